"""CHATHISTORY (IRCv3 draft/chathistory): history of a channel or a conversation.

    CHATHISTORY LATEST  <target> <* | msgref> <limit>
    CHATHISTORY BEFORE  <target> <msgref> <limit>
    CHATHISTORY AFTER   <target> <msgref> <limit>
    CHATHISTORY AROUND  <target> <msgref> <limit>
    CHATHISTORY BETWEEN <target> <msgref> <msgref> <limit>
    CHATHISTORY TARGETS <timestamp=...> <timestamp=...> <limit>

A msgref is ``msgid=<id>`` or ``timestamp=<server-time>``; both become id
bounds (``ircd.proto.timestamps``), so every query is a range scan on the
time-ordered id. An id is a place in that order whether or not a message of
the target has it, so BEFORE, AFTER, LATEST and BETWEEN page on from any id;
AROUND asks for the context of one message, and a msgid that is not one of
the target's messages (unknown, pruned, or another target's) gets an empty
batch, the same for every such id, so it tells nothing about other targets.

Only members read a channel's history, and a channel is looked up through
``find_channel(name, viewer)``: a non-member, and a viewer for whom the
channel does not exist (a private channel), both get exactly the reply for a
name nobody uses. A nick target reads the direct messages between the
client's account and that nick (nothing without an account).
"""

from __future__ import annotations

import logging

from ircd import caps as C
from ircd.state.channel import CHANNEL_TYPES
from ircd.dispatch import CommandContext, command
from ircd.history import PLAIN_COMMANDS
from ircd.proto.lines import Message
from ircd.proto.msgid import format_id, parse_id
from ircd.proto.timestamps import MAX_ID, first_id_at, last_id_at, parse_timestamp
from ircd.delivery.replies import Relay, ReplyBuffer
from ircd.store import HistoryRow
from ircd.store import history as rows

log = logging.getLogger("pircd")

_PARAMS = {"LATEST": 4, "BEFORE": 4, "AFTER": 4, "AROUND": 4, "BETWEEN": 5, "TARGETS": 4}


class _Invalid(Exception):
    """A parameter that cannot be parsed: ``FAIL CHATHISTORY INVALID_PARAMS``."""

    def __init__(self, *context: str) -> None:
        self.context = context


class _Ref:
    """A message reference as an id: ``at`` is the first id it names (the message itself,
    or the first id of that millisecond), ``last`` the last one; ``msgid`` when it names one
    message rather than a time."""

    __slots__ = ("at", "last", "msgid")

    def __init__(self, at: int, last: int, msgid: bool = False) -> None:
        self.at, self.last, self.msgid = at, last, msgid

    @property
    def before(self) -> int:  # the last id strictly before the reference
        return self.at - 1

    @property
    def after(self) -> int:  # the first id strictly after it
        return self.last + 1


def _ref(text: str, *, timestamps_only: bool = False) -> _Ref:
    kind, sep, value = text.partition("=")
    if sep and kind == "timestamp":
        ms = parse_timestamp(value)
        if ms is None:
            raise _Invalid(text, "Invalid timestamp")
        return _Ref(first_id_at(ms), last_id_at(ms))
    if sep and kind == "msgid" and not timestamps_only:
        ident = parse_id(value)
        if ident is None or ident > MAX_ID:
            raise _Invalid(text, "Invalid msgid")
        return _Ref(ident, ident, msgid=True)
    raise _Invalid(text, "Invalid message reference")


def _limit(text: str, maximum: int) -> int:
    if not text.isdigit() or not text.isascii():
        raise _Invalid(text, "Invalid limit")
    value = int(text)
    return maximum if value == 0 or value > maximum else value


@command("CHATHISTORY", min_params=1, requires_cap=C.CHATHISTORY)
async def handle_chathistory(ctx: CommandContext, msg: Message) -> None:
    """CHATHISTORY <LATEST|BEFORE|AFTER|AROUND|BETWEEN|TARGETS> <target> <msgref> [<msgref>] <limit>
    Plays back the history of a channel you are in, or of your direct messages with a nick (when logged
    in). A msgref is msgid=<id> or timestamp=<YYYY-MM-DDThh:mm:ss.sssZ>; LATEST also takes *."""
    reply, server = ctx.reply, ctx.server
    sub = msg.params[0].upper()
    history = server.history
    if sub not in _PARAMS:
        reply.fail("CHATHISTORY", "INVALID_PARAMS", msg.params[0], "Unknown command")
        return
    if len(msg.params) != _PARAMS[sub]:
        text = "Insufficient parameters" if len(msg.params) < _PARAMS[sub] else "Too many parameters"
        reply.fail("CHATHISTORY", "INVALID_PARAMS", sub, text)
        return
    if history is None:  # the capability is not offered without history; a rehash may have raced
        reply.fail("CHATHISTORY", "MESSAGE_ERROR", sub, msg.params[1], "History is not available")
        return
    maximum = server.config.history.max_query
    commands = None if ctx.client.caps & C.EVENT_PLAYBACK else PLAIN_COMMANDS
    try:
        if sub == "TARGETS":
            await _targets(ctx, _ref(msg.params[1], timestamps_only=True), _ref(msg.params[2], timestamps_only=True),
                           _limit(msg.params[3], maximum), commands)
        else:
            await _history(ctx, sub, msg.params[1:], maximum, commands)
    except _Invalid as exc:
        reply.fail("CHATHISTORY", "INVALID_PARAMS", sub, *exc.context)
    except Exception:
        log.exception("chathistory query failed")  # every read happens before the batch starts
        reply.fail("CHATHISTORY", "MESSAGE_ERROR", sub, msg.params[1], "Messages could not be retrieved")


async def _history(ctx: CommandContext, sub: str, params: list[str], maximum: int, commands) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    name = params[0]
    limit = _limit(params[-1], maximum)
    refs = [None if p == "*" and sub == "LATEST" else _ref(p) for p in params[1:-1]]
    history = server.history
    assert history is not None
    key, display = None, name
    if name[:1] in CHANNEL_TYPES:
        channel = server.find_channel(name, client)
        if channel is None or client not in channel.members:
            reply.fail("CHATHISTORY", "INVALID_TARGET", sub, name, "Messages could not be retrieved")
            return
        key, display = channel.folded, channel.name
    elif name == "*" or not name:
        reply.fail("CHATHISTORY", "INVALID_TARGET", sub, name or "*", "Messages could not be retrieved")
        return
    else:
        direct = history.direct_key(client, name)
        if direct is not None:
            key, display = direct
    found: list[HistoryRow] = []
    if key is not None:
        found = await _select(history, key, sub, refs, limit, commands)
    batch = reply.start_batch("chathistory", display)
    for row in found:
        _replay(reply, row)
    reply.end_batch(batch)


async def _select(history, key: str, sub: str, refs: list, limit: int, commands) -> list[HistoryRow]:
    def select(low: int, high: int, count: int, newest_first: bool):
        return history.read(rows.select, key, low, high, count, newest_first=newest_first, commands=commands)

    ref = refs[0]
    if sub == "LATEST":
        return await select(0 if ref is None else ref.after, MAX_ID, limit, True)
    if sub == "BEFORE":
        return await select(0, ref.before, limit, True)
    if sub == "AFTER":
        return await select(ref.after, MAX_ID, limit, False)
    if sub == "AROUND":  # the message itself (or the first at that time) and what follows, plus half before
        if ref.msgid and not await history.read(rows.has_message, key, ref.at):
            return []  # no such message in this target: nothing is around it (an empty batch)
        earlier = await select(0, ref.before, limit // 2, True)
        return earlier + await select(ref.at, MAX_ID, limit - limit // 2, False)
    # BETWEEN: counted from the first reference, forwards or backwards in time
    first, second = refs
    if first.at <= second.at:
        return await select(first.after, second.before, limit, False)
    return await select(second.after, first.before, limit, True)


def _replay(reply: ReplyBuffer, row: HistoryRow) -> None:
    """One stored message as it was relayed: its msgid, time, account and client tags."""
    params = [row.param] if row.command == "TAGMSG" else [row.param, row.text]
    relay = Relay(row.source, row.command, params, msgid=format_id(row.id), time=row.time,
                  account=row.account, client_tags=row.tags)
    if row.lines is None:
        reply.relay(relay)
        return
    client = reply.client
    tags = relay.tags_for(client.caps & C.TAG_PROFILE)
    if client.caps & (C.MULTILINE | C.BATCH) == (C.MULTILINE | C.BATCH):
        from ircd.commands.multiline import BATCH_TYPE, CONCAT_TAG

        inner = reply.start_batch(BATCH_TYPE, row.param, source=row.source, tags=tags)
        stamp = {"time": tags["time"]} if "time" in tags else {}
        for text, concat in row.lines:
            reply.send("PRIVMSG", row.param, text, source=row.source, tags={CONCAT_TAG: "", **stamp} if concat else stamp)
        reply.end_batch(inner, source=row.source)
        return
    for text, _ in row.lines:  # the fallback: no blank lines, the msgid on the first line only
        if text:
            reply.send(row.command, row.param, text, source=row.source, tags=dict(tags))
            tags.pop("msgid", None)


async def _targets(ctx: CommandContext, first, second, limit: int, commands) -> None:
    """IRCv3 chathistory TARGETS: "channels the user has visible history in, together with users with
    which the user has exchanged direct messages, ordered by the time of the latest message"."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    history = server.history
    assert history is not None
    forwards = first.at <= second.at
    low, high = (first.after, second.before) if forwards else (second.after, first.before)
    found: list[tuple[int, str, str]] = []
    channels = {ch.folded: ch for ch in client.channels.values()}
    if channels:
        newest = await history.read(rows.newest_in, list(channels), commands)
        for folded, (ident, time) in newest.items():
            if low <= ident <= high and folded in client.channels:
                found.append((ident, channels[folded].name, time))
    if client.account_folded is not None and server.config.history.direct_messages:
        for conv in await history.read(rows.conversations, client.account_folded, low, high):
            found.append((conv.last_id, conv.peer, conv.time))
    found.sort()
    found = found[:limit] if forwards else found[-limit:]
    batch = reply.start_batch("draft/chathistory-targets")
    for _, name, time in found:
        reply.send("CHATHISTORY", "TARGETS", name, time)
    reply.end_batch(batch)
