"""A socket-free harness: drive a Server with lines, read each client's output.

Like h11's ConnectionPair: ``h.send("alice", "JOIN #x")`` runs the command to
completion (async handlers included) and flushes every outbox, so a test
reads exactly the lines each client received, with no sleeps and no sockets.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable

from ircd.state.client import Client
from ircd.config import Config, from_dict
from ircd.proto.lines import Message, parse_line
from ircd.server import Server
from tests import dbs


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeConn:
    def __init__(self) -> None:
        self.data = bytearray()
        self.closed = False
        self.backlog = 0  # pretend bytes stuck in the kernel (SendQ tests)

    def write(self, data: bytes | bytearray) -> None:
        if not self.closed:
            self.data += data
            if self.backlog:  # a client that does not read: what is written waits behind the rest
                self.backlog += len(data)

    @property
    def output_full(self) -> bool:
        return self.backlog > 0

    def buffered(self) -> int:
        return self.backlog

    def close(self) -> None:
        self.closed = True


def config(**sections: dict[str, Any]) -> Config:
    # the HTTP listener on an ephemeral port, so that live servers never collide on 6680
    data: dict[str, Any] = {"server": {"name": "irc.test", "network": "TestNet", "extensions": []},
                            "http": {"listen": ["127.0.0.1:0"]}}
    for key, values in sections.items():
        data.setdefault(key, {}).update(values)
    return from_dict(data)


class Harness:
    def __init__(
        self,
        cfg: Config | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        db: str | None = None,
        extensions: bool = False,
        clock_start: float | None = None,
    ) -> None:
        """``db``: a database file to give the server its store (accounts, channels): on PostgreSQL
        runs (tests/dbs.py), a database of its own that the path names;
        ``extensions``: load the extensions named in the config."""
        self.clock = FakeClock() if clock_start is None else FakeClock(clock_start)
        self.loop = loop or asyncio.new_event_loop()
        self.server = Server(cfg or config(), clock=self.clock)
        self.clients: dict[str, Client] = {}
        self.conns: dict[str, FakeConn] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.server.spawner = self._spawn
        if db is not None:
            from ircd.app import attach_store

            attach_store(self.server, dbs.database(db))
        self.apis: dict[str, Any] = {}
        if extensions:
            from ircd.api import load_extensions

            self.apis = {api.name: api for api in load_extensions(self.server)}
        for start in self.server.on_startup:
            self.run(start())

    def server_api(self, name: str) -> Any:
        """The ``ExtensionAPI`` the extension ``name`` was set up with."""
        return self.apis[name]

    def settle(self) -> None:
        """Let background work finish: queued store writes are committed."""
        if self.server.store is not None:
            self.run(self.server.store.flush())

    def close(self) -> None:
        for stop in reversed(self.server.on_shutdown):
            self.run(stop())
        self.loop.close()

    def run(self, awaitable: Any) -> Any:
        result = self.loop.run_until_complete(awaitable)
        self._drain()
        return result

    def _spawn(self, coro: Any) -> Any:
        """Background work becomes a task that the harness finishes before a send returns."""
        task = self.loop.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        if not self.loop.is_running():
            self._drain()
        return task

    def _drain(self) -> None:
        while self.tasks and not self.loop.is_running():
            self.loop.run_until_complete(asyncio.wait(list(self.tasks)))

    # connections -------------------------------------------------------

    def connect(self, name: str, ip: str = "127.0.0.1", tls: bool = False) -> Client | None:
        conn = FakeConn()
        client = self.server.connect(conn, ip, tls=tls)
        self.conns[name] = conn
        if client is not None:
            self.clients[name] = client
        return client

    def send(self, name: str, line: str | bytes) -> None:
        raw = line.encode() if isinstance(line, str) else line
        client = self.clients[name]
        while True:
            result = self.server.handle_line(client, raw)
            if isinstance(result, float):
                self.clock.advance(result)
                continue
            if result is not None:
                self.run(result)
            break
        self.server.flush_all()

    def register(self, name: str, nick: str | None = None, caps: Iterable[str] = (), ip: str = "127.0.0.1") -> Client:
        client = self.connect(name, ip=ip)
        assert client is not None
        caps = list(caps)
        if caps:
            self.send(name, "CAP LS 302")
            self.send(name, "CAP REQ :" + " ".join(caps))
        self.send(name, f"NICK {nick or name}")
        self.send(name, f"USER {name} 0 * :{name.title()} Realname")
        if caps:
            self.send(name, "CAP END")
        assert client.registered, self.lines(name)
        self.take(name)
        return client

    def alice_and_bob_in(self, channel: str) -> None:
        """alice (who gets op, joining first) and bob registered and in ``channel``, outboxes empty."""
        self.register("alice")
        self.register("bob")
        self.send("alice", f"JOIN {channel}")
        self.send("bob", f"JOIN {channel}")
        self.take("alice")
        self.take("bob")

    def disconnect(self, name: str) -> None:
        self.server.connection_lost(self.clients[name])
        self.server.flush_all()

    # reading -----------------------------------------------------------

    def take(self, name: str) -> bytes:
        conn = self.conns[name]
        data = bytes(conn.data)
        conn.data.clear()
        return data

    def lines(self, name: str) -> list[str]:
        return [ln for ln in self.take(name).decode("utf-8", "replace").split("\r\n") if ln]

    def messages(self, name: str) -> list[Message]:
        return [m for m in (parse_line(ln.encode()) for ln in self.lines(name)) if m is not None]

    def numerics(self, name: str) -> list[str]:
        return [m.command for m in self.messages(name)]

    def tick(self, seconds: float = 0.0) -> None:
        self.clock.advance(seconds)
        self.server.tick()

    def advance(self, seconds: float) -> None:
        """Move the clock on and fire the timers that came due (without a tick)."""
        self.clock.advance(seconds)
        self.server.timers.run_due()
        self.server.flush_all()
