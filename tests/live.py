"""Live-test helpers: a server on an ephemeral loopback port and a small blocking client.

The server runs in-process on its own event loop in a background thread and
binds port 0. Tests synchronise with ``PING <token>`` / ``PONG``: everything a
client receives before the PONG for its token was caused by what it sent
before the PING (the server handles one connection's lines in order).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from ircd.config import Config
from ircd.proto.lines import Message, parse_line
from ircd.server import Server
from tests import dbs

_tokens = itertools.count(1)


def whole_seconds_left(window: float, started: float) -> range:
    """The retry times correct for a throttle window of ``window`` seconds that began after
    ``started`` (the server's clock, ``time.time()``) and refused by now: its remaining seconds,
    rounded up as the server rounds them. Under load the clock moves between the window's start
    and the refusal, so 59 is as right as 60; more than the time gone since ``started`` is not."""
    gone = time.time() - started
    return range(max(1, math.ceil(window - gone)), math.ceil(window) + 1)


class LiveServer:
    def __init__(
        self, config: Config, setup: Callable[[Server], None] | None = None, db: str | None = None
    ) -> None:
        """``db``: a database file to give the server its store (accounts, PIRCAN); on PostgreSQL
        runs (tests/dbs.py), a database of its own that the path names."""
        from ircd.api import load_extensions
        from ircd.app import attach_store
        from ircd.net.runner import run_server

        self.config = config
        self.server = Server(config)
        if db is not None:
            attach_store(self.server, dbs.database(db))
        load_extensions(self.server)
        if setup is not None:
            setup(self.server)
        self.loop = asyncio.new_event_loop()
        self.addresses: list[tuple[str, int]] = []
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None

        async def main() -> None:
            self._stop = asyncio.Event()
            await run_server(self.server, ready=self._on_ready, stop=self._stop)

        def thread() -> None:
            try:
                self.loop.run_until_complete(main())
            except BaseException as exc:  # noqa: BLE001 - whatever stopped the server is raised by start()
                self._error = exc
                self._ready.set()

        self._thread = threading.Thread(target=thread, daemon=True)

    def _on_ready(self, addresses: list[tuple[str, int]]) -> None:
        self.addresses = addresses
        self._ready.set()

    def start(self) -> LiveServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("server did not start")
        if self._error is not None:
            raise self._error
        return self

    @property
    def port(self) -> int:
        return self.addresses[0][1]

    @property
    def http_url(self) -> str:
        """The HTTP listener's base URL (``http://127.0.0.1:<port>``)."""
        host, port = self.server.http.addresses[0]
        return f"http://{host}:{port}"

    def call(self, fn: Callable[[], object]) -> object:
        """Run ``fn`` on the server's loop and return its result."""
        future: asyncio.Future[object] = asyncio.run_coroutine_threadsafe(_wrap(fn), self.loop)
        return future.result(10)

    def until(self, owner: Any, method: str, condition: Callable[[], object]) -> None:
        """Return once ``condition()`` holds for server state no client can observe (a wait in
        place, a connection released). It is checked on the server's loop when the watch starts and
        right after each call of ``owner.method`` (wrapped meanwhile), so nothing is polled and no
        change is missed in between. An object of the compiled build (docs/compiled.md) takes no
        wrapper, and its compiled callers would not call one: there it is checked after each pass
        of the server's loop instead (every change of server state happens in one)."""
        ready = threading.Event()
        original = getattr(owner, method)
        passes: list[bool] = []  # set: checking after each pass of the loop

        def checked(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if condition():
                ready.set()
            return result

        def each_pass() -> None:
            if condition():
                ready.set()
            elif passes:
                self.loop.call_soon(each_pass)

        def watch() -> None:
            try:
                setattr(owner, method, checked)
            except (AttributeError, TypeError):  # a compiled class: its attributes are fixed
                passes.append(True)
            if condition():
                ready.set()
            elif passes:
                self.loop.call_soon(each_pass)

        self.call(watch)
        try:
            assert ready.wait(10), f"not reached after {method}"
        finally:
            def unwatch() -> None:
                passes.clear()
                if method in getattr(owner, "__dict__", {}):
                    del owner.__dict__[method]

            self.call(unwatch)

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)
        if not self.loop.is_closed() and not self._thread.is_alive():
            self.loop.close()


async def _wrap(fn: Callable[[], object]) -> object:
    return fn()


class IRCClient:
    """A blocking line client for tests; ``sync()`` waits for the PONG of a fresh token."""

    def __init__(self, port: int, host: str = "127.0.0.1", *, tls: ssl.SSLContext | None = None,
                 timeout: float = 10.0, server_hostname: str | None = None, source: str | None = None) -> None:
        """``source``: the local address to connect from (e.g. 127.0.0.2, to be another client IP)."""
        sock = socket.create_connection((host, port), timeout=timeout,
                                        source_address=(source, 0) if source else None)
        self.sock: socket.socket = (
            tls.wrap_socket(sock, server_hostname=server_hostname or host) if tls else sock
        )
        self.buf = b""
        self.closed = False

    def send(self, line: str | bytes) -> None:
        data = line if isinstance(line, bytes) else line.encode()
        if not data.endswith(b"\n"):
            data += b"\r\n"
        self.sock.sendall(data)

    def read_line(self) -> str | None:
        while b"\n" not in self.buf:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, OSError):
                chunk = b""
            if not chunk:
                self.closed = True
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r").decode("utf-8", "replace")

    def read_until(self, predicate: Callable[[Message], bool]) -> list[Message]:
        out = []
        while True:
            line = self.read_line()
            if line is None:
                raise ConnectionError(f"closed before the expected line; got {out!r}")
            msg = parse_line(line.encode())
            if msg is None:
                continue
            out.append(msg)
            if predicate(msg):
                return out

    def sync(self) -> list[Message]:
        """Everything received up to the PONG answering a fresh PING (the PONG excluded)."""
        token = f"sync{next(_tokens)}"
        self.send(f"PING {token}")
        lines = self.read_until(lambda m: m.command == "PONG" and m.params[-1] == token)
        return lines[:-1]

    def register(self, nick: str, caps: list[str] | None = None) -> list[Message]:
        if caps:
            self.send("CAP LS 302")
            self.send("CAP REQ :" + " ".join(caps))
        self.send(f"NICK {nick}")
        self.send(f"USER {nick} 0 * :{nick}")
        if caps:
            self.send("CAP END")
        return self.read_until(lambda m: m.command in ("376", "422"))

    def login(self, account: str, password: str, caps: tuple[str, ...] = (), *, nick: str | None = None,
              sync: bool = True) -> list[Message]:
        """Register as ``nick`` (the account's name by default), logged in to ``account`` with SASL
        PLAIN, with ``caps`` requested too; asserts the login succeeded. Returns what came up to the
        end of the MOTD (and, with ``sync``, up to a PONG after it)."""
        nick = nick or account
        self.send("CAP LS 302")
        self.send("CAP REQ :" + " ".join(("sasl", *caps)))
        self.send(f"NICK {nick}")
        self.send(f"USER {nick} 0 * :{nick}")
        self.send("AUTHENTICATE PLAIN")
        got = self.read_until(lambda m: m.command == "AUTHENTICATE")
        self.send("AUTHENTICATE " + base64.b64encode(f"\0{account}\0{password}".encode()).decode())
        got += self.read_until(lambda m: m.command in ("903", "904"))
        assert got[-1].command == "903", got
        self.send("CAP END")
        got += self.read_until(lambda m: m.command in ("376", "422"))
        return got + self.sync() if sync else got

    def read_all_until_close(self) -> list[str]:
        out = []
        while True:
            line = self.read_line()
            if line is None:
                return out
            out.append(line)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def pircan_server(tmp_path: Any, **sections: Any) -> LiveServer:
    """A started live server with the PIRCAN extension, its database in ``tmp_path``, durability
    normal and no flood control; ``sections`` are merged into those config sections."""
    from tests.harness import config

    base: dict[str, Any] = {
        "server": {"listen": ["127.0.0.1:0"], "extensions": ["pircan"]},
        "storage": {"durability": "normal"},
        "flood": {"enabled": False},
        # like flood control, the HTTP call limit is the subject of its own tests only (test_http_limits):
        # a test that makes a hundred MCP calls in a second must not meet it by chance on a fast machine
        "pircan": {"http_calls_burst": 10_000},
    }
    for key, value in sections.items():
        base[key] = {**base.get(key, {}), **value}
    return LiveServer(config(**base), db=str(tmp_path / "pircd.db")).start()
