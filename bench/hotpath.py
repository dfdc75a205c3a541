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
  (001-005, LUSERS, MOTD), then the connection closes;
- ``churn``: the socket benchmark's cycle: a connection, NICK and USER (the
  welcome burst), ``JOIN #churn`` (NAMES), then ``PRIVMSG #churn`` and ``QUIT``
  in one read, and the connection closes; ``--members`` clients stay in
  ``#churn`` and hear every JOIN, message and QUIT;
- ``send``: pairs of PIRCAN agents (100 by default; logged in with SASL, each
  pair with a ``message`` agreement); in each round every sender sends one
  ``SEND`` and the event loop runs until every receipt is out. This path is
  not socket-free in time: it includes the writer thread (one group commit
  per round, at the configured durability) and the event loop's own work for
  the handlers' tasks and futures, since that is most of what a SEND costs.

It reports CPU microseconds (``time.process_time``, every thread of the
process) per relayed message, per delivered line, per registration and per
SEND, the median of ``--repeat`` runs. The figures are lower
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

    def abort(self) -> None:
        self.closing = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _Receipts:
    """Counts ``marker`` in what the send scenario's clients are written, and wakes the round."""

    def __init__(self, marker: bytes) -> None:
        self.marker = marker
        self.want = 0
        self.done: asyncio.Future[None] | None = None
        self.arrived: asyncio.Future[None] | None = None  # set-up: woken by any write

    def poke(self) -> None:
        if self.arrived is not None and not self.arrived.done():
            self.arrived.set_result(None)

    def expect(self, loop: asyncio.AbstractEventLoop, want: int) -> asyncio.Future[None]:
        self.want = want
        self.done = loop.create_future()
        return self.done

    def saw(self, data: bytes | bytearray | memoryview) -> None:
        data = bytes(data)
        self.want -= data.count(self.marker)
        if self.done is None or self.done.done():
            return
        if b" FAIL " in data or data.startswith(b"FAIL "):
            self.done.set_exception(RuntimeError(f"a SEND was refused: {data!r}"))
        elif self.want <= 0:
            self.done.set_result(None)


class RecordingTransport(CountingTransport):
    """Keeps what it is written until the measured phase, then only counts receipts."""

    def __init__(self, peer: str, receipts: _Receipts) -> None:
        super().__init__(peer)
        self.data = bytearray()
        self.receipts = receipts
        self.measuring = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        if self.measuring:
            self.receipts.saw(data)
        else:
            self.data += data
            self.receipts.poke()


def _build(directory: Path, loop: asyncio.AbstractEventLoop):
    from ircd.app import build_server
    from ircd.config import load as load_config

    path = directory / "pircd.toml"
    # the send scenario's set-up creates 2 x --pairs agents of one owner and logs them all in at
    # once from one address (a login counts against it until it succeeds); the logins, the
    # owner's agent limit and the login throttle are not what it measures
    cheap_logins = ("\n[accounts]\nargon2_time_cost = 1\nargon2_memory_kib = 8192\n"
                    "agents_per_owner = 100000\nlogin_ip_attempts = 100000\n")
    path.write_text(_pircd_config(directory, free_port()) + cheap_logins)
    server = build_server(load_config(str(path)))
    server.delivery.schedule = lambda fn: None  # the benchmark writes the outboxes itself
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
    a, _ = _connect(server, "dma")
    b, tb = _connect(server, "dmb")
    text = "x" * 100
    to_b = f"PRIVMSG dmb :{text}\r\n".encode()
    to_a = f"PRIVMSG dma :{text}\r\n".encode()
    flush = server.delivery.flush_all  # what the event loop calls at the end of a pass
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
    flush = server.delivery.flush_all  # what the event loop calls at the end of a pass
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
    flush = server.delivery.flush_all  # what the event loop calls at the end of a pass
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


def bench_churn(loop: asyncio.AbstractEventLoop, server, count: int, members: int) -> float:
    """CPU microseconds per churn cycle (connect, register, JOIN, PRIVMSG, QUIT, close).
    Runs inside the event loop: a closing connection sets a timer, as in the server."""
    from ircd.net.connection import Connection

    stay = []
    for i in range(members):
        conn, transport = _connect(server, f"cm{i}")
        conn.data_received(b"JOIN #churn\r\n")
        stay.append((conn, transport))
    server.flush_all()
    hello = [f"NICK k{i}\r\nUSER k{i} 0 * :bench client\r\n".encode() for i in range(count)]
    join = b"JOIN #churn\r\n"
    talk = [f"PRIVMSG #churn :hello from k{i}\r\nQUIT :bye\r\n".encode() for i in range(count)]
    flush = server.delivery.flush_all  # what the event loop calls at the end of a pass

    async def cycles() -> float:
        start = time.process_time()
        for i in range(count):
            conn = Connection(server)
            transport = CountingTransport("127.0.0.1")
            conn.connection_made(transport)
            conn.data_received(hello[i])
            flush()
            conn.data_received(join)
            flush()
            conn.data_received(talk[i])
            flush()
            conn.connection_lost(None)
        spent = time.process_time() - start
        assert transport.closing, "QUIT did not close the connection"
        return spent

    spent = loop.run_until_complete(cycles())
    assert stay and stay[0][1].written > count * 100 or not stay, "members heard nothing"
    for conn, _ in stay:
        conn.connection_lost(None)
    return spent / count * 1e6


def _until(loop: asyncio.AbstractEventLoop, receipts: _Receipts, ready, what: str, seconds: float = 60.0) -> None:
    """Run the loop until ``ready()``, looking again after each write to a set-up client."""
    deadline = time.monotonic() + seconds
    while not ready():
        receipts.arrived = loop.create_future()
        try:
            loop.run_until_complete(asyncio.wait_for(receipts.arrived, deadline - time.monotonic()))
        except TimeoutError:
            raise RuntimeError(f"set-up timed out waiting for {what}") from None
    receipts.arrived = None


def setup_send(server, loop: asyncio.AbstractEventLoop, pairs: int):
    """``pairs`` sender/recipient agents logged in with SASL, each pair with a ``message`` agreement."""
    import base64

    from ircd.net.connection import Connection

    server.delivery.schedule = loop.call_soon  # outboxes go out as in the server: once per event-loop pass
    password = "hotpath-password"
    loop.run_until_complete(server.accounts.create("hotowner", password, kind="person"))
    names = [(f"hs{i}", f"hr{i}") for i in range(pairs)]
    for a, b in names:
        for name in (a, b):
            loop.run_until_complete(server.accounts.create(name, password, kind="agent", owner="hotowner"))
    receipts = _Receipts(b" OK ")  # a receipt: ":<server> SEND <nick> OK <id> ..."
    conns: dict[str, tuple[Connection, RecordingTransport]] = {}
    for name in [n for pair in names for n in pair]:
        conn = Connection(server)
        transport = RecordingTransport("127.0.0.1", receipts)
        conn.connection_made(transport)
        token = base64.b64encode(f"\0{name}\0{password}".encode()).decode()
        conn.data_received(
            f"CAP REQ :sasl\r\nNICK {name}\r\nUSER {name} 0 * :{name}\r\nAUTHENTICATE PLAIN\r\n"
            f"AUTHENTICATE {token}\r\nCAP END\r\n".encode()
        )
        conns[name] = (conn, transport)
    _until(loop, receipts, lambda: all(b" 376 " in t.data or b" 422 " in t.data for _, t in conns.values()), "logins")
    refused = [name for name, (_, t) in conns.items() if b" 903 " not in t.data]
    if refused:
        raise RuntimeError(f"set-up: SASL login failed for {refused[:3]}")
    for a, b in names:
        (ca, ta), (cb, tb) = conns[a], conns[b]
        ca.data_received(f"CONTACT REQUEST {b} message 30 :hotpath\r\n".encode())
        _until(loop, receipts, lambda ta=ta: b" REQUESTED " in ta.data, "CONTACT REQUEST")
        request = ta.data.split(b" REQUESTED ")[1].split()[0].decode()
        cb.data_received(f"CONTACT ACCEPT {request}\r\n".encode())
        _until(loop, receipts, lambda tb=tb: b" ACCEPTED " in tb.data, "CONTACT ACCEPT")
    for _, transport in conns.values():
        transport.measuring = True
    senders = [conns[a][0] for a, _ in names]
    lines = [f"SEND {b} :hotpath message of a durable direct message run\r\n".encode() for _, b in names]
    return senders, lines, receipts


SEND_WARMUP = 5  # rounds before the measured runs


def bench_send(loop: asyncio.AbstractEventLoop, senders, lines, receipts: _Receipts, rounds: int) -> float:
    """CPU microseconds per durable SEND, receipt included. Every round is one SEND per
    agreement, and an agreement allows 120 an hour: at most 115 measured rounds in all."""
    pairs = list(zip(senders, lines))
    start = time.process_time()
    for _ in range(rounds):
        done = receipts.expect(loop, len(pairs))
        for conn, line in pairs:
            conn.data_received(line)
        loop.run_until_complete(done)
    spent = time.process_time() - start
    return spent / (rounds * len(pairs)) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hotpath", description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=40_000, help="direct messages per run")
    parser.add_argument("--reads", type=int, default=40, help="fan-out reads of 128 lines per run")
    parser.add_argument("--receivers", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--registrations", type=int, default=5_000, help="registrations per run")
    parser.add_argument("--cycles", type=int, default=5_000, help="churn cycles per run")
    parser.add_argument("--members", type=int, default=5, help="churn: clients that stay in #churn")
    parser.add_argument("--pairs", type=int, default=100, help="sender/recipient agent pairs for send")
    parser.add_argument("--rounds", type=int, default=20, help="send: rounds of one SEND per pair, per run")
    parser.add_argument("--only", choices=("dm", "fanout", "register", "churn", "send"), help="run one scenario")
    args = parser.parse_args(argv)
    if args.only in (None, "send") and SEND_WARMUP + args.repeat * args.rounds > 120:
        parser.error("send: --repeat x --rounds must stay within 115 (120 SENDs per agreement per hour)")
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    dm: list[float] = []
    fan: list[float] = []
    reg: list[float] = []
    chu: list[float] = []
    snd: list[float] = []
    with tempfile.TemporaryDirectory(prefix="pircd-hotpath-") as tmp:
        server = _build(Path(tmp), loop)
        try:
            bench_dm(server, min(2_000, args.messages))  # warm up caches and the allocator
            if args.only in (None, "send"):
                sending = setup_send(server, loop, args.pairs)
                bench_send(loop, *sending, rounds=SEND_WARMUP)
            gc.collect()
            for _ in range(args.repeat):
                if args.only in (None, "dm"):
                    dm.append(bench_dm(server, args.messages))
                if args.only in (None, "fanout"):
                    fan.append(bench_fanout(server, args.receivers, args.reads))
                if args.only in (None, "register"):
                    reg.append(bench_register(server, args.registrations))
                if args.only in (None, "churn"):
                    chu.append(bench_churn(loop, server, args.cycles, args.members))
                if args.only in (None, "send"):
                    snd.append(bench_send(loop, *sending, rounds=args.rounds))
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
    if chu:
        print(
            f"churn   {statistics.median(chu):7.1f} us CPU per cycle, {args.members} members"
            f" ({min(chu):.1f}..{max(chu):.1f})"
        )
    if snd:
        print(
            f"send    {statistics.median(snd):7.1f} us CPU per SEND, both threads, {args.pairs} pairs"
            f" ({min(snd):.1f}..{max(snd):.1f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
