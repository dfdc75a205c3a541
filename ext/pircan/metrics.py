"""PIRCAN's metrics: counters its paths keep as plain numbers, given to ``/metrics`` at scrape time.

SENDs and their refusals are counted by the one service function every transport calls
(``service.messages.send_message``); MCP tools and A2A methods by the wrappers every tool and
method already goes through (``mcp.tools.tool_of``, ``a2a.gateway._mapped``); webhook outcomes by
the delivery worker. docs/operations.md lists each metric.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ircd.api import MetricsOut, TimingsByLabel

if TYPE_CHECKING:
    from ext.pircan.state import Pircan

__all__ = ["Stats", "install", "CANCELLED", "ERROR", "INVALID", "OK"]

# a call's result, when it is not a refusal's code
OK = "ok"
ERROR = "error"  # failed inside the server (INTERNAL_ERROR)
CANCELLED = "cancelled"  # its client went away before the answer
INVALID = "invalid"  # an A2A protocol error (an unsupported operation, a malformed request)


TRANSPORTS = ("irc", "mcp", "a2a", "portal")  # shown at 0 before their first message


class Stats:
    """The counters: dicts from label values to counts, and call durations per transport and name."""

    __slots__ = ("sends", "send_refusals", "calls", "seconds")

    def __init__(self) -> None:
        self.sends: dict[tuple[str, ...], int] = {}  # (transport,) -> messages stored
        self.send_refusals: dict[tuple[str, ...], int] = {}  # (code,) -> SENDs refused
        self.calls: dict[str, dict[tuple[str, ...], int]] = {"mcp": {}, "a2a": {}}  # (name, result) -> calls
        self.seconds: dict[str, TimingsByLabel] = {"mcp": TimingsByLabel(), "a2a": TimingsByLabel()}

    def sent(self, via: str) -> None:
        key = (via,)
        self.sends[key] = self.sends.get(key, 0) + 1

    def send_refused(self, code: str) -> None:
        key = (code,)
        self.send_refusals[key] = self.send_refusals.get(key, 0) + 1

    def call(self, transport: str, name: str, result: str, started: float) -> None:
        """A call of an MCP tool or an A2A method ended with ``result`` (ok, a refusal's code, error);
        ``started``: its ``time.perf_counter()`` at the start."""
        self.seconds[transport][(name,)].observe(time.perf_counter() - started)
        counts = self.calls[transport]
        key = (name, result)
        counts[key] = counts.get(key, 0) + 1


def install(state: "Pircan") -> None:
    state.api.metrics_collector(lambda out: _collect(state, out))


def _collect(state: "Pircan", out: MetricsOut) -> None:
    stats: Stats = state.stats
    sends = {(via,): 0 for via in TRANSPORTS} | stats.sends
    out.counter("pircd_pircan_sends_total", "PIRCAN messages stored (SEND and its MCP, A2A and portal "
                "counterparts; an idempotent retry is not counted again), by the transport they came by",
                sends, ("transport",))
    out.counter("pircd_pircan_send_refusals_total", "PIRCAN messages refused, by refusal code",
                stats.send_refusals, ("code",))
    out.gauge("pircd_pircan_agreements", "Live PIRCAN agreements", len(state.agreements))
    for transport, unit in (("mcp", "tool"), ("a2a", "method")):
        name = transport.upper()
        out.counter(f"pircd_{transport}_calls_total", f"{name} {unit} calls, by {unit} and result (ok, the "
                    "refusal's code, invalid, error or cancelled)", stats.calls[transport], (unit, "result"))
        out.histogram(f"pircd_{transport}_call_seconds", f"How long {name} {unit} calls took, by {unit}",
                      stats.seconds[transport], (unit,))
    if state.webhooks is not None:
        _webhooks(state.webhooks, out)


def _webhooks(webhooks: Any, out: MetricsOut) -> None:
    counts: dict[tuple[str, str], int] = webhooks.counts
    kinds = ("webhook", "a2a")

    def by_kind(outcome: str) -> dict[tuple[str, ...], float]:
        return {(kind,): counts.get((kind, outcome), 0) for kind in kinds}

    out.counter("pircd_webhook_deliveries_total", "Event deliveries the receiver accepted (2xx), by endpoint "
                "kind", by_kind("delivered"), ("kind",))
    out.counter("pircd_webhook_retries_total", "Delivery tries that failed and were scheduled again",
                by_kind("retry"), ("kind",))
    dead: dict[tuple[str, ...], float] = {(kind, why): counts.get((kind, "dead_" + why), 0) for kind in kinds
            for why in ("tries", "expired", "gone")}
    out.counter("pircd_webhook_dead_letters_total", "Deliveries that became dead letters, by why: tries (12 "
                "failed), expired (3 days), gone (HTTP 410 disabled the endpoint)", dead, ("kind", "reason"))
    out.gauge("pircd_webhook_requests_in_flight", "Delivery requests in flight now", webhooks.in_flight)
