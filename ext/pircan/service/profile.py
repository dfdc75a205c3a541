"""What an agent publishes about itself: a display name, the skills it accepts tasks for,
resources that holders of ``resource:read`` may read, and the URL of its own A2A endpoint.

An agent, or its owner, changes these; every change is audited. Skills and display names are
public (the roster shows them to everyone). Resources are not: only an account with an active
agreement granting it ``resource:read`` toward the agent learns which exist and reads them, and
every other caller gets exactly what a name that does not exist gets. The A2A endpoint is not
public either: the network hands it out with an intro token (``service/intro.py``) and shows it on
the agent's A2A card to those who hold an agreement with it.
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit

from ircd.api import Conn

from ext.pircan import rules
from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.a2a import store as astore
from ext.pircan.rules import Limits
from ext.pircan.service.contact import acts_for, managed_account
from ext.pircan.service.events import by_whom
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store_tasks import Resource

__all__ = [
    "Profile", "set_display_name", "set_skill", "delete_skill", "profiles", "put_resource", "delete_resource",
    "list_resources", "read_resource", "may_read_resources", "readable_resources", "DISPLAY_CHARS", "DESCRIPTION_CHARS",
    "RESOURCE_NAME", "set_endpoint", "endpoint_of", "ENDPOINT_CHARS",
]

DISPLAY_CHARS = 64
DESCRIPTION_CHARS = 200
RESOURCE_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
ENDPOINT_CHARS = 256  # an endpoint fits one IRC line with the rest of PROFILE's and INTRO's replies


class Profile:
    """The public part of an account's roster entry."""

    __slots__ = ("account", "display_name", "skills")

    def __init__(self, account: str, display_name: str, skills: list[tuple[str, str]]) -> None:
        self.account = account
        self.display_name = display_name
        self.skills = skills


async def _owned(state: Pircan, actor: str, account_name: str | None) -> str:
    """The agent ``actor`` may change: itself, or one it owns (as it names it)."""
    return await managed_account(state, actor, account_name, "Only an account and its owner change its profile")


def _audited(conn: Conn, audit_id: int, at: int, actor: str, account: str, action: str,
             detail: str, fn: object, *args: object) -> object:
    """``fn(conn, *args)`` and its audit row, in one transaction (no row when ``fn`` changed nothing)."""
    result = fn(conn, *args)  # type: ignore[operator]
    if result is not False:
        db.audit(conn, audit_id, at, actor, account, action, detail)
    return result


async def set_display_name(state: Pircan, actor: str, account_name: str | None, name: str,
                           *, via: str = "irc") -> tuple[str, str]:
    account = await _owned(state, actor, account_name)
    name = " ".join(name.split())
    if len(name) > DISPLAY_CHARS:
        raise Refused("TOO_LONG", account, text=f"A display name is at most {DISPLAY_CHARS} characters")
    now = state.now_ms()
    await state.database.write(_audited, state.new_id(), now, actor, account, "profile.name",
                               (name or "(none)") + by_whom(actor, account, via), tdb.set_display_name,
                               account, name, now)
    state.display_names[account] = name
    if not name:
        state.display_names.pop(account, None)
    if state.cluster is not None:
        state.cluster.display_name_set(account, name)
    return account, name


def _skill(skill: str) -> str:
    scopes = rules.parse_scopes(f"task:{skill}")
    if scopes is None:
        raise Refused("INVALID_SCOPE", skill, text="Skills are 1-64 of a-z 0-9 . _ - (starting with a letter or digit)")
    return scopes[0][5:]


async def set_skill(state: Pircan, actor: str, account_name: str | None, skill: str, description: str,
                    *, via: str = "irc") -> tuple[str, str]:
    account = await _owned(state, actor, account_name)
    skill = _skill(skill)
    description = " ".join(description.split())
    if len(description) > DESCRIPTION_CHARS:
        raise Refused("TOO_LONG", skill, text=f"A skill's description is at most {DESCRIPTION_CHARS} characters")
    now = state.now_ms()
    await state.database.write(_audited, state.new_id(), now, actor, account, "skill.set",
                               skill + by_whom(actor, account, via), tdb.set_skill, account, skill, description, now)
    return account, skill


async def delete_skill(state: Pircan, actor: str, account_name: str | None, skill: str,
                       *, via: str = "irc") -> tuple[str, str]:
    account = await _owned(state, actor, account_name)
    skill = _skill(skill)
    now = state.now_ms()
    found = await state.database.write(_audited, state.new_id(), now, actor, account, "skill.delete",
                                       skill + by_whom(actor, account, via), tdb.delete_skill, account, skill)
    if not found:
        raise Refused("NO_SUCH_SKILL", skill, text="No such skill")
    return account, skill


async def profiles(state: Pircan, accounts: list[str] | None = None) -> dict[str, Profile]:
    """Display names and skills, by account (every account that has either, for None)."""
    skills = await state.database.read(tdb.skills_of, accounts)
    names = state.display_names
    wanted = accounts if accounts is not None else sorted(set(skills) | set(names))
    return {a: Profile(a, names.get(a, ""), skills.get(a, [])) for a in wanted}


# resources --------------------------------------------------------------------------------


def may_read_resources(state: Pircan, reader: str, owner: str) -> bool:
    """``reader`` holds ``resource:read`` toward ``owner`` in an active agreement (or is it, or acts for it)."""
    if reader == owner:
        return True
    agreement, _ = state.find_agreement(reader, owner, "resource:read", state.now_ms())
    return agreement is not None


async def _visible_owner(state: Pircan, reader: str, owner_name: str) -> str | None:
    owner = state.api.casefold(owner_name)
    if state.api.account_kind(owner) is None:
        return None
    if may_read_resources(state, reader, owner) or await acts_for(state, reader, owner):
        return owner
    return None


async def put_resource(state: Pircan, actor: str, account_name: str | None, name: str, content_type: str,
                       body: str, *, via: str = "irc") -> Resource:
    account = await _owned(state, actor, account_name)
    if not RESOURCE_NAME.match(name):
        raise Refused("INVALID_NAME", name, text="Resource names are 1-64 of a-z 0-9 . _ - (starting with a letter "
                                                  "or digit)")
    content_type = content_type.lower()
    if content_type not in ("text", "json"):
        raise Refused("INVALID_PARAMS", content_type, text="The content type is text or json")
    if len(body.encode("utf-8")) > Limits.body_bytes:
        raise Refused("TOO_LONG", name, text=f"A resource is at most {Limits.body_bytes} bytes of UTF-8")
    if content_type == "json":
        try:
            json.loads(body)
        except ValueError:
            raise Refused("INVALID_PARAMS", name, text="This is not JSON") from None
    now = state.now_ms()
    res = Resource(account, name, content_type, body, now)
    await state.database.write(_audited, state.new_id(), now, actor, account, "resource.put",
                               f"{name} {content_type} {len(body.encode('utf-8'))} bytes" + by_whom(actor, account, via),
                               tdb.put_resource, res)
    return res


async def delete_resource(state: Pircan, actor: str, account_name: str | None, name: str,
                          *, via: str = "irc") -> str:
    account = await _owned(state, actor, account_name)
    now = state.now_ms()
    found = await state.database.write(_audited, state.new_id(), now, actor, account, "resource.delete",
                                       name + by_whom(actor, account, via), tdb.delete_resource, account, name)
    if not found:
        raise Refused("NO_SUCH_RESOURCE", name, text="No such resource")
    return name


async def list_resources(state: Pircan, reader: str, owner_name: str) -> list[Resource]:
    """The resources of ``owner_name`` that ``reader`` may read; [] when it may read none (whether
    or not any exist)."""
    owner = await _visible_owner(state, reader, owner_name)
    return [] if owner is None else await state.database.read(tdb.resources_of, owner)


async def readable_resources(state: Pircan, reader: str) -> list[Resource]:
    """Every resource ``reader`` may read: its own, its agents', and those of agents it holds
    ``resource:read`` toward."""
    now = state.now_ms()
    owners = {reader, *(a.folded for a in await state.api.list_accounts(owner=reader))}
    owners |= {a.target for a in state.agreements.values()
               if a.requester == reader and a.active(now) and "resource:read" in a.scopes}
    found: list[Resource] = []
    for owner in sorted(owners):
        found += await state.database.read(tdb.resources_of, owner)
    return found


async def read_resource(state: Pircan, reader: str, owner_name: str, name: str) -> Resource:
    """One resource; NO_SUCH_RESOURCE for one that does not exist or that ``reader`` may not read."""
    owner = await _visible_owner(state, reader, owner_name)
    found = await state.database.read(tdb.get_resource, owner, name) if owner is not None else None
    if found is None:
        raise Refused("NO_SUCH_RESOURCE", owner_name, name, text="No such resource")
    return found


# the A2A endpoint ---------------------------------------------------------------------------


def _endpoint(url: str) -> str:
    """A URL an agent may publish (http or https, a host, no credentials or fragment), or '' to
    withdraw it; INVALID_PARAMS otherwise."""
    url = url.strip()
    if url in ("", "*"):
        return ""
    bad = len(url) > ENDPOINT_CHARS or not url.isascii() or any(c <= " " or c == "\x7f" for c in url)
    try:
        parts = urlsplit(url)
        bad = bad or parts.scheme not in ("http", "https") or not parts.hostname or parts.username is not None \
            or bool(parts.fragment) or parts.port == 0
    except ValueError:  # an unbracketed IPv6 host, a port that is not a number
        bad = True
    if bad:
        raise Refused("INVALID_PARAMS", url[:ENDPOINT_CHARS],
                      text=f"An endpoint is an http or https URL of at most {ENDPOINT_CHARS} characters "
                           "(no credentials, no fragment), or * to withdraw it")
    return url


async def set_endpoint(state: Pircan, actor: str, account_name: str | None, url: str,
                       *, via: str = "irc") -> tuple[str, str]:
    """Publish the URL where the account's own A2A server listens ('' or '*': withdraw it); an
    account and its owner may. (account, url)."""
    account = await _owned(state, actor, account_name)
    url = _endpoint(url)
    now = state.now_ms()
    await state.database.write(_audited, state.new_id(), now, actor, account, "a2a.endpoint",
                               (url or "(none)") + by_whom(actor, account, via), astore.set_endpoint,
                               account, url, now)
    if state.webhooks is not None:  # the network delivers the account's events there (without a webhook)
        await state.webhooks.a2a_changed(account)
    return account, url


async def endpoint_of(state: Pircan, account: str) -> str | None:
    return await state.database.read(astore.endpoint_of, account)
