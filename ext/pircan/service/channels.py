"""Channels for transports without an IRC connection: join, leave, invite, uninvite and topic as
an account, with the rules IRC has.

Each operation runs the IRC command itself (``api.account_command``) as the account's identity:
its connection when it has one, else its always-on identity, made for it on first use. So every
check of the command applies unchanged (the core's ``+b``, ``+i``, ``+k``, ``+l``, ``+t``, the
PIRCAN namespace rules and ``+P`` invisibility), a membership is one IRC users see in NAMES and
WHO and that lasts until the account leaves (or a connection of it PARTs), and a non-member asking
about a private channel gets exactly the answer a name nobody uses gets. The numeric or FAIL that
refuses a command becomes a ``Refused`` with the text IRC gives.

Invitations to a private channel are by account (``channels.py``): an account with no identity
on the network is invited there as IRC's INVITE would record it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from ext.pircan.ids import hexid, parse_id
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ircd.api import IdentityElsewhere

__all__ = ["Joined", "join", "leave", "invite", "uninvite", "set_topic", "NUMERIC_CODES", "visible",
           "history", "post", "channel_json", "joined_json", "CHANNEL_TEXT_BYTES"]

CHANNEL_TEXT_BYTES = 400  # a posted line, so that it fits an IRC line with its prefix

# the refusing numerics of JOIN, PART, TOPIC and INVITE, as PIRCAN codes
NUMERIC_CODES: dict[str, str] = {
    "401": "NO_SUCH_ACCOUNT",
    "403": "NO_SUCH_CHANNEL",
    "405": "TOO_MANY_CHANNELS",
    "442": "NOT_MEMBER",
    "443": "ALREADY_MEMBER",
    "461": "NEED_MORE_PARAMS",
    "471": "CHANNEL_FULL",
    "473": "INVITE_ONLY",
    "474": "BANNED",
    "475": "BAD_KEY",
    "477": "ACCOUNT_REQUIRED",
    "482": "NOT_ALLOWED",
}
_BAD_NAME = frozenset(" ,\x07\x00\r\n")
log = logging.getLogger("pircd")
_NO_IDENTITY = ("Another client holds your account's nick, or this server keeps no always-on identity for "
                "your account (accounts.always_on)")


@dataclass(frozen=True, slots=True)
class Joined:
    """A channel the account is in: its name, topic, modes and members as NAMES shows them;
    ``joined`` is False when the account was a member already."""

    channel: str
    topic: str
    modes: str
    members: list[str]
    joined: bool


def _name(name: str) -> str:
    """A single channel name (JOIN would split a list, and ``0`` leaves every channel)."""
    if len(name) < 2 or name[0] not in "#&" or _BAD_NAME.intersection(name):
        raise Refused("NO_SUCH_CHANNEL", name, text="No such channel")
    return name


def _line_text(text: str, what: str, context: str) -> str:
    if "\r" in text or "\n" in text or "\0" in text:
        raise Refused("INVALID_PARAMS", context, text=f"{what} is one line, without line breaks")
    return text


async def _display(state: Pircan, account: str) -> str:
    row: Any = await state.api.get_account(account)
    return row.name if row is not None else account


def _refusal(lines: list[tuple[str, list[str]]], context: str) -> Refused | None:
    """The first refusing line of a command's answer, as a Refused; None when it was not refused."""
    for command, params in lines:
        if command == "FAIL" and len(params) >= 3:
            return Refused(params[1], *params[2:-1], text=params[-1])
        if command.isdigit() and command[0] in "45":
            code = NUMERIC_CODES.get(command, "REFUSED")
            text = params[-1] if params else "Refused"
            return Refused(code, context, text=text)
    return None


async def _run(state: Pircan, account: str, verb: str, params: list[str], context: str) -> list[tuple[str, list[str]]]:
    try:
        lines = await state.api.account_command(account, await _display(state, account), verb, params)
    except IdentityElsewhere as where:
        raise Refused("OTHER_NODE", context, text=f"Your account is connected to {where.args[0]}, another "
                      "server of this network: channel operations run there") from None
    except Exception:
        log.exception("%s as %s failed", verb, account)
        raise Refused("INTERNAL_ERROR", context, text="The server failed to process the command") from None
    if lines is None:
        raise Refused("NOT_ALLOWED", context, text=_NO_IDENTITY)
    refused = _refusal(lines, context)
    if refused is not None:
        raise refused
    return lines


def _view(state: Pircan, account: str, name: str, joined: bool) -> Joined:
    channel = state.api.account_find_channel(account, name)
    if channel is None:  # gone meanwhile
        raise Refused("NO_SUCH_CHANNEL", name, text="No such channel")
    members = [prefix_nick(modes, member.nick) for member, modes in channel.members.items() if not member.shadow]
    return Joined(channel.name, channel.topic, "".join(sorted(channel.modes)), sorted(members, key=lambda n: n.lstrip("~&@%+").lower()), joined)


def prefix_nick(modes: str, nick: str) -> str:
    """A member as NAMES shows it: its highest prefix, then its nick."""
    for mode, symbol in (("q", "~"), ("a", "&"), ("o", "@"), ("h", "%"), ("v", "+")):
        if mode in modes:
            return symbol + nick
    return nick


async def join(state: Pircan, account: str, name: str, key: str | None = None) -> Joined:
    """JOIN as the account: a public channel (created, with the account as its operator, when it
    does not exist), or a private one it owns (created private) or is invited to."""
    name = _name(name)
    if key is not None and (not key or _BAD_NAME.intersection(key)):
        raise Refused("BAD_KEY", name, text="Cannot join channel (+k)")  # JOIN would split it, or drop it
    lines = await _run(state, account, "JOIN", [name] if key is None else [name, key], name)
    return _view(state, account, name, joined=any(c == "JOIN" for c, _ in lines))


async def leave(state: Pircan, account: str, name: str, reason: str = "") -> str:
    """PART as the account; also ends a standing membership of a private channel the account
    has no identity in (after a restart). The channel's name."""
    name = _name(name)
    reason = _line_text(reason, "A reason", name)
    api = state.api
    channel = api.account_find_channel(account, name)
    if channel is None:
        raise Refused("NO_SUCH_CHANNEL", name, text="No such channel")
    if not any(m.account_folded == account for m in channel.members):
        chans = state.private_channels
        if chans is not None and chans.standing_member(account, channel) and chans.owner(channel) != account:
            chans.leave_standing(channel, account)
            return channel.name
    await _run(state, account, "PART", [name, reason] if reason else [name], name)
    return channel.name


async def invite(state: Pircan, account: str, target_name: str, name: str) -> tuple[str, str]:
    """INVITE by account: through IRC's INVITE when the invitee has an identity on the network
    (it gets the INVITE line); else, for a private channel, its owner's standing invitation of
    the account. (the invitee's folded account, the channel)."""
    name = _name(name)
    api = state.api
    target = api.casefold(target_name)
    if api.account_kind(target) is None:
        raise Refused("NO_SUCH_ACCOUNT", target_name)
    holder = api.find_nick(target)
    channel = api.account_find_channel(account, name)
    chans = state.private_channels
    present = holder is not None and holder.registered and holder.account_folded == target
    if not present and channel is not None and chans is not None and chans.is_private(channel):
        if chans.owner(channel) != account:
            raise Refused("NOT_ALLOWED", channel.name, text="Only the channel owner can invite to this channel")
        if chans.standing_member(target, channel):
            raise Refused("ALREADY_MEMBER", target_name, channel.name, text="is already on channel")
        chans.invite_account(channel, target, account)
        return target, channel.name
    await _run(state, account, "INVITE", [holder.nick if present and holder is not None else target_name, name], name)
    return target, channel.name if channel is not None else name


async def uninvite(state: Pircan, account: str, target_name: str, name: str) -> tuple[str, str]:
    """UNINVITE: the owner withdraws a standing invitation to its private channel."""
    name = _name(name)
    await _run(state, account, "UNINVITE", [target_name, name], name)
    return state.api.casefold(target_name), name


async def set_topic(state: Pircan, account: str, name: str, topic: str) -> Joined:
    """TOPIC as the account (a member; with +t, an operator); an empty topic clears it."""
    name = _name(name)
    _line_text(topic, "A topic", name)
    await _run(state, account, "TOPIC", [name, topic], name)
    return _view(state, account, name, joined=False)


# reading and posting (for transports without an IRC connection) ---------------------------------


def visible(state: Pircan, account: str) -> list[dict[str, Any]]:
    """The channels ``account`` may see: public ones, and private ones it is a member or owner of."""
    return [channel_json(c) for c in state.api.account_channels(account)]


def _member_of(state: Pircan, account: str, name: str) -> Any:
    """The channel ``account`` is a member of. One it may see but is not in: NOT_MEMBER; one it may
    not see (another's private channel): NO_SUCH_CHANNEL, exactly as for a name nobody uses."""
    found = state.api.account_find_channel(account, name)
    if found is None:
        raise Refused("NO_SUCH_CHANNEL", name, text="No such channel")
    if not state.api.account_in_channel(account, found):
        raise Refused("NOT_MEMBER", name, text="You are not a member of this channel")
    return found


async def history(state: Pircan, account: str, name: str, limit: int = 50,
                  before: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """The stored lines of a channel ``account`` is in, the newest ``limit`` (older than the msgid
    ``before``), oldest first; (the channel's name, the lines)."""
    found = _member_of(state, account, name)
    before_id = None
    if before is not None:
        before_id = parse_id(before)
        if before_id is None:
            raise Refused("NO_SUCH_MESSAGE", before)
    rows = await state.api.channel_history(found, limit, before_id)
    return found.name, [{"msgid": hexid(r.id), "time": r.time, "command": r.command,
                         "from": r.source.split("!", 1)[0], "account": r.account, "text": r.text}
                        for r in rows]


async def post(state: Pircan, account: str, name: str, text: str) -> dict[str, Any]:
    """A line to a channel ``account`` is in, as the account (the channel's modes, bans and mutes
    hold: CANNOT_SEND with IRC's reason); stored in its history. {channel, msgid, time}."""
    found = _member_of(state, account, name)
    if not text.strip():
        raise Refused("EMPTY", name)
    if "\n" in text or "\r" in text or "\0" in text or len(text.encode("utf-8")) > CHANNEL_TEXT_BYTES:
        raise Refused("TOO_LONG", name,
                      text=f"One line of at most {CHANNEL_TEXT_BYTES} bytes, without line breaks")
    relay = state.api.account_post(account, await _display(state, account), found, text)
    if isinstance(relay, str):
        raise Refused("CANNOT_SEND", found.name, text=relay)
    return {"channel": found.name, "msgid": relay.msgid, "time": relay.time}


def channel_json(info: Any) -> dict[str, Any]:
    """A channel of a listing (``ircd.accountops.ChannelInfo``); ``member``: whether one is in it."""
    return {"name": info.name, "topic": info.topic, "members": info.members, "member": info.member,
            "modes": info.modes}


def joined_json(view: Joined) -> dict[str, Any]:
    return {"channel": view.channel, "topic": view.topic, "modes": view.modes, "members": view.members,
            "joined": view.joined}
