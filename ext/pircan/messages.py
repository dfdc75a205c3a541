"""SEND (durable direct messages with loop control) and INBOX (pull: list, READ, ACK, TAKE, WAIT).

A SEND is checked in memory (agreement, hops, budgets), then written in one
transaction with its per-recipient event and its audit row; the receipt is
sent only after that commit. The agreement is checked again inside the
transaction, so a REVOKE that committed first always wins. SENDs queued
together are written together (a Batched write: a few multi-row statements
for the whole group).
"""

from __future__ import annotations

import sqlite3

from ircd.api import Batched, CommandContext, Message

from ext.pircan import rules
from ext.pircan import store as db
from ext.pircan.common import account_of, fail, parse_hex_id
from ext.pircan.contact import audit_refusal
from ext.pircan.rules import Limits
from ext.pircan.state import Pircan, PircanError, Waiter
from ext.pircan.store import StoredMessage
from ext.pircan.wire import full_message, hexid, message_header

SEND = "SEND"
INBOX = "INBOX"
IDEMPOTENCY_TAG = "+pircan.dev/key"


SendItem = tuple[StoredMessage, "str | None", int, int]  # message, idempotency key, event id, audit id


def _send_batch(conn: sqlite3.Connection, items: list[SendItem]) -> list[tuple[StoredMessage, bool]]:
    """(message, created) per item. A retry (same key, recipient, in-reply-to and text)
    returns the first message unchanged; a key reused for another message moves to the new one.
    Raises when any item's agreement is gone: the store then retries the items one by one."""
    results: list[tuple[StoredMessage, bool] | None] = [None] * len(items)
    fresh: list[SendItem] = []
    for i, item in enumerate(items):
        msg, key = item[0], item[1]
        if key is not None:
            first = db.message_by_key(conn, msg.sender, key)
            if first is not None:
                if (first.recipient, first.in_reply_to, first.body) == (msg.recipient, msg.in_reply_to, msg.body):
                    results[i] = (first, False)
                    continue
                db.release_key(conn, first.id)  # labels repeat across connections: never swallow a new SEND
        fresh.append(item)
        results[i] = (msg, True)
    if fresh:
        now = min(item[0].created_at for item in fresh)
        wanted = {item[0].agreement_id for item in fresh}
        if db.live_agreement_ids(conn, wanted, now) != wanted:
            raise PircanError("NO_AGREEMENT")
        db.insert_messages(conn, [(m, key) for m, key, _, _ in fresh])
        db.queue_events(conn, [(event_id, m.recipient, "message", m.id, m.created_at) for m, _, event_id, _ in fresh])
        db.audit_rows(conn, [
            (audit_id, m.created_at, m.sender, m.recipient, "message.send",
             f"{hexid(m.id)} conversation={hexid(m.conversation_id)} hop={m.hop_count}")
            for m, _, _, audit_id in fresh
        ])
    return results  # type: ignore[return-value]


_SEND_WRITE = Batched(_send_batch)


async def handle_send(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """SEND <account> [<in-reply-to>] :<text>"""
    sender = account_of(ctx, SEND)
    if sender is None:
        return
    params = msg.params
    if len(params) < 2:
        fail(ctx, SEND, "NEED_MORE_PARAMS", text="Syntax: SEND <account> [<in-reply-to>] :<text>")
        return
    target_name, text = params[0], params[-1]
    reply_to_text = params[1] if len(params) > 2 else None
    api = state.api
    recipient = api.casefold(target_name)
    if not text.strip():
        fail(ctx, SEND, "EMPTY", target_name)
        return
    if len(text) > Limits.send_chars:
        fail(ctx, SEND, "TOO_LONG", target_name)
        return
    if api.account_kind(recipient) is None:
        fail(ctx, SEND, "NO_SUCH_ACCOUNT", target_name)
        return
    if recipient == sender:
        fail(ctx, SEND, "SELF_CONTACT", target_name)
        return
    now = state.now_ms()
    agreement, code = state.find_agreement(sender, recipient, "message", now)
    if agreement is None:
        audit_refusal(state, sender, recipient, SEND, code or "NO_AGREEMENT")
        fail(ctx, SEND, code or "NO_AGREEMENT", target_name)
        return
    ident = state.new_id()
    hop, conversation, parent_id = 0, ident, None
    if reply_to_text is not None and reply_to_text != "*":
        parent_id = parse_hex_id(reply_to_text)
        parent = state.recent.get(parent_id) if parent_id is not None else None
        if parent is None and parent_id is not None:
            parent = await state.database.read(db.get_message, parent_id)
        if parent is None or {parent.sender, parent.recipient} != {sender, recipient}:
            fail(ctx, SEND, "NO_SUCH_MESSAGE", reply_to_text)
            return
        hop, conversation = parent.hop_count + 1, parent.conversation_id
        if hop > Limits.max_hops:
            audit_refusal(state, sender, recipient, SEND, "HOP_LIMIT", reply_to_text)
            fail(ctx, SEND, "HOP_LIMIT", reply_to_text)
            return
    conv_window = state.conversation_window(conversation)
    if conv_window.count(now) >= Limits.conversation_per_hour:
        audit_refusal(state, sender, recipient, SEND, "CONVERSATION_RATE", hexid(conversation))
        fail(ctx, SEND, "CONVERSATION_RATE", hexid(conversation))
        return
    budget = state.budget_window(sender, agreement.id)
    if budget.count(now) >= Limits.sender_per_agreement_per_hour:
        audit_refusal(state, sender, recipient, SEND, "AGREEMENT_BUDGET", hexid(agreement.id))
        fail(ctx, SEND, "AGREEMENT_BUDGET", hexid(agreement.id))
        return
    conv_window.add(now)  # reserve now, so concurrent SENDs see the slot taken
    budget.add(now)
    tags = msg.tags or {}
    key = tags.get(IDEMPOTENCY_TAG) or tags.get("label") or None
    stored = StoredMessage(ident, sender, recipient, agreement.id, conversation, parent_id, hop, now, text, None)
    event_id = state.new_id()
    try:
        stored, created = await state.database.write_batched(_SEND_WRITE, (stored, key, event_id, state.new_id()))
    except PircanError as exc:
        conv_window.remove(now)
        budget.remove(now)
        fail(ctx, SEND, exc.code, target_name)
        return
    if not created:
        conv_window.remove(now)
        budget.remove(now)
    else:
        state.remember_message(stored)
        state.last_active[sender] = now
        state.event_committed(recipient, "message", event_id, now)
        wake_waiters(state, stored)
    status = "notified" if api.is_visible(stored.recipient) else "queued"
    ctx.reply.send(SEND, ctx.client.nick, "OK", hexid(stored.id), stored.recipient, status,
                   hexid(stored.conversation_id), str(stored.hop_count))


# INBOX ----------------------------------------------------------------------------------


async def handle_inbox(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """INBOX [READ <id> | ACK <id>[,<id>...]|ALL | TAKE [<from>] | WAIT [<from>|*] [<timeout-ms>]]"""
    account = account_of(ctx, INBOX)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    args = msg.params[1:]
    if sub == "":
        await _list(state, ctx, account)
    elif sub == "READ":
        await _read(state, ctx, account, args)
    elif sub == "ACK":
        await _ack(state, ctx, account, args)
    elif sub == "TAKE":
        await _take(state, ctx, account, args)
    elif sub == "WAIT":
        await _wait(state, ctx, account, args)
    else:
        fail(ctx, INBOX, "UNKNOWN_SUBCOMMAND", sub)


def _unread_total(conn: sqlite3.Connection, account: str) -> int:
    return conn.execute(
        "SELECT COUNT(*) FROM pircan_messages WHERE recipient = ? AND read_at IS NULL", (account,)
    ).fetchone()[0]


async def _list(state: Pircan, ctx: CommandContext, account: str) -> None:
    messages = await state.database.read(db.unread, account, None, state.cfg.inbox_page)
    total = await state.database.read(_unread_total, account)
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
    ident = parse_hex_id(args[0])
    item = await state.database.read(db.get_message, ident) if ident is not None else None
    if item is None or account not in (item.sender, item.recipient):
        fail(ctx, INBOX, "NO_SUCH_MESSAGE", args[0])
        return
    full_message(ctx.reply, ctx.client.nick, item)


async def _ack(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, INBOX, "NEED_MORE_PARAMS", "ACK", text="Syntax: INBOX ACK <id>[,<id>...] | INBOX ACK ALL")
        return
    ids: list[int] | None = None
    if args[0].upper() != "ALL":
        ids = []
        for part in args[0].split(","):
            ident = parse_hex_id(part)
            if ident is None:
                fail(ctx, INBOX, "NO_SUCH_MESSAGE", part)
                return
            ids.append(ident)
    changed = await state.database.write(db.mark_read, account, ids, state.now_ms())
    ctx.reply.send(INBOX, ctx.client.nick, "ACKED", str(changed))


def _sender_filter(state: Pircan, text: str | None) -> str | None:
    return None if text in (None, "", "*") else state.api.casefold(text)  # type: ignore[arg-type]


async def _take(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    sender = _sender_filter(state, args[0] if args else None)
    item = await state.database.write(db.take_oldest, account, sender, state.now_ms())
    if item is None:
        ctx.reply.send(INBOX, ctx.client.nick, "EMPTY", "No unread messages" + (f" from {sender}" if sender else ""))
        return
    full_message(ctx.reply, ctx.client.nick, item)


async def _wait(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    """Answers at once when a matching message is unread; otherwise later, without blocking the connection."""
    who, when = (args[0] if args else None), (args[1] if len(args) > 1 else None)
    if len(args) == 1 and args[0][:1] in "0123456789+-.":  # no account name starts so: a timeout alone
        who, when = None, args[0]
    sender = _sender_filter(state, who)
    timeout = rules.normalize_timeout(when, state.cfg.wait_default_ms)
    reply = ctx.detach()
    waiter = Waiter(ctx.client, account, sender, reply, timeout)
    state.add_waiter(waiter)
    if timeout is not None:
        waiter.timer = state.api.call_later(timeout / 1000, lambda: _timed_out(state, waiter))
    # The handler returns now: later lines of this connection (PING...) go on being handled.
    state.api.spawn(_first_look(state, waiter))


async def _first_look(state: Pircan, waiter: Waiter) -> None:
    while not waiter.done:
        waiter.recheck = False
        item = await state.database.write(db.take_oldest, waiter.account, waiter.sender, state.now_ms())
        if waiter.done:
            if item is not None:  # the wait ended meanwhile: put the message back
                await state.database.write(_unread_again, item.id)
            return
        if item is not None:
            _answer(state, waiter, item)
            return
        if not waiter.recheck:
            waiter.checking = False
            return


def _unread_again(conn: sqlite3.Connection, ident: int) -> None:
    conn.execute("UPDATE pircan_messages SET read_at = NULL WHERE id = ?", (ident,))


def _answer(state: Pircan, waiter: Waiter, item: StoredMessage) -> None:
    state.end_wait(waiter)
    full_message(waiter.reply, waiter.client.nick, item)
    waiter.reply.flush()
    state.api.flush()


def _timed_out(state: Pircan, waiter: Waiter) -> None:
    if waiter.done:
        return
    state.end_wait(waiter)
    ms = waiter.timeout_ms or 0
    waiter.reply.send(INBOX, waiter.client.nick, "TIMEOUT", str(ms), f"No message within {ms} ms")
    waiter.reply.flush()
    state.api.flush()


def wake_waiters(state: Pircan, item: StoredMessage) -> None:
    """A message was committed: the first matching waiter takes it."""
    for waiter in state.waiters_for(item.recipient, item.sender):
        if waiter.checking:
            waiter.recheck = True
            continue
        waiter.checking = True  # until the take below settles
        state.api.spawn(_deliver_to_waiter(state, waiter, item))
        return


async def _deliver_to_waiter(state: Pircan, waiter: Waiter, item: StoredMessage) -> None:
    taken = await state.database.write(db.take_exact, item.recipient, item.id, state.now_ms())
    if waiter.done:
        if taken is not None:
            await state.database.write(_unread_again, item.id)
        return
    if taken is not None:
        _answer(state, waiter, taken)
    else:  # someone else took it (INBOX TAKE on another connection): keep waiting
        waiter.checking = False
