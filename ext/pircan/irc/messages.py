"""SEND and INBOX on IRC (list, READ, ACK, TAKE, WAIT, HISTORY), over ext.pircan.service.messages."""

from __future__ import annotations

from ircd.api import CommandContext, Message

from ext.pircan.ids import parse_count
from ext.pircan.irc.broadcast import send_to_all
from ext.pircan.irc.common import account_of, fail, refuse
from ext.pircan.irc.wire import full_message, hexid, message_header
from ext.pircan.rules import Limits
from ext.pircan.service import messages as service
from ext.pircan.service import search
from ext.pircan.service.refusals import Refused
from ext.pircan.irc.waits import await_ms_of, await_reply, handle_wait
from ext.pircan.state import Pircan

__all__ = ["handle_send", "handle_inbox"]

SEND = "SEND"
INBOX = "INBOX"
IDEMPOTENCY_TAG = "+pircan.dev/key"


async def handle_send(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """SEND <account> [<in-reply-to>|*] :<text> | SEND <account> <in-reply-to|*> <await-ms> :<text>"""
    sender = account_of(ctx, SEND)
    if sender is None:
        return
    params = msg.params
    if len(params) < 2:
        fail(ctx, SEND, "NEED_MORE_PARAMS", text="Syntax: SEND <account> [<in-reply-to>] :<text>")
        return
    tags = msg.tags or {}
    key = tags.get(IDEMPOTENCY_TAG) or tags.get("label") or None
    if params[0] == "*":
        await send_to_all(state, ctx, sender, msg, key)
        return
    try:
        await_ms = await_ms_of(params[2]) if len(params) > 3 else None  # checked before anything is sent
        sent = await service.send_message(state, sender, params[0], params[-1],
                                          params[1] if len(params) > 2 else None,
                                          key=key, max_chars=Limits.send_chars)
    except Refused as exc:
        refuse(ctx, SEND, exc)
        return
    stored = sent.message
    ctx.reply.send(SEND, ctx.client.nick, "OK", hexid(stored.id), stored.recipient, sent.status,
                   hexid(stored.conversation_id), str(stored.hop_count))
    if await_ms is not None:  # the reply's wait starts once the receipt is out (after this handler)
        state.api.spawn(await_reply(state, ctx.client, stored, await_ms))


async def handle_inbox(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """INBOX [READ <id> | ACK <id>[,<id>...]|ALL | TAKE [<from>] | WAIT [<from>|*] [<timeout-ms>] [<option>=...]
    | HISTORY <peer|conversation-id> [<limit>] [<before-id>] | SEARCH [<limit>] [<before-id>] :<query>]"""
    account = account_of(ctx, INBOX)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    args = msg.params[1:]
    try:
        if sub == "":
            await _list(state, ctx, account)
        elif sub == "READ":
            await _read(state, ctx, account, args)
        elif sub == "ACK":
            await _ack(state, ctx, account, args)
        elif sub == "TAKE":
            await _take(state, ctx, account, args)
        elif sub == "WAIT":
            await handle_wait(state, ctx, account, args)
        elif sub == "HISTORY":
            await _history(state, ctx, account, args)
        elif sub == "SEARCH":
            await _search(state, ctx, account, args)
        else:
            fail(ctx, INBOX, "UNKNOWN_SUBCOMMAND", sub)
    except Refused as exc:
        refuse(ctx, INBOX, exc)


async def _list(state: Pircan, ctx: CommandContext, account: str) -> None:
    messages, total = await service.inbox(state, account)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/inbox")
    for item in messages:
        message_header(ctx.reply, nick, item, with_preview=True)
    ctx.reply.send(INBOX, nick, "UNREAD", str(total), f"{total} unread message{'s' if total != 1 else ''}")
    ctx.reply.end_batch(ref)


async def _read(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, INBOX, "NEED_MORE_PARAMS", "READ", text="Syntax: INBOX READ <message-id>")
        return
    full_message(ctx.reply, ctx.client.nick, await service.read_message(state, account, args[0]))


async def _ack(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, INBOX, "NEED_MORE_PARAMS", "ACK", text="Syntax: INBOX ACK <id>[,<id>...] | INBOX ACK ALL")
        return
    ids = None if args[0].upper() == "ALL" else args[0].split(",")
    changed = await service.acknowledge(state, account, ids)
    ctx.reply.send(INBOX, ctx.client.nick, "ACKED", str(changed))


async def _take(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    sender = args[0] if args and args[0] != "*" else None
    item = await service.take(state, account, sender)
    if item is None:
        who = f" from {state.api.casefold(sender)}" if sender else ""
        ctx.reply.send(INBOX, ctx.client.nick, "EMPTY", "No unread messages" + who)
        return
    full_message(ctx.reply, ctx.client.nick, item)


async def _history(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, INBOX, "NEED_MORE_PARAMS", "HISTORY",
             text="Syntax: INBOX HISTORY <account|conversation-id> [<limit>] [<before-id>]")
        return
    limit, before = 50, None
    for arg in args[1:3]:
        count = parse_count(arg, 1, service.HISTORY_MAX)
        if count is not None and len(arg) < 16:
            limit = count
        else:
            before = arg
    what, items = await service.history(state, account, args[0], limit, before)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/history", what)
    for item in items:
        message_header(ctx.reply, nick, item, with_preview=True, with_read=True)
    more = hexid(items[0].id) if len(items) == limit else "*"
    text = f"{len(items)} message{'s' if len(items) != 1 else ''}"
    if more != "*":
        text += f"; older ones: INBOX HISTORY {args[0]} {limit} {more}"
    ctx.reply.send(INBOX, nick, "HISTORY", what, str(len(items)), more, text)
    ctx.reply.end_batch(ref)


async def _search(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    """SEARCH [<limit>] [<before-id>] :<query>: the MESSAGE lines of HISTORY, newest first."""
    if not args:
        fail(ctx, INBOX, "NEED_MORE_PARAMS", "SEARCH", text="Syntax: INBOX SEARCH [<limit>] [<before-id>] :<query>")
        return
    limit, before = search.SEARCH_PAGE, None
    for arg in args[:-1]:
        count = parse_count(arg, 1, search.SEARCH_MAX)
        if count is not None and len(arg) < 16:
            limit = count
        elif len(arg) == 16 and before is None:
            before = arg
        else:  # words of a query sent without its colon, most likely
            fail(ctx, INBOX, "INVALID_PARAMS", "SEARCH",
                 text="Syntax: INBOX SEARCH [<limit>] [<before-id>] :<query> (a query of several words after a colon)")
            return
    found = await search.search_messages(state, account, args[-1], limit=limit, before=before)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/search")
    for item in found.messages:
        message_header(ctx.reply, nick, item, with_preview=True, with_read=True)
    count = len(found.messages)
    text = f"{count} message{'s' if count != 1 else ''}"
    if found.more is not None:
        text += f"; older ones: INBOX SEARCH {limit} {found.more} :<the same query>"
    ctx.reply.send(INBOX, nick, "SEARCH", str(count), found.more or "*", text)
    ctx.reply.end_batch(ref)
