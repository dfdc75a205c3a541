"""floor-py: the least an IRC relay in Python on uvloop does for the benchmark's socket scenarios.

    python -m bench.floor_py PORT

The same yardstick as ``bench/floor.c``, with the same replies, in the
interpreter and on the event loop pircd runs on: one ``asyncio.Protocol``
per connection (uvloop's C accept, transport and read callbacks), every line
of a read handled at once, each connection's output of the pass collected
and written with one ``write`` when the pass ends (``call_soon``), as pircd
does. It answers NICK and USER with 001 and 376, PING with PONG, JOIN with the
JOIN to every member and 366, relays PRIVMSG to a nick or a channel, and closes
on QUIT after sending the QUIT to the channel. It checks and stores nothing.

Its CPU per unit of work is the floor of a Python server on this machine: the
kernel's share of the socket work, plus uvloop's and the interpreter's least
work per connection, read and write. What pircd spends above it is its own
work (parsing, checks, the welcome burst, history, extensions).
"""

from __future__ import annotations

import asyncio
import sys

NAME = b"floor"


class Relay:
    """The shared state: nicks, channels, and the connections with output for this pass."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.nicks: dict[bytes, Conn] = {}
        self.channels: dict[bytes, dict[Conn, None]] = {}
        self.dirty: list[Conn] = []

    def queue(self, conn: Conn, data: bytes) -> None:
        if conn.transport is None:
            return
        conn.out.append(data)
        if not conn.dirty:
            conn.dirty = True
            if not self.dirty:
                self.loop.call_soon(self.flush)
            self.dirty.append(conn)

    def flush(self) -> None:
        dirty, self.dirty = self.dirty, []
        for conn in dirty:
            conn.dirty = False
            if conn.out and conn.transport is not None:
                conn.transport.write(b"".join(conn.out))
            conn.out.clear()


class Conn(asyncio.Protocol):
    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.nick = b""
        self.registered = False
        self.channels: list[bytes] = []
        self.out: list[bytes] = []
        self.dirty = False
        self.part = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        lines = (self.part + data).split(b"\n") if self.part else data.split(b"\n")
        self.part = lines.pop()
        for line in lines:
            if self.transport is None:
                return
            self.handle(line[:-1] if line[-1:] == b"\r" else line)

    def connection_lost(self, exc: Exception | None) -> None:
        self.leave(b"Connection closed")

    def handle(self, line: bytes) -> None:
        relay = self.relay
        command, _, rest = line.partition(b" ")
        if command == b"PRIVMSG":
            if not self.registered:
                return
            target, _, text = rest.partition(b" ")
            if text[:1] == b":":
                text = text[1:]
            out = b":%s!u@127.0.0.1 PRIVMSG %s :%s\r\n" % (self.nick, target, text)
            if len(out) > 1023:  # floor.c formats into 1,024 bytes: cut, still a line
                out = out[:1021] + b"\r\n"
            if target[:1] == b"#":
                for member in relay.channels.get(target, ()):
                    if member is not self:
                        relay.queue(member, out)
            elif (peer := relay.nicks.get(target)) is not None:
                relay.queue(peer, out)
            else:
                relay.queue(self, b":floor 401 %s %s :No such nick\r\n" % (self.nick, target))
        elif command == b"PING":
            relay.queue(self, b":floor PONG floor :%s\r\n" % (rest[1:] if rest[:1] == b":" else rest))
        elif command == b"NICK":
            nick = rest.partition(b" ")[0]
            if not nick or nick in relay.nicks:
                relay.queue(self, b":floor 433 * %s :Nickname is in use\r\n" % nick)
                return
            relay.nicks.pop(self.nick, None)
            self.nick = nick
            relay.nicks[nick] = self
        elif command == b"USER":
            if not self.registered and self.nick:
                self.registered = True
                relay.queue(self, b":floor 001 %s :Welcome\r\n:floor 376 %s :End of MOTD\r\n" % (self.nick, self.nick))
        elif command == b"JOIN":
            name = rest.partition(b" ")[0]
            if not self.registered or not name or name in self.channels:
                return
            members = relay.channels.setdefault(name, {})
            members[self] = None
            self.channels.append(name)
            out = b":%s!u@127.0.0.1 JOIN %s\r\n" % (self.nick, name)
            for member in members:
                relay.queue(member, out)
            relay.queue(self, b":floor 366 %s %s :End of NAMES list\r\n" % (self.nick, name))
        elif command == b"QUIT":
            relay.queue(self, b"ERROR :Closing link\r\n")
            relay.flush()
            self.leave(b"Quit")

    def leave(self, reason: bytes) -> None:
        transport, self.transport = self.transport, None
        if transport is None:
            return
        relay = self.relay
        quit = b":%s!u@127.0.0.1 QUIT :%s\r\n" % (self.nick, reason) if self.registered else b""
        for name in self.channels:
            members = relay.channels.get(name)
            if members is None:
                continue
            members.pop(self, None)
            for member in members if quit else ():
                relay.queue(member, quit)
            if not members:
                del relay.channels[name]
        if relay.nicks.get(self.nick) is self:
            del relay.nicks[self.nick]
        transport.close()


async def serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    relay = Relay(loop)
    server = await loop.create_server(lambda: Conn(relay), "127.0.0.1", port, backlog=4096, reuse_address=True)
    print(f"floor-py: listening on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    await server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m bench.floor_py PORT", file=sys.stderr)
        return 2
    try:
        import uvloop
    except ImportError:  # pircd runs on plain asyncio there too
        loop = asyncio.new_event_loop()
    else:
        loop = uvloop.new_event_loop()
    try:
        loop.run_until_complete(serve(int(argv[0])))
    except KeyboardInterrupt:
        pass
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
