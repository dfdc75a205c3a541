"""PRIVMSG, NOTICE and TAGMSG to nicks and channels.

NOTICE never produces an error reply (RFC 2812 section 3.3.2: automatic
replies must never be sent in response to a NOTICE). TAGMSG carries only
tags and reaches only clients that enabled message-tags.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Awaitable, Final

from ircd import caps as C
from ircd.state.channel import PREFIX_CHARS, PREFIX_MODES
from ircd.commands import multiline
from ircd.commands.speech import cannot_send, client_tags, is_restricted_ctcp
from ircd.dispatch import CommandContext, command
from ircd.events import ChannelMessage, DirectMessage
from ircd.proto import numerics as N
from ircd.proto.lines import MAX_LINE, Message
from ircd.delivery.replies import Relay

if TYPE_CHECKING:
    from ircd.state.client import Client

_STATUS_RANK = {PREFIX_CHARS[m]: PREFIX_MODES.index(m) for m in PREFIX_MODES}
_CHANNEL_START: Final = frozenset(["#", *_STATUS_RANK])  # a channel, or a status prefix before one


def relayable_text(ctx: CommandContext, command: str, target: str, text: str) -> str | None:
    """``text`` as it can be relayed to ``target``: the relayed line (``:<prefix> <command>
    <target> :<text>`` and CR LF) may not pass 512 bytes (RFC 1459 2.3, Modern IRC: lines "SHALL
    NOT exceed 512 bytes in length"). A PRIVMSG too long for that is refused with 417 and None;
    a NOTICE, which is never answered, is cut at a character boundary."""
    room = MAX_LINE - 7 - len(ctx.client.prefix) - len(command) - len(target)
    if len(text) * 4 <= room:  # no character takes more than 4 bytes in UTF-8
        return text
    colon = 1 if not text or text[0] == ":" or " " in text else 0  # as format_line writes it
    room = MAX_LINE - 6 - colon - len(ctx.client.prefix.encode()) - len(command) - len(target.encode())
    data = text.encode()
    if len(data) <= room:
        return text
    if command == "NOTICE":
        return data[: max(room, 0)].decode("utf-8", "ignore")
    ctx.reply.numeric(N.ERR_INPUTTOOLONG, "Input line was too long")
    return None


def _to_channel(ctx: CommandContext, msg: Message, target_name: str, text: str, tags) -> None:
    server, client = ctx.server, ctx.client
    command = msg.command
    quiet = command == "NOTICE"
    name = target_name
    i = 0
    while i < len(name) - 1 and name[i] in _STATUS_RANK:
        i += 1
    status = ""
    if i and name[i] == "#":  # STATUSMSG: @#chan reaches operators only
        status, name = name[:i], name[i:]
    channel = server.find_channel(name, client) if name[:1] == "#" else None
    if channel is None:
        if not quiet:
            if name[:1] == "#":
                ctx.reply.numeric(N.ERR_NOSUCHCHANNEL, name, "No such channel")
            else:  # a status prefix before something that is not a channel
                ctx.reply.numeric(N.ERR_NOSUCHNICK, name, "No such nick/channel")
        return
    why = cannot_send(channel, client, server.casefold)
    if why is None and "C" in channel.modes and is_restricted_ctcp(text):
        why = "Cannot send to channel (+C)"
    if why is not None:
        if not quiet:
            ctx.reply.numeric(N.ERR_CANNOTSENDTOCHAN, channel.name, why)
        return
    for check in server.message_checks:
        if check(ctx, None, channel):
            return
    shown = target_name if status else channel.name
    if command != "TAGMSG":
        fitted = relayable_text(ctx, command, shown, text)
        if fitted is None:
            return
        text = fitted
    params = [shown] if command == "TAGMSG" else [shown, text]
    msgid, time = server.message_stamp()
    relay = Relay(client.prefix, command, params, msgid=msgid, time=time, account=client.account, client_tags=tags)
    recipients: Iterable[Client]
    if status:
        rank = min(_STATUS_RANK[s] for s in status)
        recipients = [
            m for m, modes in channel.members.items()
            if modes and PREFIX_MODES.index(modes[0]) <= rank
        ]
    else:
        recipients = channel.members
    if command == "TAGMSG":
        recipients = [m for m in recipients if m.caps & C.MESSAGE_TAGS]
    server.delivery.relay(recipients, relay, exclude=client)
    if client.caps & C.ECHO_MESSAGE:
        ctx.reply.relay(relay)
    if not status and server.events.wants(ChannelMessage):
        server.events.publish(
            ChannelMessage(client, channel, command, text, msgid, server.clock(), tags, relay)
        )


def _to_nick(ctx: CommandContext, command: str, target: "Client", text: str, tags) -> None:
    """One message to one registered client: the whole of a direct message's work."""
    server, client = ctx.server, ctx.client
    for check in server.message_checks:
        if check(ctx, target, None):
            return
    if command != "TAGMSG":
        fitted = relayable_text(ctx, command, target.nick, text)
        if fitted is None:
            return
        text = fitted
    relay = Relay(  # the msgid and time are made when first needed (see Relay)
        client.prefix,
        command,
        [target.nick] if command == "TAGMSG" else [target.nick, text],
        stamp=server.stamp,
        account=client.account,
        client_tags=tags,
    )
    # A message to oneself is delivered like any other, straight to the outbox:
    # the delivery is a side effect, so only the echo-message copy (through the
    # reply buffer) carries the label (IRCv3 labeled-response).
    if target.group is not None or client.group is not None:  # nicks shared by several connections
        server.delivery.relay(server.sessions.direct_recipients(client, target, command == "TAGMSG"), relay)
    elif command != "TAGMSG" or target.caps & C.MESSAGE_TAGS:
        server.delivery.relay((target,), relay)
    if client.caps & C.ECHO_MESSAGE:
        ctx.reply.relay(relay)
    if target.away is not None and command == "PRIVMSG":
        ctx.reply.numeric(N.RPL_AWAY, target.nick, target.away)
    if server.events.wants(DirectMessage):
        server.events.publish(DirectMessage(client, target, command, text, None, server.clock(), tags, relay))


def _message(ctx: CommandContext, msg: Message) -> Awaitable[None] | None:
    """Deliver to every target; a line to a service (NickServ) returns the service's coroutine."""
    command = msg.command
    params = msg.params
    if msg.tags is not None and "batch" in msg.tags and ctx.client.ext is not None:
        if multiline.collect(ctx, msg):  # a line of an open draft/multiline batch
            return None
    quiet = command == "NOTICE"
    if not params or not params[0]:
        if not quiet:
            ctx.reply.numeric(N.ERR_NORECIPIENT, f"No recipient given ({command})")
        return None
    if command == "TAGMSG":
        text = ""
    elif len(params) < 2 or not params[1]:
        if not quiet:
            ctx.reply.numeric(N.ERR_NOTEXTTOSEND, "No text to send")
        return None
    else:
        text = params[1]
    server = ctx.server
    client = ctx.client
    tags = client_tags(client, msg) if msg.tags or "B" in client.modes else None
    first = params[0]
    if "," not in first:  # one target: the common case
        return _to_target(ctx, msg, first, text, tags)
    targets = [t for t in first.split(",") if t]
    limit = server.config.limits.targets
    if len(targets) > limit:
        if not quiet:
            ctx.reply.numeric(N.ERR_TOOMANYTARGETS, first, f"Too many targets (at most {limit})")
        targets = targets[:limit] if quiet else []
    seen: set[str] = set()
    pending = None
    for target in targets:
        folded = server.casefold(target)
        if folded not in seen:
            seen.add(folded)
            coro = _to_target(ctx, msg, target, text, tags, folded, pending is None)
            if pending is None:
                pending = coro
    return pending


def _to_target(
    ctx: CommandContext,
    msg: Message,
    target: str,
    text: str,
    tags,
    folded: str | None = None,
    may_call_service: bool = True,
) -> Awaitable[None] | None:
    """One target: a channel, a service (whose coroutine is returned: one per line at
    most, hence ``may_call_service``) or a nick."""
    if target[0] in _CHANNEL_START:
        _to_channel(ctx, msg, target, text, tags)
        return None
    server = ctx.server
    if folded is None:
        folded = server.casefold(target)
    command = msg.command
    service = server.services.get(folded)
    if service is not None:
        return service(ctx, text) if command == "PRIVMSG" and may_call_service else None
    user = server.state.nick_holder(folded)
    if user is None or not user.registered:
        if command != "NOTICE":
            ctx.reply.numeric(N.ERR_NOSUCHNICK, target, "No such nick/channel")
        return None
    _to_nick(ctx, command, user, text, tags)
    return None


# The help texts are arguments, not docstrings: this module is in the compiled build.


@command(
    "PRIVMSG",
    doc="""PRIVMSG <target>{,<target>} :<text>
    Sends a message to nicks or channels. Prefix a channel with @ or + to reach only its operators or voiced members.""",
)
def handle_privmsg(ctx: CommandContext, msg: Message) -> Awaitable[None] | None:
    return _message(ctx, msg)


@command(
    "NOTICE",
    doc="""NOTICE <target>{,<target>} :<text>
    Like PRIVMSG, but never answered automatically (no error replies either).""",
)
def handle_notice(ctx: CommandContext, msg: Message) -> Awaitable[None] | None:
    return _message(ctx, msg)


@command(
    "TAGMSG",
    doc="""TAGMSG <target>{,<target>}
    Sends only message tags (reactions, typing notices) to clients that enabled message-tags.""",
)
def handle_tagmsg(ctx: CommandContext, msg: Message) -> Awaitable[None] | None:
    return _message(ctx, msg)
