"""The delivery worker: sends queued webhook deliveries from the server's event loop.

The database is the queue (``pircan_webhook_deliveries``); memory holds one small record per
enabled endpoint: when its next delivery is due, whether a runner is sending to it, and how long
it is paused. So memory grows with the number of endpoints, never with the backlog.

* **Concurrency.** An endpoint has at most one request in flight (its runner), so an endpoint
  gets its deliveries in the order they were created while it answers; all endpoints together
  have at most ``pircan.webhook_max_in_flight``. A runner sends one batch, then gives its slot
  back and queues up again behind the other endpoints that are due.
* **Fairness across owners.** Endpoints that are due wait in a queue per owner (a person and its
  agents are one owner). A free slot goes to the waiting owner with the fewest requests in
  flight, the owners taking turns; and a runner gives its slot up after the delivery in hand
  when another owner waits for one. So slow receivers of one owner, however many, delay another
  owner's delivery by at most one request's timeout.
* **Schedule.** Each delivery has its own schedule (``rules.next_try_at``); a delivery that failed
  does not hold the newer ones of its endpoint back. When a try gets no HTTP answer at all
  (timeout, connection refused), the endpoint itself pauses until that delivery's next try, so a
  dead receiver costs one request per pause, not one per pending delivery.
* **Durability.** A delivery's payload is stored before its first try; a delivery is deleted only
  once its 2xx is recorded. After a crash every pending row is due again (at-least-once, same
  delivery id, same bytes). At start-up, and every ``pircan.sweep_interval_ms``, the worker reads
  the endpoints and their next due times from the database (changes made by ``pircd webhook``).
* **Clusters.** On a node of a cluster, a runner sends only while its node holds the endpoint's
  claim in the database (``claims.py``), so each delivery is sent by one node of the network.
* **Time.** Timers go through ``api.call_later`` and times through the server's clock, so the
  socket-free harness drives the whole schedule with its fake clock.
"""

from __future__ import annotations

import heapq
import itertools
import json
import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan.ids import hexid
from ext.pircan.lazy import load
from ext.pircan.state import Pircan
from ext.pircan.webhooks import payload as payloads
from ext.pircan.webhooks import rules, store
from ext.pircan.webhooks.sender import Outcome, Policy, Sender, signed_headers
from ext.pircan.webhooks.store import Due, Endpoint

if TYPE_CHECKING:
    from ext.pircan.webhooks.claims import Claims

__all__ = ["BATCH", "Webhooks"]

log = logging.getLogger("pircd.pircan.webhooks")

BATCH = 16  # deliveries a runner reads at once (their payloads are in memory while it sends them)
_RETRY_READ_MS = 60_000  # after a failed database read, look again this much later


@dataclass(slots=True, eq=False)
class _Endpoint:
    id: int
    account: str
    owner: str  # whose slots it uses: the account's owner, or the account itself
    due: int | None = None  # when it is queued to run (its key in the heap), None: not queued
    ready: bool = False  # due now, waiting in its owner's queue for a slot
    running: bool = False
    more: bool = False  # an event came while its runner ran
    paused_until: int = 0


class Webhooks:
    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.api = state.api
        self.by_id: dict[int, _Endpoint] = {}
        self.by_account: dict[str, _Endpoint] = {}
        self._heap: list[tuple[int, int, int]] = []  # (due, seq, endpoint id); stale entries are skipped
        self._seq = itertools.count()
        self.in_flight = 0
        self.owners: dict[str, str] = {}  # account -> its owner (agents; refreshed when accounts change)
        self._ready: dict[str, deque[_Endpoint]] = {}  # owner -> its due endpoints, owners in turn order
        self._owner_flight: dict[str, int] = {}  # owner -> requests in flight
        self._timer: Any = None
        self._timer_at: int | None = None
        self._tasks: set[Any] = set()
        self.stopping = False
        self.started = False
        self._policy: tuple[Any, Policy] = (None, Policy(1.0, 1.0, 0, []))
        self.sender = Sender(self.policy, max_idle=min(state.cfg.webhook_max_in_flight, 256))
        self.testing: set[str] = set()  # accounts whose endpoint a TEST is sending to
        self.sent = 0  # requests made (for tests and benchmarks)
        self.delivered = 0
        # (endpoint kind, outcome) -> deliveries, for /metrics (ext/pircan/metrics.py): kind webhook or
        # a2a; outcome delivered, retry, dead_tries, dead_expired, dead_gone
        self.counts: dict[tuple[str, str], int] = {}
        self.claims: Claims | None = None  # on a node of a cluster: which node sends to which endpoint
        if self.api.node is not None:
            from ext.pircan.webhooks.claims import Claims

            self.claims = Claims(self, self.api.node)

    def policy(self) -> Policy:
        cfg = self.state.cfg  # replaced whole by a REHASH
        if self._policy[0] is not cfg:
            self._policy = (cfg, Policy.from_config(cfg))
        return self._policy[1]

    # start, stop, reload ---------------------------------------------------------------------

    async def start(self) -> None:
        await self.state.database.migrate(store.TRACK, store.MIGRATIONS)
        self.started = True
        if self.claims is not None:
            self.claims.start()
        await self.accounts_changed()  # accounts deleted while the server was down
        await self.reload()

    async def accounts_changed(self) -> None:
        """Accounts were deleted (or deleted and made again): their webhooks go with them, so that a
        new account of the same name neither sends to the old one's URL nor sees its dead letters."""
        if not self.started or self.stopping:
            return
        rows = await self.api.list_accounts()
        self.owners = {row.folded: row.owner for row in rows if row.owner}
        for ep in self.by_id.values():
            if not ep.running and not ep.ready:  # its slot is counted under the owner it started with
                ep.owner = self.owners.get(ep.account, ep.account)
        current = {row.folded: row.created_at for row in rows}
        for account, dropped, dead in await self.state.database.write(store.drop_deleted, current):
            self.forget(account)
            log.info("webhook of deleted account %s removed (%d pending, %d dead letters)", account, dropped, dead)

    async def reload(self) -> None:
        """Take the endpoints and their due times from the database (also what the CLI changed)."""
        if self.stopping:
            return
        await self.a2a_changed()  # endpoints published or withdrawn elsewhere (the CLI, a deleted account)
        known = set(self.by_id)  # an endpoint set while the read runs is newer than what it finds
        found = await self.state.database.read(store.enabled_endpoints)
        seen = set()
        for ident, account, due in found:
            seen.add(ident)
            ep = self.by_id.get(ident)
            if ep is None:
                newer = self.by_account.get(account)
                if newer is not None and newer.id not in known:
                    continue  # the account's endpoint was set again while the read ran
                self.forget_here(account)
                ep = self._add(ident, account)
            if due is not None and not ep.running:
                self._schedule(ep, due)
        for ident in [i for i in self.by_id if i not in seen and i in known]:
            self.forget(self.by_id[ident].account)
        self.pump()
        await self.sender.prune()

    def stop(self) -> list[Any]:
        """Stop sending: cancel the timer and the runners (what they were sending stays pending)."""
        self.stopping = True
        if self._timer is not None:
            self._timer.cancel()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks

    async def close(self) -> None:
        if self.claims is not None:
            await self.claims.stop()
        await self.sender.aclose()

    # the endpoints in memory ---------------------------------------------------------------------

    def _add(self, ident: int, account: str) -> _Endpoint:
        ep = _Endpoint(ident, account, self.owners.get(account, account))
        self.by_id[ident] = ep
        self.by_account[account] = ep
        return ep

    def forget_here(self, account: str) -> None:
        old = self.by_account.pop(account, None)
        if old is not None:
            self.by_id.pop(old.id, None)

    def endpoint_set(self, endpoint: Endpoint) -> None:
        """An endpoint was set or enabled again (its pending deliveries are due as they were)."""
        self.set_here(endpoint)
        if self.claims is not None:
            self.claims.changed(endpoint.account)

    def set_here(self, endpoint: Endpoint) -> None:
        """(Also what another node set or enabled: ``claims.py``.)"""
        ep = self.by_id.get(endpoint.id)
        if ep is None:
            self.forget_here(endpoint.account)
            ep = self._add(endpoint.id, endpoint.account)
        ep.paused_until = 0
        self.state.api.spawn(self._refresh(ep))

    def forget(self, account: str) -> None:
        """The account's endpoint was cleared or disabled: nothing more is sent to it."""
        self.forget_here(account)
        if self.claims is not None:
            self.claims.changed(account)

    def event_queued(self, recipient: str, kind: str, event_id: int, at: int) -> None:
        """An event was committed (``Pircan.event_hooks``): its delivery row was made with it. An
        event another node committed is that node's to wake for (every node hears every event:
        ext/pircan/cluster.py), so one node, not all, tries to claim the endpoint for it."""
        link = self.state.cluster
        if link is not None and link.applying:
            return
        ep = self.by_account.get(recipient)
        if ep is not None and not self.stopping:
            self.wake(ep, at)

    def wake(self, ep: _Endpoint, at: int) -> None:
        if ep.running:
            ep.more = True
            return
        self._schedule(ep, at)
        self.pump()

    def replayed(self, account: str) -> None:
        ep = self.by_account.get(account)
        if ep is not None:
            ep.paused_until = 0
            self.wake(ep, self.state.now_ms())

    async def _refresh(self, ep: _Endpoint) -> None:
        due = await self.state.database.read(store.next_due, ep.id)
        if due is not None and self.by_id.get(ep.id) is ep:
            self.wake(ep, due)

    # scheduling ---------------------------------------------------------------------------

    def _schedule(self, ep: _Endpoint, at: int) -> None:
        at = max(at, ep.paused_until)
        if ep.due is not None and ep.due <= at:
            return
        ep.due = at
        heapq.heappush(self._heap, (at, next(self._seq), ep.id))

    def _collect(self, now: int) -> None:
        """Move the endpoints that are due from the heap to their owners' queues."""
        heap = self._heap
        while heap:
            at, _, ident = heap[0]
            ep = self.by_id.get(ident)
            if ep is None or ep.due != at or ep.running or ep.ready:
                heapq.heappop(heap)  # stale
                continue
            if at > now:
                break
            heapq.heappop(heap)
            ep.ready = True
            queue = self._ready.get(ep.owner)
            if queue is None:
                queue = self._ready[ep.owner] = deque()
            queue.append(ep)

    def _next_ready(self) -> _Endpoint | None:
        """The next endpoint to run: of the waiting owner with the fewest requests in flight (at most
        ``webhook_max_in_flight`` owners have any, so the look stops soon); that owner goes last."""
        best: str | None = None
        fewest = 0
        for owner in self._ready:
            flying = self._owner_flight.get(owner, 0)
            if best is None or flying < fewest:
                best, fewest = owner, flying
                if not flying:
                    break
        while best is not None:
            queue = self._ready.pop(best)
            ep = queue.popleft()
            if queue:
                self._ready[best] = queue  # its next endpoint waits behind the other owners
            ep.ready = False
            if self.by_id.get(ep.id) is ep and not ep.running:
                return ep
            best = next(iter(self._ready), None)  # forgotten meanwhile: the next one
        return None

    def pump(self) -> None:
        """Start a runner for each endpoint that is due, while slots are free, owner by owner; set
        the timer for the next one."""
        if self.stopping or not self.started:
            return
        now = self.state.now_ms()
        cap = self.state.cfg.webhook_max_in_flight
        self._collect(now)
        while self._ready and self.in_flight < cap:
            ep = self._next_ready()
            if ep is None:
                break
            ep.due = None
            ep.running = True
            ep.more = False
            self.in_flight += 1
            self._owner_flight[ep.owner] = self._owner_flight.get(ep.owner, 0) + 1
            task = self.api.spawn(self._run(ep))
            if task is not None and not task.done():
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        self._set_timer(now)

    def _set_timer(self, now: int) -> None:
        at = self._heap[0][0] if self._heap else None
        if at is None or at <= now:  # nothing waits, or only for a free slot (a runner's end pumps)
            return
        if self._timer_at is not None and self._timer_at <= at and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.api.call_later((at - now) / 1000, self._fire)

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = None
        self.pump()

    # a runner: one endpoint, one batch ---------------------------------------------------------

    async def _run(self, ep: _Endpoint) -> None:
        """Send the endpoint's due deliveries (one batch, or more while nobody else waits)."""
        next_at: int | None = None
        claimed = False
        try:
            if self.claims is not None:
                claimed, next_at = await self.claims.claim(ep)
                if not claimed:  # another node sends to it now; this one tries again when its claim ends
                    if next_at is None:
                        self.forget_here(ep.account)
                    return
            while not self.stopping and self.by_id.get(ep.id) is ep:
                ep.more = False
                now = self.state.now_ms()
                endpoint, batch = await self.state.database.read(store.due_batch, ep.id, now, BATCH)
                if endpoint is None:
                    self.forget(ep.account)
                    return
                if not batch or not await self._send_batch(ep, endpoint, batch):
                    break
                if len(batch) < BATCH and not ep.more:
                    break
                if self._others_wait():
                    break  # give the slot to them; this endpoint queues up again (below)
            next_at = await self.state.database.read(store.next_due, ep.id)
        except Exception:
            if self.stopping:
                return
            log.exception("webhook runner failed endpoint=%d account=%s", ep.id, ep.account)
            next_at = self.state.now_ms() + _RETRY_READ_MS
        finally:
            if claimed and self.claims is not None:
                self.claims.release(ep)
            self.in_flight -= 1
            flying = self._owner_flight.get(ep.owner, 1) - 1
            if flying > 0:
                self._owner_flight[ep.owner] = flying
            else:
                self._owner_flight.pop(ep.owner, None)
            ep.running = False
            if not self.stopping and self.by_id.get(ep.id) is ep:
                if ep.more:
                    next_at = self.state.now_ms() if next_at is None else min(next_at, self.state.now_ms())
                if next_at is not None:
                    self._schedule(ep, next_at)
            self.pump()

    def _count(self, endpoint: Endpoint, outcome: str, n: int = 1) -> None:
        key = ("webhook" if endpoint.is_webhook else "a2a", outcome)
        self.counts[key] = self.counts.get(key, 0) + n

    def _others_wait(self, owner: str | None = None) -> bool:
        """Every slot is taken and an endpoint waits for one (of another owner than ``owner``)."""
        if self.in_flight < self.state.cfg.webhook_max_in_flight:
            return False
        self._collect(self.state.now_ms())
        return any(o != owner for o in self._ready) if owner is not None else bool(self._ready)

    async def _send_batch(self, ep: _Endpoint, endpoint: Endpoint, batch: list[Due]) -> bool:
        """Try each delivery of the batch in order; False when the runner must stop (the endpoint
        was disabled or paused). The outcomes are recorded together at the end, in one transaction
        (one commit per batch, not per delivery); the next batch is read only after that."""
        database = self.state.database
        now = self.state.now_ms()
        live = [d for d in batch if now < d.queued_at + rules.EXPIRY_MS]
        if any(d.payload is None for d in live):
            stored = await database.write(_snapshot, [d for d in live if d.payload is None], now)
        else:
            stored = {}
        outcomes: list[tuple[Any, tuple]] = []
        try:
            return await self._send_each(ep, endpoint, batch, stored, outcomes)
        finally:
            if outcomes:
                try:
                    await database.write(_record, outcomes)
                except Exception:  # the deliveries stay as they were: sent again, at least once
                    log.exception("webhook outcomes not recorded endpoint=%d", endpoint.id)

    async def _send_each(self, ep: _Endpoint, endpoint: Endpoint, batch: list[Due], stored: dict[int, str],
                         outcomes: list[tuple[Any, tuple]]) -> bool:
        for n, due in enumerate(batch):
            if self.stopping or self.by_id.get(ep.id) is not ep:
                return False
            if n and self._others_wait(ep.owner):
                return False  # another owner waits for a slot: this one queues up again (the rest is due)
            now = self.state.now_ms()
            if now >= due.queued_at + rules.EXPIRY_MS:
                outcomes.append((store.to_dead, (due.id, now, due.tries, "expired", due.last_status, due.last_error)))
                self._count(endpoint, "dead_expired")
                continue
            body = due.payload if due.payload is not None else stored.get(due.id)
            if body is None:
                continue  # cleared meanwhile
            outcome = await self._post(endpoint, due.id, due.kind, body.encode())
            now = self.state.now_ms()
            if outcome.ok:
                self.delivered += 1
                self._count(endpoint, "delivered")
                outcomes.append((store.delivered, (due.id, endpoint.id, now)))
                continue
            if outcome.status == 410:
                if outcomes:  # what this batch delivered is recorded before the rest turns dead
                    await self.state.database.write(_record, list(outcomes))
                    outcomes.clear()
                await self._disable(ep, endpoint, due, now)
                return False
            tries = due.tries + 1
            retry_at = rules.next_try_at(tries, now, due.queued_at)
            if retry_at is None:
                outcomes.append((store.given_up, (due.id, endpoint.id, now, tries, "tries", outcome.status,
                                                  outcome.error)))
                self._count(endpoint, "dead_tries")
            else:
                outcomes.append((store.failed, (due.id, endpoint.id, tries, retry_at, now, outcome.status,
                                                outcome.error)))
                self._count(endpoint, "retry")
            if outcome.status is None:  # no answer at all: the endpoint waits, not only this delivery
                ep.paused_until = retry_at if retry_at is not None else now + rules.FIRST_RETRY_MS
                return False
        return True

    async def _post(self, endpoint: Endpoint, delivery_id: int | str, kind: str, body: bytes) -> Outcome:
        self.sent += 1
        if not endpoint.is_webhook:
            return await self._post_a2a(endpoint, delivery_id, body)
        headers = signed_headers(endpoint, delivery_id, kind, body, self.api.now())
        return await self.sender.post(endpoint.url, body, headers)

    # A2A endpoints -----------------------------------------------------------------------------

    async def _post_a2a(self, endpoint: Endpoint, delivery_id: int | str, payload: bytes) -> Outcome:
        """One try of a delivery to an agent's A2A endpoint: an A2A ``SendMessage`` (ext/pircan/a2a/push.py);
        a reply in the answer is stored as the agent's reply in the conversation."""
        from ext.pircan.a2a import store as astore

        push = await load("ext.pircan.a2a.push")  # the A2A SDK: loaded with the first such delivery

        ident = delivery_id if isinstance(delivery_id, str) else hexid(delivery_id)
        key = await self.state.database.read(astore.signing_key)
        issuer = self.api.http_base_url
        if key is None or not issuer:
            return Outcome(None, "no signing key or HTTP listener for A2A deliveries", 0)
        body = push.request_body(payload.decode(), ident)
        outcome = await self.sender.post(endpoint.url, body, push.headers(key, issuer, endpoint.account, ident,
                                                                          self.api.now()), keep=push.ANSWER_BYTES)
        if not outcome.ok:
            return outcome
        answer = push.answer_of(outcome.body)
        if answer.error:
            return Outcome(outcome.status, answer.error[:200], outcome.elapsed_ms)
        if answer.reply is not None:
            await self._a2a_reply(endpoint.account, payload, answer.reply, ident)
        return outcome

    async def _a2a_reply(self, account: str, payload: bytes, text: str, delivery: str) -> None:
        """The agent's answer to a delivered message: its reply in the conversation (once per delivery,
        whatever the retries), under the rules of every message; a refused one is logged."""
        from ext.pircan.service import messages
        from ext.pircan.service.refusals import Refused

        data = json.loads(payload)
        msg = data.get("message") if data.get("type") == "message" else None
        if not isinstance(msg, dict):
            return
        try:
            await messages.send_message(self.state, account, str(msg["sender"]), text, str(msg["message_id"]),
                                        key=f"a2a-delivery-{delivery}", via="a2a")
        except Refused as exc:
            log.info("a2a reply of %s to %s refused: %s", account, msg.get("sender"), exc.code)

    async def a2a_changed(self, account: str | None = None) -> None:
        """The A2A endpoints agents publish changed (of ``account``, or any): their push endpoints follow."""
        if not self.started or self.stopping:
            return
        changed, ended = await self.state.database.write(store.sync_a2a, self.state.now_ms(), rules.new_secret,
                                                         account)
        for name in ended:
            self.forget(name)
        for endpoint in changed:
            self.endpoint_set(endpoint)

    async def _disable(self, ep: _Endpoint, endpoint: Endpoint, due: Due, now: int) -> None:
        """HTTP 410: the receiver is gone for good. The endpoint is disabled, its deliveries become
        dead letters, and the account (and its owner) get a ``webhook`` event and an audit row."""
        self.forget(ep.account)
        account: Any = await self.api.get_account(endpoint.account)
        owner = account.owner if account is not None else None
        audit_id = self.state.new_id()
        events = [(self.state.new_id(), endpoint.account)]
        if owner is not None and owner != endpoint.account:
            events.append((self.state.new_id(), owner))
        moved, written = await self.state.database.write(_disable_txn, endpoint, due, now, audit_id, events)
        self._count(endpoint, "dead_gone", moved)
        for event_id, recipient in written:
            self.state.event_committed(recipient, "webhook", event_id, now)
        log.info("webhook disabled account=%s url=%s (HTTP 410)", endpoint.account, endpoint.url)

    # TEST -------------------------------------------------------------------------------------

    async def test(self, endpoint: Endpoint) -> tuple[str, Outcome]:
        """Send a signed ``test`` event to the endpoint now (not queued, not retried)."""
        delivery = f"test-{hexid(self.state.new_id())}"
        body = payloads.test_body(delivery, endpoint, self.state.now_ms())
        return delivery, await self._post(endpoint, delivery, "test", body)


def _snapshot(conn: Conn, rows: list[Due], now: int) -> dict[int, str]:
    """Build and store the payloads of deliveries about to be tried for the first time."""
    return store.set_payloads(conn, [(due.id, payloads.build(conn, due, now)) for due in rows])


def _record(conn: Conn, outcomes: list[tuple[Any, tuple]]) -> None:
    """The outcomes of a batch's tries, in the order they came (store functions and their arguments)."""
    for fn, args in outcomes:
        fn(conn, *args)


def _disable_txn(conn: Conn, endpoint: Endpoint, due: Due, now: int, audit_id: int,
                 events: list[tuple[int, str]]) -> tuple[int, list[tuple[int, str]]]:
    """The endpoint disabled and its deliveries dead letters: (how many, the events written)."""
    moved = store.disable(conn, endpoint.id, due.id, due.tries + 1, now, "HTTP 410")
    db.audit(conn, audit_id, now, "server", endpoint.account, "webhook.disable",
             f"HTTP 410 from {endpoint.url}; {moved} dead letter{'s' if moved != 1 else ''}")
    return moved, [(event_id, recipient) for event_id, recipient in events
                   if db.queue_event(conn, event_id, recipient, "webhook", audit_id, now)]
