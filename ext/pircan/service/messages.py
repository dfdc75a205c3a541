"""Durable direct messages: send (with loop control), the inbox, reading, acknowledging, waiting, history.

A send is checked in memory (agreement, hops, budgets), then written in one
transaction with its per-recipient event and its audit row; the caller gets
the result only after that commit. The agreement is checked again inside the
transaction, so a revoke that committed first always wins. Sends queued
together are written together (a Batched write: a few multi-row statements
for the whole group). The body limit (60,000 bytes of UTF-8) holds for every
transport, here and in the database itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ircd.api import Batched, Conn

from ext.pircan import store as db
from ext.pircan.ids import hexid, parse_id
from ext.pircan.rules import Limits, SlidingWindow
from ext.pircan.service.contact import no_agreement, peer_of
from ext.pircan.service.events import audit_refusal, by_whom
from ext.pircan.service.refusals import Refused
from ext.pircan.service.waits import delivery_word, wake_waiters
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage

__all__ = [
    "Sent",
    "send_message",
    "inbox",
    "read_message",
    "acknowledge",
    "take",
    "history",
    "conversation",
    "body_refusal",
    "HISTORY_MAX",
    "OWNER_AGREEMENT",
    "owner_pair",
]

HISTORY_MAX = 200


@dataclass(slots=True, unsafe_hash=True)  # not frozen: one per SEND (see store.StoredMessage)
class Sent:
    """A stored message and what became of it: ``status`` is the receipt's delivery word (woken,
    delivered, revived, pushed or queued: ``waits.delivery_word``); ``created`` is False for an
    idempotent retry that returned the first message (its word is said as of the retry)."""

    message: StoredMessage
    status: str
    created: bool


# the message, its idempotency key, and its row for the store (db.send_row)
SendItem = tuple[StoredMessage, "str | None", db.SendRow]
OWNER_AGREEMENT = 0  # the agreement id of a message between an agent and its owner, who need none


def _send_batch(conn: Conn, items: list[SendItem]) -> list[tuple[StoredMessage, bool]]:
    """(message, created) per item. A retry (same key, recipient, in-reply-to and text)
    returns the first message unchanged; a key reused for another message moves to the new one.
    Raises when any item's agreement is gone: the store then retries the items one by one."""
    results: list[tuple[StoredMessage, bool] | None] = [None] * len(items)
    fresh: list[db.SendRow] = []
    for i, (msg, key, row) in enumerate(items):
        if key is not None:
            first = db.message_by_key(conn, msg.sender, key)
            if first is not None:
                if (first.recipient, first.in_reply_to, first.body) == (msg.recipient, msg.in_reply_to, msg.body):
                    results[i] = (first, False)
                    continue
                db.release_key(conn, first.id)  # labels repeat across connections: never swallow a new SEND
        fresh.append(row)
        results[i] = (msg, True)
    if fresh and not db.insert_sends(conn, fresh):
        raise Refused("NO_AGREEMENT")
    return results  # type: ignore[return-value]


def _one_statement(conn: Conn, items: list[SendItem]) -> bool:
    """New messages without keys (no lookup, no key to release) are one statement of
    ``insert_sends``, where the store makes them one."""
    return db.sends_in_one_statement(conn, len(items)) and all(item[1] is None for item in items)


_SEND_WRITE = Batched(_send_batch, alone=_one_statement)


def body_refusal(body: str, max_chars: int | None) -> str | None:
    """EMPTY or TOO_LONG for a body, or None. ``max_chars``: the transport's own limit in code
    points (IRC's 200), checked before the network's 60,000 bytes. (A NUL character never gets
    here: the transports refuse it, ``refusals.refuse_nul``.)"""
    if not body.strip():
        return "EMPTY"
    if max_chars is not None and len(body) > max_chars:
        return "TOO_LONG"
    if len(body) * 4 > Limits.body_bytes and len(body.encode("utf-8")) > Limits.body_bytes:
        return "TOO_LONG"
    return None


async def owner_pair(state: Pircan, a: str, b: str) -> bool:
    """One of the two accounts is a person and the other an agent it owns: they talk without an agreement."""
    kind_a, kind_b = state.api.account_kind(a), state.api.account_kind(b)
    if kind_a == "person" and kind_b == "agent":
        owner, agent = a, b
    elif kind_a == "agent" and kind_b == "person":
        owner, agent = b, a
    else:
        return False
    row: Any = await state.api.get_account(agent)
    return row is not None and row.owner == owner


async def send_message(state: Pircan, sender: str, recipient_name: str, body: str,
                       in_reply_to: str | None = None, *, key: str | None = None,
                       max_chars: int | None = None, via: str = "irc") -> Sent:
    """Store a direct message from ``sender`` and queue its event. Refusals, in this order:
    EMPTY, TOO_LONG, NO_SUCH_ACCOUNT, SELF_CONTACT, NO_AGREEMENT / SCOPE_MISSING,
    NO_SUCH_MESSAGE (``in_reply_to``), HOP_LIMIT, CONVERSATION_RATE, AGREEMENT_BUDGET.
    An agent and its owner need no agreement (``OWNER_AGREEMENT``); the other limits hold.
    Counted for /metrics by ``via`` (stored) and by code (refused).

    One coroutine (the checks and the bookkeeping are plain functions): every coroutine
    between the IRC handler and the write is resumed once more when the commit is done."""
    try:
        recipient, now, agreement_id, why = _checked(state, sender, recipient_name, body, max_chars)
        if agreement_id is None:
            agreement_id = await _owner_or_refuse(state, sender, recipient, recipient_name, why)
        parent = None
        if in_reply_to is not None and in_reply_to not in ("", "*"):
            parent = await _parent(state, sender, recipient, in_reply_to)
        stored, windows = _reserve(state, sender, recipient, agreement_id, parent, body, now)
        event_id = state.new_id()
        detail = f"{hexid(stored.id)} conversation={hexid(stored.conversation_id)} hop={stored.hop_count}"
        item: SendItem = (stored, key, db.send_row(stored, key, event_id, state.new_id(),
                                                   detail + by_whom(sender, sender, via)))
        try:
            stored, created = await state.database.write_batched(_SEND_WRITE, item)
        except Refused as exc:
            _release(windows, now)
            raise Refused(exc.code, recipient_name) from None
        except BaseException:  # not stored (the database unavailable, say): the reserved slots go back
            _release(windows, now)
            raise
    except Refused as exc:
        state.stats.send_refused(exc.code)
        raise
    if not created:
        _release(windows, now)
        return Sent(stored, delivery_word(state, stored.recipient, False), False)
    state.stats.sent(via)
    return Sent(stored, delivery_word(state, stored.recipient, _committed(state, stored, event_id, now)), True)


def _checked(state: Pircan, sender: str, recipient_name: str, body: str, max_chars: int | None
             ) -> tuple[str, int, int | None, str | None]:
    """The body and the recipient checked: (folded recipient, now, the agreement's id, None) or,
    without an agreement, (..., None, why not)."""
    code = body_refusal(body, max_chars)
    if code is not None:
        if code == "TOO_LONG" and max_chars is not None and len(body) > max_chars:
            raise Refused(code, recipient_name)
        if code == "TOO_LONG":
            raise Refused(code, recipient_name, text=f"A message body is at most {Limits.body_bytes} bytes of UTF-8")
        raise Refused(code, recipient_name)
    recipient = peer_of(state, sender, recipient_name)
    now = state.now_ms()
    agreement, why = state.find_agreement(sender, recipient, "message", now)
    return recipient, now, None if agreement is None else agreement.id, why


async def _owner_or_refuse(state: Pircan, sender: str, recipient: str, recipient_name: str,
                           why: str | None) -> int:
    """OWNER_AGREEMENT between an agent and its owner; else the refusal (audited)."""
    if await owner_pair(state, sender, recipient):
        return OWNER_AGREEMENT
    code = why or "NO_AGREEMENT"
    audit_refusal(state, sender, recipient, "SEND", code)
    raise await no_agreement(state, sender, recipient, code, recipient_name)


async def _parent(state: Pircan, sender: str, recipient: str, in_reply_to: str) -> StoredMessage:
    """The message ``in_reply_to`` names, between the two (NO_SUCH_MESSAGE), if a reply to it
    stays within the hops (HOP_LIMIT)."""
    parent_id = parse_id(in_reply_to)
    parent = state.recent.get(parent_id) if parent_id is not None else None
    if parent is None and parent_id is not None:
        parent = await state.database.read(db.get_message, parent_id)
    if parent is None or {parent.sender, parent.recipient} != {sender, recipient}:
        raise Refused("NO_SUCH_MESSAGE", in_reply_to)
    if parent.hop_count + 1 > Limits.max_hops:
        audit_refusal(state, sender, recipient, "SEND", "HOP_LIMIT", in_reply_to)
        raise Refused("HOP_LIMIT", in_reply_to)
    return parent


def _reserve(state: Pircan, sender: str, recipient: str, agreement_id: int, parent: StoredMessage | None,
             body: str, now: int) -> tuple[StoredMessage, tuple[SlidingWindow, SlidingWindow]]:
    """The message to store (in reply to ``parent``), after the two rates (a slot of each
    reserved now, so concurrent sends see it taken; ``_release`` gives them back)."""
    ident = state.new_id()
    hop, conversation_id, parent_id = 0, ident, None
    if parent is not None:
        hop, conversation_id, parent_id = parent.hop_count + 1, parent.conversation_id, parent.id
    conv_window = state.conversation_window(conversation_id)
    if conv_window.count(now) >= Limits.conversation_per_hour:
        audit_refusal(state, sender, recipient, "SEND", "CONVERSATION_RATE", hexid(conversation_id))
        raise Refused("CONVERSATION_RATE", hexid(conversation_id), retry_after_s=conv_window.retry_after_s(now))
    budget = state.budget_window(sender, agreement_id)
    if budget.count(now) >= Limits.sender_per_agreement_per_hour:
        audit_refusal(state, sender, recipient, "SEND", "AGREEMENT_BUDGET", hexid(agreement_id))
        raise Refused("AGREEMENT_BUDGET", hexid(agreement_id), retry_after_s=budget.retry_after_s(now))
    conv_window.add(now)
    budget.add(now)
    stored = StoredMessage(ident, sender, recipient, agreement_id, conversation_id, parent_id, hop, now, body, None)
    return stored, (conv_window, budget)


def _release(windows: tuple[SlidingWindow, SlidingWindow], now: int) -> None:
    windows[0].remove(now)
    windows[1].remove(now)


def _committed(state: Pircan, stored: StoredMessage, event_id: int, now: int) -> bool:
    """The bookkeeping of a stored message; True when a wait took it."""
    state.remember_message(stored)
    state.last_active[stored.sender] = now
    state.event_committed(stored.recipient, "message", event_id, now)
    woken = wake_waiters(state, stored)
    state.message_committed(stored)
    return woken


# the inbox ---------------------------------------------------------------------------------


def _unread_total(conn: Conn, account: str) -> int:
    return conn.execute(
        "SELECT COUNT(*) FROM pircan_messages WHERE recipient = ? AND read_at IS NULL", (account,)
    ).fetchone()[0]


async def inbox(state: Pircan, account: str, sender: str | None = None, conversation_id: str | None = None,
                limit: int | None = None) -> tuple[list[StoredMessage], int]:
    """The oldest unread messages to ``account`` (from ``sender`` / in a conversation, when given),
    without changing anything, and how many are unread in all (under the same filters)."""
    page = state.cfg.inbox_page if limit is None else max(1, min(limit, state.cfg.inbox_page))
    sender_folded = None if sender in (None, "", "*") else state.api.casefold(sender)  # type: ignore[arg-type]
    conv: int | None = None
    if conversation_id not in (None, "", "*"):
        conv = parse_id(conversation_id)  # type: ignore[arg-type]
        if conv is None:
            return [], 0
    if sender_folded is None and conv is None:
        messages = await state.database.read(db.unread, account, None, page)
        return messages, await state.database.read(_unread_total, account)
    return await state.database.read(db.unread_filtered, account, sender_folded, conv, page)


async def read_message(state: Pircan, account: str, message_id: str) -> StoredMessage:
    """One whole message ``account`` sent or received; its read state does not change."""
    ident = parse_id(message_id)
    item = await state.database.read(db.get_message, ident) if ident is not None else None
    if item is None or account not in (item.sender, item.recipient):
        raise Refused("NO_SUCH_MESSAGE", message_id)
    return item


async def acknowledge(state: Pircan, account: str, message_ids: list[str] | None) -> int:
    """Mark unread messages to ``account`` read (all of them for None); how many changed.
    One malformed id refuses the whole call."""
    ids: list[int] | None = None
    if message_ids is not None:
        ids = []
        for text in message_ids:
            ident = parse_id(text)
            if ident is None:
                raise Refused("NO_SUCH_MESSAGE", text)
            ids.append(ident)
        if not ids:
            return 0
    return await state.database.write(db.mark_read, account, ids, state.now_ms())


async def take(state: Pircan, account: str, sender: str | None = None) -> StoredMessage | None:
    """The oldest unread (matching) message, read and acknowledged in one step; None when none."""
    folded = None if sender in (None, "", "*") else state.api.casefold(sender)  # type: ignore[arg-type]
    return await state.database.write(db.take_oldest, account, folded, state.now_ms())


# history -----------------------------------------------------------------------------------


async def history(state: Pircan, account: str, peer_or_conversation: str, limit: int = 50,
                  before: str | None = None) -> tuple[str, list[StoredMessage]]:
    """Messages between ``account`` and a peer account, or of one conversation ``account`` is part
    of: both directions, read and unread, the newest ``limit`` (older than ``before``), oldest
    first. Returns (what it is: the folded peer or the conversation id, messages)."""
    limit = max(1, min(limit, HISTORY_MAX))
    before_id = None
    if before not in (None, "", "*"):
        before_id = parse_id(before)  # type: ignore[arg-type]
        if before_id is None:
            raise Refused("NO_SUCH_MESSAGE", before)  # type: ignore[arg-type]
    conv = parse_id(peer_or_conversation)
    peer = state.api.casefold(peer_or_conversation)
    if conv is not None:  # 16 hex digits: a conversation, unless it is an account's name
        items = await state.database.read(db.conversation_messages, account, conv, limit, before_id)
        if items or state.api.account_kind(peer) is None:
            if not items and before_id is None:
                raise Refused("NO_SUCH_MESSAGE", peer_or_conversation, text="No such conversation for you")
            return hexid(conv), items
    if state.api.account_kind(peer) is None:
        raise Refused("NO_SUCH_ACCOUNT", peer_or_conversation)
    return peer, await state.database.read(db.messages_between, account, peer, limit, before_id)


async def conversation(state: Pircan, account: str, conversation_id: str, limit: int = HISTORY_MAX,
                       before: str | None = None) -> list[StoredMessage]:
    """A whole thread by its conversation id (both directions), oldest first."""
    if parse_id(conversation_id) is None:
        raise Refused("NO_SUCH_MESSAGE", conversation_id, text="No such conversation for you")
    return (await history(state, account, conversation_id, limit, before))[1]
