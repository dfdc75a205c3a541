"""Whether an HTTP request's answer reached a client that is still there.

A call that takes something for its caller (MCP ``wait_for_messages``, the A2A gateway's blocking
send, which marks the reply read) counts it as taken only once the answer was written while the
client was connected. ``Watched`` wraps an HTTP route: it sees the ASGI ``http.disconnect`` (and,
once the request body is read and the call asked, watches for it), and the response body being written. The call
``hold``s what it took with a way to put it back; a disconnect before the answer was written puts
everything held back (unread again), and a call still waiting hears of it (``gone``) and ends.

The MCP SDK runs a tool in its session's task, not the request's: it finds the request's
``Delivery`` in the ASGI scope (``DELIVERY_KEY``); the A2A SDK calls the handler in the request's
own task, which finds it in ``current``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from typing import Any, Callable

__all__ = ["Delivery", "Watched", "DELIVERY_KEY", "current", "of_scope"]

log = logging.getLogger("pircd.pircan")

DELIVERY_KEY = "pircan.delivery"
_CURRENT: contextvars.ContextVar[Delivery | None] = contextvars.ContextVar("pircan_delivery", default=None)


class Delivery:
    """One HTTP request's answer: taken items to put back if the client leaves before it is written.

    The client's disconnect is watched for only once something asks (``hold``, ``gone``): most
    requests take nothing, and a task per request watching for it was a noticeable part of a call."""

    def __init__(self, watch: Callable[[], None] | None = None) -> None:
        self._gone: asyncio.Event | None = None  # the client disconnected (made when asked for)
        self._watch = watch  # starts watching for the disconnect (``Watched``)
        self.written = False  # a part of the answer was written after something was held
        self._held: list[Callable[[], None]] = []

    @property
    def gone(self) -> asyncio.Event:
        """Set once the client disconnected (watched for from now on)."""
        if self._gone is None:
            self._gone = asyncio.Event()
        if self._watch is not None:
            watch, self._watch = self._watch, None
            watch()
        return self._gone

    def hold(self, put_back: Callable[[], None]) -> bool:
        """Something was taken for this request's answer; False (and put back at once) when the
        client is gone already."""
        if self.gone.is_set():
            put_back()
            return False
        self._held.append(put_back)
        return True

    def disconnected(self) -> None:
        if self._gone is None:
            self._gone = asyncio.Event()
        elif self._gone.is_set():
            return
        self._gone.set()
        if not self.written:
            for put_back in self._held:
                try:
                    put_back()
                except Exception:  # noqa: BLE001 - one failed undo must not keep the others
                    log.exception("putting back an undelivered answer failed")
        self._held.clear()

    def wrote(self, body: bytes) -> None:
        # an SSE comment (": ping") is a keep-alive, not the answer
        if self._held and body and not body.startswith(b":") and not (self._gone and self._gone.is_set()):
            self.written = True


def current() -> Delivery | None:
    """The Delivery of the HTTP request whose task this is (the A2A handler), if any."""
    return _CURRENT.get()


def of_scope(scope: Any) -> Delivery | None:
    return None if scope is None else scope.get(DELIVERY_KEY)


class Watched:
    """ASGI middleware giving each HTTP request a ``Delivery``. Once the request's body is read and
    the delivery asked about its client, a task reads the next message, the disconnect."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watcher: asyncio.Task[None] | None = None
        read = wanted = False  # the body was read; the delivery asked for the watcher

        def watch() -> None:
            nonlocal watcher, wanted
            wanted = True
            if read and watcher is None:
                watcher = asyncio.get_running_loop().create_task(until_gone())

        async def until_gone() -> None:  # after the body: the next message is the disconnect
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    delivery.disconnected()
                    return

        async def watched_receive() -> Any:
            nonlocal read
            message = await receive()
            if message["type"] == "http.disconnect":
                delivery.disconnected()
            elif not message.get("more_body", False) and not read:
                read = True
                if wanted:
                    watch()
            return message

        async def watched_send(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body":
                delivery.wrote(message.get("body", b""))

        delivery = Delivery(watch)
        scope[DELIVERY_KEY] = delivery  # the scope is this request's own
        token = _CURRENT.set(delivery)
        try:
            await self.app(scope, watched_receive, watched_send)
        finally:
            _CURRENT.reset(token)
            if watcher is not None:
                watcher.cancel()
