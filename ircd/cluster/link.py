"""What the nodes of a cluster tell each other, over NATS (``nats-py``).

Subjects, under ``pircd.<network>``:

- ``hello``: a node that starts says so here, to every node (the one subject all share).
- ``node.<name>``: everything else for one node, in one stream: the network's changes
  (a user arrived, changed nick, joined, parted, left; the network as a node sees it, to a
  node that said hello; a node going away), and the lines for that node's clients, already
  formatted where they were said, in frames of (client id, bytes).

One subject per receiving node is what keeps order: NATS delivers one publisher's messages
on one subject in the order they were published, and every message from node A to node B
(a change of state, then the lines that follow from it) takes the same subject, so B
applies a JOIN before it hands its clients the lines said after it. A change for everyone
is published once per peer (the nodes this node has exchanged state with); messages are
published in the order they were queued, by one task.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
from collections.abc import Callable
from typing import Any

log = logging.getLogger("pircd.cluster")

__all__ = ["Frames", "Joiner", "Link", "pack_lines", "shown", "split", "unpack_lines"]

# a frame of lines: how many clients get the bytes, the bytes' length; then the clients' ids (8
# bytes each), then the bytes. A line said to a channel goes to each of its members on a node in
# one frame, not one per member.
_FRAME = struct.Struct("!II")
_LINES = b"L"  # the first byte of a message of lines; a change is a JSON object ("{")
# the first byte of a piece of a message longer than NATS takes in one (its max_payload, 1 MB by
# default; a burst of a big node): then the sender's name's length and name, then M (more follow)
# or E (the end), then the piece. One publisher's pieces arrive in order on one subject.
_PART = b"P"


def shown(url: str) -> str:
    """A NATS URL as logs and errors show it: without a user name or password in it."""
    scheme, sep, rest = url.partition("://")
    return f"{scheme}{sep}{rest.rpartition('@')[2]}"


Frames = list[tuple[list[int], bytes]]  # (the clients, the bytes each of them gets), in order


def pack_lines(frames: Frames, limit: int | None = None) -> list[bytes]:
    """The frames as messages of lines, each at most ``limit`` bytes (a frame longer than that
    alone in its message: ``split`` cuts it)."""
    messages, parts, size = [], [_LINES], 1
    for idents, data in frames:
        count = len(idents)
        frame = _FRAME.pack(count, len(data)) + struct.pack(f"!{count}Q", *idents) + data
        if limit is not None and size + len(frame) > limit and len(parts) > 1:
            messages.append(b"".join(parts))
            parts, size = [_LINES], 1
        parts.append(frame)
        size += len(frame)
    messages.append(b"".join(parts))
    return messages


def split(payload: bytes, limit: int, node: str) -> list[bytes]:
    """``payload`` in pieces of at most ``limit`` bytes, which ``Joiner`` puts together again."""
    head = _PART + bytes([len(node)]) + node.encode()
    room = limit - len(head) - 1
    pieces = [payload[at:at + room] for at in range(0, len(payload), room)]
    return [head + (b"E" if n == len(pieces) - 1 else b"M") + piece for n, piece in enumerate(pieces)]


class Joiner:
    """Pieces of the messages of each sending node, put together again."""

    def __init__(self) -> None:
        self.pending: dict[str, bytearray] = {}

    def piece(self, data: bytes) -> bytes | None:
        """The whole message once ``data`` was its last piece; None while pieces are to come."""
        size = data[1]
        node = data[2:2 + size].decode()
        kept = self.pending.setdefault(node, bytearray())
        kept += data[3 + size:]
        if data[2 + size:3 + size] == b"M":
            return None
        del self.pending[node]
        return bytes(kept)

    def restarted(self, node: str) -> None:
        self.pending.pop(node, None)  # what it was sending before is not coming


def unpack_lines(payload: bytes) -> Frames:
    frames: Frames = []
    at = 1
    while at < len(payload):
        count, size = _FRAME.unpack_from(payload, at)
        at += _FRAME.size
        idents = list(struct.unpack_from(f"!{count}Q", payload, at))
        at += 8 * count
        frames.append((idents, payload[at:at + size]))
        at += size
    return frames


class Link:
    """This node's connection to NATS. ``on_op(op)`` gets every change another node
    published (never this node's own); ``on_lines(frames)`` the lines for local clients."""

    def __init__(self, network: str, node: str, servers: list[str],
                 on_op: Callable[[dict[str, Any]], None],
                 on_lines: Callable[[Frames], None]) -> None:
        self.node = node
        self.servers = servers
        self.prefix = f"pircd.{network}"
        self.on_op = on_op
        self.on_lines = on_lines
        self.nc: Any = None
        self.peers: set[str] = set()  # the nodes that have this node's state, and get its changes
        self._queue: asyncio.Queue[tuple[str, bytes] | None] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._lines: dict[str, Frames] = {}  # node -> frames not yet queued
        self._joiner = Joiner()

    async def start(self) -> None:
        import nats

        try:
            # the first connection must succeed (a node that cannot reach the others does not
            # start); once up, the client reconnects for as long as it takes
            self.nc = await nats.connect(servers=self.servers, name=f"pircd-{self.node}",
                                         allow_reconnect=True, max_reconnect_attempts=2,
                                         reconnect_time_wait=0.5, connect_timeout=2,
                                         error_cb=self._error, disconnected_cb=self._disconnected,
                                         reconnected_cb=self._reconnected)
        except Exception as exc:
            where = ", ".join(shown(url) for url in self.servers)
            raise RuntimeError(f"cannot reach NATS at {where}: {exc or type(exc).__name__}") from None
        # from here on: as long as it takes (nats-py reads the option there at each attempt)
        self.nc.options["max_reconnect_attempts"] = -1
        await self.nc.subscribe(f"{self.prefix}.hello", cb=self._received)
        await self.nc.subscribe(f"{self.prefix}.node.{self.node}", cb=self._received)
        await self.nc.flush()  # the subscriptions are in place before anyone is told we are here
        self._sender = asyncio.get_running_loop().create_task(self._send())

    async def _error(self, exc: Exception) -> None:
        log.warning("cluster NATS error: %s", exc or type(exc).__name__)

    async def _disconnected(self) -> None:
        log.warning("cluster NATS disconnected")

    async def _reconnected(self) -> None:
        url = self.nc.connected_url if self.nc is not None else None
        log.info("cluster NATS reconnected server=%s", f"{url.hostname}:{url.port}" if url else "?")

    async def stop(self) -> None:
        if self._sender is not None:
            self._queue.put_nowait(None)
            await self._sender
        if self.nc is not None:
            await self.nc.drain()

    # out -----------------------------------------------------------------

    def hello(self) -> None:
        hello = json.dumps({"op": "hello", "from": self.node}).encode()
        self._queue.put_nowait((f"{self.prefix}.hello", hello))

    def broadcast(self, op: dict[str, Any]) -> None:
        """A change for every peer."""
        if self.peers:
            op["from"] = self.node
            payload = json.dumps(op).encode()
            for node in self.peers:
                self._queue.put_nowait((f"{self.prefix}.node.{node}", payload))

    def to_node(self, node: str, op: dict[str, Any]) -> None:
        op["from"] = self.node
        self._queue.put_nowait((f"{self.prefix}.node.{node}", json.dumps(op).encode()))

    def forward(self, node: str, ident: int, data: bytes) -> None:
        """Lines for a client of ``node``: gathered for this event-loop pass, sent together. The
        same bytes for one client after another (a fan-out) make one frame: only order within
        each client's lines matters, and a run of one line to many keeps it."""
        frames = self._lines.get(node)
        if frames is None:
            if not self._lines:
                asyncio.get_running_loop().call_soon(self._queue_lines)
            frames = self._lines[node] = []
        if frames and frames[-1][1] == data:
            frames[-1][0].append(ident)
        else:
            frames.append(([ident], bytes(data)))

    def _queue_lines(self) -> None:
        lines, self._lines = self._lines, {}
        limit = self._limit()
        for node, frames in lines.items():
            subject = f"{self.prefix}.node.{node}"
            for message in pack_lines(frames, limit):
                self._queue.put_nowait((subject, message))

    def _limit(self) -> int:
        """The most one NATS message carries (the server says, at connecting)."""
        nc = self.nc
        return nc.max_payload if nc is not None and nc.max_payload > 0 else 1024 * 1024

    async def _send(self) -> None:
        while True:
            item = await self._queue.get()
            if item is None:
                await self.nc.flush()
                return
            subject, payload = item
            try:
                limit = self._limit()
                if len(payload) <= limit:
                    await self.nc.publish(subject, payload)
                else:
                    for piece in split(payload, limit, self.node):
                        await self.nc.publish(subject, piece)
            except Exception as exc:  # NATS away: the message is lost, as a netsplit loses lines
                log.warning("cluster publish failed subject=%s: %s", item[0], exc)

    # in ------------------------------------------------------------------

    async def _received(self, msg: Any) -> None:
        data = msg.data
        try:
            if data[:1] == _PART:
                whole = self._joiner.piece(data)
                if whole is None:
                    return
                data = whole
            if data[:1] == _LINES:
                self.on_lines(unpack_lines(data))
                return
            op = json.loads(data)
            if op.get("op") == "hello":
                self._joiner.restarted(op.get("from", ""))
            if op.get("from") != self.node:  # this node's own hello comes back to it
                self.on_op(op)
        except Exception:
            log.exception("cluster message not applied subject=%s", msg.subject)
