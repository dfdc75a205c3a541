"""Pages that change without a reload: a server-sent event stream per open page.

PIRCAN calls ``on_event`` for every event row it commits (``Pircan.event_hooks``): a new request to
an agent, a decision, an agreement, a message. A stream is open for a signed-in person and hears
the events of that person and of its agents; it sends one ``change`` event (the page then fetches
itself again and swaps the parts marked ``data-live``: static/portal.js) and otherwise a comment
every ``KEEPALIVE`` seconds, which also ends a stream whose session is over. Nothing is polled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

__all__ = ["KEEPALIVE", "PER_SESSION", "Streams"]

KEEPALIVE = 20.0
PER_SESSION = 8  # streams one session may hold open (tabs)
_STOP = "stop"


class _Stream:
    __slots__ = ("accounts", "queue")

    def __init__(self, accounts: set[str]) -> None:
        self.accounts = accounts
        self.queue: asyncio.Queue[str] = asyncio.Queue()


class Streams:
    def __init__(self) -> None:
        self.open: set[_Stream] = set()

    def on_event(self, recipient: str, kind: str, event_id: int, at: int) -> None:
        for stream in self.open:
            # one pending "change" is enough: the page reloads its parts once for all of them
            if recipient in stream.accounts and stream.queue.empty():
                stream.queue.put_nowait(kind)

    def stop_all(self) -> None:
        for stream in self.open:
            stream.queue.put_nowait(_STOP)

    async def serve(self, accounts: set[str], alive: Callable[[], bool], scope: dict, receive: Any,
                    send: Any) -> None:
        """An ASGI response: ``text/event-stream`` until the client goes, ``alive()`` turns False,
        or the listener stops."""
        stream = _Stream(accounts)
        self.open.add(stream)

        async def watch() -> None:  # the client went away: end at once rather than at the next write
            while (await receive())["type"] != "http.disconnect":
                pass
            stream.queue.put_nowait(_STOP)

        watcher = asyncio.ensure_future(watch())
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"),
                (b"x-accel-buffering", b"no")]})
            await send({"type": "http.response.body", "body": b"retry: 3000\n\n", "more_body": True})
            while True:
                try:
                    kind: str | None = await asyncio.wait_for(stream.queue.get(), KEEPALIVE)
                except TimeoutError:
                    kind = None
                if kind == _STOP or not alive():
                    break
                chunk = b": keep-alive\n\n" if kind is None else f"event: change\ndata: {kind}\n\n".encode()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # the client went away while we wrote (uvicorn's ClientDisconnected)
            pass
        finally:
            self.open.discard(stream)
            watcher.cancel()
