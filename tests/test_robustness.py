"""Robustness without sockets: flood control, connection limits, handler exceptions, timeouts, SendQ."""

from __future__ import annotations

import asyncio
import logging

from ircd.dispatch import make_spec
from ircd.net.connection import Connection


# flood control ------------------------------------------------------------------


def test_flood_control_delays_past_the_burst(make_harness):
    """Flood control (like Ergo's fakelag): a client may send ``burst`` commands at once, then
    ``per_second``; an over-budget line is held back (handle_line returns the delay) and runs later."""
    h = make_harness(flood={"burst": 3, "per_second": 2})
    client = h.register("alice")
    h.clock.advance(10)  # refill the bucket spent on registration
    results = [h.server.handle_line(client, f"PING t{i}".encode()) for i in range(3)]
    assert results == [None, None, None]
    delay = h.server.handle_line(client, b"PING t3")
    assert delay == 0.5
    # the line was not run: retrying before the delay is still refused, after it succeeds
    h.clock.advance(0.25)
    assert h.server.handle_line(client, b"PING t3") == 0.25
    h.clock.advance(0.25)
    assert h.server.handle_line(client, b"PING t3") is None
    h.server.flush_all()
    assert h.lines("alice") == [f":irc.test PONG irc.test t{i}" for i in range(4)]


def test_flood_control_free_commands(make_harness):
    """PONG and QUIT cost nothing (answering the server or leaving is never held back)."""
    h = make_harness(flood={"burst": 1, "per_second": 1})
    client = h.register("alice")
    h.clock.advance(10)
    assert h.server.handle_line(client, b"PING a") is None
    assert isinstance(h.server.handle_line(client, b"PING b"), float)
    assert h.server.handle_line(client, b"PONG irc.test") is None
    assert h.server.handle_line(client, b"QUIT :bye") is None
    h.server.flush_all()
    assert h.lines("alice") == [":irc.test PONG irc.test a", "ERROR :Closing link: 127.0.0.1 (Quit: bye)"]


def test_flood_control_exempts_operators(make_harness):
    """Flood control: "opers exempt" (flood.exempt_opers)."""
    h = make_harness(flood={"burst": 1, "per_second": 1})
    client = h.register("alice")
    client.modes.add("o")
    assert all(h.server.handle_line(client, f"PING {i}".encode()) is None for i in range(50))


def test_flood_control_can_be_disabled(make_harness):
    """flood.enabled = false turns the budget off."""
    h = make_harness(flood={"enabled": False, "burst": 1})
    client = h.register("alice")
    assert all(h.server.handle_line(client, f"PING {i}".encode()) is None for i in range(50))


def test_flood_of_one_client_does_not_hold_back_another(make_harness):
    """A flood never blocks other clients: the budget is per session."""
    h = make_harness(flood={"burst": 2, "per_second": 1})
    alice = h.register("alice")
    bob = h.register("bob")
    h.clock.advance(10)
    for i in range(2):
        assert h.server.handle_line(alice, f"PING {i}".encode()) is None
    assert isinstance(h.server.handle_line(alice, b"PING x"), float)
    assert h.server.handle_line(bob, b"PING y") is None


# connection limits ------------------------------------------------------------------


def test_per_ip_connection_limit(make_harness):
    """connections.max_per_ip: more concurrent connections from one address are refused with ERROR."""
    h = make_harness(connections={"max_per_ip": 2})
    assert h.connect("a", ip="192.0.2.1") is not None
    assert h.connect("b", ip="192.0.2.1") is not None
    assert h.connect("c", ip="192.0.2.1") is None
    assert h.lines("c") == ["ERROR :Closing link: 192.0.2.1 (Too many connections from your IP address)"]
    assert h.conns["c"].closed
    # another address is unaffected, and a slot frees up when a client leaves
    assert h.connect("d", ip="192.0.2.2") is not None
    h.disconnect("a")
    assert h.connect("e", ip="192.0.2.1") is not None


def test_connection_throttle(make_harness):
    """connections.throttle_count connections per throttle_window seconds from one address."""
    h = make_harness(connections={"max_per_ip": 100, "throttle_count": 3, "throttle_window": 60})
    for i in range(3):
        assert h.connect(f"c{i}", ip="198.51.100.7") is not None
        h.disconnect(f"c{i}")
    assert h.connect("c3", ip="198.51.100.7") is None
    assert h.lines("c3") == [
        "ERROR :Closing link: 198.51.100.7 (Too many connections too quickly; try again later)"
    ]
    h.clock.advance(61)
    assert h.connect("c4", ip="198.51.100.7") is not None


def test_connection_throttle_forgets_quiet_addresses(make_harness):
    """The tick drops the throttle record of an address once its window has passed,
    so one record per address ever seen does not pile up."""
    h = make_harness(connections={"throttle_count": 3, "throttle_window": 60})
    h.connect("a", ip="198.51.100.7")
    h.clock.advance(30)
    h.connect("b", ip="198.51.100.8")
    h.tick(31)  # the first sweep: .7 connected 61 s ago, .8 30 s ago
    assert sorted(h.server.admission.throttle) == ["198.51.100.8"]
    h.tick(59)  # no sweep within a minute of the last one
    assert sorted(h.server.admission.throttle) == ["198.51.100.8"]
    h.tick(1)
    assert h.server.admission.throttle == {}


def test_loopback_is_exempt_by_default(make_harness):
    """connections.exempt_loopback (default true): local clients (tests, bouncers) are not limited."""
    h = make_harness(connections={"max_per_ip": 1, "throttle_count": 1})
    for i in range(5):
        assert h.connect(f"l{i}", ip="127.0.0.1") is not None
    assert h.connect("v6", ip="::1") is not None
    h2 = make_harness(connections={"max_per_ip": 1, "exempt_loopback": False})
    assert h2.connect("a", ip="127.0.0.1") is not None
    assert h2.connect("b", ip="127.0.0.1") is None


def test_server_full(make_harness):
    """connections.max_clients caps the whole server."""
    h = make_harness(connections={"max_clients": 2})
    h.connect("a")
    h.connect("b")
    assert h.connect("c") is None
    assert h.lines("c") == ["ERROR :Closing link: 127.0.0.1 (Server is full)"]


# handler exceptions ------------------------------------------------------------------


def _boom(ctx, msg):
    """BOOM
    Always fails (test command)."""
    raise RuntimeError("kaboom")


async def _aboom(ctx, msg):
    """ABOOM
    Always fails after an await (test command)."""
    raise RuntimeError("async kaboom")


def test_handler_exception_is_answered_and_logged(h, caplog):
    """No handler exception reaches a client or kills the server: it is logged with the line that caused it
    and answered with FAIL <verb> INTERNAL_ERROR."""
    h.server.commands.add(make_spec("BOOM", _boom))
    h.register("alice")
    h.register("bob")
    with caplog.at_level(logging.ERROR, logger="pircd"):
        h.send("alice", "BOOM now please")
    assert h.lines("alice") == [
        ":irc.test FAIL BOOM INTERNAL_ERROR :The server could not process this command"
    ]
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "BOOM now please" in record.getMessage()
    assert record.exc_info is not None and "kaboom" in str(record.exc_info[1])
    # the server and the client keep working
    h.send("alice", "PRIVMSG bob :still here")
    assert h.lines("bob") == [":alice!alice@127.0.0.1 PRIVMSG bob :still here"]


def test_async_handler_exception(h):
    """The same for a handler that fails after an await; the label stays on the FAIL."""
    h.server.commands.add(make_spec("ABOOM", _aboom))
    h.register("alice", caps=["labeled-response", "batch"])
    h.send("alice", "@label=L1 ABOOM")
    assert h.lines("alice") == [
        "@label=L1 :irc.test FAIL ABOOM INTERNAL_ERROR :The server could not process this command"
    ]
    h.send("alice", "PING ok")
    assert h.lines("alice") == [":irc.test PONG irc.test ok"]


def test_exception_log_redacts_secrets(h, caplog):
    """Logs never carry a password: the parameters of PASS/OPER/AUTHENTICATE are cut."""
    from ircd.commands.intake import _redact

    assert _redact(b"OPER root hunter2") == b"OPER <redacted>"
    assert _redact(b"@label=1 PASS hunter2") == b"@label=1 PASS <redacted>"
    assert _redact(b"PRIVMSG NickServ :IDENTIFY hunter2") == b"PRIVMSG NickServ <redacted>"
    assert _redact(b"PRIVMSG #a :hello") == b"PRIVMSG #a :hello"


# line errors --------------------------------------------------------------------------


def test_invalid_utf8_is_rejected_with_fail(h):
    """IRCv3 UTF8ONLY: "the server MUST NOT relay content ... that contains invalid UTF-8 ... it SHOULD reply
    with FAIL <command> INVALID_UTF8\""""
    h.register("alice")
    h.register("bob")
    h.send("alice", b"PRIVMSG bob :caf\xe9")
    assert h.lines("alice") == [
        ":irc.test FAIL PRIVMSG INVALID_UTF8 :Message rejected, your message contained invalid UTF-8"
    ]
    assert h.lines("bob") == []


def test_latin1_accepted_without_utf8only(make_harness):
    """With server.utf8only = false, non-UTF-8 bytes are decoded as Latin-1 instead of rejected."""
    h = make_harness(server={"utf8only": False})
    h.register("alice")
    h.register("bob")
    h.send("alice", b"PRIVMSG bob :caf\xe9")
    assert h.lines("bob") == [":alice!alice@127.0.0.1 PRIVMSG bob caf\u00e9"]


def test_blank_and_sourced_lines(h):
    """Empty lines are ignored; a source prefix sent by a client is ignored."""
    h.register("alice")
    h.send("alice", "")
    h.send("alice", "   ")
    h.send("alice", ":spoofed!x@y PING tok")
    assert h.lines("alice") == [":irc.test PONG irc.test tok"]


# timeouts (the tick) --------------------------------------------------------------------


def test_registration_timeout(make_harness):
    """A connection that does not register within timeouts.registration is closed."""
    h = make_harness(timeouts={"registration": 30})
    h.connect("a")
    h.send("a", "NICK alice")
    h.tick(29)
    assert h.lines("a") == []
    h.tick(2)
    assert h.lines("a") == ["ERROR :Closing link: 127.0.0.1 (Registration timed out)"]
    assert h.conns["a"].closed
    h.register("b", nick="alice")


def test_ping_timeout(make_harness):
    """Ping timeout: an idle client is sent PING after ping_interval and closed with ``ERROR :Ping timeout``
    when it does not answer within ping_timeout."""
    h = make_harness(timeouts={"ping_interval": 60, "ping_timeout": 20})
    h.alice_and_bob_in("#a")
    h.tick(61)
    assert h.lines("alice") == ["PING irc.test"]
    assert h.lines("bob") == ["PING irc.test"]
    h.send("bob", "PONG irc.test")
    h.tick(21)
    assert h.lines("alice") == ["ERROR :Closing link: 127.0.0.1 (Ping timeout: 82 seconds)"]
    assert h.lines("bob") == [":alice!alice@127.0.0.1 QUIT :Ping timeout: 82 seconds"]


def test_answering_ping_keeps_the_client(make_harness):
    """Any line from the client (its PONG) resets the ping timer."""
    h = make_harness(timeouts={"ping_interval": 60, "ping_timeout": 20})
    h.register("alice")
    for _ in range(5):
        h.tick(61)
        assert h.lines("alice") == ["PING irc.test"]
        h.send("alice", "PONG irc.test")
    assert not h.conns["alice"].closed


# SendQ -----------------------------------------------------------------------------------


def test_sendq_exceeded_closes_only_the_slow_reader(make_harness):
    """SendQ: a bounded outbox per session; a reader that stops reading is disconnected with
    ``ERROR :SendQ exceeded`` and never stalls the sender or the channel."""
    h = make_harness(limits={"sendq": 8192}, flood={"enabled": False})
    h.register("alice")
    h.register("slow")
    h.register("carol")
    for name in ("alice", "slow", "carol"):
        h.send(name, "JOIN #a")
    for name in ("alice", "slow", "carol"):
        h.take(name)
    h.conns["slow"].backlog = 8000  # the kernel buffer is full: nothing drains
    text = "x" * 400
    for i in range(30):
        h.send("alice", f"PRIVMSG #a :{i} {text}")
    slow_lines = h.lines("slow")
    assert slow_lines[-1] == "ERROR :Closing link: 127.0.0.1 (SendQ exceeded)"
    assert h.conns["slow"].closed
    carol = h.lines("carol")
    assert len(carol) == 30 + 1  # every message, and the QUIT of the slow reader
    assert ":slow!slow@127.0.0.1 QUIT :SendQ exceeded" in carol
    h.send("alice", "PING alive")
    assert h.lines("alice")[-1] == ":irc.test PONG irc.test alive"


def test_sendq_overflow_in_the_middle_of_a_fanout(make_harness):
    """A SendQ overflow during a channel fan-out must not break the fan-out: every other member still gets
    the message and the sender gets no error."""
    h = make_harness(limits={"sendq": 8192})
    names = ["alice", "bob", "slow", "carol", "dave"]
    for name in names:
        h.register(name)
        h.send(name, "JOIN #a")
    for name in names:
        h.take(name)
    slow = h.clients["slow"]
    h.conns["slow"].backlog = 100  # not reading
    slow.outbuf.append(b"x" * 8150)  # almost full, not yet written
    slow.outlen += 8150
    h.send("alice", "PRIVMSG #a :hello everyone")
    assert h.lines("alice") == [":slow!slow@127.0.0.1 QUIT :SendQ exceeded"]
    for name in ("bob", "carol", "dave"):
        assert h.lines(name) == [
            ":alice!alice@127.0.0.1 PRIVMSG #a :hello everyone",
            ":slow!slow@127.0.0.1 QUIT :SendQ exceeded",
        ]
    # the outbox went to the socket when it passed the SendQ; the socket then held too much
    assert h.lines("slow") == [
        "x" * 8150 + ":alice!alice@127.0.0.1 PRIVMSG #a :hello everyone",
        "ERROR :Closing link: 127.0.0.1 (SendQ exceeded)",
    ]
    h.send("alice", "NAMES #a")
    assert h.lines("alice")[0] == ":irc.test 353 alice = #a :@alice bob carol dave"


def test_one_reply_larger_than_the_sendq_reaches_a_client_that_reads(make_harness):
    """The SendQ bounds what a client has not read, not what one command answers: a WHO
    whose reply passes the SendQ goes to the socket as it grows, and the client stays."""
    h = make_harness(limits={"sendq": 4096}, connections={"max_per_ip": 1000})
    h.register("alice")
    h.send("alice", "JOIN #big")
    for i in range(60):
        h.register(f"m{i:02d}")
        h.send(f"m{i:02d}", "JOIN #big")
    h.take("alice")
    h.send("alice", "WHO #big")
    who = h.lines("alice")
    assert len("\r\n".join(who)) > 4096
    assert [ln.split()[1] for ln in who] == ["352"] * 61 + ["315"]
    assert not h.conns["alice"].closed
    h.send("alice", "PING alive")
    assert h.lines("alice") == [":irc.test PONG irc.test alive"]


def test_many_commands_in_one_read_reach_a_client_that_reads(make_harness):
    """Lines of one read are handled together (up to 128 per pass) before the outboxes
    are written; their replies together may pass the SendQ without closing a reader."""
    h = make_harness(limits={"sendq": 4096}, flood={"enabled": False})
    h.register("alice")
    conn = Connection(h.server)
    conn.client = h.clients["alice"]  # the harness client, fed through the real line framing
    conn.data_received(b"".join(b"PING :%s\r\n" % (b"%03d" % i + b"y" * 200) for i in range(40)))
    h.server.flush_all()
    pongs = h.lines("alice")
    assert len(pongs) == 40 and sum(len(p) for p in pongs) > 4096
    assert pongs[-1] == ":irc.test PONG irc.test 039" + "y" * 200
    assert not h.conns["alice"].closed


def test_a_read_of_many_lines_is_handled_in_passes_in_order(make_harness):
    """A read of 300 lines is handled 128 lines per pass, the outboxes written in between;
    CR LF and a bare LF both end a line, and an unfinished last line waits for its end."""
    h = make_harness(flood={"enabled": False})
    h.register("alice")
    conn = Connection(h.server)
    conn.client = h.clients["alice"]  # the harness client, fed through the real line framing
    chunk = b"".join(b"PING :%03d%s" % (i, b"\r\n" if i % 2 else b"\n") for i in range(300))
    pong = ":irc.test PONG irc.test {:03d}".format

    async def feed() -> list[list[str]]:
        passes = []
        conn.data_received(chunk + b"PING :ta")
        h.server.flush_all()
        passes.append(h.lines("alice"))
        while conn.blocked:
            await asyncio.sleep(0)  # one turn of the loop: the next pass runs
            passes.append(h.lines("alice"))
        assert bytes(conn.inbuf) == b"PING :ta"
        conn.data_received(b"il\r\n")
        h.server.flush_all()
        passes.append(h.lines("alice"))
        return passes

    passes = h.run(feed())
    assert passes == [
        [pong(i) for i in range(128)],
        [pong(i) for i in range(128, 256)],
        [pong(i) for i in range(256, 300)],
        [":irc.test PONG irc.test tail"],
    ]
    assert not conn.inbuf and not conn.blocked


def test_a_line_held_by_flood_control_keeps_its_place(make_harness):
    """A line that flood control holds back is retried first: the lines after it in the
    same read wait behind it, and none is lost or handled twice."""
    h = make_harness(flood={"burst": 2, "per_second": 1000})
    h.register("alice")
    h.clock.advance(10)  # a full bucket
    conn = Connection(h.server)
    conn.client = h.clients["alice"]

    async def feed() -> None:
        conn.data_received(b"".join(b"PING :%d\r\n" % i for i in range(5)))
        assert conn.blocked and bytes(conn.inbuf) == b"PING :2\r\nPING :3\r\nPING :4\r\n"
        while conn.blocked:
            h.clock.advance(1)
            conn._resume()

    h.run(feed())
    h.server.flush_all()
    assert h.lines("alice") == [f":irc.test PONG irc.test {i}" for i in range(5)]


def test_sendq_overflow_during_the_ping_tick(make_harness):
    """The same when the overflow happens while the tick walks every client to send PING."""
    h = make_harness(limits={"sendq": 4096}, timeouts={"ping_interval": 10})
    for name in ("a1", "a2", "a3", "a4"):
        h.register(name)
    a2 = h.clients["a2"]
    h.conns["a2"].backlog = 10  # not reading
    a2.outbuf.append(b"x" * 4090)
    a2.outlen += 4090
    h.tick(11)
    assert h.lines("a2") == ["x" * 4090 + "PING irc.test", "ERROR :Closing link: 127.0.0.1 (SendQ exceeded)"]
    for name in ("a1", "a3", "a4"):
        assert h.lines(name) == ["PING irc.test"]


ODD_ARGUMENTS = [
    "", ":", ": ", "*", "0", "-1", "#", "#a", "#a,#a", ",", ",,,", "alice", "bob,#a", "+", "-", "+-+-",
    "x" * 450, "\u00e9\u00e8", "\x01ACTION waves\x01", "#a :", "#a +b", "#a +k :", "#a +l 99999999999999999999",
    "#a +ov", "#a b", "* *", "a b c d e f g h i j k l m n o", "%tcuihsnfdlaor,1", "#a %", "#a %,",
    "L", "C", "S", "+ ,", "- a", "LS 302", "REQ :", "REQ :-", "END", ":-", "*!*@*", "$a:x", "@#a :x",
    "~#a :x", "@ :x", "!", "a!b@c", "#a 0", "#a :" + "t" * 400,
]


def test_no_input_makes_a_handler_fail(make_harness, caplog):
    """Bad input gets a clear reply, never a traceback: every verb in the command table, with odd arguments,
    from a registered client with every capability and from an unregistered one, never ends in
    FAIL ... INTERNAL_ERROR or a logged handler error."""
    h = make_harness()
    caps = [c.name for c in h.server.caps.offered(h.server) if c.name != "sasl"]
    h.register("alice", caps=caps)
    h.register("bob")
    h.send("alice", "JOIN #a")
    h.send("bob", "JOIN #a")
    h.connect("u")
    replies = 0
    with caplog.at_level(logging.ERROR, logger="pircd"):
        for verb in sorted(h.server.commands.specs):
            if verb == "QUIT":
                continue
            for arg in ODD_ARGUMENTS:
                for who in ("alice", "u"):
                    h.send(who, f"@label=l1;+x=y {verb} {arg}".strip())
                    lines = h.lines(who)
                    replies += len(lines)
                    assert not [ln for ln in lines if "INTERNAL_ERROR" in ln], (who, verb, arg, lines)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert replies > 5000
    assert not h.clients["alice"].closing and not h.clients["u"].closing


class _HeldTransport(asyncio.Transport):
    """A socket whose peer reads only when the test says so (``drain``): it keeps what is
    written and pauses its protocol past ``high`` bytes, as asyncio's transports do."""

    def __init__(self) -> None:
        super().__init__()
        self.held = bytearray()
        self.high = 65536
        self.writing_paused = False
        self.protocol: Connection | None = None

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.high = 65536 if high is None else high

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("192.0.2.9", 40000) if name == "peername" else default

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.held += data
        if not self.writing_paused and len(self.held) > self.high:
            self.writing_paused = True
            self.protocol.pause_writing()  # type: ignore[union-attr]

    def get_write_buffer_size(self) -> int:
        return len(self.held)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def drain(self) -> bytes:
        data = bytes(self.held)
        self.held.clear()
        if self.writing_paused:
            self.writing_paused = False
            self.protocol.resume_writing()  # type: ignore[union-attr]
        return data


def test_lines_wait_while_the_clients_output_waits(make_harness):
    """While a client's socket holds more than the transport's high-water mark, its next
    lines wait (they are not answered into an ever larger buffer); once it reads, they are
    handled in order, and nothing reaches the SendQ."""
    h = make_harness(limits={"sendq": 8192}, flood={"enabled": False})
    conn = Connection(h.server)
    transport = _HeldTransport()
    transport.protocol = conn
    conn.connection_made(transport)
    assert transport.high == h.server.delivery.write_at == 2048  # a quarter of the SendQ
    conn.data_received(b"NICK reader\r\nUSER r 0 * :R\r\n")
    h.server.flush_all()
    transport.drain()
    conn.data_received(b"".join(b"PING :%03d%s\r\n" % (i, b"y" * 300) for i in range(100)))
    h.server.flush_all()
    got = transport.drain()  # the first write passed the high-water mark: the rest waited
    rounds = 1
    assert 0 < got.count(b" PONG ") < 100 and conn.inbuf
    while b" PONG irc.test 099" not in got:
        h.server.flush_all()
        got += transport.drain()  # reading resumes the lines
        rounds += 1
        assert rounds < 100
    pongs = [line for line in got.split(b"\r\n") if line]
    assert pongs == [b":irc.test PONG irc.test %03d%s" % (i, b"y" * 300) for i in range(100)]
    assert rounds > 2
    assert conn.client is not None and not conn.client.closing


def test_a_closed_connection_is_aborted_after_a_grace_only_when_output_waits(make_harness):
    """QUIT closes the socket after its last lines; a client that does not take them is cut off
    after a grace (10 s), and a socket with nothing left to send needs no timer at all."""
    from ircd.net import connection

    class Closing(_HeldTransport):
        def __init__(self, reads: bool) -> None:
            super().__init__()
            self.reads = reads  # the client takes each write at once: nothing stays buffered
            self.sent = bytearray()

        def write(self, data: bytes | bytearray | memoryview) -> None:
            (self.sent if self.reads else self.held).extend(data)

        def close(self) -> None:
            pass

    h = make_harness()
    timers: list[tuple[float, object]] = []
    h.loop.call_later = lambda delay, fn, *args: timers.append((delay, fn))  # type: ignore[method-assign]

    async def quit_on(transport: Closing) -> None:
        conn = Connection(h.server)
        transport.protocol = conn
        conn.connection_made(transport)
        conn.data_received(b"NICK q%d\r\nUSER q 0 * :Q\r\n" % len(timers))
        conn.data_received(b"QUIT\r\n")

    reader = Closing(reads=True)
    h.run(quit_on(reader))
    assert reader.sent.endswith(b"ERROR :Closing link: 192.0.2.9 (Quit:)\r\n")
    assert timers == []
    stuck = Closing(reads=False)
    h.run(quit_on(stuck))
    assert stuck.held.endswith(b"ERROR :Closing link: 192.0.2.9 (Quit:)\r\n")
    assert timers == [(connection._CLOSE_GRACE, stuck.abort)]


def test_new_connections_register_a_few_per_pass_while_registered_clients_go_first(make_harness):
    """A storm of registrations is spread over passes of the event loop (64 lines of connections
    not registered yet per pass, in order); a registered client's line in the same pass is
    answered in that pass, and every newcomer registers."""
    from ircd.net.connection import _ARRIVAL_LINES, Arrivals

    h = make_harness(flood={"enabled": False}, connections={"max_per_ip": 1000, "throttle_count": 1000})
    h.register("alice")
    alice = Connection(h.server)
    alice.client = h.clients["alice"]

    async def storm() -> list[int]:
        h.server.arrivals = Arrivals(asyncio.get_running_loop())
        newcomers = []
        for i in range(100):
            conn = Connection(h.server)
            transport = _HeldTransport()
            transport.protocol = conn
            conn.connection_made(transport)
            conn.data_received(b"NICK n%03d\r\nUSER n 0 * :N\r\n" % i)
            newcomers.append(conn)
        alice.data_received(b"PING :first\r\n")
        h.server.flush_all()
        assert h.lines("alice") == [":irc.test PONG irc.test first"]
        registered = []
        while len(registered) < 100 or any(c.blocked for c in newcomers):
            registered.append(sum(c.client is not None and c.client.registered for c in newcomers))
            await asyncio.sleep(0)  # one pass of the loop
        return registered

    passes = h.run(storm())
    assert passes[0] == _ARRIVAL_LINES // 2  # NICK and USER each
    assert passes[1] == _ARRIVAL_LINES
    assert max(passes) == 100
    assert sorted(c.nick for c in h.server.clients if c.registered and c.nick.startswith("n")) == [
        f"n{i:03d}" for i in range(100)
    ]
