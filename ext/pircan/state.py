"""PIRCAN's live state: agreement cache, budgets, NOTIFY and the waits (INBOX WAIT and its kin).

The database is the truth; this keeps what the hot paths need in memory:
live agreements by pair (checked on every SEND and agent-to-agent PRIVMSG),
sliding one-hour windows for the conversation and agreement budgets, the
pending NOTIFY counts per account and type, and the connections blocked in
INBOX WAIT. All of it is rebuilt from the database at start-up.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Final, Protocol, TypeVar

from ircd.api import Channel, Client, CommandContext, ExtensionAPI, LoggedIn, Quit, Registered

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.config import PircanConfig
from ext.pircan.metrics import Stats
from ext.pircan.rules import HOUR_MS, Limits, SlidingWindow, allows
from ext.pircan.store import Agreement, StoredMessage
from ext.pircan.ids import ts
from ext.pircan.waiting import Waiter

log = logging.getLogger("pircd.pircan")

NOTIFY_CAP_NAME = "pircan.dev/lobby"
SERVICE_PREFIX = "PIRCAN!pircan@services.pircd"
EVENT_TYPES = ("message", "request", "decision", "agreement", "task", "task-update", "webhook")
MINUTE_MS = 60_000
_RECENT = 20_000  # recent messages kept for reply checks without a database read


# the events that bring a parked agent back (the agent host): what another party asks of it
WAKE_KINDS = frozenset({"message", "request", "task"})


class Waker(Protocol):
    """Something that can start an agent that is not on the network (the agent host).

    ``can_wake(account)``: the account is one this waker may start (a hosted agent that has not
    failed for good). ``wake(account, kind)``: start it for an event of ``kind`` unless it runs or is
    starting already; True when a start was begun now or is still under way (the receipt's
    ``revived``), False when it cannot be started. Called on the event loop, never blocks."""

    def can_wake(self, account: str) -> bool: ...

    def wake(self, account: str, kind: str) -> bool: ...


@dataclass
class PendingNotify:
    events: dict[str, deque[tuple[int, int]]] = field(default_factory=dict)  # type -> (time ms, event id)


_K = TypeVar("_K")
MARKS_FLUSH_S: Final = 0.1  # how long an announced event waits to be marked so in the database
MARKS_MOST: Final = 256  # marks held at most: more are written at once (a write of a few tenths of a ms)


def _drop_idle(table: dict[_K, SlidingWindow], now: int) -> None:
    for key in [k for k, window in table.items() if window.count(now) == 0]:
        del table[key]


class Pircan:
    def __init__(self, api: ExtensionAPI, cfg: PircanConfig) -> None:
        self.api = api
        self.cfg = cfg
        self.notify_cap: Any = None
        self.agreements: dict[int, Agreement] = {}
        self.pairs: dict[tuple[str, str], set[int]] = {}
        self.policies: dict[str, str] = {}
        self.conversations: dict[int, SlidingWindow] = {}
        self.budgets: dict[tuple[str, int], SlidingWindow] = {}
        self.recent: OrderedDict[int, StoredMessage] = OrderedDict()
        self.pending: dict[str, PendingNotify] = {}
        self.notify_timers: dict[str, Any] = {}
        self.waiters: dict[str, list[Waiter]] = {}
        self.wait_by_key: dict[object, Waiter] = {}
        self.channel_waiters: dict[str, set[Waiter]] = {}  # folded channel -> the waits watching it
        # account -> {a connection that just logged in: its unread messages announced before}
        self.greetings: dict[str, dict[Client, int]] = {}
        self.last_active: dict[str, int] = {}
        self.sweeper: Any = None
        self.sweep_hooks: list[Callable[[], None]] = []
        # accounts present on a transport other than IRC (an open MCP session...): name -> count
        self.elsewhere: dict[str, int] = {}
        self.refusals: dict[str, list[int]] = {}  # actor -> [minute start ms, rows written, rows held back]
        self.message_hooks: list[Callable[[StoredMessage], None]] = []
        self.agreement_end_hooks: list[Callable[[Agreement, int], None]] = []
        # after each committed change of a task (new, moved on, canceled by the agreement's end)
        self.task_hooks: list[Callable[[tdb.Task, tdb.TaskEntry], None]] = []
        self.display_names: dict[str, str] = {}  # account -> display name (the roster's)
        # (recipient, type, event id, time ms) after an event row committed: live pages (the portal),
        # webhook deliveries
        self.event_hooks: list[Callable[[str, str, int, int], None]] = []
        self.webhooks: Any = None  # the webhook delivery worker (ext/pircan/webhooks)
        self.private_channels: Any = None  # invitations and standing members (ext/pircan/channels.py)
        self.wakers: list[Waker] = []  # who can start an agent that is not present (the agent host)
        self.host: Any = None  # the agent host (ext/pircan/host), for its owner operations
        self.http_calls: Any = None  # the HTTP transports' call limits (ext/pircan/mcp/limits.py)
        self.mcp_sessions: Any = None  # MCP's session manager while the listener runs (mcp/sessions.py)
        self.http_apps: dict[str, Any] = {}  # "mcp", "a2a", "portal": built on first request (lazy.py)
        self.reviving: set[str] = set()  # accounts whose start an event began and that have not arrived
        # account -> True when its events are pushed to it while it is away (an enabled webhook, an
        # A2A endpoint the network delivers to): the roster's "parked", the receipt's "pushed"
        self.pushers: list[Callable[[str], bool]] = []
        self.stats = Stats()  # counters for /metrics (ext/pircan/metrics.py)
        # events announced (NOTIFY, a wait) and not yet marked so in the database: event id -> when
        # (the first time); written together every MARKS_FLUSH_S or MARKS_MOST, and before anything
        # reads them
        self._marks: dict[int, int] = {}
        self._marks_timer: Any = None
        self.marks_most = MARKS_MOST
        # the other nodes of a cluster (ext/pircan/cluster.py, set once the state is loaded); None alone
        self.cluster: Any = None

    # helpers ----------------------------------------------------------------

    @property
    def database(self) -> Any:
        return self.api.database

    def now_ms(self) -> int:
        return int(self.api.now() * 1000)

    def new_id(self) -> int:
        return self.api.new_id()

    # start-up -----------------------------------------------------------------

    async def start(self) -> None:
        await self.database.migrate(db.TRACK, db.MIGRATIONS)
        self.database.before_flush.append(self.flush_marks)  # a flush or close of the store includes them
        # the clock may be behind the last stored id (restarted within the same ms, or stepped back)
        self.api.observe_id(await self.database.read(db.max_id))
        now = self.now_ms()
        for agreement in await self.database.read(db.live_agreements, now):
            self.remember_agreement(agreement)
        self.policies = await self.database.read(db.all_policies)
        self.display_names = await self.database.read(tdb.display_names)
        for sender, agreement_id, conversation_id, at in await self.database.read(
            db.recent_message_times, now - HOUR_MS
        ):
            self.conversation_window(conversation_id).add(at)
            self.budget_window(sender, agreement_id).add(at)
            self.last_active[sender] = max(self.last_active.get(sender, 0), at)
        for event_id, recipient, kind, at in await self.database.read(
            db.pending_events, now - Limits.notify_ttl_ms
        ):
            self._count_event(recipient, kind, event_id, at)
        log.info(
            "pircan loaded agreements=%d policies=%d pending_accounts=%d",
            len(self.agreements), len(self.policies), len(self.pending),
        )
        self.sweeper = self.api.call_later(self.cfg.sweep_interval_ms / 1000, self._sweep_tick)

    def stop(self) -> None:
        if self.sweeper is not None:
            self.sweeper.cancel()
        for handle in self.notify_timers.values():
            handle.cancel()
        for waiters in list(self.waiters.values()):
            for waiter in list(waiters):
                self.end_wait(waiter)
        self.flush_refusal_summaries(None)

    # agreements ---------------------------------------------------------------

    @staticmethod
    def pair(a: str, b: str) -> tuple[str, str]:
        return (a, b) if a < b else (b, a)

    def remember_agreement(self, agreement: Agreement) -> None:
        self.agreements[agreement.id] = agreement
        self.pairs.setdefault(self.pair(agreement.requester, agreement.target), set()).add(agreement.id)
        if self.cluster is not None:
            self.cluster.agreement_known(agreement)

    def forget_agreement(self, ident: int) -> Agreement | None:
        agreement = self.agreements.pop(ident, None)
        if agreement is not None:
            key = self.pair(agreement.requester, agreement.target)
            ids = self.pairs.get(key)
            if ids is not None:
                ids.discard(ident)
                if not ids:
                    del self.pairs[key]
            if self.cluster is not None:
                self.cluster.agreement_gone(ident)
        return agreement

    def find_agreement(self, sender: str, recipient: str, scope: str, now: int) -> tuple[Agreement | None, str | None]:
        """The live agreement letting ``sender`` use ``scope`` toward ``recipient``, or a FAIL code."""
        ids = self.pairs.get(self.pair(sender, recipient))
        if not ids:
            return None, "NO_AGREEMENT"
        if len(ids) == 1:  # the usual case (every SEND asks): no list, no sort
            for only in ids:
                agreement = self.agreements[only]
            if not agreement.active(now):
                return None, "NO_AGREEMENT"
            if allows(agreement.scopes, agreement.requester, agreement.target, sender, scope):
                return agreement, None
            return None, "SCOPE_MISSING"
        live = [self.agreements[i] for i in ids if self.agreements[i].active(now)]
        if not live:
            return None, "NO_AGREEMENT"
        for agreement in sorted(live, key=lambda a: -a.expires_at):
            if allows(agreement.scopes, agreement.requester, agreement.target, sender, scope):
                return agreement, None
        return None, "SCOPE_MISSING"

    def privmsg_check(self, ctx: CommandContext, target: Client | None, channel: Channel | None) -> bool:
        """The message check of every PRIVMSG/NOTICE/TAGMSG (a method here, so that it is compiled
        with this module): a direct message between two agents needs a ``message`` agreement
        unless ``privmsg_policy`` is open. True when it was refused (with a FAIL)."""
        if channel is not None or target is None:
            return False
        sender = ctx.client
        if sender.account_kind != "agent" or target.account_kind != "agent" or self.cfg.privmsg_policy == "open":
            return False
        # an agent is always logged in, so both accounts are set
        sender_account, target_account = sender.account_folded, target.account_folded
        if sender_account is None or target_account is None or sender_account == target_account:
            return False
        agreement, code = self.find_agreement(sender_account, target_account, "message", self.now_ms())
        if agreement is not None:
            return False
        ctx.reply.fail(ctx.msg.command, code or "NO_AGREEMENT", target.nick,
                       "Agents need a message agreement to talk directly (CONTACT REQUEST)")
        return True

    # budgets ------------------------------------------------------------------

    def conversation_window(self, conversation_id: int) -> SlidingWindow:
        window = self.conversations.get(conversation_id)
        if window is None:
            window = self.conversations[conversation_id] = SlidingWindow()
        return window

    def budget_window(self, sender: str, agreement_id: int) -> SlidingWindow:
        key = (sender, agreement_id)
        window = self.budgets.get(key)
        if window is None:
            window = self.budgets[key] = SlidingWindow()
        return window

    def prune_windows(self, now: int) -> None:
        """Forget budget windows with nothing in the last hour (every new conversation makes one)."""
        _drop_idle(self.conversations, now)
        _drop_idle(self.budgets, now)

    def remember_message(self, msg: StoredMessage) -> None:
        recent = self.recent
        recent[msg.id] = msg
        if len(recent) > _RECENT:
            recent.popitem(last=False)

    # events and NOTIFY ----------------------------------------------------------

    def event_committed(self, recipient: str, kind: str, event_id: int, at: int) -> None:
        """An event row is committed: count it, and NOTIFY soon if the account is visible."""
        self._count_event(recipient, kind, event_id, at)
        if self.api.is_visible(recipient):
            # a cluster's node tells its own connections only (each node counts every event)
            if self.cluster is None or self.api.local_clients_for_account(recipient):
                self.schedule_notify(recipient)
        elif kind in WAKE_KINDS and not self.present(recipient):
            self.wake(recipient, kind)
        for hook in self.event_hooks:
            hook(recipient, kind, event_id, at)

    def _count_event(self, recipient: str, kind: str, event_id: int, at: int) -> None:
        # get-then-create: setdefault would build a PendingNotify and a deque per SEND
        pending = self.pending.get(recipient)
        if pending is None:
            pending = self.pending[recipient] = PendingNotify()
        events = pending.events.get(kind)
        if events is None:
            events = pending.events[kind] = deque()
        events.append((at, event_id))

    def schedule_notify(self, account: str, delay_ms: int | None = None) -> None:
        if account in self.notify_timers or (account not in self.pending and account not in self.greetings):
            return
        delay = self.cfg.notify_coalesce_ms if delay_ms is None else delay_ms
        self.notify_timers[account] = self.api.call_later(delay / 1000, lambda: self.flush_notify(account))

    def flush_notify(self, account: str) -> None:
        self.notify_timers.pop(account, None)
        clients = self.api.local_clients_for_account(account)  # a cluster's other nodes tell theirs
        pending = self.pending.get(account)
        greetings = self.greetings.pop(account, {})
        if (pending is None and not greetings) or not clients:
            return  # held until the account is visible again
        now = self.now_ms()
        counts: dict[str, int] = {}
        for kind in EVENT_TYPES:
            events = pending.events.get(kind) if pending is not None else None
            if not events:
                continue
            fresh = [e for e in events if now - e[0] <= Limits.notify_ttl_ms]  # 24 h, then they expire
            if fresh:
                counts[kind] = len(fresh)
        self.pending.pop(account, None)
        for client in clients:
            # a connection that just logged in also hears of the unread messages announced before
            extra = greetings.get(client, 0)
            for kind in EVENT_TYPES:
                count = counts.get(kind, 0) + (extra if kind == "message" else 0)
                if count:
                    self.send_notify(client, kind, count)
        self.api.flush()
        if pending is not None:
            ids = [event_id for events in pending.events.values() for _, event_id in events]
            self._mark(ids, now)
            if self.cluster is not None:
                self.cluster.notified(account, ids)

    def _mark(self, ids: list[int], at: int) -> None:
        """Events announced at ``at``: marked in the database within MARKS_FLUSH_S. One write for
        the marks of many NOTIFYs, instead of an UPDATE in nearly every group commit of a busy
        server; a crash in between announces them once more after the restart. Once
        ``marks_most`` (MARKS_MOST) are held they are written at once: a tenth of a second of a
        busy server's marks (1,700 at 16,000 SENDs a second) made one group commit 4 ms longer."""
        marks = self._marks
        for ident in ids:
            marks.setdefault(ident, at)
        if len(marks) >= self.marks_most:
            self.flush_marks()
        elif self._marks_timer is None:
            self._marks_timer = self.api.call_later(MARKS_FLUSH_S, self.flush_marks)

    def flush_marks(self) -> Any:
        """Queue the marks held (the store's flush and close, a wait before it looks for
        unannounced events, a login before it counts the announced ones); the write's future, or
        None with nothing held."""
        timer, self._marks_timer = self._marks_timer, None
        if timer is not None:
            timer.cancel()
        if not self._marks:
            return None
        marks, self._marks = self._marks, {}
        return self.database.write_nowait(db.MARK_NOTIFIED, list(marks.items()))

    def send_notify(self, client: Client, kind: str, count: int) -> None:
        if self.notify_cap is not None and client.caps & self.notify_cap.bit:
            self.api.send(client, "NOTIFY", client.nick, kind, str(count))
        else:
            self.api.send(client, "NOTICE", client.nick, f"NOTIFY {kind} {count}", source=SERVICE_PREFIX)

    def account_visible(self, client: Client) -> None:
        """A connection logged in to an account registered: deliver what waited, and remind it of
        the unread messages an earlier connection was told of (one NOTIFY message with both)."""
        account = client.account_folded
        if account is None:
            return
        self.api.spawn(self._greet(client, account))
        self.account_arrived(account)

    async def _greet(self, client: Client, account: str) -> None:
        marked = self.flush_marks()  # what was announced to the account's other connections counts
        if marked is not None:
            try:
                await marked
            except Exception:  # logged by the store; the count may then miss them
                pass
        told = await self.database.read(db.unread_announced, account)
        if client.account_folded != account:
            return  # logged out meanwhile
        if told:
            self.greetings.setdefault(account, {})[client] = told
        self.schedule_notify(account, delay_ms=0)

    def announced(self, account: str, kind: str, event_id: int, write: bool = True) -> None:
        """A wait told ``account`` of an event: it counts as announced (a later wait in the oldest
        mode does not answer it again; ``write`` False: the caller marked it). NOTIFY still counts
        it for the connections present now; with none, a later login does not hear of it again."""
        if write:
            self._mark([event_id], self.now_ms())
        pending = self.pending.get(account)
        events = pending.events.get(kind) if pending is not None else None
        if events and not self.api.is_visible(account):
            for item in [e for e in events if e[1] == event_id]:
                events.remove(item)
            if self.cluster is not None:
                self.cluster.notified(account, [event_id])

    def account_arrived(self, account: str) -> None:
        """Waits for ``account`` now watch for its departure; a revived agent is back."""
        self.reviving.discard(account)
        for waiting in self.waiters.values():
            for waiter in waiting:
                if waiter.senders is not None and account in waiter.senders:
                    waiter.watching = True

    # parked agents ----------------------------------------------------------------

    def wakeable(self, account: str) -> bool:
        """Not needed on the network to be reached: a waker may start it (a parked hosted agent)."""
        return any(waker.can_wake(account) for waker in self.wakers)

    def pushed(self, account: str) -> bool:
        """Its events reach it while it is away: a webhook or an A2A endpoint will be sent them."""
        return any(pusher(account) for pusher in self.pushers)

    def wake(self, account: str, kind: str) -> bool:
        """Ask the wakers to start ``account`` for an event of ``kind``; True when one is starting it.
        The mark lasts until the account arrives on a transport (``account_arrived``)."""
        for waker in self.wakers:
            if waker.wake(account, kind):
                self.reviving.add(account)
                return True
        return False

    # presence -------------------------------------------------------------------

    def present(self, account: str) -> bool:
        """Visible on IRC, or present on another transport (an open MCP session)."""
        return self.api.is_visible(account) or account in self.elsewhere

    def arrived_elsewhere(self, account: str) -> None:
        self.elsewhere[account] = self.elsewhere.get(account, 0) + 1
        if self.cluster is not None:
            self.cluster.presence(account, 1)
        if account in self.pending:
            self.schedule_notify(account, delay_ms=0)
        self.account_arrived(account)

    def left_elsewhere(self, account: str) -> None:
        count = self.elsewhere.get(account, 0) - 1
        if self.cluster is not None:
            self.cluster.presence(account, -1)
        if count > 0:
            self.elsewhere[account] = count
        else:
            self.elsewhere.pop(account, None)
            self.account_departed(account)

    # waits -----------------------------------------------------------

    def add_waiter(self, waiter: Waiter) -> None:
        if waiter.key is not None:
            old = self.wait_by_key.get(waiter.key)
            if old is not None:  # a connection has one INBOX WAIT, and one SEND awaiting its reply (key (conn, SEND))
                what = "SEND awaiting its reply" if isinstance(waiter.key, tuple) else "INBOX WAIT"
                self.finish_wait(old, "cancelled", f"Replaced by a newer {what}")
            self.wait_by_key[waiter.key] = waiter
        self.waiters.setdefault(waiter.account, []).append(waiter)
        for channel in waiter.channels or ():
            self.channel_waiters.setdefault(channel, set()).add(waiter)
        if waiter.senders is not None:
            waiter.watching = any(self.present(peer) for peer in waiter.senders)

    def end_wait(self, waiter: Waiter) -> None:
        """Forget a wait without telling its transport (the connection is gone)."""
        waiter.done = True
        if waiter.timer is not None:
            waiter.timer.cancel()
        if waiter.key is not None and self.wait_by_key.get(waiter.key) is waiter:
            del self.wait_by_key[waiter.key]
        waiting = self.waiters.get(waiter.account)
        if waiting is not None and waiter in waiting:
            waiting.remove(waiter)
            if not waiting:
                del self.waiters[waiter.account]
        for channel in waiter.channels or ():
            watching = self.channel_waiters.get(channel)
            if watching is not None:
                watching.discard(waiter)
                if not watching:
                    del self.channel_waiters[channel]

    def finish_wait(self, waiter: Waiter, kind: str, detail: str) -> None:
        """End a wait without an answer: ``kind`` is timeout, gone, nothing or cancelled."""
        if waiter.done:
            return
        self.end_wait(waiter)
        waiter.on_end(kind, detail)

    def answer_wait(self, waiter: Waiter, item: Any) -> None:
        self.end_wait(waiter)
        waiter.on_message(item)

    def wait_ended_for_key(self, key: object, reason: str | None = None) -> None:
        """The connection behind ``key`` quit (no reply) or logged out (``reason``: cancelled)."""
        waiter = self.wait_by_key.get(key)
        if waiter is None:
            return
        if reason is None:
            self.end_wait(waiter)
        else:
            self.finish_wait(waiter, "cancelled", reason)

    def check_departed(self, waiter: Waiter) -> None:
        """A wait for particular peers ends when they have all left the network. A peer that was
        not present when the wait began may still come and send, so only a departure counts; a wait
        that also watches tasks goes on (they may still change)."""
        if waiter.done or waiter.checking or waiter.senders is None or waiter.tasks is not None:
            return
        if any(self.present(peer) for peer in waiter.senders):
            waiter.watching = True
        elif waiter.watching:
            self.finish_wait(waiter, "gone", ",".join(sorted(waiter.senders)))

    def account_departed(self, account: str) -> None:
        """``account``'s last connection (on any transport) closed: end waits for it alone."""
        if self.present(account):
            return
        for waiting in list(self.waiters.values()):
            for waiter in list(waiting):
                if waiter.senders is not None and account in waiter.senders:
                    self.check_departed(waiter)

    # the listeners of the server's events (subscribed by ext/pircan/__init__.py): methods, which
    # the compiled build calls without a Python frame

    def on_account_seen(self, event: Registered | LoggedIn) -> None:
        self.account_visible(event.client)

    def on_quit(self, event: Quit) -> None:
        self.client_gone(event.client)
        self.client_left(event.client, event.client.account_folded)

    def client_gone(self, client: Client, reason: str | None = None) -> None:
        """An IRC connection quit (``reason`` None) or logged out while it may have been waiting."""
        self.wait_ended_for_key(client, reason)
        self.wait_ended_for_key((client, "SEND"), reason)

    def client_left(self, client: Client, account: str | None) -> None:
        """After an IRC connection closed: if its account is no longer present, its waiters' peers hear."""
        if account is not None:
            self.account_departed(account)

    # hooks for later deliveries (tasks, webhooks) ------------------------------------------

    def message_committed(self, item: StoredMessage) -> None:
        for hook in self.message_hooks:
            hook(item)

    def agreement_ended(self, agreement: Agreement, now: int) -> None:
        for hook in self.agreement_end_hooks:
            hook(agreement, now)

    def task_committed(self, task: tdb.Task, entry: tdb.TaskEntry) -> None:
        """``task`` as it is after the change that ``entry`` records has committed."""
        for hook in self.task_hooks:
            hook(task, entry)

    # refusal audit rows -----------------------------------------------------------------

    def refusal_allowed(self, actor: str, now: int) -> bool:
        record = self.refusals.get(actor)
        if record is None or now - record[0] >= MINUTE_MS:
            self.refusals[actor] = [now, 1, 0]
            return True
        if record[1] < self.cfg.audit_refusals_per_minute:
            record[1] += 1
            return True
        record[2] += 1
        return False

    def flush_refusal_summaries(self, now: int | None, only: str | None = None) -> None:
        """Write one ``refused.summary`` row for each actor whose minute is over (every one for
        ``now`` None) and whose refusals past the limit were held back."""
        for actor in [only] if only is not None else list(self.refusals):
            record = self.refusals.get(actor)
            if record is None or (now is not None and now - record[0] < MINUTE_MS):
                continue
            del self.refusals[actor]
            if record[2]:
                at = self.now_ms() if now is None else now
                self.database.write_nowait(
                    db.audit, self.new_id(), at, actor, actor, "refused.summary",
                    f"{record[2]} more refusals in the minute from {ts(record[0])}",
                )

    # sweeping ---------------------------------------------------------------------

    def _sweep_tick(self) -> None:
        """Every ``sweep_interval_ms`` (a minute): expire old requests and agreements (see contact.sweep)."""
        self.sweeper = self.api.call_later(self.cfg.sweep_interval_ms / 1000, self._sweep_tick)
        for hook in self.sweep_hooks:
            hook()
