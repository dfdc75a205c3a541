"""Webhook deliveries: how fast to a fast receiver, and what hanging receivers cost IRC.

    python -m bench.webhooks [--deliveries 20000] [--endpoints 100] [--hanging 1000]
                             [--pairs 20] [--seconds 10] [--only throughput|bystanders]

Both parts start ``pircd serve`` (PIRCAN loaded, as ``bench.servers`` configures it) on a database
filled beforehand through the server's own store functions and trigger: accounts with webhooks, and
message events queued for them, so each delivery is queued exactly as a SEND queues it.

1. **Throughput.** DELIVERIES events spread over ENDPOINTS webhooks that point at a fast receiver
   in this process (an asyncio protocol answering ``204`` on kept-alive connections). The server
   resumes them at start-up; the figure is deliveries per second from the first request to the last,
   with the server's CPU per delivery. Every delivery id must arrive, and the database must hold no
   pending delivery afterwards.
2. **Bystanders.** PAIRS pairs of IRC clients ping each other with PRIVMSG for SECONDS while HANGING
   webhooks hang: their receiver accepts each request and never answers, and
   ``pircan.webhook_max_in_flight`` is raised to HANGING so that all of them are in flight at once (the
   timeout is longer than the measurement). The same measurement on the same database without any
   webhook ("webhooks off") is the reference. Reported: round-trip p50 and p99 of the bystanders, and
   the server's CPU and memory.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import loadgen
from bench.servers import free_port, proc_sample

ROOT = Path(__file__).resolve().parent.parent  # the server runs from this checkout's source


class Counter:
    """Requests a receiver has seen (all of a request: headers and body)."""

    def __init__(self) -> None:
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.ids: set[bytes] = set()
        self.open = 0
        self.done = asyncio.Event()
        self.want = 0

    def seen(self, head: bytes) -> None:
        now = time.perf_counter()
        self.count += 1
        if self.count == 1:
            self.first = now
        self.last = now
        at = head.find(b"pircan-delivery:")
        if at >= 0:
            self.ids.add(head[at + 16:head.find(b"\r\n", at)].strip())
        if self.want and self.count >= self.want:
            self.done.set()


class Receiver(asyncio.Protocol):
    """HTTP/1.1 requests in, ``204`` out (``answer`` False: nothing out, ever)."""

    def __init__(self, counter: Counter, answer: bool) -> None:
        self.counter = counter
        self.answer = answer
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.counter.open += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.counter.open -= 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).lower()
            at = head.find(b"content-length:")
            length = 0
            if at >= 0:
                stop = head.find(b"\r\n", at)
                length = int(head[at + 15:stop if stop >= 0 else len(head)])
            if len(self.buf) < end + 4 + length:
                return
            del self.buf[:end + 4 + length]
            self.counter.seen(head)
            if self.answer:
                self.transport.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")


def fill(directory: Path, endpoints: int, per_endpoint: int, url: str) -> None:
    """Accounts h0.. with a webhook to ``url`` each, and ``per_endpoint`` message events for each,
    written as bare rows (the trigger on the events queues the deliveries). The accounts exist
    (without a password): the server drops the webhooks of accounts that do not."""
    from bench.search import insert_messages
    from ext.pircan import store as pstore
    from ext.pircan.store import StoredMessage
    from ext.pircan.webhooks import rules
    from ext.pircan.webhooks import store as wstore
    from ircd.proto.msgid import IdGenerator
    from ircd.store.accounts import insert_account
    from ircd.store.db import connect_sync, migrate, transaction
    from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK
    from ircd.store.writes import insert_rows

    conn = connect_sync(str(directory / "pircd.db"), "normal")
    try:
        for track, steps in ((CORE_TRACK, CORE_MIGRATIONS), (pstore.TRACK, pstore.MIGRATIONS),
                             (wstore.TRACK, wstore.MIGRATIONS)):
            migrate(conn, track, steps)
        ids = IdGenerator()
        now = int(time.time() * 1000)
        with transaction(conn):
            for e in range(endpoints):
                insert_account(conn, f"h{e}", f"h{e}", "person", None, now, None, None)
                wstore.save_endpoint(conn, f"h{e}", url, rules.new_secret(), now)
            for i in range(per_endpoint):
                messages: list[tuple[StoredMessage, str | None]] = []
                events: list[tuple[int, str, str, int, int]] = []
                for e in range(endpoints):
                    mid = ids.next_int()
                    messages.append((StoredMessage(mid, "sender", f"h{e}", 1, mid, None, 0, now,
                                                   f"benchmark message {i} for h{e}", None), None))
                    events.append((ids.next_int(), f"h{e}", "message", mid, now))
                insert_messages(conn, messages)
                insert_rows(conn, "INSERT INTO pircan_events (id, recipient, type, ref_id, created_at)", 5, events)
    finally:
        conn.close()


def pending(directory: Path) -> int:
    conn = sqlite3.connect(directory / "pircd.db")
    try:
        return conn.execute("SELECT COUNT(*) FROM pircan_webhook_deliveries").fetchone()[0]
    finally:
        conn.close()


class Server:
    """``pircd serve`` on the filled database, until stop()."""

    def __init__(self, directory: Path, **pircan: Any) -> None:
        self.port = free_port()
        keys = "".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in pircan.items())
        config = directory / "pircd.toml"
        config.write_text(
            f'[server]\nname = "bench.pircd.local"\nlisten = ["127.0.0.1:{self.port}"]\n'
            f'db = "{directory / "pircd.db"}"\n'
            '[flood]\nenabled = false\n[http]\nlisten = ["127.0.0.1:0"]\n'
            '[connections]\nmax_per_ip = 100000\nthrottle_count = 100000\n'
            f'[pircan]\nguests_may_join = true\n{keys}'
        )
        self.proc = subprocess.Popen([sys.executable, "-m", "ircd", "serve", "--config", str(config)],
                                     stderr=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if " ready" in line:
                break
        else:
            raise RuntimeError("pircd exited before it was ready")
        self._drain = threading.Thread(target=self._read, daemon=True)
        self._drain.start()
        self.started = time.perf_counter()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for _ in self.proc.stderr:
            pass

    def sample(self) -> tuple[float, float, int]:
        return proc_sample(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 15 s (by its PID, as every server of the suite)."""
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(15)


async def throughput(directory: Path, deliveries: int, endpoints: int) -> dict[str, float]:
    counter = Counter()
    counter.want = deliveries
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: Receiver(counter, answer=True), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/hook"
    fill(directory, endpoints, deliveries // endpoints, url)
    # started from a thread: this loop answers the deliveries that begin before "ready"
    server = await loop.run_in_executor(None, lambda: Server(directory, webhook_allowed_networks=["127.0.0.0/8"]))
    try:
        cpu0, counted = server.sample()[0], counter.count
        await asyncio.wait_for(counter.done.wait(), 600)
        cpu1, _, rss = server.sample()
    finally:
        server.stop()
        listener.close()
    left = pending(directory)
    if len(counter.ids) != deliveries or left:
        raise RuntimeError(f"{len(counter.ids)} distinct deliveries of {deliveries}, {left} still pending")
    wall = counter.last - counter.first
    return {"deliveries": deliveries, "endpoints": endpoints, "per_s": deliveries / wall, "wall_s": wall,
            "cpu_us": 1e6 * (cpu1 - cpu0) / max(1, deliveries - counted), "rss_mib": rss / 1024}


async def bystanders(directory: Path, hanging: int, pairs: int, seconds: float) -> dict[str, float]:
    counter = Counter()
    loop = asyncio.get_running_loop()
    listener = await loop.create_server(lambda: Receiver(counter, answer=False), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/hook"
    if hanging:
        fill(directory, hanging, 2, url)
    else:
        fill(directory, 0, 0, url)
    server = await loop.run_in_executor(None, lambda: Server(
        directory, webhook_allowed_networks=["127.0.0.0/8"], webhook_max_in_flight=max(hanging, 1),
        webhook_timeout_ms=120_000, webhook_connect_timeout_ms=60_000))
    target = loadgen.Target("pircd", "127.0.0.1", server.port, server.sample, workdir=directory)
    clients: list[Any] = []
    try:
        deadline = time.perf_counter() + 120
        while counter.count < hanging:  # every webhook has a request in flight that nobody answers
            if time.perf_counter() > deadline:
                raise RuntimeError(f"only {counter.count} of {hanging} webhook requests arrived")
            await asyncio.sleep(0.05)
        clients = await loadgen.register_many(target, 2 * pairs, "by")
        latencies: list[float] = []
        stop = asyncio.Event()
        before = server.sample()
        traffic = asyncio.ensure_future(loadgen._bystander_traffic(
            [(clients[2 * i], clients[2 * i + 1]) for i in range(pairs)], stop, latencies))
        await asyncio.sleep(seconds)
        stop.set()
        await traffic
        after = server.sample()
        in_flight = counter.open
    finally:
        for c in clients:
            c.abort()
        server.stop()
        listener.close()
    p50, p99 = loadgen._p50_p99_ms(latencies)
    return {"hanging": hanging, "in_flight": in_flight if hanging else 0, "round_trips": len(latencies),
            "p50_ms": p50, "p99_ms": p99, "cpu_pct": 100 * (after[0] - before[0]) / seconds,
            "rss_mib": after[2] / 1024}


def fresh() -> Path:
    return Path(tempfile.mkdtemp(prefix="bench-webhooks-"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--deliveries", type=int, default=20_000)
    p.add_argument("--endpoints", type=int, default=100)
    p.add_argument("--hanging", type=int, default=1000)
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--only", choices=("throughput", "bystanders"))
    args = p.parse_args(argv)
    loop = loadgen.new_event_loop()
    try:
        if args.only in (None, "throughput"):
            for endpoints in sorted({1, args.endpoints}):
                directory = fresh()
                try:
                    r = loop.run_until_complete(throughput(directory, args.deliveries, endpoints))
                finally:
                    shutil.rmtree(directory, ignore_errors=True)
                print(f"throughput: {r['deliveries']:,} deliveries to {r['endpoints']} webhook(s): "
                      f"{r['per_s']:,.0f}/s ({r['wall_s']:.1f} s), server CPU {r['cpu_us']:.0f} us/delivery, "
                      f"RSS {r['rss_mib']:.0f} MiB", flush=True)
        if args.only in (None, "bystanders"):
            for hanging in (0, args.hanging):
                directory = fresh()
                try:
                    r = loop.run_until_complete(bystanders(directory, hanging, args.pairs, args.seconds))
                finally:
                    shutil.rmtree(directory, ignore_errors=True)
                what = "webhooks off" if not hanging else f"{hanging} webhooks hanging ({r['in_flight']} in flight)"
                print(f"bystanders, {what}: {r['round_trips']:,} round trips, p50 {r['p50_ms']:.2f} ms, "
                      f"p99 {r['p99_ms']:.2f} ms; server CPU {r['cpu_pct']:.0f}%, RSS {r['rss_mib']:.0f} MiB",
                      flush=True)
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
