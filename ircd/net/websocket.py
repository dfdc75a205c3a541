"""IRC over WebSocket (IRCv3 "WebSocket support"), served by the HTTP listener.

A WebSocket connection is an IRC client like any other: the endpoint makes a
``Connection`` (the same protocol object a TCP socket gets) and drives it
through ``WebSocketTransport``, a small asyncio-transport look-alike. So
registration, flood control, the line limits (417), the UTF-8 policy, SendQ
and the output pause all apply unchanged; only framing differs.

Framing, as the spec says: "each message MUST consist of a single IRC line,
except that servers and clients MUST NOT include trailing \\r or \\n". A
received message becomes one line (a trailing CR LF is tolerated and
dropped; a message with a LF or CR LF inside it is refused whole with
``FAIL <verb> INVALID_CHARACTERS``, as a line with a CR inside is); what the connection writes is cut at CR LF and sent one line per
message. The subprotocol is the client's first of ``binary.ircv3.net`` and
``text.ircv3.net``; without either, text. Text messages carry only UTF-8:
"Servers MUST NOT relay non-UTF-8 content to clients using text messages",
so invalid bytes become U+FFFD.

Invariant: the endpoint reads the next message only while the connection
reads (``pause_reading``), and the writer task is the only sender, so lines
go out in the order they were written.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from ircd.net.connection import Connection

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")

__all__ = ["BINARY", "TEXT", "WebSocketTransport", "choose_subprotocol", "irc_endpoint"]

BINARY = "binary.ircv3.net"
TEXT = "text.ircv3.net"


def choose_subprotocol(offered: list[str]) -> str | None:
    """ "The server MUST accept any subprotocol it supports, respecting the client's order of
    preference."""
    for name in offered:
        if name in (BINARY, TEXT):
            return name
    return None


class _TlsInfo:
    """What ``Connection`` asks of an SSL object: the HTTP listener asks for no client certificate."""

    def getpeercert(self, binary_form: bool = False) -> None:
        return None


class WebSocketTransport(asyncio.Transport):
    """Lines written by a ``Connection`` become WebSocket messages (sent by one writer task)."""

    websocket = True  # how /metrics tells a WebSocket client from a TCP one (ircd/metrics.py)

    def __init__(self, send: Any, subprotocol: str | None, peer: tuple[str, int] | None, tls: bool) -> None:
        super().__init__()
        self._send = send
        self._binary = subprotocol == BINARY
        self._subprotocol = subprotocol
        self._peer = peer
        self._tls = _TlsInfo() if tls else None
        self._protocol: Connection | None = None
        self._queue: deque[bytes] = deque()
        self._pending = b""  # an unfinished line (a write that did not end in LF)
        self._size = 0  # bytes queued, not yet sent
        self._high = 65536
        self._low = 16384
        self._writing_paused = False
        self._closing = False
        self._closed = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._reading = asyncio.Event()
        self._reading.set()
        self._writer: asyncio.Task[None] | None = None

    def start(self, protocol: Connection) -> None:
        self._protocol = protocol
        self._writer = asyncio.get_running_loop().create_task(self._write_loop())

    # asyncio.Transport ----------------------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peer
        if name == "ssl_object":
            return self._tls
        if name == "subprotocol":
            return self._subprotocol
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = 65536 if high is None else high
        self._low = self._high // 4 if low is None else low

    def get_write_buffer_size(self) -> int:
        return self._size

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        chunk = self._pending + bytes(data)
        lines = chunk.split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            self._queue.append(line)
            self._size += len(line)
        self._wakeup.set()
        if not self._writing_paused and self._size > self._high and self._protocol is not None:
            self._writing_paused = True
            self._protocol.pause_writing()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        """Send what is queued, then close the WebSocket."""
        self._closing = True
        self._wakeup.set()

    def abort(self) -> None:
        self._closing = True
        self._queue.clear()
        self._size = 0
        if self._writer is not None:
            self._writer.cancel()
        self._closed.set()

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set()

    # the endpoint's side --------------------------------------------------------

    async def wait_reading(self) -> None:
        await self._reading.wait()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    async def _write_loop(self) -> None:
        try:
            while True:
                while self._queue:
                    line = self._queue.popleft()
                    self._size -= len(line)
                    if self._binary:
                        await self._send({"type": "websocket.send", "bytes": line})
                    else:
                        await self._send({"type": "websocket.send", "text": line.decode("utf-8", "replace")})
                    if self._writing_paused and self._size <= self._low and self._protocol is not None:
                        self._writing_paused = False
                        self._protocol.resume_writing()
                if self._closing:
                    await self._send({"type": "websocket.close", "code": 1000})
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 (the peer went away under us: nothing more can be sent)
            self._queue.clear()
            self._size = 0
        finally:
            self._closing = True
            self._closed.set()


def irc_endpoint(server: Server) -> Any:
    """The ASGI endpoint that makes each WebSocket an IRC connection."""

    async def endpoint(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            return
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        subprotocol = choose_subprotocol(list(scope.get("subprotocols") or ()))
        await send({"type": "websocket.accept", "subprotocol": subprotocol})
        client_addr = scope.get("client")
        peer = (client_addr[0], client_addr[1]) if client_addr else None
        local = scope.get("server")
        port = local[1] if local and local[1] is not None else 0
        transport = WebSocketTransport(send, subprotocol, peer, tls=scope.get("scheme") == "wss")
        conn = Connection(server, port)
        transport.start(conn)
        conn.connection_made(transport)
        lost = False
        try:
            while not transport.is_closing():
                if not transport.is_reading():
                    reading = asyncio.ensure_future(transport.wait_reading())
                    closed = asyncio.ensure_future(transport.wait_closed())
                    await asyncio.wait((reading, closed), return_when=asyncio.FIRST_COMPLETED)
                    reading.cancel()
                    closed.cancel()
                    continue
                message = await receive()
                kind = message["type"]
                if kind == "websocket.disconnect":
                    lost = True
                    break
                if kind != "websocket.receive":
                    continue
                data = message.get("bytes")
                if data is None:
                    data = (message.get("text") or "").encode("utf-8")
                if data[-1:] == b"\n":
                    data = data[:-1]
                if b"\n" in data:
                    # one message is one line: a LF inside it would make it two commands. As a
                    # CR it is refused whole, like a TCP line with a CR inside (INVALID_CHARACTERS)
                    data = data.replace(b"\n", b"\r")
                conn.data_received(data + b"\n")
        finally:
            conn.connection_lost(None)
            if lost:
                transport.abort()
            else:
                await transport.wait_closed()

    return endpoint
