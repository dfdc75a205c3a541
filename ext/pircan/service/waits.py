"""The one wait of every transport (IRC INBOX WAIT, MCP wait_for_messages, the A2A pull, a send
that awaits its reply), and the delivery word of a send's receipt.

A wait is answered by the first thing it watches (``ext/pircan/waiting.py``): in the ``oldest``
mode what is there already comes first (the oldest unread message, else the oldest unseen change
of a task, else the oldest event nothing announced yet), then whatever commits while it waits; in
the ``new`` mode only what commits after the wait began. A message and a task change are consumed
by one wait; every other matching wait of the account is told that it arrived and was taken. A
request, a decision, an agreement change, a webhook notice and a channel message are told to
every matching wait and consumed by none.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence
from typing import Any

from ircd.api import ChannelMessage, Conn

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.delivery import Delivery
from ext.pircan.ids import hexid, parse_id
from ext.pircan.rules import Limits
from ext.pircan.service import eventdoc
from ext.pircan.service.refusals import Refused
from ext.pircan.service.schema import message_json, task_json
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import TERMINAL, Task
from ext.pircan.waiting import CHANNEL, EVENT_KINDS, TOLD, Waiter, WaitEvent

__all__ = ["MODES", "DELIVERIES", "start_wait", "wait_once", "start_reply_wait", "await_reply", "put_back",
           "wake_waiters", "wake_task_waiters", "delivery_word", "reachable", "install", "kinds_of"]

MODES = ("oldest", "new")
# what a receipt says happened to a message, strongest first (the first that holds is named)
DELIVERIES = ("woken", "delivered", "revived", "pushed", "queued")
_CATCH_UP = 50  # unannounced events looked at per first look


def kinds_of(values: Sequence[str] | None) -> frozenset[str] | None:
    """The event types a wait names (None: every one); INVALID_PARAMS for an unknown one."""
    if not values:
        return None
    wanted = set()
    for value in values:
        kind = value.strip().lower()
        if kind not in EVENT_KINDS:
            raise Refused("INVALID_PARAMS", value, text="Kinds are " + ", ".join(EVENT_KINDS))
        wanted.add(kind)
    return frozenset(wanted)


# the receipt ---------------------------------------------------------------------------------------


def reachable(state: Pircan, account: str) -> bool:
    """Something it sends may still come: it is present, the host may start it, or its events are
    pushed to it (a webhook, an A2A endpoint) and it answers from there."""
    return state.present(account) or state.wakeable(account) or state.pushed(account)


def delivery_word(state: Pircan, recipient: str, woken: bool) -> str:
    """What became of a message to ``recipient`` as it committed, for its receipt: ``woken`` (a wait
    of the recipient took it), ``delivered`` (a connection or session of it is there and was told),
    ``revived`` (it was not there and the host is starting it), ``pushed`` (its webhook or A2A
    endpoint will be sent the event), else ``queued``. The first that holds, in that order."""
    if woken:
        return "woken"
    if state.present(recipient):
        return "delivered"
    if recipient in state.reviving:
        return "revived"
    if state.pushed(recipient):
        return "pushed"
    return "queued"


# starting a wait --------------------------------------------------------------------------------------


async def start_wait(state: Pircan, account: str, senders: list[str] | None, timeout_ms: int | None,
                     on_message: Callable[[Any], None], on_end: Callable[[str, str], None], key: object = None,
                     *, kinds: frozenset[str] | None = None, mode: str = "oldest", tasks: list[str] | None = None,
                     channels: list[str] | None = None, conversation: int | None = None,
                     after: int = 0) -> Waiter:
    """Wait for the next thing ``account`` watches (see ``ext/pircan/waiting.py``); the callbacks
    hear of the outcome (``Waiter``). ``key`` (an IRC connection) allows one wait at a time: a new
    wait with the same key cancels the old one. ``timeout_ms`` None waits until something happens.
    Refusals (before anything waits): INVALID_PARAMS (a mode), NO_SUCH_ACCOUNT (a sender),
    NO_SUCH_TASK (a task ``account`` is not a party of), NO_SUCH_CHANNEL / NOT_MEMBER (a channel).
    With nothing to wait for (every sender unreachable, every task final) it ends at once with
    ``nothing`` and the reason."""
    if mode not in MODES:
        raise Refused("INVALID_PARAMS", mode, text="The mode is oldest or new")
    folded = _senders(state, senders)
    watched = await _tasks(state, account, tasks)
    rooms = _channels(state, account, channels)
    why = _nothing(state, folded, watched, rooms)
    waiter = Waiter(account, folded, on_message, on_end, timeout_ms, key,
                    kinds=kinds or frozenset(EVENT_KINDS), tasks=None if watched is None else frozenset(watched),
                    channels=rooms, conversation=conversation, after=after)
    state.add_waiter(waiter)
    if timeout_ms is not None:
        waiter.timer = state.api.call_later(timeout_ms / 1000, lambda: state.finish_wait(waiter, "timeout", ""))
    if mode == "new":
        _looked(state, waiter, why)
    else:
        state.api.spawn(_first_look(state, waiter, why))
    return waiter


def _senders(state: Pircan, senders: list[str] | None) -> frozenset[str] | None:
    if senders is None:
        return None
    folded = set()
    for name in senders:
        if name in ("", "*"):
            continue
        account = state.api.casefold(name)
        if state.api.account_kind(account) is None:
            raise Refused("NO_SUCH_ACCOUNT", name, text="No such account: a wait for it would never end")
        folded.add(account)
    return frozenset(folded) or None


async def _tasks(state: Pircan, account: str, tasks: list[str] | None) -> dict[int, Task] | None:
    if not tasks:
        return None
    found: dict[int, Task] = {}
    for text in tasks:
        ident = parse_id(text)
        task = await state.database.read(tdb.get_task, ident) if ident is not None else None
        if task is None or account not in (task.requester, task.target):
            raise Refused("NO_SUCH_TASK", text, text="No such task of yours: a wait for it would never end")
        found[task.id] = task
    return found


def _channels(state: Pircan, account: str, channels: list[str] | None) -> frozenset[str] | None:
    if not channels:
        return None
    rooms = set()
    for name in channels:
        found = state.api.account_find_channel(account, name)
        if found is None:  # a private channel one may not see is a name nobody uses
            raise Refused("NO_SUCH_CHANNEL", name, text="No such channel")
        if not state.api.account_in_channel(account, found):
            raise Refused("NOT_MEMBER", name, text="You are not a member of this channel")
        rooms.add(found.folded)
    return frozenset(rooms)


def _nothing(state: Pircan, senders: frozenset[str] | None, tasks: dict[int, Task] | None,
             channels: frozenset[str] | None) -> str | None:
    """Why nothing the wait watches can happen, or None. Anyone may still write, so only a wait
    limited to given senders and/or tasks (and no channels) can have nothing to wait for."""
    if channels or (senders is None and tasks is None):
        return None
    if senders is not None and any(reachable(state, peer) for peer in senders):
        return None
    if tasks is not None and any(t.state not in TERMINAL for t in tasks.values()):
        return None
    why = []
    if senders is not None:
        names = ", ".join(sorted(senders))
        why.append(f"{names} {'is' if len(senders) == 1 else 'are'} not on the network, not hosted and "
                   "without a push endpoint")
    if tasks is not None:
        why.append(", ".join(f"task {hexid(t.id)} is {t.state}" for t in tasks.values()))
    return "Nothing to wait for: " + "; ".join(why)


def _looked(state: Pircan, waiter: Waiter, why: str | None) -> None:
    """The first look found nothing to take: what was told meanwhile answers, else it waits (or
    ends at once when nothing it watches can happen)."""
    waiter.checking = False
    if waiter.done:
        return
    if waiter.backlog:
        state.answer_wait(waiter, waiter.backlog[0])
    elif why is not None:
        state.finish_wait(waiter, "nothing", why)
    else:
        state.check_departed(waiter)


async def _first_look(state: Pircan, waiter: Waiter, why: str | None) -> None:
    """What is there already, oldest first: a message, a task change, an event not yet announced."""
    while not waiter.done:
        waiter.recheck = False
        state.flush_marks()  # queued first: what NOTIFY announced is no longer news to this look
        item = await state.database.write(_take_first, waiter, state.now_ms())
        if waiter.done:
            if item is not None and not isinstance(item, WaitEvent):  # the wait ended meanwhile
                await state.database.write(_put_back, item, waiter.account)
            return
        if isinstance(item, WaitEvent):
            if item.event_id is not None:
                state.announced(waiter.account, item.kind, item.event_id, write=False)
            state.answer_wait(waiter, item)
            return
        if item is not None:
            state.answer_wait(waiter, item)
            return
        if not waiter.recheck:
            _looked(state, waiter, why)
            return


def _take_first(conn: Conn, waiter: Waiter, now: int) -> StoredMessage | Task | WaitEvent | None:
    account = waiter.account
    if "message" in waiter.kinds and waiter.peer_leg:
        message = db.take_oldest_of(conn, account, waiter.senders, now, waiter.conversation, waiter.after)
        if message is not None:
            return message
    if waiter.conversation is None:
        for task in tdb.unseen_tasks(conn, account, None):
            kind = "task" if task.version == 1 else "task-update"
            if waiter.wants_task(task.id, task.other(account), kind):
                taken = tdb.take_task_update(conn, task.id, account)
                if taken is not None:
                    return taken
    return _unannounced(conn, waiter, now)


def _unannounced(conn: Conn, waiter: Waiter, now: int) -> WaitEvent | None:
    """The oldest event of the kinds it wants that no NOTIFY and no wait announced yet (within the
    24 hours NOTIFY keeps them), marked announced. A request decided since is no longer news (the
    account, or its owner, decided it): it is passed over, and counts as announced."""
    kinds = sorted(waiter.kinds & TOLD)
    if not kinds or not waiter.peer_leg or waiter.conversation is not None:
        return None
    since = max(waiter.after, db.first_id_after(now - Limits.notify_ttl_ms) - 1)
    for event_id, kind, ref, _ in db.unannounced_events(conn, waiter.account, kinds, since, _CATCH_UP):
        event, peer = _document(conn, waiter.account, event_id, kind, ref, now)
        if kind == "request" and event.data.get("state") != "pending":
            db.mark_notified(conn, [(event_id, now)])
        elif waiter.from_ok(peer):
            db.mark_notified(conn, [(event_id, now)])
            return event
    return None


def _document(conn: Conn, recipient: str, event_id: int, kind: str, ref: int,
              now: int) -> tuple[WaitEvent, str | None]:
    """The WaitEvent of an event row, and the account it comes from."""
    found = eventdoc.object_of(conn, kind, ref, now)
    key, data = found if found is not None else ("ref_id", None)
    body = data if isinstance(data, dict) else {"ref_id": hexid(ref)}
    return (WaitEvent(kind, hexid(ref), key, body, event_id),
            eventdoc.peer_of_object(kind, recipient, data if isinstance(data, dict) else None))


async def wait_once(state: Pircan, account: str, timeout_ms: int | None, delivery: Delivery | None = None,
                    held: set[Waiter] | None = None, **filters: Any) -> tuple[str, Any]:
    """Run one wait for an HTTP request (MCP, A2A) until it ends: (``message``, the item) or (the
    end's kind, its detail). What it takes counts as taken only if the request's client is still
    there when the answer is written (``delivery``): a client that disconnects ends the wait, and
    anything taken for it is unread (unseen) again. ``held``: a set the wait is in while it runs (so
    a listener that stops can end it)."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Any] = loop.create_future()

    def on_message(item: Any) -> None:
        if outcome.done():  # the caller went away: it stays unread (unseen)
            put_back(state, account, item)
        elif delivery is None or delivery.hold(lambda: put_back(state, account, item)):
            outcome.set_result(("message", item))
        else:
            outcome.set_result(("cancelled", "The client disconnected"))

    def on_end(kind: str, detail: str) -> None:
        if not outcome.done():
            outcome.set_result((kind, detail))

    senders = filters.pop("senders", None)
    waiter = await start_wait(state, account, senders, timeout_ms, on_message, on_end, **filters)
    if held is not None:
        held.add(waiter)
    gone = None if delivery is None else loop.create_task(delivery.gone.wait())
    try:
        if gone is not None:
            await asyncio.wait({outcome, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not outcome.done():
                outcome.set_result(("cancelled", "The client disconnected"))
        return await outcome
    finally:
        if gone is not None:
            gone.cancel()
        if not outcome.done():
            outcome.cancel()
        state.end_wait(waiter)
        if held is not None:
            held.discard(waiter)


def _reply_filters(sent: StoredMessage) -> dict[str, Any]:
    """What a sender awaiting the reply to ``sent`` waits for: the recipient's next message in that
    conversation (newer than ``sent``; one there already answers at once)."""
    return {"senders": [sent.recipient], "kinds": frozenset({"message"}), "conversation": sent.conversation_id,
            "after": sent.id}


async def start_reply_wait(state: Pircan, sent: StoredMessage, timeout_ms: int | None,
                           on_message: Callable[[Any], None], on_end: Callable[[str, str], None],
                           key: object = None) -> Waiter:
    """Await the reply to ``sent`` (a SEND with an await time), answered through the callbacks."""
    filters = _reply_filters(sent)
    senders = filters.pop("senders")
    return await start_wait(state, sent.sender, senders, timeout_ms, on_message, on_end, key, **filters)


async def await_reply(state: Pircan, sent: StoredMessage, timeout_ms: int | None, delivery: Delivery | None = None,
                      held: set[Waiter] | None = None) -> tuple[str, Any]:
    """Await the reply to ``sent`` for an HTTP request (MCP send_direct_message's await_reply, the A2A
    gateway's blocking send): (``message``, the reply, taken) or (timeout|gone|nothing|cancelled, detail)."""
    return await wait_once(state, sent.sender, timeout_ms, delivery, held, **_reply_filters(sent))


def put_back(state: Pircan, account: str, item: Any) -> None:
    """A taken message is unread again, a seen task change unseen (its answer never reached a
    client); an event told is not consumed, so nothing changes."""
    if isinstance(item, (StoredMessage, Task)):
        state.database.write_nowait(_put_back, item, account)


def _put_back(conn: Conn, item: StoredMessage | Task, account: str) -> None:
    if isinstance(item, StoredMessage):
        db.unread_again(conn, item.id)
    else:
        tdb.unsee(conn, item.id, account, item.seen_by(account))


# what commits wakes waits ----------------------------------------------------------------------------


def wake_waiters(state: Pircan, msg: StoredMessage) -> bool:
    """A message was committed: the first matching wait of its recipient takes it, the others are
    told that it was taken. True when a wait was there for it (the receipt's ``woken``)."""
    waiting = state.waiters.get(msg.recipient)
    if not waiting:  # the SEND path: most messages find no wait
        return False
    matching = [w for w in waiting if not w.done and w.wants_message(msg.sender, msg.conversation_id, msg.id)]
    if not matching:
        return False
    told = WaitEvent("message", hexid(msg.id), "message", message_json(msg, with_body=False), taken=True)
    return _hand_over(state, matching, (db.take_exact, msg.recipient, msg.id, msg.created_at),
                      lambda conn, taken: db.unread_again(conn, taken.id), told)


def wake_task_waiters(state: Pircan, task: Task, recipient: str, kind: str = "task-update") -> bool:
    """A change of ``task`` by the other party (``kind`` task for a new task): the first matching wait
    of ``recipient`` takes it (has seen it), the others are told."""
    matching = [w for w in state.waiters.get(recipient, ())
                if not w.done and w.wants_task(task.id, task.other(recipient), kind)]
    if not matching:
        return False
    told = WaitEvent(kind, hexid(task.id), "task", task_json(task), taken=True)
    return _hand_over(state, matching, (tdb.take_task_update, task.id, recipient),
                      lambda conn, taken: tdb.unsee(conn, taken.id, recipient, taken.seen_by(recipient)), told)


def _hand_over(state: Pircan, matching: list[Waiter], take: tuple, undo: Callable[[Conn, Any], None],
               told: WaitEvent) -> bool:
    if not matching:
        return False
    taker = next((w for w in matching if not w.checking), None)
    for waiter in matching:
        if waiter.checking:
            waiter.recheck = True  # its first look takes it, if nobody else does
    if taker is not None:
        taker.checking = True  # until the take below settles
        others = [w for w in matching if w is not taker]
        state.api.spawn(_take_for(state, taker, others, take, undo, told))
    return True


async def _take_for(state: Pircan, taker: Waiter, others: list[Waiter], take: tuple,
                    undo: Callable[[Conn, Any], None], told: WaitEvent) -> None:
    taken = await state.database.write(*take)
    if taker.done:  # the wait ended meanwhile: it stays unread (unseen) for the next one
        if taken is not None:
            await state.database.write(undo, taken)
        return
    if taken is None:  # another connection took it first (INBOX TAKE, TASK GET): it is told so too
        taker.checking = False
        others = [taker, *others]
    else:
        state.answer_wait(taker, taken)
    for waiter in others:
        tell(state, waiter, told)


def tell(state: Pircan, waiter: Waiter, event: WaitEvent) -> None:
    """Answer a wait with an event; one whose first look is in flight hears of it after that look."""
    if waiter.done:
        return
    if waiter.checking:
        waiter.backlog.append(event)
        return
    state.answer_wait(waiter, event)


def event_committed(state: Pircan, recipient: str, kind: str, event_id: int, at: int) -> None:
    """An event row committed (``Pircan.event_hooks``): one that is told, not consumed, goes to every
    matching wait of its recipient (messages and task changes wake waits where they commit)."""
    if kind not in TOLD:
        return
    # the sender filter is checked once the event's object is read (it names where it comes from)
    waiting = [w for w in state.waiters.get(recipient, ()) if not w.done and w.wants_event(kind, None, event_id)]
    if waiting:
        state.api.spawn(_tell_event(state, recipient, kind, event_id, waiting))


async def _tell_event(state: Pircan, recipient: str, kind: str, event_id: int, waiting: list[Waiter]) -> None:
    row = await state.database.read(eventdoc.event_row, event_id)
    if row is None:
        return
    event, peer = await state.database.read(_document, recipient, event_id, kind, row[2], state.now_ms())
    told = False
    for waiter in waiting:
        if not waiter.done and waiter.from_ok(peer):
            tell(state, waiter, event)
            told = True
    if told:
        state.announced(recipient, kind, event_id)


def channel_posted(state: Pircan, event: ChannelMessage) -> None:
    """A channel message was relayed: the waits watching that channel are told (none consumes it)."""
    watching = state.channel_waiters.get(event.channel.folded) if state.channel_waiters else None
    if not watching:
        return
    poster = event.client.account_folded
    relay = event.relay
    data = {"channel": event.channel.name, "msgid": event.msgid, "time": relay.time if relay is not None else "",
            "command": event.command, "from": event.client.nick, "account": poster, "text": event.text}
    told = WaitEvent(CHANNEL, event.msgid, "channel_message", data)
    for waiter in list(watching):
        if waiter.account != poster and state.api.account_in_channel(waiter.account, event.channel):
            tell(state, waiter, told)


def install(state: Pircan) -> None:
    """Waits hear of the events and channel messages that commit."""
    state.event_hooks.append(functools.partial(event_committed, state))  # no frame of its own per event
    state.api.subscribe(ChannelMessage, functools.partial(channel_posted, state))

