"""draft/multiline: one message sent as a client BATCH of PRIVMSG lines.

A client opens ``BATCH +<ref> draft/multiline <target>``, sends PRIVMSG lines
tagged ``batch=<ref>`` (``draft/multiline-concat`` joins a line to the one
before it without a line feed) and closes with ``BATCH -<ref>``. Nothing is
delivered until the batch closes; then the message goes out once: as a
``draft/multiline`` batch to clients with the capability (and batch), as
separate lines to the others (blank lines dropped, the msgid on the first
line only), and it is published (and so stored in history) as one message
whose text is the lines joined.

The open batch lives on the client (``client.ext["multiline"]``); it keeps
the opening line's reply buffer, so the label of ``@label=x BATCH +ref``
lands on the echoed batch (IRCv3 multiline: "Servers MUST only include the
label tag on the opening BATCH command when replying to a client using
echo-message") or on the error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.dispatch import CommandContext, command
from ircd.events import ChannelMessage, DirectMessage
from ircd.proto import numerics as N
from ircd.proto.lines import Message, format_line
from ircd.delivery.replies import Relay, ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.server import Server

__all__ = ["BATCH_TYPE", "CONCAT_TAG", "MultilineRelay", "collect"]

BATCH_TYPE = "draft/multiline"
CONCAT_TAG = "draft/multiline-concat"
_STATE = "multiline"


@dataclass(slots=True)
class _OpenBatch:
    ref: str
    target: str
    reply: ReplyBuffer  # the opening BATCH line's buffer: it carries that line's label
    tags: dict[str, str] | None  # client-only tags, sent on the opening BATCH line
    lines: list[tuple[str, bool]] = field(default_factory=list)
    size: int = 0  # bytes of the combined text so far (joining line feeds count)
    failed: bool = False


def _fail(batch: _OpenBatch, code: str, *context: str) -> None:
    """Answer on the opening line's buffer (so its label gets the answer) and drop the batch's lines."""
    batch.failed = True
    batch.reply.fail("BATCH", code, *context)
    batch.reply.flush()


@command("BATCH", min_params=1, requires_cap=C.MULTILINE)
def handle_batch(ctx: CommandContext, msg: Message) -> None:
    """BATCH +<ref> draft/multiline <target> | BATCH -<ref>
    Sends one message of several lines (draft/multiline): open the batch, send PRIVMSG lines tagged
    batch=<ref>, then close it; nothing is delivered before the close."""
    client, reply = ctx.client, ctx.reply
    param = msg.params[0]
    batch: _OpenBatch | None = client.ext_state(_STATE)
    if param[:1] == "+" and len(param) > 1:
        if len(msg.params) < 3 or msg.params[1] != BATCH_TYPE:
            kind = msg.params[1] if len(msg.params) > 1 else "*"
            reply.fail("BATCH", "MULTILINE_INVALID", kind, "Only draft/multiline batches with a target are supported")
            return
        if batch is not None:
            client.set_ext_state(_STATE, None)
            reply.fail("BATCH", "MULTILINE_INVALID", "A multiline batch is already open")
            return
        from ircd.commands.speech import client_tags

        client.set_ext_state(_STATE, _OpenBatch(param[1:], msg.params[2], ctx.detach(), client_tags(client, msg)))
        return
    if param[:1] != "-" or batch is None or param[1:] != batch.ref:
        if batch is not None:
            client.set_ext_state(_STATE, None)
            if batch.failed:
                return
        reply.fail("BATCH", "MULTILINE_INVALID", "No such multiline batch is open")
        return
    client.set_ext_state(_STATE, None)
    if not batch.failed:
        _deliver(ctx.server, client, batch)


def collect(ctx: CommandContext, msg: Message) -> bool:
    """Take a ``batch``-tagged PRIVMSG/NOTICE/TAGMSG into the client's open multiline batch.

    Returns False when the client has no open batch (the line is handled as usual)."""
    batch: _OpenBatch | None = ctx.client.ext_state(_STATE)
    if batch is None:
        return False
    if batch.failed:
        return True
    limits = ctx.server.config.limits
    assert msg.tags is not None
    if msg.tags.get("batch") != batch.ref or msg.command != "PRIVMSG":
        _fail(batch, "MULTILINE_INVALID", "Only PRIVMSG lines of the open batch may be sent inside it")
        return True
    target = msg.params[0] if msg.params else ""
    casefold = ctx.server.casefold
    if casefold(target) != casefold(batch.target):
        _fail(batch, "MULTILINE_INVALID_TARGET", batch.target, target or "*", "Invalid multiline target")
        return True
    text = msg.params[1] if len(msg.params) > 1 else ""
    concat = CONCAT_TAG in msg.tags
    if concat and not text:
        _fail(batch, "MULTILINE_INVALID", "A blank line cannot carry draft/multiline-concat")
        return True
    size = batch.size + len(text.encode()) + (1 if batch.lines and not concat else 0)
    if len(batch.lines) + 1 > limits.multiline_max_lines:
        _fail(batch, "MULTILINE_MAX_LINES", str(limits.multiline_max_lines), "Multiline batch max-lines exceeded")
        return True
    if size > limits.multiline_max_bytes:
        _fail(batch, "MULTILINE_MAX_BYTES", str(limits.multiline_max_bytes), "Multiline batch max-bytes exceeded")
        return True
    batch.lines.append((text, concat))
    batch.size = size
    return True


def combine(lines: list[tuple[str, bool]] | tuple[tuple[str, bool], ...]) -> str:
    """The message a multiline batch stands for: lines joined by line feeds, concat lines joined directly."""
    parts: list[str] = []
    for i, (text, concat) in enumerate(lines):
        if i and not concat:
            parts.append("\n")
        parts.append(text)
    return "".join(parts)


class MultilineRelay:
    """A multiline message for many clients, formatted once per (tag profile, batch or fallback)."""

    __slots__ = ("cache", "lines", "ref", "relay")

    def __init__(self, relay: Relay, lines: list[tuple[str, bool]] | tuple[tuple[str, bool], ...], ref: str) -> None:
        self.relay = relay  # source, target parameter, msgid, time, account, client tags
        self.lines = lines
        self.ref = ref
        self.cache: dict[tuple[int, bool], bytes] = {}

    def for_client(self, client: Client, label: str | None = None) -> bytes:
        profile = client.caps & C.TAG_PROFILE
        batched = client.caps & (C.MULTILINE | C.BATCH) == (C.MULTILINE | C.BATCH)
        key = (profile, batched)
        data = self.cache.get(key) if label is None else None
        if data is None:
            data = self._format(profile, batched, label)
            if label is None:
                self.cache[key] = data
        return data

    def _format(self, profile: int, batched: bool, label: str | None) -> bytes:
        relay = self.relay
        target = relay.params[0]
        tags = relay.tags_for(profile)
        if label is not None:
            tags = {"label": label, **tags}
        out = []
        if batched:
            out.append(format_line("BATCH", ["+" + self.ref, BATCH_TYPE, target], relay.source, tags))
            for text, concat in self.lines:
                line_tags = {"batch": self.ref, CONCAT_TAG: ""} if concat else {"batch": self.ref}
                out.append(format_line("PRIVMSG", [target, text], relay.source, line_tags))
            out.append(format_line("BATCH", ["-" + self.ref], relay.source))
            return b"".join(out)
        # fallback (IRCv3 multiline): no blank lines; the msgid only on the first line sent
        for text, _ in self.lines:
            if not text:
                continue
            out.append(format_line("PRIVMSG", [target, text], relay.source, tags))
            if "msgid" in tags:
                tags = {k: v for k, v in tags.items() if k not in ("msgid", "label")}
        return b"".join(out)


def _send_batch(client: Client, data: bytes) -> None:
    """A whole batch as one outbox entry, counted as its lines."""
    client.send_lines(data, data.count(b"\n"))


def _deliver(server: Server, client: Client, batch: _OpenBatch) -> None:
    from ircd.commands.speech import cannot_send, is_restricted_ctcp

    reply = batch.reply
    if not any(text for text, _ in batch.lines):
        _fail(batch, "MULTILINE_INVALID", "A multiline message cannot be blank")
        return
    text = combine(batch.lines)
    name = batch.target
    ctx = CommandContext(server, client, reply, Message("PRIVMSG", [name, text], tags=batch.tags))
    channel = target = None
    if name[:1] == "#":
        channel = server.find_channel(name, client)
        if channel is None:
            reply.numeric(N.ERR_NOSUCHCHANNEL, name, "No such channel")
        elif (why := cannot_send(channel, client, server.casefold)) is not None:
            reply.numeric(N.ERR_CANNOTSENDTOCHAN, channel.name, why)
            channel = None
        elif "C" in channel.modes and any(is_restricted_ctcp(line) for line, _ in batch.lines):
            reply.numeric(N.ERR_CANNOTSENDTOCHAN, channel.name, "Cannot send to channel (+C)")
            channel = None
    else:
        target = server.state.find_nick(name)
        if target is None or not target.registered:
            reply.numeric(N.ERR_NOSUCHNICK, name, "No such nick/channel")
            target = None
    if (channel is None and target is None) or any(check(ctx, target, channel) for check in server.message_checks):
        reply.flush()
        return
    param = channel.name if channel is not None else target.nick  # type: ignore[union-attr]
    msgid, time = server.message_stamp()
    relay = Relay(client.prefix, "PRIVMSG", [param, text], msgid=msgid, time=time,
                  account=client.account, client_tags=batch.tags)
    lines = tuple(batch.lines)
    multi = MultilineRelay(relay, lines, "ml" + msgid)
    if channel is not None:
        for member in channel.members:
            if member is not client:
                _send_batch(member, multi.for_client(member))
    elif target is not None:
        for each in server.sessions.direct_recipients(client, target, False):  # every connection of the nick
            _send_batch(each, multi.for_client(each))
    if client.caps & C.ECHO_MESSAGE:
        label = reply.label if client.caps & C.LABELED_RESPONSE else None
        _send_batch(client, multi.for_client(client, label))
        reply.label = None  # the echo answered the label
    if target is not None and target.away is not None:
        reply.numeric(N.RPL_AWAY, target.nick, target.away)
    reply.flush()
    now = server.clock()
    if channel is not None and server.events.wants(ChannelMessage):
        server.events.publish(ChannelMessage(client, channel, "PRIVMSG", text, msgid, now, batch.tags, relay, lines))
    elif target is not None and server.events.wants(DirectMessage):
        server.events.publish(DirectMessage(client, target, "PRIVMSG", text, msgid, now, batch.tags, relay, lines))
