"""Local delivery: the outboxes of this process's connections.

Commands call down into this layer; it never calls up into them. A line for a
client is appended to its outbox (``Client.send``, or ``relay`` for a fan-out);
the client is marked dirty once, and ``flush_all`` hands every dirty outbox to
its socket once per event-loop pass (write coalescing). An outbox past
``write_at`` goes out at once; a client whose socket holds more than the SendQ
is closed here and forgotten (``on_dropped``) at the next ``flush_all``.

Invariant: safe in the middle of a fan-out loop over a channel's members or the
client set: a SendQ overflow only marks the client closing; removing it from
channels waits for the next ``flush_all``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ircd.proto.lines import format_line

if TYPE_CHECKING:
    from ircd.delivery.replies import Relay
    from ircd.state.client import Client

__all__ = ["Delivery", "WRITE_AT"]

WRITE_AT = 65536  # the largest write high-water mark (asyncio's and uvloop's default)

log = logging.getLogger("pircd")


def _ignore(client: Client) -> None:
    return None


class Delivery:
    """The dirty list, the writes and the fan-out loop (``ircd.state.client.Outlet``)."""

    def __init__(self, sendq_limit: int) -> None:
        self.sendq_limit = sendq_limit
        self.write_at = WRITE_AT
        self.set_sendq(sendq_limit)
        # counters for /metrics: plain ints, so the per-line path pays one addition
        self.lines_out = 0
        self.sendq_drops = 0
        self._dirty: list[Client] = []
        self._dropped: list[Client] = []  # SendQ overflows waiting to be forgotten
        self._flush_pending = False
        # how a flush is run at the end of the event-loop pass (ircd.net sets loop.call_soon)
        self.schedule: Callable[[Callable[[], None]], Any] = lambda fn: None
        # a client closed for its SendQ is forgotten through this (Server.forget)
        self.on_dropped: Callable[[Client], None] = _ignore

    def set_sendq(self, sendq_limit: int) -> None:
        self.sendq_limit = sendq_limit
        # An outbox past this goes to the socket before the end of the pass, and it is each
        # connection's write high-water mark: past it the client's next lines wait (see
        # Connection). A quarter of the SendQ: the transport holds at most about twice this
        # plus one reply before the pause takes effect, so a client that reads is not
        # closed for what it asked for, short of a single reply of about half the SendQ.
        self.write_at = min(sendq_limit // 4, WRITE_AT)

    def mark_dirty(self, client: Client) -> None:
        self._dirty.append(client)
        if not self._flush_pending:
            self._flush_pending = True
            self.schedule(self.flush_all)

    def flush_all(self) -> None:
        self._flush_pending = False
        dirty = self._dirty
        if dirty:
            self._dirty = []
            for client in dirty:  # every recipient of a fan-out, once per pass of up to 128 lines
                client.dirty = False
                if client.outbuf:
                    self.write_out(client)
        if self._dropped:
            dropped, self._dropped = self._dropped, []
            for client in dropped:
                self.on_dropped(client)

    def write_out(self, client: Client) -> None:
        """Hand ``client``'s outbox to its socket.

        ``flush_all`` does this at the end of a pass, and a send does it at once
        when the outbox passes ``write_at`` (one large reply, many commands in one
        read). The SendQ bounds what the client has not taken: a client that reads
        takes the bytes from the socket (the kernel's buffer holds them meanwhile);
        what the socket could not take waits in the connection's buffer, and past
        the limit the client is closed. Safe in the middle of a fan-out loop.
        """
        out = client.outbuf
        if not out:
            return
        # an entry is one line, but for replies and batches (Client.send_lines): counting the line
        # ends of the bytes instead made a fan-out's delivered line cost half as much again
        lines = len(out)
        extra = client.extra_lines
        if extra:
            lines += extra
            client.extra_lines = 0
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()  # the list is kept for the next lines
        client.outlen = 0
        if client.closing:
            return
        conn = client.conn
        conn.write(data)
        self.lines_out += lines
        # Below the high-water mark (write_at <= sendq / 4) the SendQ cannot be exceeded,
        # so the socket is asked for its buffer size only past it.
        if conn.output_full and conn.buffered() > self.sendq_limit:
            self.sendq_exceeded(client)

    def sendq_exceeded(self, client: Client) -> None:
        """Close a client that does not read: its socket holds more than the SendQ.

        This runs inside a send, often in the middle of a fan-out loop over a
        channel's members or the client set, so the client is only closed here
        (no more output, ERROR written); removing it from channels and telling
        its peers waits for the next ``flush_all``.
        """
        if client.closing:
            return
        log.info("sendq exceeded id=%d nick=%s", client.id, client.nick)
        client.closing = True
        self.sendq_drops += 1
        self.lines_out += 1
        try:
            client.conn.write(format_line("ERROR", [f"Closing link: {client.host} (SendQ exceeded)"]))
            client.conn.close()
        except Exception:  # the socket may already be gone
            pass
        self._dropped.append(client)
        if not self._flush_pending:
            self._flush_pending = True
            self.schedule(self.flush_all)

    def close(self, client: Client, line: bytes) -> None:
        """Write what ``client`` has queued and a last ``line`` (its ERROR), then close it."""
        self.lines_out += len(client.outbuf) + client.extra_lines + 1
        data = client.take_output() + line
        client.closing = True
        try:
            client.conn.write(data)
            client.conn.close()
        except Exception:  # the socket may already be gone
            pass

    def relay(self, recipients: Iterable[Client], relay: Relay, exclude: Client | None = None) -> None:
        """Append one formatted line to each recipient's outbox.

        This is the inner loop of every fan-out, so ``Client.send`` is inlined:
        per recipient, one list append of the shared line, the byte count, the
        dirty mark and the SendQ check.
        """
        body = relay.body
        body_len = len(body)
        limit = self.write_at
        dirty = self._dirty
        for client in recipients:
            if client is exclude or client.closing:
                continue
            if client.tag_profile:
                data = relay.for_client(client)
                pending = client.outlen + len(data)
            else:
                data = body
                pending = client.outlen + body_len
            client.outbuf.append(data)
            client.outlen = pending
            if not client.dirty:
                client.dirty = True
                dirty.append(client)
            if pending > limit:
                self.write_out(client)  # safe mid-loop: leaving channels waits for flush_all
        if dirty and not self._flush_pending:
            self._flush_pending = True
            self.schedule(self.flush_all)
