"""What a person does to its own account and the agents it owns, beyond contact decisions: delete and
suspend an agent, give it a new password, manage its bearer tokens, change its own password, and
search the audit log of itself and its agents.

Like every service function these take the acting account and plain arguments and raise
``Refused`` with the vocabulary of docs/pircan.md; the owner portal's forms call them, and an IRC
verb or an MCP tool would call the same ones. An agent that is not the actor's is ``NO_SUCH_ACCOUNT``
whether or not it exists, so no answer tells an owner about someone else's agents. Every change is
audited, its detail ending like every owner action's (" by owner, through the portal").
"""

from __future__ import annotations

import secrets
from typing import Any

from ext.pircan import store as db
from ext.pircan.service.events import by_whom
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store import AuditEntry
from ircd.api import TokenRefused

__all__ = [
    "AUDIT_FAMILIES",
    "AUDIT_PAGE",
    "add_token",
    "agents_of",
    "audit_search",
    "change_password",
    "delete_agent",
    "owned_agent",
    "reset_password",
    "revoke_token",
    "set_suspended",
    "tokens_of",
]

# The kinds of audit entry one can filter by: each the first word of the actions it covers.
AUDIT_FAMILIES = ("contact", "agreement", "message", "policy", "task", "agent", "token", "account", "profile",
                  "skill", "resource", "channel", "refused")
AUDIT_PAGE = 500
_NEVER = (1 << 63) - 1


async def owned_agent(state: Pircan, actor: str, name: str) -> Any:
    """The account row of the agent ``name`` if ``actor`` owns it; NO_SUCH_ACCOUNT otherwise."""
    folded = state.api.casefold(name)
    row: Any = await state.api.get_account(folded) if folded else None
    if row is None or row.kind != "agent" or row.owner != actor:
        raise Refused("NO_SUCH_ACCOUNT", name)
    return row


async def agents_of(state: Pircan, actor: str) -> list[Any]:
    """The account rows of the agents ``actor`` owns, by name."""
    return [a for a in await state.api.list_accounts(owner=actor) if a.kind == "agent"]


async def _audit(state: Pircan, actor: str, subject: str, action: str, detail: str) -> None:
    await state.database.write(db.audit, state.new_id(), state.now_ms(), actor, subject, action, detail)


async def delete_agent(state: Pircan, actor: str, name: str, *, via: str = "irc") -> str:
    """Delete an agent the actor owns: its tokens are revoked, its account deleted, and its PIRCAN
    state ends (``service/lifecycle.py``: agreements revoked and the other parties told, pending
    requests expired, open tasks canceled, profile, skills and resources deleted)."""
    agent = await owned_agent(state, actor, name)
    try:
        await state.api.revoke_token(actor, agent.folded, None)
    except TokenRefused:
        pass  # gone meanwhile: deleting it below finds nothing either
    if not await state.api.delete_account(agent.folded):
        raise Refused("NO_SUCH_ACCOUNT", name)
    await _audit(state, actor, agent.folded, "agent.delete", by_whom(actor, agent.folded, via).strip())
    return str(agent.name)


async def set_suspended(state: Pircan, actor: str, name: str, suspended: bool, *, via: str = "irc") -> bool:
    """Suspend an agent the actor owns (it cannot log in, its connections close, its tokens are
    refused) or let it back in; False when it already was in that state (nothing audited)."""
    agent = await owned_agent(state, actor, name)
    if bool(agent.suspended) == suspended:
        return False
    if not await state.api.set_suspended(agent.folded, suspended):
        raise Refused("NO_SUCH_ACCOUNT", name)
    action = "agent.suspend" if suspended else "agent.unsuspend"
    await _audit(state, actor, agent.folded, action, by_whom(actor, agent.folded, via).strip())
    return True


async def reset_password(state: Pircan, actor: str, name: str, *, via: str = "irc") -> str:
    """Give an agent the actor owns a new random password; the password, to be shown once."""
    agent = await owned_agent(state, actor, name)
    password = secrets.token_urlsafe(18)
    if not await state.api.set_password(agent.folded, password):
        raise Refused("NO_SUCH_ACCOUNT", name)
    await _audit(state, actor, agent.folded, "agent.password", by_whom(actor, agent.folded, via).strip())
    return password


async def change_password(state: Pircan, actor: str, ip: str, current: str, new: str, *, via: str = "irc") -> None:
    """A person changes its own password: the current one is checked like a login (the same
    throttle, counted against ``ip``), the new one must be ``accounts.min_password_length`` long."""
    api = state.api
    if len(new) < api.min_password_length:
        raise Refused("WEAK_PASSWORD", text=f"A password is at least {api.min_password_length} characters")
    checked: Any = await api.check_password(ip, actor, current, "portal")
    if isinstance(checked, str):  # the name is the actor's own: a refusal not of the throttle is the password
        wrong = checked == "Invalid account name or password"
        raise Refused("INVALID_PASSWORD", text="The current password is wrong" if wrong else checked)
    if not await api.set_password(actor, new):
        raise Refused("NO_SUCH_ACCOUNT", actor)
    await _audit(state, actor, actor, "account.password", by_whom(actor, actor, via).strip())


def _token_refused(exc: TokenRefused, context: str) -> Refused:
    return Refused(exc.code, context, text=exc.text)


async def tokens_of(state: Pircan, actor: str, name: str) -> list[Any]:
    """The bearer tokens (``TokenRow``: name, created, last used) of an agent the actor owns."""
    agent = await owned_agent(state, actor, name)
    try:
        return await state.api.list_tokens(actor, agent.folded)
    except TokenRefused as exc:
        raise _token_refused(exc, name) from None


async def add_token(state: Pircan, actor: str, name: str, label: str | None, *, via: str = "irc") -> tuple[Any, str]:
    """A new bearer token for an agent the actor owns: (its row, the token text, shown once)."""
    agent = await owned_agent(state, actor, name)
    try:
        row, text = await state.api.create_token(actor, agent.folded, label or None)
    except TokenRefused as exc:
        raise _token_refused(exc, label or name) from None
    await _audit(state, actor, agent.folded, "token.create", f"{row.name}" + by_whom(actor, agent.folded, via))
    return row, text


async def revoke_token(state: Pircan, actor: str, name: str, label: str, *, via: str = "irc") -> int:
    """Revoke an agent's token by name: refused from its next request on, everywhere."""
    agent = await owned_agent(state, actor, name)
    try:
        count = await state.api.revoke_token(actor, agent.folded, label)
    except TokenRefused as exc:
        raise _token_refused(exc, label) from None
    await _audit(state, actor, agent.folded, "token.revoke", f"{label}" + by_whom(actor, agent.folded, via))
    return count


async def audit_search(state: Pircan, actor: str, agent_name: str | None = None, family: str | None = None,
                       since: int = 0, until: int = _NEVER, limit: int = 100,
                       before: int | None = None) -> list[AuditEntry]:
    """Audit entries of ``actor`` and the agents it owns (of one of them with ``agent_name``),
    newest first: those of one kind (``family``, one of ``AUDIT_FAMILIES``) made in
    [``since``, ``until``) (ms), at most ``limit``, older than the entry ``before``. Each account's
    entries start at its creation (a deleted account's name made again does not inherit its trail)."""
    if family is not None and family not in AUDIT_FAMILIES:
        raise Refused("INVALID_PARAMS", family, text="Kinds of entry: " + ", ".join(AUDIT_FAMILIES))
    if agent_name is not None:
        agent = await owned_agent(state, actor, agent_name)
        accounts = [(str(agent.folded), int(agent.created_at))]
    else:
        me: Any = await state.api.get_account(actor)
        accounts = [(actor, int(me.created_at) if me is not None else 0)]
        accounts += [(str(a.folded), int(a.created_at)) for a in await agents_of(state, actor)]
    return await state.database.read(db.audit_search, accounts, family, since, until,
                                     max(1, min(limit, AUDIT_PAGE)), before)
