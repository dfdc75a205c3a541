"""The HTTP client of outgoing webhook requests: httpx over httpcore, with a pool of our own and a
network backend that checks every address it connects to (``resolve``). Imported with the first
request (``Sender.post``), so that a server that sends none does not load httpx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpcore
import httpx

from ext.pircan.webhooks.rules import Network
from ext.pircan.webhooks.sender import KEEPALIVE_S, resolve

__all__ = ["NETWORK_ERRORS", "TIMEOUTS", "make_client", "read_some"]

TIMEOUTS = (TimeoutError, httpcore.TimeoutException, httpx.TimeoutException)
NETWORK_ERRORS = (httpcore.NetworkError, httpx.NetworkError, OSError)


def make_client(allowed: Callable[[], list[Network]], max_idle: int) -> tuple[httpx.AsyncClient, Any]:
    """(the client, its pool)."""
    pool = _Pool(_CheckedBackend(allowed), max_idle=max_idle)
    return httpx.AsyncClient(transport=_Transport(pool), follow_redirects=False, trust_env=False), pool


def timeout(total_s: float, connect_s: float) -> httpx.Timeout:
    return httpx.Timeout(total_s, connect=connect_s)


class _CheckedBackend(httpcore.AnyIOBackend):
    """Resolves and checks the host itself, then connects to a checked address."""

    def __init__(self, allowed: Callable[[], list[Network]]) -> None:
        self.allowed = allowed

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        last: Exception | None = None
        for address in await resolve(host, port, self.allowed()):
            try:
                return await super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:  # the next address of the host, if any
                last = exc
        assert last is not None
        raise last


Key = tuple[bytes, bytes, int]  # (scheme, host, port)


class _Pool:
    """Kept-alive connections by origin, each an httpcore single connection. httpcore's own pool
    walks every waiting request and every connection at each request, so its cost per request
    grows with the requests in flight (twice the CPU at 20 at once); here taking and returning a
    connection is a dictionary look-up. At most ``max_idle`` connections wait for reuse."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend, max_idle: int) -> None:
        self.backend = backend
        self.max_idle = max_idle
        self.ssl_context = httpx.create_ssl_context(trust_env=False)
        self.idle: dict[Key, list[httpcore.AsyncHTTPConnection]] = {}
        self.idle_count = 0

    async def take(self, key: Key) -> httpcore.AsyncHTTPConnection:
        waiting = self.idle.get(key)
        while waiting:
            conn = waiting.pop()
            self.idle_count -= 1
            if not waiting:
                del self.idle[key]
            if conn.is_available() and not conn.has_expired():
                return conn
            await conn.aclose()
        return httpcore.AsyncHTTPConnection(origin=httpcore.Origin(*key), ssl_context=self.ssl_context,
                                            keepalive_expiry=KEEPALIVE_S, network_backend=self.backend)

    async def give_back(self, key: Key, conn: httpcore.AsyncHTTPConnection) -> None:
        if conn.is_idle() and not conn.is_closed() and self.idle_count < self.max_idle:
            self.idle.setdefault(key, []).append(conn)
            self.idle_count += 1
        else:
            await conn.aclose()

    async def prune(self, everything: bool = False) -> None:
        """Close the connections that waited too long (or all)."""
        for key in list(self.idle):
            keep = []
            for conn in self.idle.pop(key):
                if not everything and conn.is_available() and not conn.has_expired():
                    keep.append(conn)
                else:
                    self.idle_count -= 1
                    await conn.aclose()
            if keep:
                self.idle[key] = keep


class _Body(httpx.AsyncByteStream):
    """A response's body; closing it hands the connection back to the pool."""

    def __init__(self, inner: Any, pool: _Pool, key: Key, conn: httpcore.AsyncHTTPConnection) -> None:
        self._inner = inner
        self._done = (pool, key, conn)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._inner:
            yield part

    async def aclose(self) -> None:
        pool, key, conn = self._done
        try:
            await self._inner.aclose()
        finally:
            await pool.give_back(key, conn)  # or closes it, when it is not idle (a body left unread...)


class _Transport(httpx.AsyncBaseTransport):
    """httpx's transport interface over the pool above (no proxies, nothing from the environment)."""

    def __init__(self, pool: _Pool) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        key = (url.raw_scheme, url.raw_host, url.port or (443 if url.raw_scheme == b"https" else 80))
        conn = await self._pool.take(key)
        try:
            response = await conn.handle_async_request(core)
        except BaseException:
            await conn.aclose()
            raise
        return httpx.Response(status_code=response.status, headers=response.headers,
                              stream=_Body(response.stream, self._pool, key, conn), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._pool.prune(everything=True)


async def read_some(resp: httpx.Response, limit: int, kept: bytearray | None = None) -> None:
    """Read at most ``limit`` bytes of the body (raw: no decompression), then stop; into ``kept``."""
    read = 0
    if limit <= 0:
        return
    async for chunk in resp.aiter_raw():
        read += len(chunk)
        if kept is not None:
            kept += chunk[: max(0, limit - len(kept))]
        if read >= limit:
            return
