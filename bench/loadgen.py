"""Load generator: IRC clients on asyncio (uvloop when installed) and the scenarios.

A client is an ``asyncio.Protocol`` with two modes. While it sets up
(registration, JOIN, PING sync) it parses every line. Once set up it only
counts newlines in each received chunk and looks at single lines only when a
chunk holds something it must act on (a server PING, the PONG of its sync
token, the end marker, ERROR), so one load generator can follow a thousand
receivers without becoming the bottleneck.

Every scenario is bounded: fixed counts, and every wait has a timeout. It
talks to one server on a loopback address; ``Target`` tells it where, and
how to read the server process's CPU time and RSS (see ``bench.servers``).

Scenarios live in ``SCENARIOS`` (see ``scenario``); SASL logins and PIRCAN
SEND are declared there as pending hooks so that they slot in once accounts
and PIRCAN exist.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import math
import random
import resource
import socket
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "SCENARIOS",
    "IRCClient",
    "Metric",
    "Scenario",
    "Target",
    "new_event_loop",
    "scenario",
]

_tokens = itertools.count(1)

# Lines of channel payload use only these characters, so that none of the
# substrings the counting fast path looks for can appear in them.
_FILLER = "abcdefghijklmnopqrstuvwxyz0123456789"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed, plain asyncio otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


# --------------------------------------------------------------------------
# What a scenario is given and what it returns


@dataclass
class Sample:
    cpu_s: float  # utime + stime of the server process
    sys_s: float  # stime alone: the kernel's share
    rss_kib: int  # VmRSS of the server process
    when: float  # time.perf_counter()
    loadgen_cpu_s: float  # this process's own CPU time
    machine: tuple[int, int, int]  # /proc/stat jiffies: (busy, idle, steal), all CPUs


def _machine_jiffies() -> tuple[int, int, int]:
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return (0, 0, 0)
    idle = fields[3] + fields[4]  # idle + iowait
    steal = fields[7] if len(fields) > 7 else 0
    return (sum(fields[:8]) - idle - steal, idle, steal)


@dataclass
class Target:
    """The server under test."""

    name: str
    host: str
    port: int
    sample_server: Callable[[], tuple[float, float, int]]  # (cpu seconds, of which system, rss KiB)
    oper: tuple[str, str] | None = None  # OPER name and password, when the config has one
    oper_modes: str = ""  # user modes the sender sets after OPER (ngIRCd: +F)
    nicklen: int = 30
    on_phase: Callable[[bool], None] | None = None  # measured phase starts (True) / ends (False)
    workdir: Path | None = None  # the server's directory (pircd: its SQLite file is workdir/pircd.db)
    database: str | None = None  # pircd's server.db: that file, or a PostgreSQL URL (pircd-pg)
    http_port: int | None = None  # pircd's HTTP listener (MCP at /mcp), when it has one

    def begin(self) -> Sample:
        """The measured phase starts: a profiler attached to the server switches on."""
        if self.on_phase is not None:
            self.on_phase(True)
        return self.sample()

    def end(self) -> Sample:
        sample = self.sample()
        if self.on_phase is not None:
            self.on_phase(False)
        return sample

    def sample(self) -> Sample:
        cpu, sys_s, rss = self.sample_server()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return Sample(cpu, sys_s, rss, time.perf_counter(), ru.ru_utime + ru.ru_stime, _machine_jiffies())


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    fmt: str = "{:.1f}"
    better: str = "higher"  # or "lower", or "" (informational)


@dataclass(frozen=True)
class Scenario:
    name: str
    family: str
    description: str
    metrics: tuple[Metric, ...]
    run: Callable[[Target], Awaitable[dict[str, Any]]] | None = None
    pending: str | None = None  # why it cannot run yet (a hook for later work)
    timeout: float = 300.0  # bound on one run, setup included
    servers: tuple[str, ...] | None = None  # only these servers (None: every server)


SCENARIOS: dict[str, Scenario] = {}


def scenario(s: Scenario) -> Scenario:
    SCENARIOS[s.name] = s
    return s


class BenchError(Exception):
    """A run that could not measure what it set out to (the runner reports it)."""


# --------------------------------------------------------------------------
# The client


class IRCClient(asyncio.Protocol):
    """One connection. ``counting`` switches from parsing lines to counting them."""

    def __init__(self, nick: str) -> None:
        self.nick = nick
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.closed: asyncio.Future[None] = self.loop.create_future()
        self.error: str | None = None
        self.waiters: list[tuple[frozenset[bytes], bytes | None, asyncio.Future[bytes]]] = []
        self.on_line: Callable[[bytes], None] | None = None
        # counting mode
        self.counting = False
        self.count = 0
        self.marker: bytes | None = None
        self.markers_left = 1
        self.marker_seen: asyncio.Future[float] = self.loop.create_future()
        self.sync_token: bytes | None = None
        self.synced: asyncio.Future[None] | None = None
        self.start_time = 0.0  # direct messages: when the outstanding message left
        # write flow control
        self._can_write = asyncio.Event()
        self._can_write.set()

    # asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:  # no Nagle delay on the client side of a round trip
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.error is None:
            self.error = f"connection lost ({exc})" if exc else "connection closed"
        for _, _, fut in self.waiters:
            if not fut.done():
                fut.set_exception(ConnectionError(f"{self.nick}: {self.error}"))
        self.waiters.clear()
        if self.synced is not None and not self.synced.done():
            self.synced.set_exception(ConnectionError(f"{self.nick}: {self.error}"))
        if not self.marker_seen.done():
            self.marker_seen.set_result(-1.0)  # never saw the marker: cut off
        if not self.closed.done():
            self.closed.set_result(None)
        self._can_write.set()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    def data_received(self, data: bytes) -> None:
        if self.counting:
            self._count(data)
            return
        lines = (self.buf + data).split(b"\n")
        self.buf = lines.pop()
        for raw in lines:
            if self.counting:  # a handler switched modes mid-chunk
                self.count += 1
                continue
            self._line(raw[:-1] if raw[-1:] == b"\r" else raw)

    # line mode --------------------------------------------------------------

    def _line(self, line: bytes) -> None:
        rest = line
        if rest[:1] == b"@":
            rest = rest.partition(b" ")[2]
        if rest[:1] == b":":
            rest = rest.partition(b" ")[2]
        command, _, params = rest.partition(b" ")
        if command == b"PING":
            self.write(b"PONG " + params + b"\r\n")
            return
        if command == b"ERROR":
            self.error = line.decode("utf-8", "replace")
        if self.waiters:
            for item in list(self.waiters):
                commands, needle, fut = item
                if command in commands and (needle is None or needle in params):
                    self.waiters.remove(item)
                    if not fut.done():
                        fut.set_result(line)
        if self.on_line is not None:
            self.on_line(line)

    def expect(self, *commands: str, needle: str | None = None) -> asyncio.Future[bytes]:
        """A future for the next line with one of these commands (and ``needle`` in its params)."""
        fut: asyncio.Future[bytes] = self.loop.create_future()
        if self.closed.done():
            fut.set_exception(ConnectionError(f"{self.nick}: {self.error}"))
            return fut
        fut.add_done_callback(_retrieve)
        self.waiters.append(
            (frozenset(c.encode() for c in commands), needle.encode() if needle else None, fut)
        )
        return fut

    # counting mode ----------------------------------------------------------

    def start_counting(self, marker: bytes, markers: int = 1) -> None:
        """From now on count lines; ``marker`` ends the count (see ``marker_seen``), on its
        ``markers``-th arrival (one from each of several senders)."""
        self.marker = marker
        self.markers_left = markers
        self.count = 0
        self.counting = True  # a partial line in ``buf`` is counted when it ends

    def _count(self, data: bytes) -> None:
        window = self.buf + data if self.buf else data
        marker = self.marker
        if (
            b"PING " in window
            or b"PONG " in window
            or b"ERROR " in window
            or (marker is not None and marker in window)
        ):
            self._count_slow(window)
            return
        self.count += window.count(b"\n")
        end = window.rfind(b"\n")
        self.buf = window[end + 1 :] if end >= 0 else window

    def _count_slow(self, window: bytes) -> None:
        lines = window.split(b"\n")
        self.buf = lines.pop()
        marker = self.marker
        for line in lines:
            if b"PING " in line and line.split(b" ", 2)[1 if line[:1] == b":" else 0] == b"PING":
                token = line.partition(b"PING ")[2].rstrip(b"\r")
                self.write(b"PONG " + token + b"\r\n")
            elif self.sync_token is not None and b"PONG " in line and self.sync_token in line:
                self.sync_token = None
                self.count = 0  # what came before the sync PONG was set-up noise
                if self.synced is not None and not self.synced.done():
                    self.synced.set_result(None)
            elif marker is not None and marker in line:
                self.markers_left -= 1
                if self.markers_left <= 0 and not self.marker_seen.done():
                    self.marker_seen.set_result(time.perf_counter())
            elif b"ERROR " in line and line.startswith(b"ERROR "):
                self.error = line.decode("utf-8", "replace")
            else:
                self.count += 1

    async def sync_counting(self, timeout: float) -> None:
        """PING/PONG in counting mode; the count restarts at the PONG."""
        token = f"sync{next(_tokens)}".encode()
        self.sync_token = token
        self.synced = self.loop.create_future()
        self.synced.add_done_callback(_retrieve)
        self.write(b"PING " + token + b"\r\n")
        await asyncio.wait_for(self.synced, timeout)

    # output -----------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def send(self, line: str) -> None:
        self.write(line.encode() + b"\r\n")

    async def drain(self) -> None:
        await self._can_write.wait()

    async def ping(self, timeout: float) -> None:
        token = f"p{next(_tokens)}"
        fut = self.expect("PONG", needle=token)
        self.send(f"PING {token}")
        await asyncio.wait_for(fut, timeout)

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen: the scenario reports failures itself."""
    if not fut.cancelled():
        fut.exception()


async def connect(
    target: Target, nick: str, *, source: str | None = None, timeout: float = 30.0
) -> IRCClient:
    loop = asyncio.get_running_loop()
    local = (source, 0) if source else None
    _, proto = await asyncio.wait_for(
        loop.create_connection(lambda: IRCClient(nick), target.host, target.port, local_addr=local),
        timeout,
    )
    return proto  # type: ignore[return-value]


async def register(client: IRCClient, timeout: float = 30.0) -> None:
    """NICK/USER, then wait for the end of the welcome burst (376 or 422)."""
    done = client.expect("376", "422")
    refused = client.expect("432", "433", "436", "465", "ERROR")
    client.send(f"NICK {client.nick}")
    client.send(f"USER {client.nick} 0 * :bench client")
    finished, _ = await asyncio.wait({done, refused}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if refused in finished:
        line = refused.result() if not refused.exception() else str(refused.exception())
        done.cancel()
        raise BenchError(f"{client.nick} not registered: {line!r}")
    if done not in finished:
        refused.cancel()
        done.cancel()
        raise BenchError(f"{client.nick} not registered within {timeout} s")
    refused.cancel()
    client.waiters = [w for w in client.waiters if not w[2].done()]
    done.result()


async def join(client: IRCClient, channel: str, timeout: float = 30.0) -> None:
    fut = client.expect("366", needle=channel)
    client.send(f"JOIN {channel}")
    await asyncio.wait_for(fut, timeout)


async def oper_up(client: IRCClient, target: Target, timeout: float = 30.0) -> None:
    if target.oper is None:
        return
    fut = client.expect("381", "464", "491")
    client.send(f"OPER {target.oper[0]} {target.oper[1]}")
    line = await asyncio.wait_for(fut, timeout)
    if b" 381 " not in line:
        raise BenchError(f"OPER refused: {line!r}")
    if target.oper_modes:
        client.send(f"MODE {client.nick} {target.oper_modes}")
        await client.ping(timeout)


def source_address(i: int, spread: int = 50) -> str:
    """127.0.0.2 ... 127.0.0.(spread+1): spreads clients over loopback addresses
    (per-IP limits, and more source ports for many connections)."""
    return f"127.0.0.{2 + i % spread}"


async def bounded_gather(n: int, limit: int, make: Callable[[int], Awaitable[Any]]) -> list[Any]:
    """Run ``make(i)`` for i in range(n), at most ``limit`` at a time; results or exceptions."""
    sem = asyncio.Semaphore(limit)

    async def one(i: int) -> Any:
        async with sem:
            try:
                return await make(i)
            except (TimeoutError, OSError, BenchError) as exc:  # counted by the caller
                return exc

    return await asyncio.gather(*(one(i) for i in range(n)))


async def connect_registered(
    target: Target,
    nick: str,
    source: str,
    *,
    attempts: int = 6,
    timeout: float = 30.0,
    retries: list[str] | None = None,
) -> IRCClient:
    """Connect and register, retrying a reset or refused connection with backoff.

    A server with a short listen backlog (ngIRCd: 10) drops or resets part of a
    burst of connections; ``retries`` collects why, so the scenario reports it.
    """
    for attempt in range(attempts):
        client: IRCClient | None = None
        try:
            client = await connect(target, nick, source=source, timeout=timeout)
            await register(client, timeout)
            return client
        except (TimeoutError, OSError, BenchError) as exc:
            if client is not None:
                client.abort()
            if attempt == attempts - 1:
                raise
            if retries is not None:
                retries.append(repr(exc))
            await asyncio.sleep(min(4.0, 0.25 * 2**attempt) * (0.5 + random.random()))
    raise AssertionError("unreachable")


async def register_many(
    target: Target, n: int, prefix: str, *, limit: int = 50, channel: str | None = None
) -> list[IRCClient]:
    """``n`` registered clients (set-up, not measured): retried, and all or nothing."""

    async def make(i: int) -> IRCClient:
        client = await connect_registered(target, f"{prefix}{i}", source_address(i))
        if channel is not None:
            await join(client, channel)
        return client

    results = await bounded_gather(n, limit, make)
    clients = [r for r in results if isinstance(r, IRCClient)]
    errors = [r for r in results if not isinstance(r, IRCClient)]
    if errors:
        for c in clients:
            c.abort()
        raise BenchError(f"{len(errors)} of {n} clients failed to set up; first: {errors[0]!r}")
    return clients


def _p50_p99_ms(seconds: list[float]) -> tuple[float, float]:
    """Median and 99th percentile, in milliseconds, of latencies in seconds."""
    ordered = sorted(seconds)
    return 1000 * statistics.median(ordered), 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _close_all(clients: list[IRCClient]) -> None:
    for c in clients:
        c.abort()


def _usage(before: Sample, after: Sample) -> dict[str, float]:
    wall = after.when - before.when
    cpu = after.cpu_s - before.cpu_s
    busy, idle, steal = (a - b for a, b in zip(after.machine, before.machine))
    ticks = busy + idle + steal
    return {
        "machine_busy_pct": 100.0 * busy / ticks if ticks else 0.0,
        "steal_pct": 100.0 * steal / ticks if ticks else 0.0,
        "wall_s": wall,
        "server_cpu_s": cpu,
        "server_sys_s": after.sys_s - before.sys_s,
        "server_cpu_pct": 100.0 * cpu / wall if wall > 0 else 0.0,
        "loadgen_cpu_pct": 100.0 * (after.loadgen_cpu_s - before.loadgen_cpu_s) / wall if wall > 0 else 0.0,
    }


# After set-up, wait past the 40 ms delayed-ACK timer: otherwise a server that
# leaves Nagle's algorithm on holds its first measured write until the client
# acknowledges the set-up traffic, and every pair's first round trip takes 40 ms.
_SETTLE = 0.2

_USAGE_METRICS = (
    Metric("server_cpu_pct", "server CPU use (% of one core)", "{:.0f}", ""),
    Metric("loadgen_cpu_pct", "load generator CPU use (%)", "{:.0f}", ""),
    Metric("machine_busy_pct", "machine busy (% of all cores)", "{:.0f}", ""),
)


# --------------------------------------------------------------------------
# 1. channel fan-out


def _payload_lines(channel: str, count: int, size: int) -> list[bytes]:
    lines = []
    for seq in range(count):
        head = f"{seq:08d} "
        body = (head + _FILLER * (size // len(_FILLER) + 1))[:size]
        lines.append(f"PRIVMSG {channel} :{body}\r\n".encode())
    return lines


async def fanout(
    target: Target, receivers: int, lines: int, size: int = 100, timeout: float = 120.0
) -> dict[str, Any]:
    """One sender, ``receivers`` members, ``lines`` channel messages of ``size`` bytes of text."""
    channel = "#fanout"
    recv = await register_many(target, receivers, "r", channel=channel)
    sender: IRCClient | None = None
    try:
        sender = await connect(target, "sender")
        await register(sender)
        await oper_up(sender, target)
        await join(sender, channel)
        marker = f"END{next(_tokens)}x".encode()
        for c in recv:
            c.start_counting(marker)
        # After every receiver's sync PONG, all set-up lines (JOINs of later
        # members) have reached it: the count starts from zero there.
        await asyncio.gather(*(c.sync_counting(timeout) for c in recv))
        await asyncio.sleep(_SETTLE)
        payload = _payload_lines(channel, lines, size)
        block = 64
        before = target.begin()
        for i in range(0, lines, block):
            sender.write(b"".join(payload[i : i + block]))
            await sender.drain()
            if sender.closed.done():
                raise BenchError(f"sender disconnected: {sender.error}")
        sender.write(f"PRIVMSG {channel} :".encode() + marker + b"\r\n")
        await sender.ping(timeout)
        # marker_seen resolves on the marker, or with -1 when the connection closes
        await asyncio.wait([c.marker_seen for c in recv], timeout=timeout)
        seen = [t for c in recv if c.marker_seen.done() and (t := c.marker_seen.result()) > 0]
        after = target.end()
        if seen:
            after.when = max(seen)
        delivered = sum(c.count for c in recv)
        expected = receivers * lines
        cut_off = sum(1 for c in recv if c.closed.done() or not c.marker_seen.done())
        usage = _usage(before, after)
        return {
            "delivered": delivered,
            "lost": expected - delivered,
            "receivers_cut_off": cut_off,
            "lines_per_s": delivered / usage["wall_s"] if usage["wall_s"] > 0 else 0.0,
            "cpu_us_per_line": 1e6 * usage["server_cpu_s"] / delivered if delivered else float("nan"),
            "sys_us_per_line": 1e6 * usage["server_sys_s"] / delivered if delivered else float("nan"),
            **usage,
        }
    finally:
        _close_all(recv)
        if sender is not None:
            sender.abort()


_FANOUT_METRICS = (
    Metric("lines_per_s", "delivered lines/s", "{:,.0f}", "higher"),
    Metric("cpu_us_per_line", "server CPU us/delivered line", "{:.2f}", "lower"),
    Metric("sys_us_per_line", "  of which system (kernel)", "{:.2f}", "lower"),
    Metric("lost", "lost lines", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)


# --------------------------------------------------------------------------
# 2. direct messages


async def direct(target: Target, pairs: int, round_trips: int, timeout: float = 120.0) -> dict[str, Any]:
    """``pairs`` pairs; A sends to B, B answers, A sends the next when the answer arrives."""
    clients = await register_many(target, 2 * pairs, "d")
    try:
        latencies: list[float] = []
        finished: list[asyncio.Future[None]] = []
        loop = asyncio.get_running_loop()
        for p in range(pairs):
            a, b = clients[2 * p], clients[2 * p + 1]
            done = loop.create_future()
            finished.append(done)
            _wire_pair(a, b, round_trips, latencies, done)
        await asyncio.gather(*(c.ping(timeout) for c in clients))
        await asyncio.sleep(_SETTLE)
        before = target.begin()
        for p in range(pairs):
            a, b = clients[2 * p], clients[2 * p + 1]
            a.start_time = time.perf_counter()
            a.send(f"PRIVMSG {b.nick} :0")
        await asyncio.wait_for(asyncio.gather(*finished), timeout)
        after = target.end()
        usage = _usage(before, after)
        total = pairs * round_trips
        p50, p99 = _p50_p99_ms(latencies)
        return {
            "round_trips": total,
            "rt_per_s": total / usage["wall_s"],
            "p50_ms": p50,
            "p99_ms": p99,
            "cpu_us_per_msg": 1e6 * usage["server_cpu_s"] / (2 * total),
            "sys_us_per_msg": 1e6 * usage["server_sys_s"] / (2 * total),
            **usage,
        }
    finally:
        _close_all(clients)


def _last_param(line: bytes) -> bytes:
    _, sep, trailing = line[1:].partition(b" :")  # [1:]: skip the source's own colon
    return trailing if sep else line.rsplit(b" ", 1)[-1]


def _wire_pair(
    a: IRCClient, b: IRCClient, round_trips: int, latencies: list[float], done: asyncio.Future[None]
) -> None:
    a_prefix = f":{b.nick}!".encode()
    b_prefix = f":{a.nick}!".encode()
    state = {"n": 0}

    def on_b(line: bytes) -> None:
        if line.startswith(b_prefix) and b" PRIVMSG " in line:
            text = _last_param(line)
            b.write(f"PRIVMSG {a.nick} :".encode() + text + b"\r\n")

    def on_a(line: bytes) -> None:
        if not (line.startswith(a_prefix) and b" PRIVMSG " in line):
            return
        now = time.perf_counter()
        latencies.append(now - a.start_time)
        state["n"] += 1
        if state["n"] >= round_trips:
            if not done.done():
                done.set_result(None)
            return
        a.start_time = now
        a.write(f"PRIVMSG {b.nick} :{state['n']}\r\n".encode())

    a.on_line = on_a
    b.on_line = on_b


_DIRECT_METRICS = (
    Metric("rt_per_s", "round trips/s", "{:,.0f}", "higher"),
    Metric("p50_ms", "latency p50 (ms)", "{:.2f}", "lower"),
    Metric("p99_ms", "latency p99 (ms)", "{:.2f}", "lower"),
    Metric("cpu_us_per_msg", "server CPU us/relayed message", "{:.1f}", "lower"),
    Metric("sys_us_per_msg", "  of which system (kernel)", "{:.1f}", "lower"),
    *_USAGE_METRICS,
)


# --------------------------------------------------------------------------
# 3. connections


def _registration_rates(registered: int, usage: dict[str, Any]) -> dict[str, float]:
    """Registrations per second and the server's CPU per registration (connections, storm)."""
    return {
        "reg_per_s": registered / usage["wall_s"],
        "cpu_us_per_reg": 1e6 * usage["server_cpu_s"] / max(registered, 1),
        "sys_us_per_reg": 1e6 * usage["server_sys_s"] / max(registered, 1),
    }


_REGISTRATION_METRICS = (
    Metric("reg_per_s", "registrations/s", "{:,.0f}", "higher"),
    Metric("cpu_us_per_reg", "server CPU us/registration", "{:.0f}", "lower"),
    Metric("sys_us_per_reg", "  of which system (kernel)", "{:.0f}", "lower"),
)


async def connections(target: Target, n: int, concurrency: int = 200, hold: float = 3.0) -> dict[str, Any]:
    """Register ``n`` clients (``concurrency`` at a time), hold them idle, measure RSS."""
    clients: list[IRCClient] = []
    retries: list[str] = []
    await asyncio.sleep(0.5)  # let the freshly started server settle before the baseline
    before = target.begin()

    async def make(i: int) -> IRCClient:
        client = await connect_registered(target, f"c{i}", source_address(i), timeout=60.0, retries=retries)
        clients.append(client)
        client.start_counting(b"\x00")  # idle: answers PING, counts whatever else arrives
        return client

    try:
        results = await bounded_gather(n, concurrency, make)
        registered = sum(1 for r in results if isinstance(r, IRCClient))
        errors = [r for r in results if not isinstance(r, IRCClient)]
        after_reg = target.end()
        await asyncio.sleep(hold)
        held = target.sample()
        dropped = sum(1 for c in clients if c.closed.done())
        usage = _usage(before, after_reg)
        return {
            "registered": registered,
            "errors": len(errors) + dropped,
            "first_error": repr(errors[0]) if errors else None,
            "retries": len(retries),
            "first_retry": retries[0] if retries else None,
            **_registration_rates(registered, usage),
            "rss_base_mib": before.rss_kib / 1024,
            "rss_held_mib": held.rss_kib / 1024,
            "rss_kib_per_conn": (held.rss_kib - before.rss_kib) / max(registered, 1),
            **usage,
        }
    finally:
        _close_all(clients)


_CONNECTIONS_METRICS = (
    *_REGISTRATION_METRICS,
    Metric("rss_kib_per_conn", "RSS KiB/idle connection", "{:.1f}", "lower"),
    Metric("rss_held_mib", "RSS with all held (MiB)", "{:.0f}", "lower"),
    Metric("retries", "connections retried (reset, refused)", "{:.0f}", "lower"),
    Metric("errors", "errors (failed 6 times, dropped)", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)


# --------------------------------------------------------------------------
# 4. churn


async def churn(target: Target, total: int, workers: int, timeout: float = 30.0) -> dict[str, Any]:
    """``workers`` loops of connect, register, JOIN, PRIVMSG, QUIT until ``total`` are done."""
    counter = itertools.count()
    errors: list[str] = []
    ok = 0
    channel = "#churn"

    async def worker() -> None:
        nonlocal ok
        while True:
            i = next(counter)
            if i >= total:
                return
            client: IRCClient | None = None
            try:
                client = await connect(target, f"k{i}", source=source_address(i))
                await register(client, timeout)
                await join(client, channel, timeout)
                client.send(f"PRIVMSG {channel} :hello from {client.nick}")
                client.send("QUIT :bye")
                await asyncio.wait_for(asyncio.shield(client.closed), timeout)
                ok += 1
            except (TimeoutError, OSError, BenchError) as exc:
                errors.append(repr(exc))
            finally:
                if client is not None:
                    client.abort()

    before = target.begin()
    await asyncio.gather(*(worker() for _ in range(workers)))
    after = target.end()
    usage = _usage(before, after)
    return {
        "cycles": ok,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "cycles_per_s": ok / usage["wall_s"],
        "cpu_us_per_cycle": 1e6 * usage["server_cpu_s"] / max(ok, 1),
        "sys_us_per_cycle": 1e6 * usage["server_sys_s"] / max(ok, 1),
        **usage,
    }


_CHURN_METRICS = (
    Metric("cycles_per_s", "cycles/s", "{:,.0f}", "higher"),
    Metric("cpu_us_per_cycle", "server CPU us/cycle", "{:.0f}", "lower"),
    Metric("sys_us_per_cycle", "  of which system (kernel)", "{:.0f}", "lower"),
    Metric("errors", "errors", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)


# --------------------------------------------------------------------------
# 4b. a reconnect storm


async def _start_bystanders(target: Target, count: int, timeout: float) -> asyncio.subprocess.Process:
    """``count`` bystanders pinging the server, in a process of their own (bench/bystander.py)."""
    import os
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.bystander", target.host, str(target.port), str(count),
        "--seconds", str(timeout),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 60)
    if line.strip() != b"ready":
        proc.kill()
        await proc.wait()
        raise BenchError(f"the bystanders did not start: {line!r}")
    return proc


async def _stop_bystanders(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    import json

    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"stop\n")
    await proc.stdin.drain()
    out = await asyncio.wait_for(proc.stdout.read(), 60)  # one JSON line, then EOF
    await asyncio.wait_for(proc.wait(), 60)
    return json.loads(out)


def _window(samples: list[list[float]], start: float, end: float) -> list[float]:
    """The round trips that were under way at some moment between ``start`` and ``end``."""
    return [rtt for sent, rtt in samples if sent < end and sent + rtt > start]


async def storm(target: Target, n: int, bystanders: int, quiet: float = 1.0, timeout: float = 600.0) -> dict[str, Any]:
    """A reconnect storm: ``bystanders`` established clients keep pinging the server (in a process
    of their own) while ``n`` clients connect and register all at once. A connection the server
    resets or refuses is retried (up to 6 times, with backoff) and counted."""
    proc = await _start_bystanders(target, bystanders, timeout)
    clients: list[IRCClient] = []
    retries: list[str] = []
    try:
        await asyncio.sleep(quiet)  # the bystanders' round trips before the storm
        start = time.monotonic()
        before = target.begin()

        async def one(i: int) -> IRCClient:
            client = await connect_registered(target, f"s{i}", source_address(i), timeout=120.0, retries=retries)
            clients.append(client)
            client.start_counting(b"\x00")  # idle once registered: answers PING, counts the rest
            return client

        results = await asyncio.wait_for(
            asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True), timeout
        )
        after = target.end()
        end = time.monotonic()
        seen = await _stop_bystanders(proc)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        _close_all(clients)
        raise
    try:
        errors = [r for r in results if not isinstance(r, IRCClient)]
        registered = n - len(errors)
        quiet_rtts = [rtt for sent, rtt in seen["samples"] if start - quiet <= sent and sent + rtt <= start]
        storm_rtts = _window(seen["samples"], start, end)
        if not quiet_rtts:
            raise BenchError("no bystander round trip before the storm")
        usage = _usage(before, after)
        quiet_p50, quiet_p99 = _p50_p99_ms(quiet_rtts)
        # a storm shorter than a round trip (tiny counts) has none of its own
        p50, p99 = _p50_p99_ms(storm_rtts) if storm_rtts else (math.nan, math.nan)
        return {
            "registered": registered,
            "errors": len(errors) + len(seen["errors"]),
            "first_error": repr(errors[0]) if errors else (seen["errors"] or [None])[0],
            "retries": len(retries),
            **_registration_rates(registered, usage),
            "quiet_p50_ms": quiet_p50,
            "quiet_p99_ms": quiet_p99,
            "p50_ms": p50,
            "p99_ms": p99,
            "max_ms": 1000 * max(storm_rtts) if storm_rtts else math.nan,
            "round_trips": len(storm_rtts),
            **usage,
        }
    finally:
        _close_all(clients)


_STORM_METRICS = (
    *_REGISTRATION_METRICS,
    Metric("quiet_p50_ms", "bystander PING p50 before (ms)", "{:.2f}", "lower"),
    Metric("quiet_p99_ms", "bystander PING p99 before (ms)", "{:.2f}", "lower"),
    Metric("p50_ms", "bystander PING p50 during the storm (ms)", "{:.2f}", "lower"),
    Metric("p99_ms", "bystander PING p99 during the storm (ms)", "{:.2f}", "lower"),
    Metric("max_ms", "bystander PING max during the storm (ms)", "{:.1f}", "lower"),
    Metric("retries", "connections retried (reset, refused)", "{:.0f}", "lower"),
    Metric("errors", "errors", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)


# --------------------------------------------------------------------------
# The registry. ``quick`` variants keep every code path but shrink the counts.


# --------------------------------------------------------------------------
# 5. SASL logins and 6. PIRCAN SEND (pircd only: accounts in its SQLite file)

PIRCD_ONLY = ("pircd", "pircd-asyncio", "pircd-nohistory", "pircd-compiled", "pircd-nohttp", "pircd-pg",
              "pircd-base", "pircd-normal")
WITH_HTTP = tuple(name for name in PIRCD_ONLY if name != "pircd-nohttp")  # MCP needs the HTTP listener
BENCH_PASSWORD = "bench-password-1"


def server_database(target: Target) -> str:
    """pircd's database (set-up writes accounts and tokens there, as the CLI does)."""
    if target.database is not None:
        return target.database
    if target.workdir is None:
        raise BenchError("this scenario needs the server's database (pircd only)")
    return str(target.workdir / "pircd.db")


def create_accounts(target: Target, names: list[str], kind: str = "person", owner: str | None = None) -> None:
    """Write accounts straight into the server's database (set-up, not measured).

    One argon2 hash and one set of SCRAM keys serve every account (they share a
    password), so set-up does not spend a verification's worth of CPU per account;
    every login still costs the server one full argon2id verification.
    """
    from ircd.passwords import hash_sync
    from ircd.sasl.scram import derive_keys
    from ircd.store import accounts as rows
    from ircd.store.db import connect_sync, migrate, transaction
    from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

    conn = connect_sync(server_database(target))
    try:
        migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
        hashed, keys = hash_sync(BENCH_PASSWORD), derive_keys(BENCH_PASSWORD)
        now = int(time.time() * 1000)
        with transaction(conn):
            for name in names:
                rows.insert_account(conn, name, name.lower(), kind, owner, now, hashed, keys)
    finally:
        conn.close()


async def sasl_login(target: Target, name: str, timeout: float = 60.0, source: str | None = None) -> IRCClient:
    """Connect (from ``source``), log in with SASL PLAIN during registration, finish registration."""
    client = await connect(target, name, source=source, timeout=timeout)
    plus = client.expect("AUTHENTICATE")
    client.send("CAP REQ :sasl")
    client.send(f"NICK {name}")
    client.send(f"USER {name} 0 * :bench")
    client.send("AUTHENTICATE PLAIN")
    await asyncio.wait_for(plus, timeout)
    result = client.expect("903", "904", "905", "906")
    welcome = client.expect("376", "422")
    payload = base64.b64encode(f"\0{name}\0{BENCH_PASSWORD}".encode()).decode()
    client.send(f"AUTHENTICATE {payload}")
    line = await asyncio.wait_for(result, timeout)
    if b" 903 " not in line:
        raise BenchError(f"{name}: SASL failed: {line!r}")
    client.send("CAP END")
    await asyncio.wait_for(welcome, timeout)
    return client


async def _bystander_traffic(pairs: list[tuple[IRCClient, IRCClient]], stop: asyncio.Event,
                             latencies: list[float]) -> None:
    """Each pair pings its partner through the server until ``stop``; records round trips."""

    async def one(a: IRCClient, b: IRCClient) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            fut = b.expect("PRIVMSG", needle=f"bystander {n}")
            t0 = time.perf_counter()
            a.send(f"PRIVMSG {b.nick} :bystander {n}")
            await asyncio.wait_for(fut, 30)
            latencies.append(time.perf_counter() - t0)
            await asyncio.sleep(0.005)

    await asyncio.gather(*(one(a, b) for a, b in pairs))


async def sasl_logins(target: Target, n: int, bystander_pairs: int, timeout: float = 240.0) -> dict[str, Any]:
    names = [f"login{i}" for i in range(n)]
    create_accounts(target, names)
    bystanders = await register_many(target, 2 * bystander_pairs, "by")
    pairs = [(bystanders[2 * i], bystanders[2 * i + 1]) for i in range(bystander_pairs)]
    logged_in: list[IRCClient] = []
    try:
        quiet: list[float] = []
        stop = asyncio.Event()
        traffic = asyncio.ensure_future(_bystander_traffic(pairs, stop, quiet))
        await asyncio.sleep(1.0)  # bystander latency with nobody logging in
        stop.set()
        await traffic
        storm: list[float] = []
        stop = asyncio.Event()
        traffic = asyncio.ensure_future(_bystander_traffic(pairs, stop, storm))
        before = target.begin()
        results = await asyncio.wait_for(
            # from 50 loopback addresses: a storm from one address is what the login throttle stops
            asyncio.gather(*(sasl_login(target, name, source=source_address(i)) for i, name in enumerate(names)),
                           return_exceptions=True), timeout
        )
        after = target.end()
        stop.set()
        await traffic
        logged_in = [r for r in results if isinstance(r, IRCClient)]
        failed = [r for r in results if not isinstance(r, IRCClient)]
        if failed:
            raise BenchError(f"{len(failed)} of {n} logins failed; first: {failed[0]!r}")
        usage = _usage(before, after)
        quiet_p50, quiet_p99 = _p50_p99_ms(quiet)
        p50, p99 = _p50_p99_ms(storm)
        return {
            "logins": n,
            "logins_per_s": n / usage["wall_s"],
            "cpu_ms_per_login": 1e3 * usage["server_cpu_s"] / n,
            "quiet_p50_ms": quiet_p50,
            "quiet_p99_ms": quiet_p99,
            "p50_ms": p50,
            "p99_ms": p99,
            **usage,
        }
    finally:
        _close_all(bystanders + logged_in)


async def pircan_send(target: Target, senders: int, per_sender: int, timeout: float = 300.0) -> dict[str, Any]:
    create_accounts(target, ["owner"])
    a_names = [f"sa{i}" for i in range(senders)]
    b_names = [f"sb{i}" for i in range(senders)]
    create_accounts(target, a_names + b_names, kind="agent", owner="owner")
    await asyncio.sleep(1.5)  # the server picks up new accounts from the database once a second
    agents: list[IRCClient] = []
    try:
        a_side = [await sasl_login(target, name) for name in a_names]
        b_side = [await sasl_login(target, name) for name in b_names]
        agents = a_side + b_side
        for a, b in zip(a_side, b_side):  # agreements (set-up)
            await agree(a, b)
        latencies: list[float] = []
        await asyncio.gather(*(c.ping(30) for c in agents))
        before = target.begin()
        pairs = zip(a_side, b_side)
        await asyncio.wait_for(asyncio.gather(*(send_many(a, b, per_sender, latencies) for a, b in pairs)), timeout)
        after = target.end()
        return measured(_usage(before, after), latencies, "sends", "send")
    finally:
        _close_all(agents)


async def agree(a: IRCClient, b: IRCClient, timeout: float = 30.0) -> None:
    """An agreement for messages from ``a`` to ``b`` (set-up): ``a`` requests, ``b`` accepts."""
    requested = a.expect("CONTACT", "FAIL")
    a.send(f"CONTACT REQUEST {b.nick} message 30 :benchmark")
    line = await asyncio.wait_for(requested, timeout)
    if b" REQUESTED " not in line:
        raise BenchError(f"CONTACT REQUEST refused: {line!r}")
    request_id = line.split(b" REQUESTED ")[1].split()[0].decode()
    accepted = b.expect("CONTACT", "FAIL")
    b.send(f"CONTACT ACCEPT {request_id}")
    line = await asyncio.wait_for(accepted, timeout)
    if b" ACCEPTED " not in line:
        raise BenchError(f"CONTACT ACCEPT refused: {line!r}")


async def send_many(a: IRCClient, b: IRCClient, count: int, latencies: list[float]) -> None:
    """``count`` durable SENDs from ``a`` to ``b``, each waiting for its receipt (latency recorded)."""
    for i in range(count):
        receipt = a.expect("SEND", "FAIL")
        t0 = time.perf_counter()
        a.send(f"SEND {b.nick} :benchmark message {i} of a durable direct message run")
        line = await receipt
        latencies.append(time.perf_counter() - t0)
        if b" OK " not in line:
            raise BenchError(f"SEND refused: {line!r}")


def measured(usage: dict[str, float], latencies: list[float], things: str, thing: str) -> dict[str, Any]:
    """The figures of a scenario whose every operation waited for its answer: ``<things>``,
    ``<things>_per_s``, latency ``p50_ms`` and ``p99_ms``, ``cpu_us_per_<thing>`` and the usage."""
    total = len(latencies)
    p50, p99 = _p50_p99_ms(latencies)
    return {
        things: total,
        f"{things}_per_s": total / usage["wall_s"],
        "p50_ms": p50,
        "p99_ms": p99,
        f"cpu_us_per_{thing}": 1e6 * usage["server_cpu_s"] / total,
        **usage,
    }


_SASL_METRICS = (
    Metric("logins_per_s", "logins/s", "{:,.0f}", "higher"),
    Metric("cpu_ms_per_login", "server CPU ms/login", "{:.1f}", "lower"),
    Metric("quiet_p50_ms", "bystander p50 before (ms)", "{:.2f}", "lower"),
    Metric("quiet_p99_ms", "bystander p99 before (ms)", "{:.2f}", "lower"),
    Metric("p50_ms", "bystander p50 during logins (ms)", "{:.2f}", "lower"),
    Metric("p99_ms", "bystander p99 during logins (ms)", "{:.2f}", "lower"),
)
_PIRCAN_METRICS = (
    Metric("sends_per_s", "SENDs/s", "{:,.0f}", "higher"),
    Metric("p50_ms", "receipt latency p50 (ms)", "{:.2f}", "lower"),
    Metric("p99_ms", "receipt latency p99 (ms)", "{:.2f}", "lower"),
    Metric("cpu_us_per_send", "server CPU us/SEND", "{:.0f}", "lower"),
)

_HTTP_LOAD_METRICS = (  # the scenario itself is in bench/http_load.py
    Metric("limit_quiet_p50", "bystander PING p50, between flood seconds (ms)", "{:.2f}", "lower"),
    Metric("limit_quiet_p99", "bystander PING p99, between flood seconds (ms)", "{:.2f}", "lower"),
    Metric("limit_p50", "  p50, MCP flood at the limit (ms)", "{:.2f}", "lower"),
    Metric("limit_p99", "  p99, MCP flood at the limit (ms)", "{:.2f}", "lower"),
    Metric("limit_max", "  max, MCP flood at the limit (ms)", "{:.1f}", "lower"),
    Metric("limit_ratio", "  p99 at the limit / between (goal <= 3)", "{:.2f}", "lower"),
    Metric("limit_ok_per_s", "  calls answered/s at the limit", "{:.1f}", ""),
    Metric("limit_cpu", "  server CPU share, phase at the limit", "{:.1%}", "lower"),
    Metric("over_quiet_p99", "bystander PING p99, between flood seconds (ms)", "{:.2f}", "lower"),
    Metric("over_p50", "  p50, MCP flood over the limit (ms)", "{:.2f}", "lower"),
    Metric("over_p99", "  p99, MCP flood over the limit (ms)", "{:.2f}", "lower"),
    Metric("over_max", "  max, MCP flood over the limit (ms)", "{:.1f}", "lower"),
    Metric("over_ratio", "  p99 over the limit / between", "{:.2f}", "lower"),
    Metric("over_ok_per_s", "  calls answered/s over the limit", "{:,.1f}", ""),
    Metric("over_refused_per_s", "  calls refused (429)/s over the limit", "{:,.0f}", ""),
    Metric("over_cpu", "  server CPU share, phase over the limit", "{:.1%}", "lower"),
)

_MCP_METRICS = (  # the scenario itself is in bench/mcp.py
    Metric("sends_per_s", "send_direct_message calls/s", "{:,.0f}", "higher"),
    Metric("p50_ms", "call latency p50 (ms)", "{:.2f}", "lower"),
    Metric("p99_ms", "call latency p99 (ms)", "{:.2f}", "lower"),
    Metric("cpu_us_per_send", "server CPU us/send", "{:.0f}", "lower"),
    Metric("sys_us_per_send", "  of which system (kernel)", "{:.0f}", "lower"),
    Metric("loadgen_cpu_us_per_send", "load generator CPU us/send", "{:.0f}", "lower"),
    Metric("lost", "messages not in the inbox", "{:.0f}", "lower"),
    Metric("refused", "calls refused (tool errors)", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)

_MCP_MAIL_METRICS = (  # bench/mcp.py for pircd, bench/agentmail.py for MCP Agent Mail
    Metric("sends_per_s", "sends/s (calls that sent)", "{:,.1f}", "higher"),
    Metric("p50_ms", "call latency p50 (ms)", "{:.1f}", "lower"),
    Metric("p99_ms", "call latency p99 (ms)", "{:.1f}", "lower"),
    Metric("cpu_us_per_send", "server CPU us/call (with its child processes)", "{:,.0f}", "lower"),
    Metric("sys_us_per_send", "  of which system (kernel)", "{:,.0f}", "lower"),
    Metric("loadgen_cpu_us_per_send", "load generator CPU us/call", "{:,.0f}", "lower"),
    Metric("lost", "messages not in the inbox", "{:.0f}", "lower"),
    Metric("refused", "calls refused (tool errors)", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)


@dataclass(frozen=True)
class Sizes:
    fanout: tuple[tuple[int, int], ...] = ((200, 2000), (1000, 500))
    dm: tuple[int, int] = (50, 200)
    connections: int = 10_000
    churn: tuple[int, int] = (2000, 20)
    storm: tuple[int, int] = (10_000, 10)  # clients at once, bystanders
    sasl: tuple[int, int] = (100, 5)  # logins at once, bystander pairs
    pircan: tuple[int, int] = (100, 100)  # senders, SENDs per sender
    mcp: tuple[int, int] = (100, 100)  # MCP agents (in pairs), send_direct_message calls per agent
    chathistory: tuple[int, int, int] = (5000, 10, 100)  # lines stored, readers, queries per reader
    mcp_mail: tuple[int, int] = (10, 10)  # the same against MCP Agent Mail: ~0.1 s of its CPU a call
    http_load: float = 40.0  # seconds of each phase (at the call limit, over it), flooding every other second
    # bench/cluster.py: receivers, senders, lines per sender; SEND pairs, SENDs per pair; remote users
    # (15,000: the loadgen and the node each hold one socket per user, under a hard limit of 20,000 open files)
    cluster_fanout: tuple[int, int, int] = (200, 4, 2500)
    cluster_send: tuple[int, int] = (40, 100)
    cluster_remote: int = 15_000


FULL = Sizes()
QUICK = Sizes(fanout=((20, 200), (100, 50)), dm=(10, 50), connections=500, churn=(100, 10), storm=(1000, 5),
              sasl=(20, 2), pircan=(20, 20), mcp=(20, 20), chathistory=(500, 4, 20), mcp_mail=(4, 25),
              http_load=10.0, cluster_fanout=(40, 2, 200), cluster_send=(8, 10), cluster_remote=1000)
TINY = Sizes(fanout=((5, 20),), dm=(2, 5), connections=20, churn=(5, 2), storm=(20, 2), sasl=(4, 1), pircan=(2, 3),
             mcp=(4, 3), chathistory=(50, 2, 3), mcp_mail=(4, 3), http_load=2.0, cluster_fanout=(4, 2, 10),
             cluster_send=(2, 2), cluster_remote=20)


def build_scenarios(sizes: Sizes = FULL) -> dict[str, Scenario]:
    """The scenario registry for one set of sizes (``SCENARIOS`` holds the full sizes)."""
    table: dict[str, Scenario] = {}

    def add(s: Scenario) -> None:
        table[s.name] = s

    def fanout_run(receivers: int, lines: int) -> Callable[[Target], Awaitable[dict[str, Any]]]:
        return lambda t: fanout(t, receivers, lines)

    for receivers, lines in sizes.fanout:
        add(
            Scenario(
                f"fanout-{receivers}x{lines}",
                "fanout",
                f"channel fan-out: 1 sender, {receivers} receivers, {lines} lines of 100 bytes",
                _FANOUT_METRICS,
                run=fanout_run(receivers, lines),
            )
        )
    pairs, rts = sizes.dm
    add(
        Scenario(
            f"dm-{pairs}x{rts}",
            "dm",
            f"direct messages: {pairs} pairs x {rts} round trips",
            _DIRECT_METRICS,
            run=lambda t: direct(t, pairs, rts),
        )
    )
    add(
        Scenario(
            f"connections-{sizes.connections}",
            "connections",
            f"register {sizes.connections} clients and hold them idle",
            _CONNECTIONS_METRICS,
            run=lambda t: connections(t, sizes.connections),
            timeout=600.0,
        )
    )
    total, workers = sizes.churn
    add(
        Scenario(
            f"churn-{total}x{workers}",
            "churn",
            f"connect, register, join, speak, quit: {total} cycles over {workers} workers",
            _CHURN_METRICS,
            run=lambda t: churn(t, total, workers),
        )
    )
    crowd, watching = sizes.storm
    add(
        Scenario(
            f"storm-{crowd}",
            "storm",
            f"reconnect storm: {crowd} clients connect and register at once while {watching} established "
            "clients keep pinging the server",
            _STORM_METRICS,
            run=lambda t: storm(t, crowd, watching),
            timeout=900.0,
        )
    )
    logins, bystanders = sizes.sasl
    add(
        Scenario(
            f"sasl-{logins}",
            "sasl",
            f"SASL PLAIN logins: {logins} clients log in at once; {bystanders} bystander pairs "
            "exchange messages meanwhile",
            _SASL_METRICS,
            run=lambda t: sasl_logins(t, logins, bystanders),
            servers=PIRCD_ONLY,
        )
    )
    senders, per_sender = sizes.pircan
    add(
        Scenario(
            f"pircan-send-{senders}x{per_sender}",
            "pircan",
            f"durable PIRCAN SEND: {senders} agents each send {per_sender} messages to a partner "
            "under an agreement, each waiting for its receipt",
            _PIRCAN_METRICS,
            run=lambda t: pircan_send(t, senders, per_sender),
            servers=PIRCD_ONLY,
        )
    )
    agents, per_agent = sizes.mcp
    add(
        Scenario(
            f"mcp-send-{agents}x{per_agent}",
            "mcp",
            f"MCP send_direct_message: {agents} agents (official MCP SDK clients, a token each) in pairs "
            f"under agreements; each calls it {per_agent} times to its peer, one call after the other",
            _MCP_METRICS,
            # bound now: agents and per_agent are named again below for mcp-mail (10 x 10), which
            # this scenario ran instead
            run=lambda t, agents=agents, per_agent=per_agent: _mcp_send(t, agents, per_agent),
            servers=WITH_HTTP,
        )
    )
    lines, readers, queries = sizes.chathistory
    add(
        Scenario(
            f"chathistory-{readers}x{queries}",
            "chathistory",
            f"CHATHISTORY LATEST {CHANNEL_PAGE} lines of a channel of {lines}: {readers} readers at once, "
            f"{queries} queries each, one after the other",
            _CHATHISTORY_METRICS,
            run=lambda t: _chathistory(t, lines, readers, queries),
            servers=tuple(name for name in PIRCD_ONLY if name != "pircd-nohistory"),
        )
    )
    agents, per_agent = sizes.mcp_mail
    add(
        Scenario(
            f"mcp-mail-{agents}x{per_agent}",
            "mcp-mail",
            f"MCP mailboxes side by side: {agents} agents (the load generator of mcp-send) in pairs, each "
            f"sends {per_agent} messages to its peer, one call after the other: pircd's send_direct_message "
            "under agreements, MCP Agent Mail's send_message under approved contacts",
            _MCP_MAIL_METRICS,
            run=lambda t: _mcp_mail(t, agents, per_agent),
            servers=(*WITH_HTTP, "agentmail"),
            timeout=900.0,
        )
    )
    add(
        Scenario(
            f"http-load-{sizes.http_load:g}s",
            "http-load",
            f"a bystander IRC client's PING round trip while one MCP client calls list_agents every other "
            f"second for {sizes.http_load:g} s at its account's call limit, then as fast as it can past it, "
            "against the seconds between",
            _HTTP_LOAD_METRICS,
            run=lambda t: _http_load(t, sizes.http_load),
            servers=WITH_HTTP,
            timeout=2 * sizes.http_load + 240.0,
        )
    )
    return table


CHANNEL_PAGE = 100


async def _chathistory(target: Target, lines: int, readers: int, queries: int) -> dict[str, Any]:
    from bench.chathistory import chathistory  # imports this module

    return await chathistory(target, lines, readers, queries)


_CHATHISTORY_METRICS = (
    Metric("queries_per_s", "CHATHISTORY queries/s", "{:,.0f}", "higher"),
    Metric("p50_ms", "query latency p50 (ms)", "{:.2f}", "lower"),
    Metric("p99_ms", "query latency p99 (ms)", "{:.2f}", "lower"),
    Metric("cpu_us_per_query", "server CPU us/query", "{:.0f}", "lower"),
    *_USAGE_METRICS,
)


async def _http_load(target: Target, seconds: float) -> dict[str, Any]:
    from bench.http_load import http_load  # imports this module: only when it runs

    return await http_load(target, seconds)


# A call's answer may take this long in the mcp-mail scenario: MCP Agent Mail's calls wait for its
# archive lock, past a minute at 10 senders, and the figures should say how long, not only that it failed.
_MAIL_CALL_TIMEOUT = 300.0


async def _mcp_mail(target: Target, agents: int, per_agent: int) -> dict[str, Any]:
    if target.name == "agentmail":
        from bench.agentmail import agentmail_send  # only when it runs, as below

        return await agentmail_send(target, agents, per_agent, call_timeout=_MAIL_CALL_TIMEOUT)
    from bench.mcp import mcp_send

    return await mcp_send(target, agents, per_agent, call_timeout=_MAIL_CALL_TIMEOUT)


async def _mcp_send(target: Target, agents: int, per_agent: int) -> dict[str, Any]:
    from bench.mcp import mcp_send  # imports this module, and the MCP SDK: only when it runs

    return await mcp_send(target, agents, per_agent)


SCENARIOS.update(build_scenarios(FULL))


@dataclass
class RunResult:
    server: str
    scenario: str
    values: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
