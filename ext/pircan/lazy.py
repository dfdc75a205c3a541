"""HTTP transports built on their first request: MCP, A2A and the portal.

Their libraries (the MCP SDK, the A2A SDK with protobuf, Jinja2) are most of what an idle server
would otherwise hold in memory (about 55 MiB of 100 measured, docs/benchmarks.md), and many
servers never get a request on some of their paths. So each transport registers its routes at
start-up as ``Lazy`` proxies; the first request to any of them imports the transport's modules (in
a worker thread, so that IRC goes on meanwhile), builds its ASGI apps on the event loop, and hands
every request on from then. A request during the build waits for it; a build that fails answers
503 and is tried again by the next request. What a build starts (the MCP session manager's task)
is stopped with the listener.

The first request to a path therefore pays for the import: 0.5-2 s for MCP on the shared machine of
docs/benchmarks.md ("Memory at rest"), depending on its load.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from types import ModuleType
from typing import Any

__all__ = ["Built", "Lazy", "load"]

log = logging.getLogger("pircd.pircan")


_LOADED: dict[str, ModuleType] = {}


async def load(module: str) -> ModuleType:
    """``module``, imported in a worker thread the first time (a library of many modules takes the
    event loop's thread for a noticeable time otherwise). Not from ``sys.modules``: a module is there
    while its import still runs, half made; ``import_module`` waits for it."""
    found = _LOADED.get(module)
    if found is None:
        found = _LOADED[module] = await asyncio.to_thread(importlib.import_module, module)
    return found


class Built:
    """What a build made: its ASGI apps by name, and what to call when the listener stops (``stop``:
    as it starts to stop, before open responses end; ``close``: after)."""

    def __init__(self) -> None:
        self.apps: dict[str, Any] = {}
        self.stop: list[Callable[[], None]] = []
        self.close: list[Callable[[], Awaitable[None]]] = []


class _Proxy:
    """One of the apps of a ``Lazy``, as an ASGI app (a plain function would be served by Starlette
    as a request-response endpoint)."""

    def __init__(self, lazy: Lazy, name: str) -> None:
        self.lazy = lazy
        self.name = name

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        built = self.lazy.built or await self.lazy.build()
        app = built.apps.get(self.name) if built is not None and not self.lazy.closed else None
        if app is None:  # the build failed, or the listener is stopping
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", b"5")]})
            await send({"type": "http.response.body", "body": f"{self.lazy.what} is not available\n".encode()})
            return
        await app(scope, receive, send)


class Lazy:
    """The apps of one transport, made by ``make(built)`` (a coroutine that fills ``built``) after
    ``modules`` were imported; ``app(name)`` is the proxy to register for each."""

    def __init__(self, what: str, modules: list[str], make: Callable[[Built], Awaitable[None]]) -> None:
        self.what = what
        self.modules = modules
        self.make = make
        self.built: Built | None = None
        self.closed = False
        self._building: asyncio.Future[Built | None] | None = None

    def app(self, name: str) -> Any:
        return _Proxy(self, name)

    async def build(self) -> Built | None:
        """The transport's apps, built now unless a build is under way (then its result); None when
        the build failed."""
        if self.built is not None:
            return self.built
        if self._building is None:
            self._building = asyncio.ensure_future(self._build())
        return await asyncio.shield(self._building)

    async def _build(self) -> Built | None:
        try:
            for module in self.modules:
                await load(module)
            built = Built()
            await self.make(built)
        except Exception:
            log.exception("%s could not be started", self.what)
            self._building = None  # the next request tries again
            return None
        self.built = built
        return built

    def stopping(self) -> None:
        """The listener starts to stop (``ExtensionAPI.http_on_stop``)."""
        for hook in self.built.stop if self.built is not None else ():
            hook()

    @contextlib.asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """For ``ExtensionAPI.http_lifespan``: on the way out, close what the build started."""
        self.closed = False
        try:
            yield
        finally:
            self.closed = True
            building, self._building = self._building, None
            if building is not None and not building.done():
                building.cancel()
            built, self.built = self.built, None
            for close in reversed(built.close if built is not None else []):
                try:
                    await close()
                except Exception:
                    log.exception("closing %s failed", self.what)
