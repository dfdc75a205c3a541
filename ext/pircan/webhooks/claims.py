"""The delivery worker on a node of a cluster (docs/scaling.md, "Workers"): every node runs it on
the one queue in the shared database, and an endpoint's runner first claims the endpoint
(``store.claim``), so that one node at a time sends its deliveries: each delivery once, in order.

* A runner that finds the endpoint claimed by another node tells that node (``webhook.wake``: an
  event came, which the holder, busy with that endpoint, might not see otherwise) and tries again
  when the claim would end: a holder that was killed loses its claim after ``CLAIM_MS`` at most,
  and this node sends what it left.
* While its runners send, a node renews its claims every third of ``CLAIM_MS``; a runner that ends
  gives its claim up (after its outcomes are recorded), and a node that stops gives up all.
* An endpoint set, changed or cleared on one node is read again by the others
  (``webhook.endpoint``), so that each node knows every endpoint to wake it for the events that
  its own clients cause.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ext.pircan.webhooks import store

if TYPE_CHECKING:
    from ext.pircan.webhooks.worker import Webhooks, _Endpoint

__all__ = ["CLAIM_MS", "Claims"]

log = logging.getLogger("pircd.pircan.webhooks")

CLAIM_MS = 30_000  # a claim's length unrenewed: how long a killed node's endpoints wait at most
WAKE = "webhook.wake"
ENDPOINT = "webhook.endpoint"


class Claims:
    def __init__(self, worker: Webhooks, node: str) -> None:
        self.worker = worker
        self.api = worker.api
        self.database = worker.state.database
        self.node = node
        self._timer: Any = None
        api = worker.api
        api.on_node_message(WAKE, self._on_wake)
        api.on_node_message(ENDPOINT, self._on_endpoint)

    async def claim(self, ep: _Endpoint) -> tuple[bool, int | None]:
        """(claimed, when to try again if not: None for an endpoint gone or disabled)."""
        now = self.worker.state.now_ms()
        found = await self.database.write(store.claim, ep.id, self.node, now, now + CLAIM_MS)
        if found is None:
            return True, None
        holder, until = found
        if holder is None:
            return False, None
        self.api.publish(WAKE, {"endpoint": ep.id}, node=holder)
        return False, max(until, now + 1)

    def release(self, ep: _Endpoint) -> None:
        """After the runner's outcomes are recorded (writes are committed in the order queued)."""
        self.database.write_nowait(store.unclaim, ep.id, self.node)

    def changed(self, account: str) -> None:
        """The account's endpoint was set, changed or cleared here: the other nodes read it again."""
        self.api.publish(ENDPOINT, {"account": account})

    # renewal --------------------------------------------------------------------------------

    def start(self) -> None:
        self._timer = self.api.call_later(CLAIM_MS / 3000, self._tick)

    def _tick(self) -> None:
        self.start()
        if self.worker.in_flight:  # runners hold claims
            self.database.write_nowait(store.renew_claims, self.node, self.worker.state.now_ms() + CLAIM_MS)

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        try:
            await self.database.write(store.unclaim_all, self.node)
        except Exception:  # the database is closing: the claims end by themselves
            log.warning("webhook claims of node %s not given up", self.node)

    # what the other nodes say -----------------------------------------------------------------

    def _on_wake(self, node: str, data: dict[str, Any]) -> None:
        ident = data.get("endpoint")
        ep = self.worker.by_id.get(ident) if isinstance(ident, int) else None
        if ep is not None and not self.worker.stopping:
            self.worker.wake(ep, self.worker.state.now_ms())

    def _on_endpoint(self, node: str, data: dict[str, Any]) -> None:
        account = data.get("account")
        if isinstance(account, str) and not self.worker.stopping:
            self.api.spawn(self._reread(account))

    async def _reread(self, account: str) -> None:
        """Another node changed the account's endpoint: take it as the database has it now."""
        endpoint = await self.database.read(store.get_endpoint, account, None)
        if endpoint is None or not endpoint.enabled:
            self.worker.forget_here(account)
        else:
            self.worker.set_here(endpoint)
