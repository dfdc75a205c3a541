"""The Python cost of pircd's hot paths, in-process, without sockets or the kernel.

    python -m bench.hotpath [--messages N] [--repeat R]

The socket benchmarks (``bench.run``) measure whole-process CPU, which on
loopback includes the kernel's share of every read and write (for a direct
message that share alone is 10-15 us on the benchmark machine, see
docs/benchmarks.md). This script isolates what pircd itself can change: it
builds the server exactly as ``pircd serve`` does with the benchmark
configuration (store, history, the PIRCAN extension), gives each client a
``Connection`` over a transport that only counts bytes, and feeds lines to
``Connection.data_received`` the way the event loop would:

- ``dm``: two clients take turns sending ``PRIVMSG <peer> :<100 bytes>``, one
  line per read, the outboxes written after every read (one message per
  read is what the 50-pair socket benchmark sees);
- ``fanout``: one sender, 200 receivers in a channel, reads of 128 lines;
- ``register``: a connection, NICK and USER in one read, the welcome burst
  (001-005, LUSERS, MOTD), then the connection closes.

It reports CPU microseconds (``time.process_time``) per relayed message and
per delivered line, the median of ``--repeat`` runs. The figures are lower
than the socket benchmark's by the kernel's share and the event loop's, and
they move far less on a busy machine, which makes them the figures to compare
before and after a change to the hot path.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import _pircd_config, free_port


class CountingTransport(asyncio.Transport):
    """A transport that accepts every write and keeps only the byte count."""

    def __init__(self, peer: str) -> None:
        super().__init__()
        self.peer = peer
        self.written = 0
        self.closing = False

    def get_extra_info(self, name: str, default: object = None) -> object:
        if name == "peername":
            return (self.peer, 40000)
        return default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass  # never pauses: every write is accepted

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _build(directory: Path, loop: asyncio.AbstractEventLoop):
    from ircd.app import build_server
    from ircd.config import load as load_config

    path = directory / "pircd.toml"
    path.write_text(_pircd_config(directory, free_port()))
    server = build_server(load_config(str(path)))
    server.schedule = lambda fn: None  # the benchmark writes the outboxes itself
    server.spawner = loop.create_task
    for start in server.on_startup:
        loop.run_until_complete(start())
    return server


def _connect(server, nick: str):
    from ircd.net.connection import Connection

    conn = Connection(server)
    transport = CountingTransport("127.0.0.1")
    conn.connection_made(transport)
    conn.data_received(f"NICK {nick}\r\nUSER {nick} 0 * :{nick}\r\n".encode())
    server.flush_all()
    assert conn.client is not None and conn.client.registered, nick
    return conn, transport


def bench_dm(server, messages: int) -> float:
    """CPU microseconds per relayed direct message."""
    a, ta = _connect(server, "dma")
    b, tb = _connect(server, "dmb")
    text = "x" * 100
    to_b = f"PRIVMSG dmb :{text}\r\n".encode()
    to_a = f"PRIVMSG dma :{text}\r\n".encode()
    flush = server.flush_all
    before = tb.written
    start = time.process_time()
    for _ in range(messages // 2):
        a.data_received(to_b)
        flush()
        b.data_received(to_a)
        flush()
    spent = time.process_time() - start
    assert tb.written > before, "no message was relayed"
    for conn in (a, b):
        conn.connection_lost(None)
    return spent / messages * 1e6


def bench_fanout(server, receivers: int, reads: int) -> float:
    """CPU microseconds per delivered channel line."""
    sender, _ = _connect(server, "fsender")
    sender.data_received(b"JOIN #hot\r\n")
    conns = []
    for i in range(receivers):
        conn, transport = _connect(server, f"frecv{i}")
        conn.data_received(b"JOIN #hot\r\n")
        conns.append((conn, transport))
    server.flush_all()
    chunk = b"".join(f"PRIVMSG #hot :{i:04d}{'y' * 96}\r\n".encode() for i in range(128))
    flush = server.flush_all
    start = time.process_time()
    for _ in range(reads):
        sender.data_received(chunk)
        flush()
    spent = time.process_time() - start
    delivered = reads * 128 * receivers
    assert conns[0][1].written >= reads * 128 * 100, "lines were not delivered"
    for conn, _ in [(sender, None), *conns]:
        conn.connection_lost(None)
    return spent / delivered * 1e6


def bench_register(server, count: int) -> float:
    """CPU microseconds per registration (connect, NICK + USER, welcome burst, close)."""
    from ircd.net.connection import Connection

    hello = [f"NICK reg{i}\r\nUSER reg 0 * :reg\r\n".encode() for i in range(count)]
    flush = server.flush_all
    start = time.process_time()
    for data in hello:
        conn = Connection(server)
        transport = CountingTransport("127.0.0.1")
        conn.connection_made(transport)
        conn.data_received(data)
        flush()
        conn.connection_lost(None)
    spent = time.process_time() - start
    assert transport.written > 1000, "no welcome burst"
    return spent / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=40_000, help="direct messages per run")
    parser.add_argument("--reads", type=int, default=40, help="fan-out reads of 128 lines per run")
    parser.add_argument("--receivers", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--registrations", type=int, default=5_000, help="registrations per run")
    parser.add_argument("--only", choices=("dm", "fanout", "register"), help="run one of the three")
    args = parser.parse_args(argv)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    dm: list[float] = []
    fan: list[float] = []
    reg: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pircd-hotpath-") as tmp:
        server = _build(Path(tmp), loop)
        try:
            bench_dm(server, min(2_000, args.messages))  # warm up caches and the allocator
            gc.collect()
            for _ in range(args.repeat):
                if args.only in (None, "dm"):
                    dm.append(bench_dm(server, args.messages))
                if args.only in (None, "fanout"):
                    fan.append(bench_fanout(server, args.receivers, args.reads))
                if args.only in (None, "register"):
                    reg.append(bench_register(server, args.registrations))
        finally:
            for stop in reversed(server.on_shutdown):
                loop.run_until_complete(stop())
    loop.close()
    asyncio.set_event_loop(None)
    print(f"python {sys.version.split()[0]}, {args.repeat} runs, medians (min..max)")
    if dm:
        print(f"dm      {statistics.median(dm):7.2f} us CPU per relayed message ({min(dm):.2f}..{max(dm):.2f})")
    if fan:
        print(
            f"fanout  {statistics.median(fan):7.3f} us CPU per delivered line, {args.receivers} receivers"
            f" ({min(fan):.3f}..{max(fan):.3f})"
        )
    if reg:
        print(f"register {statistics.median(reg):6.1f} us CPU per registration ({min(reg):.1f}..{max(reg):.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
