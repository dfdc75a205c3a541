"""One TCP (or TLS) connection: framing, ordered line handling, writes.

An asyncio Protocol rather than a task per connection: an idle client costs
a transport and two small objects, and a received chunk with many lines is
handled in one callback. Lines are cut at ``\\n`` (a trailing ``\\r`` is
dropped; any other CR is refused by the parser). A line whose message part
passes 512 bytes, or whose tags pass 8191 bytes, is answered with 417 (with
its label, and flood control applies as to any line) and skipped.

Ordering: while a line's async handler runs, or while flood control holds
the connection back, later lines wait in the input buffer; past
``_PAUSE_AT`` buffered bytes the socket stops being read (TCP backpressure
on a flooding client, no one else is affected). A connection that has not
registered yet also waits for its turn when many register at once
(``Arrivals``: a bounded number of their lines per pass of the event loop).

Output: while the transport holds more than its high-water mark
(``Delivery.write_at``: a quarter of the SendQ, at most 64 KiB) of unsent output
for this client (``pause_writing`` until ``resume_writing``), its next lines
wait too. A client that asks for a lot in one go (WHO on many
channels) is then answered as fast as it reads, and only a client that does
not read at all reaches the SendQ (``Server.write_out``).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import deque
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Final

from ircd.proto.lines import MAX_LINE, MAX_TAGS

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.server import Server

log = logging.getLogger("pircd")

# Final: compiled, these are C constants rather than lookups in the module's dict
_MAX_RAW: Final = MAX_TAGS + MAX_LINE
_PAUSE_AT: Final = 65536
_CLOSE_GRACE = 10.0  # seconds a closing socket may take to drain before it is aborted
_LINES_PER_PASS: Final = 128  # lines handled per callback before the outboxes are written
# lines of connections that have not registered yet, handled per pass of the event loop (Arrivals)
_ARRIVAL_LINES: Final = 64


def peer_ip(peer: object) -> str:
    """The client's address from a socket's peer name (an IPv4 address, not its IPv6 form)."""
    ip = peer[0] if isinstance(peer, tuple) and peer else "unix"
    if not isinstance(ip, str):
        return "unix"
    return ip[7:] if ip.startswith("::ffff:") else ip


class Arrivals:
    """The lines of connections that have not registered yet: at most ``_ARRIVAL_LINES`` in each
    pass of the event loop; past that, those connections wait their turn, in order, for the next
    passes. Registered clients' lines never wait here. After a restart, thousands of clients
    reconnect at once, and a pass of the loop handled every registration that had arrived (a
    thousand, each with its welcome burst: 40-60 ms) before anyone else's answer went out; now a
    pass holds about 30 registrations."""

    __slots__ = ("loop", "budget", "waiting", "armed", "current")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.budget = _ARRIVAL_LINES
        self.waiting: deque[Connection] = deque()
        self.armed = False  # the next pass's turn is scheduled
        self.current: Connection | None = None  # the connection whose turn it is

    def admit(self, conn: Connection) -> bool:
        """May ``conn`` handle its next line now? If not, it waits in line (``Connection._resume``
        is called when its turn comes)."""
        if not self.armed:
            self.armed = True
            self.loop.call_soon(self._next_pass)
        if self.budget > 0 and (conn is self.current or not self.waiting):
            self.budget -= 1
            return True
        if not conn.queued:
            conn.queued = True
            if conn is self.current:
                self.waiting.appendleft(conn)  # its turn goes on in the next pass
            else:
                self.waiting.append(conn)
        return False

    def _next_pass(self) -> None:
        self.armed = False
        self.budget = _ARRIVAL_LINES
        waiting = self.waiting
        while waiting and self.budget > 0:
            conn = waiting.popleft()
            conn.queued = False
            self.current = conn
            try:
                conn._resume()
            finally:
                self.current = None
        if waiting and not self.armed:
            self.armed = True
            self.loop.call_soon(self._next_pass)


class Connection(asyncio.Protocol):
    __slots__ = (
        "server", "transport", "client", "inbuf", "blocked", "skipping", "paused", "output_full", "port",
        "reserved", "queued",
    )

    def __init__(self, server: "Server", port: int = 0, reserved: bool = False) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.client: "Client | None" = None
        self.inbuf = bytearray()
        self.blocked = False
        self.skipping = False
        self.paused = False
        self.output_full = False  # the transport asked to pause writing
        self.port = port
        # its place was taken when it was accepted (TLS: before the handshake, Server.reserve)
        self.reserved = reserved
        self.queued = False  # waiting for its turn to register (Arrivals)

    # asyncio.Protocol ----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.set_write_buffer_limits(high=self.server.delivery.write_at)  # type: ignore[union-attr]
        ip = peer_ip(transport.get_extra_info("peername"))
        ssl_object = transport.get_extra_info("ssl_object")
        tls = ssl_object is not None
        client = self.server.connect(self, ip, tls=tls, port=self.port, reserved=self.reserved)
        self.reserved = False
        self.client = client
        if client is not None and ssl_object is not None:
            cert = ssl_object.getpeercert(binary_form=True)
            if cert:
                client.certfp = hashlib.sha256(cert).hexdigest()
        self.server.flush_all()

    def data_received(self, data: bytes) -> None:
        client = self.client
        if client is None or client.closing:
            return
        if self.blocked or self.output_full:
            self.inbuf += data
            if len(self.inbuf) > _PAUSE_AT and not self.paused:
                self.paused = True
                self.transport.pause_reading()  # type: ignore[union-attr]
            return
        if self.inbuf:  # an unfinished line (or lines put off) from before comes first
            self.inbuf += data
            data = bytes(self.inbuf)
            self.inbuf = bytearray()
        self._process(data)

    def connection_lost(self, exc: Exception | None) -> None:
        client = self.client
        if client is not None:
            self.server.connection_lost(client)
            self.server.delivery.flush_all()
        self.client = None

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def pause_writing(self) -> None:
        self.output_full = True  # the next lines wait until the client has read some output

    def resume_writing(self) -> None:
        self.output_full = False
        if not self.blocked:  # else the async handler, the flood timer or the slice resumes
            self._resume()

    # Conn (what Client needs) --------------------------------------------

    def write(self, data: bytes | bytearray) -> None:
        transport = self.transport
        if transport is not None and not transport.is_closing():
            transport.write(data)

    def buffered(self) -> int:
        transport = self.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def close(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.close()
        if transport.get_write_buffer_size():
            # output the client has not taken yet: a client that never reads would hold the
            # socket open for good; one with nothing left to send is closed by close() itself
            asyncio.get_running_loop().call_later(_CLOSE_GRACE, transport.abort)

    # line handling -------------------------------------------------------

    def _process(self, buf: bytes) -> None:
        """Handle the complete lines at the start of ``buf`` (``self.inbuf`` is empty);
        what is not handled in this pass goes to ``self.inbuf``."""
        client = self.client
        if client is None:
            return
        intake = self.server.intake
        arrivals: Arrivals | None = self.server.arrivals
        # One split for up to a pass of lines; the last item is the rest: b"" when the
        # read ended with a line (the usual case), else an unfinished line or more lines.
        lines = buf.split(b"\n", _LINES_PER_PASS)
        last = len(lines) - 1
        i = 0
        while i < last:  # the callers checked that the connection is open and not blocked
            if self.output_full:  # possibly set by this very pass's output (Server.write_out)
                break
            if not client.registered and arrivals is not None and not arrivals.admit(self):
                self.blocked = True  # until its turn (Arrivals._next_pass resumes it)
                break
            line = lines[i]
            i += 1
            if self.skipping:  # the end of an over-long line that was answered already
                self.skipping = False
                continue
            if line and line[-1] == 13:
                line = line[:-1]
            result: float | Awaitable[None] | None
            if len(line) > MAX_LINE - 2 and _too_long(line):
                result = intake.line_too_long(client, line)
            else:
                result = intake.handle_line(client, line)
            if result is None:
                if client.closing:
                    break
                continue
            self.blocked = True
            if isinstance(result, float):
                i -= 1  # retry this very line when flood control allows
                asyncio.get_running_loop().call_later(result, self._resume)
            else:
                task = asyncio.ensure_future(result)
                task.add_done_callback(self._resume)
            break
        if i < last or self.blocked or client.closing:  # stopped early, or waits for a handler
            self.inbuf += b"\n".join(lines[i:])
            return
        rest = lines[last]
        if not rest:
            return
        if last == _LINES_PER_PASS and b"\n" in rest:
            # Let the outboxes drain before the next lines: a fan-out of a 2,000-line
            # read would otherwise pile 2,000 lines into every recipient's buffer
            # (memory, cache misses, SendQ) before one write.
            self.blocked = True
            asyncio.get_running_loop().call_soon(self._resume)
        elif len(rest) > _MAX_RAW:
            # no line end in sight: answer once, then drop up to the next newline
            if not self.skipping:
                intake.line_too_long(client, rest, hold=False)
                self.skipping = True
            return
        self.inbuf += rest

    def _resume(self, _task: object = None) -> None:
        self.blocked = False
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        if self.client is not None and not self.client.closing:
            if self.inbuf:
                buf = bytes(self.inbuf)
                self.inbuf = bytearray()
                self._process(buf)
            self.server.delivery.flush_all()


def _too_long(line: bytes) -> bool:
    """Whether a line (without CR LF) passes 510 bytes of message or 8190 of tags."""
    if line[:1] == b"@":
        space = line.find(b" ")
        if space < 0:
            return len(line) > MAX_TAGS - 1
        return len(line) - space - 1 > MAX_LINE - 2
    return len(line) > MAX_LINE - 2
