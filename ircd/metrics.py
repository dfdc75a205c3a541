"""Metrics: numbers the server keeps as plain ints, turned into Prometheus text when scraped.

The per-line path only adds to ints on objects it already touches (``Intake.lines_in``, ``Delivery.lines_out``, ...);
nothing calls into ``prometheus_client`` per line or per message. A scrape runs the collectors
(the core's, then those extensions add with ``api.metrics_collector``), each writing families into
a ``MetricsOut``, and renders them with a registry of this server's own (never the process-wide
default), so several servers in one process keep their numbers apart. No I/O here: the HTTP
listener serves the text (``ircd/net/metrics.py``). docs/operations.md lists every metric.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ircd.server import Server

__all__ = ["Timings", "TimingsByLabel", "MetricsOut", "Metrics", "CALL_BOUNDS", "DB_BOUNDS", "core_metrics"]

log = logging.getLogger("pircd")

# histogram buckets (upper bounds, seconds): calls over HTTP (MCP tools, A2A methods) and database writes
CALL_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
DB_BOUNDS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

Labels = tuple[str, ...]
Value = float | Mapping[Labels, float]  # one number, or a number per label values


class Timings:
    """A histogram as plain numbers: a count per bucket and the sum. ``observe`` is a bisect and
    two additions (no lock: the database writer's thread observes under the GIL, and a scrape that
    reads in between sees one observation more or less, never a broken number)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: Sequence[float] = CALL_BOUNDS) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    def observe_elapsed(self, end: float, starts: Iterable[float]) -> None:
        """``observe(end - start)`` for each start, in one call (the database writer's thread
        observes every write of a commit this way, under the GIL)."""
        bounds, counts, total = self.bounds, self.counts, 0.0
        for start in starts:
            seconds = end - start
            counts[bisect_left(bounds, seconds)] += 1
            total += seconds
        self.sum += total

    @property
    def count(self) -> int:
        return sum(self.counts)

    def buckets(self) -> list[tuple[str, float]]:
        """Cumulative ``(le, count)`` pairs, as Prometheus wants them."""
        out, total = [], 0
        for bound, count in zip((*map(_le, self.bounds), "+Inf"), self.counts):
            total += count
            out.append((bound, float(total)))
        return out


def _le(bound: float) -> str:
    return repr(float(bound))


class TimingsByLabel(dict[Labels, Timings]):
    """One ``Timings`` per label values, made on first use."""

    def __init__(self, bounds: Sequence[float] = CALL_BOUNDS) -> None:
        super().__init__()
        self.bounds = tuple(bounds)

    def __missing__(self, key: Labels) -> Timings:
        made = self[key] = Timings(self.bounds)
        return made


class MetricsOut:
    """What a collector writes into. ``value`` is one number, or ``{label values: number}`` with
    ``labels`` naming the labels; names follow Prometheus (``pircd_..._total`` for counters,
    ``..._seconds`` for histograms of durations)."""

    def __init__(self) -> None:
        self.families: list[Any] = []

    def counter(self, name: str, doc: str, value: Value, labels: Sequence[str] = ()) -> None:
        from prometheus_client.core import CounterMetricFamily

        self._add(CounterMetricFamily(name, doc, labels=labels), value, labels)

    def gauge(self, name: str, doc: str, value: Value, labels: Sequence[str] = ()) -> None:
        from prometheus_client.core import GaugeMetricFamily

        self._add(GaugeMetricFamily(name, doc, labels=labels), value, labels)

    def histogram(self, name: str, doc: str, timings: Timings | Mapping[Labels, Timings],
                  labels: Sequence[str] = ()) -> None:
        from prometheus_client.core import HistogramMetricFamily

        family = HistogramMetricFamily(name, doc, labels=labels)
        items = timings.items() if isinstance(timings, Mapping) else [((), timings)]
        for key, one in sorted(items):
            family.add_metric(list(key), one.buckets(), one.sum)
        self.families.append(family)

    def _add(self, family: Any, value: Value, labels: Sequence[str]) -> None:
        if isinstance(value, Mapping):
            for key, number in sorted(value.items()):
                family.add_metric(list(key), float(number))
        elif labels:
            raise ValueError("a labelled metric takes {label values: number}")
        else:
            family.add_metric([], float(value))
        self.families.append(family)


class _Bridge:
    """The collectors as one ``prometheus_client`` collector."""

    def __init__(self, metrics: "Metrics") -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        for collector in list(self.metrics.collectors):
            out = MetricsOut()
            try:
                collector(out)
            except Exception:  # one broken collector costs its own families, not the scrape
                log.exception("metrics collector failed")
                continue
            yield from out.families


class Metrics:
    """The server's collectors and, made at the first scrape, its registry."""

    def __init__(self) -> None:
        self.collectors: list[Callable[[MetricsOut], None]] = []
        self._registry: Any = None

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        if self._registry is None:
            from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Bridge(self))
            ProcessCollector(registry=registry)  # CPU, memory, open files (on Linux)
            PlatformCollector(registry=registry)
            GCCollector(registry=registry)
            self._registry = registry
        return generate_latest(self._registry), CONTENT_TYPE_LATEST


TRANSPORTS = ("plain", "tls", "websocket", "websocket_tls")


def _transport(client: Any) -> str:
    websocket = getattr(getattr(client.conn, "transport", None), "websocket", False)
    return TRANSPORTS[2 * bool(websocket) + bool(client.tls)]


_REFUSALS = {"Server is full": "full", "Too many connections from your IP address": "per_ip",
             "Too many connections too quickly; try again later": "throttle"}


def core_metrics(server: "Server") -> Callable[[MetricsOut], None]:
    """The core's collector: connections, users, lines, SendQ drops, the database's writes."""
    from ircd import __version__

    def collect(out: MetricsOut) -> None:
        out.gauge("pircd_info", "The running pircd (always 1)", {(__version__, server.name): 1},
                  ("version", "server"))
        by_transport: dict[Labels, float] = {(name,): 0 for name in TRANSPORTS}
        for client in server.clients:
            by_transport[(_transport(client),)] += 1
        out.gauge("pircd_connections", "IRC connections open now, by transport", by_transport, ("transport",))
        out.gauge("pircd_tls_handshakes", "Accepted TLS connections still in their handshake",
                  server.admission.handshaking)
        gate = server.http.gate
        out.gauge("pircd_http_connections", "HTTP connections open now (WebSocket ones included)",
                  len(gate.open) if gate is not None else 0)
        out.gauge("pircd_users", "Registered users (as LUSERS counts them)", server.state.registered_count)
        out.gauge("pircd_channels", "Channels that exist now", len(server.state.all_channels()))
        out.counter("pircd_connections_accepted_total", "IRC connections accepted", server.admission.accepted)
        refused: dict[Labels, float] = {(reason,): 0 for reason in _REFUSALS.values()}
        for reason, n in server.admission.refused.items():
            refused[(_REFUSALS.get(reason, reason),)] = n
        out.counter("pircd_connections_refused_total", "IRC connections refused at accept, by reason",
                    refused, ("reason",))
        out.counter("pircd_registrations_total", "Connections that completed registration",
                    server.registrations)
        out.counter("pircd_lines_in_total", "IRC lines received", server.intake.lines_in)
        out.counter("pircd_lines_out_total", "IRC lines sent", server.delivery.lines_out)
        out.counter("pircd_sendq_drops_total", "Connections closed for exceeding their SendQ",
                    server.delivery.sendq_drops)
        store = server.store
        if store is not None:
            db = store.db
            out.histogram("pircd_db_commit_seconds", "Group commits of the database writer: one transaction, "
                          "BEGIN to COMMIT (SQLite's fsync or PostgreSQL's WAL flush included)", db.commit_timings)
            out.histogram("pircd_db_write_seconds", "Database writes, from queued to committed",
                          db.write_timings)

    return collect
