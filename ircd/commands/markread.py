"""MARKREAD (IRCv3 draft/read-marker): get or set the last read time of a target.

The markers themselves live in ``ircd.readmarkers``. A target is any channel
or nick name; nothing about the target is looked up, so MARKREAD tells no one
whether a channel exists.
"""

from __future__ import annotations

from collections.abc import Awaitable

from ircd.dispatch import CommandContext, command
from ircd.proto.lines import Message
from ircd.proto.timestamps import format_ms, parse_timestamp
from ircd.readmarkers import shown


@command("MARKREAD")
def handle_markread(ctx: CommandContext, msg: Message) -> Awaitable[None] | None:
    """MARKREAD <target> [timestamp=<YYYY-MM-DDThh:mm:ss.sssZ>]
    Asks for (or moves forward) the time up to which you have read a channel or a conversation;
    your other connections are told."""
    reply = ctx.reply
    if not msg.params or not msg.params[0]:
        reply.fail("MARKREAD", "NEED_MORE_PARAMS", "Missing parameters")
        return None
    if " " in msg.params[0] or msg.params[0][0] == ":":  # no channel or nick: it could not be echoed
        reply.fail("MARKREAD", "INVALID_PARAMS", msg.params[0], "Invalid target")
        return None
    time = None
    if len(msg.params) > 1:
        value = msg.params[1]
        ms = parse_timestamp(value[10:]) if value.startswith("timestamp=") else None
        if ms is None:
            reply.fail("MARKREAD", "INVALID_PARAMS", value, "Invalid timestamp")
            return None
        time = format_ms(min(ms, int(ctx.server.clock() * 1000)))
    markers = ctx.server.read_markers
    if ctx.client.account_folded is not None and markers.load(ctx.client.account_folded) is not None:
        return _after_load(ctx, msg.params[0], time)
    _markread(ctx, msg.params[0], time)
    return None


async def _after_load(ctx: CommandContext, target: str, time: str | None) -> None:
    await ctx.server.read_markers.wait_loaded(ctx.client)
    if not ctx.client.closing:
        _markread(ctx, target, time)


def _markread(ctx: CommandContext, target: str, time: str | None) -> None:
    markers = ctx.server.read_markers
    if time is None:
        ctx.reply.send("MARKREAD", target, shown(markers.get(ctx.client, target)))
        return
    now, changed = markers.set(ctx.client, target, time)
    if now is None:
        limit = ctx.server.config.limits.read_markers
        ctx.reply.fail("MARKREAD", "LIMIT_REACHED", target,
                       f"You already have read markers for {limit} targets, the most this server keeps")
        return
    ctx.reply.send("MARKREAD", target, shown(now))
    if changed:
        markers.announce(ctx.client, target, now)
