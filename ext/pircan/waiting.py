"""One pending wait (IRC INBOX WAIT, MCP wait_for_messages, the A2A pull, a send awaiting its reply):
what it watches, and what it is answered with. Transport-free; the rules that feed it are in
``service/waits.py``, the bookkeeping of the waits of each account in ``state.Pircan``.

What a wait watches (each filter narrows; given together, ``senders`` and ``tasks`` add up):

* ``kinds``: the event types that wake it (every type of ``EVENT_KINDS`` by default);
* ``senders``: messages, task changes and events *from* these accounts (None: from anyone);
* ``tasks``: changes of these tasks; given without ``senders``, only these tasks wake it;
* ``channels``: channel messages posted in these channels (opt-in; never consumed);
* ``conversation``: only messages of this conversation (a send awaiting its reply).

Messages and task changes are consumed by the one wait that gets them (read, seen); a request,
a decision, an agreement change, a webhook notice and a channel message are not: every matching
wait of the account hears of them, as a ``WaitEvent``, and so does every other matching wait when
one of them took a message or a task change (``taken``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Waiter", "WaitEvent", "EVENT_KINDS", "CONSUMED", "TOLD", "CHANNEL"]

# every type of event the network queues per recipient (state.EVENT_TYPES), in NOTIFY's order
EVENT_KINDS = ("message", "request", "decision", "agreement", "task", "task-update", "webhook")
CONSUMED = frozenset({"message", "task", "task-update"})  # taken by one wait
TOLD = frozenset({"request", "decision", "agreement", "webhook"})  # told to every wait, never consumed
CHANNEL = "channel"  # a channel message (only with a channels filter)


@dataclass(frozen=True, slots=True)
class WaitEvent:
    """What a wait is answered with for something it does not consume: ``kind`` (an event type, or
    ``channel``), ``ref`` (the object's id as shown: 16 hex digits, a channel message's msgid) and
    the object's JSON under ``key`` (``request``, ``agreement``, ``audit``, ``message`` without its
    body, ``task``, ``channel_message``). ``taken``: a message or task change that another wait
    of the account consumed."""

    kind: str
    ref: str
    key: str
    data: dict[str, Any]
    event_id: int | None = None
    taken: bool = False


@dataclass(eq=False)
class Waiter:
    """One pending wait. Exactly one of the callbacks is called, once: ``on_message(item)`` with a
    StoredMessage, a store_tasks.Task (a change it has now seen) or a WaitEvent; or ``on_end(kind,
    detail)`` with kind ``timeout``, ``gone``, ``nothing`` or ``cancelled``."""

    account: str
    senders: frozenset[str] | None  # None: from anyone
    on_message: Callable[[Any], None]
    on_end: Callable[[str, str], None]
    timeout_ms: int | None
    key: Any = None  # one wait per key (an IRC connection)
    kinds: frozenset[str] = frozenset(EVENT_KINDS)
    tasks: frozenset[int] | None = None
    channels: frozenset[str] | None = None  # folded channel names
    conversation: int | None = None
    after: int = 0  # only messages and events with a greater id (ids are time-ordered)
    timer: Any = None
    checking: bool = True  # the initial look is in flight
    recheck: bool = False  # something consumable arrived while checking
    done: bool = False
    watching: bool = False  # an awaited peer was present during the wait: its departure ends it
    backlog: list[WaitEvent] = field(default_factory=list)  # told while checking

    @property
    def peer_leg(self) -> bool:
        """Messages and events wake it: not a wait for given tasks only."""
        return self.tasks is None or self.senders is not None

    def from_ok(self, peer: str | None) -> bool:
        return self.senders is None or (peer is not None and peer in self.senders)

    def wants_message(self, sender: str, conversation_id: int, ident: int) -> bool:
        return ("message" in self.kinds and self.peer_leg and self.from_ok(sender) and ident > self.after
                and (self.conversation is None or conversation_id == self.conversation))

    def wants_task(self, task_id: int, other: str, kind: str) -> bool:
        if self.tasks is not None and task_id in self.tasks:
            return True
        return self.conversation is None and kind in self.kinds and self.peer_leg and self.from_ok(other)

    def wants_event(self, kind: str, peer: str | None, event_id: int) -> bool:
        """``peer`` None: whatever the sender filter says (checked once the event's object is read)."""
        return (self.conversation is None and kind in self.kinds and self.peer_leg and event_id > self.after
                and (peer is None or self.from_ok(peer)))

