"""Hosted agents in a cluster (docs/scaling.md, "Workers"): each agent runs on one node, the one
that holds its lease in ``pircan_host`` (``store.claim``), and another node starts it when that
node stops renewing it.

* A run begins by claiming the lease (``Host._run``): every start, whatever asked for it (an
  ``always`` agent at start-up, an event for a parked agent, an owner's or the operator's START or
  RESTART, a takeover), goes through the one claim, so two nodes never both run an agent. A node
  that finds another holding it tells that node of the event (``host.wake``) and starts nothing.
* Every third of ``host.lease_seconds`` a node renews all its leases in one statement, stops an
  agent whose lease another node took meanwhile (it was cut off from the database for a whole
  lease), and takes over the agents whose lease ended unrenewed: their node was killed or cut off,
  or stopped and handed them over (a node that stops ends its leases at once).
* An event for an agent that another node may run is told to the other nodes (``host.seen``, at
  most every ``_SEEN_EVERY_MS`` per agent), so that its node does not park it as idle
  (``idle_stop_minutes``) while its events come through other nodes.
* The lease ends when the agent parks (it exited, or was stopped): a parked agent belongs to no
  node, and the next event for it starts it on the node where the event happened.

Times are the nodes' clocks (ms): they must agree to well within two thirds of a lease (NTP).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ext.pircan.host import store as hdb

if TYPE_CHECKING:
    from ext.pircan.host.supervisor import Host, Hosted

__all__ = ["Leases", "SEEN", "WAKE"]

log = logging.getLogger("pircd.pircan.host")

WAKE = "host.wake"  # node message: an event for an agent the receiving node holds
SEEN = "host.seen"  # node message: an event for an agent, for the idle rule of the node running it
_SEEN_EVERY_MS = 10_000
_REVIVALS = ("revive", "always", "takeover")  # starts that leave a failed agent alone


class Leases:
    def __init__(self, host: Host, node: str) -> None:
        self.host = host
        self.api = host.api
        self.node = node
        self.lease_ms = int(host.cfg.lease_seconds * 1000)
        self.held: set[str] = set()  # the agents this node runs (holds the lease of)
        self._timer: Any = None
        self._ticking = False
        self._told: dict[str, int] = {}  # agent -> when an event of it was last told (host.seen)

    def now(self) -> int:
        return self.host.state.now_ms()

    # claiming -----------------------------------------------------------------------------

    async def take(self, hosted: Hosted) -> bool:
        """Claim the agent's lease for a run; False (and the holder told of an event) when another
        node holds it, or when the agent failed and this is no start by hand."""
        now = self.now()
        try:
            row = await self.host.state.database.write(hdb.claim, hosted.account, hosted.command_text, self.node,
                                                       now, now + self.lease_ms, hosted.why in _REVIVALS)
        except Exception:  # the database away: not started (an always agent is taken over later)
            log.exception("%s: lease not claimed", hosted.account)
            return False
        if row is None:
            self.held.add(hosted.account)
            return True
        if row.state == "failed" and row.lease_until is None:
            hosted.state, hosted.last_exit = "failed", row.last_exit
        elif hosted.why == "revive" and row.node is not None:
            self.api.publish(WAKE, {"account": hosted.account}, node=row.node)
        log.info("%s runs on node %s: not started here (%s)", hosted.account, row.node, hosted.why)
        return False

    def released(self, hosted: Hosted) -> None:
        self.held.discard(hosted.account)

    def on_wake(self, node: str, data: dict[str, Any]) -> None:
        """Another node had an event for an agent it found this node holding."""
        account = data.get("account")
        hosted = self.host.agents.get(account) if isinstance(account, str) else None
        if hosted is None:
            return
        if hosted.task is not None:
            hosted.last_event_ms = self.now()
        else:  # parked meanwhile: started here, or wherever it runs now
            self.host.wake(hosted.account, f"event on node {node}")

    def seen(self, hosted: Hosted, at: int) -> None:
        """An event for an agent not running here: the node running it, if any, counts it as activity."""
        if at - self._told.get(hosted.account, -_SEEN_EVERY_MS) >= _SEEN_EVERY_MS:
            self._told[hosted.account] = at
            self.api.publish(SEEN, {"account": hosted.account})

    def on_seen(self, node: str, data: dict[str, Any]) -> None:
        account = data.get("account")
        hosted = self.host.agents.get(account) if isinstance(account, str) else None
        if hosted is not None and hosted.task is not None:
            hosted.last_event_ms = self.now()

    async def take_request(self, ident: int, account: str) -> bool:
        """An operator's request (``pircd host``) is one node's to answer: the one running the
        agent, or, while none does, the first to take it."""
        hosted = self.host.agents.get(account)
        if hosted is not None and hosted.task is None:
            row = await self.host.state.database.read(hdb.get_row, account)
            if row is not None and row.held_by_other(self.node):
                return False
        return bool(await self.host.state.database.write(hdb.take_request, ident, self.node))

    async def elsewhere(self, hosted: Hosted) -> hdb.Row | None:
        """The agent's row when another node runs it or ran it last (None: this node's own view)."""
        if hosted.task is not None:
            return None
        row = await self.host.state.database.read(hdb.get_row, hosted.account)
        if row is None or row.node is None or row.node == self.node:
            return None
        return row

    # renewing and taking over ---------------------------------------------------------------

    def start(self) -> None:
        self._tick()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _tick(self) -> None:
        self._timer = self.api.call_later(self.lease_ms / 3000, self._tick)
        if not self._ticking and not self.host.stopping:
            self._ticking = True
            self.api.spawn(self._renew_and_take_over())

    async def _renew_and_take_over(self) -> None:
        try:
            await self.renew()
            await self.take_over()
        except Exception:  # the database away: the next tick tries again (the leases may end meanwhile)
            log.exception("hosted agents' leases not renewed")
        finally:
            self._ticking = False

    async def renew(self) -> None:
        """Renew this node's leases; an agent whose lease another node took is stopped here."""
        ran = set(self.held)  # claimed before the renewal, so counted in it if still this node's
        kept = await self.host.state.database.write(hdb.renew, self.node, self.now() + self.lease_ms)
        for account in ran - kept:
            self.held.discard(account)
            hosted = self.host.agents.get(account)
            if hosted is not None and hosted.task is not None:
                log.warning("%s: its lease went to another node; stopped here", account)
                self.api.spawn(self.host.stop_agent(account, "its lease went to another node"))

    async def take_over(self) -> None:
        """Start the agents whose lease ended unrenewed (or that this node held before a restart)."""
        now = self.now()
        for row in await self.host.state.database.read(hdb.leases):
            hosted = self.host.agents.get(row.account)
            if hosted is None or hosted.task is not None or row.account in self.held:
                continue
            if row.node == self.node or (row.lease_until is not None and row.lease_until <= now):
                self.host.audit(row.account, "host.takeover", f"from node {row.node}")
                self.host.start_run(hosted, "takeover")
