"""Channel operations of an account that is not (necessarily) connected over IRC.

The HTTP transports act as an account, not as a connection. This module
answers, with the same visibility rules as the IRC commands, which channels
an account may see, whether it is in one, what a channel's stored history
holds, and posts a message to a channel as the account. An account "is" in
a channel when one of its connections is; extensions add members that are
not connected (``Server.member_checks``, e.g. PIRCAN's standing members of
private channels). When the account has no connection to look through, a
detached client (never registered, never in any registry) stands in for it
as the viewer and the source, so every existence filter sees an account and
nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ircd.state.client import Client
from ircd.events import ChannelMessage
from ircd.delivery.replies import Relay
from ircd.store import history as rows

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.server import Server

__all__ = ["CannotSend", "ChannelInfo", "visible_channels", "find_channel", "is_member", "post", "history", "viewer_for",
           "run_as"]


class _NoConn:
    """The connection of a detached client: it writes nowhere."""

    output_full = False

    def write(self, data: bytes | bytearray) -> None:
        pass

    def buffered(self) -> int:
        return 0

    def close(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    name: str
    topic: str
    members: int
    member: bool  # the account is in it
    modes: str


def _connections(server: "Server", account: str) -> list[Client]:
    return list(server.state.account_clients(account))


def viewer_for(server: "Server", account: str, name: str | None = None) -> Client:
    """A detached client logged in to ``account``: a viewer and a source for an account with no
    connection. Its host says where it came from (``http.<server name>``)."""
    client = server.new_client(_NoConn(), "0.0.0.0")
    nick = name or account
    client.nick, client.nick_folded, client.user = nick, account, "http"
    client.host = f"http.{server.name}"
    client.account, client.account_folded = nick, account
    client.account_kind = server.accounts.names.get(account) if server.accounts is not None else None
    client.update_prefix()
    return client


def _viewers(server: "Server", account: str) -> list[Client]:
    return _connections(server, account) or [viewer_for(server, account)]


def is_member(server: "Server", account: str, channel: "Channel") -> bool:
    if any(c.account_folded == account for c in channel.members):
        return True
    return any(check(account, channel) for check in server.member_checks)


def _exists_for(server: "Server", account: str, channel: "Channel") -> bool:
    return any(server.visibility.channel_exists_for(v, channel) for v in _viewers(server, account))


def find_channel(server: "Server", account: str, name: str) -> "Channel | None":
    """The channel of that name if it exists for ``account`` (None exactly as for an unused name)."""
    channel = server.state.find_channel(name)
    if channel is None or not _exists_for(server, account, channel):
        return None
    return channel


def visible_channels(server: "Server", account: str) -> list[ChannelInfo]:
    """The channels LIST would show the account (its own and every one it may see), by name."""
    viewers = _viewers(server, account)
    found = []
    for channel in server.state.all_channels():
        member = is_member(server, account, channel)
        if not member and not any(server.visibility.channel_listed_for(v, channel) for v in viewers):
            continue
        if not any(server.visibility.channel_exists_for(v, channel) for v in viewers):
            continue
        found.append(ChannelInfo(channel.name, channel.topic, channel.user_count(), member,
                                 "".join(sorted(channel.modes))))
    return sorted(found, key=lambda c: c.name.lower())


class CannotSend(Exception):
    """The channel's modes, bans or mutes keep the account from speaking (the reason, as 404 says it)."""


def post(server: "Server", account: str, display: str, channel: "Channel", command: str, text: str) -> Relay:
    """Send ``text`` to ``channel`` as ``account`` (the caller checked membership): every member,
    the account's own connections included, gets it; it is stored like any channel message.
    The source is the account's connection in the channel when it has one. The channel's rules
    for who may speak (+m, bans, mutes, +C) are those of a PRIVMSG; ``CannotSend`` when they
    refuse it."""
    from ircd.commands.speech import cannot_speak, is_restricted_ctcp

    source = next((c for c in channel.members if c.account_folded == account), None)
    if source is None:
        source = viewer_for(server, account, display)
    why = cannot_speak(channel, source, channel.members.get(source, ""), server.casefold)
    if why is None and "C" in channel.modes and is_restricted_ctcp(text):
        why = "Cannot send to channel (+C)"
    if why is not None:
        raise CannotSend(why)
    msgid, time = server.message_stamp()
    relay = Relay(source.prefix, command, [channel.name, text], msgid=msgid, time=time, account=source.account)
    server.delivery.relay(channel.members, relay)
    if server.events.wants(ChannelMessage):
        server.events.publish(ChannelMessage(source, channel, command, text, msgid, server.clock(), None, relay))
    server.flush_all()
    return relay


async def history(server: "Server", channel: "Channel", limit: int, before_id: int | None) -> list[rows.HistoryRow]:
    """The newest ``limit`` stored PRIVMSG/NOTICE/TOPIC lines of the channel before ``before_id``,
    oldest first; [] without history."""
    if server.history is None:
        return []
    high = (before_id - 1) if before_id is not None else (1 << 63) - 1
    return await server.history.read(
        rows.select, channel.folded, 0, high, limit, newest_first=True, commands=("PRIVMSG", "NOTICE", "TOPIC")
    )


async def run_as(server: "Server", account: str, name: str, verb: str, params: list[str]) -> list[tuple[str, list[str]]] | None:
    """Run the IRC command ``verb params`` as the account's identity (``Sessions.summon``: its
    connection, or its always-on identity, made for it when it has none), with every rule the
    command has for a client; the lines it answered, as (command, params) with the nick left
    out of numerics. A connection of the account gets those lines too (it joined, it parted),
    as if it had sent the command. None when the account can have no identity here (another
    client holds its nick, or always-on is off for it)."""
    from ircd.dispatch import CommandContext
    from ircd.proto.lines import Message
    from ircd.delivery.replies import ReplyBuffer

    client = server.sessions.summon(account, name)
    spec = server.commands.get(verb)
    if client is None or spec is None:
        return None
    reply = ReplyBuffer(server, client)
    msg = Message(verb, params)
    ctx = CommandContext(server, client, reply, msg)
    result = spec.handler(ctx, msg)
    if result is not None:
        await result
    lines = [(ln.command, ln.params[1:] if ln.command.isdigit() else list(ln.params)) for ln in reply.lines]
    reply.flush()  # to the account's connection, if it has one (a detached identity drops it)
    server.flush_all()
    return lines
