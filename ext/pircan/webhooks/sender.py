"""Outgoing webhook requests (httpx), with the safety rules of docs/webhooks.md.

* The destination is checked where the connection is made: the host is resolved once, every
  address it resolves to must be public (or in ``pircan.webhook_allowed_networks``), and the socket
  connects to an address that was checked, so a DNS answer that changes between the check and the
  connection (DNS rebinding) cannot reach a refused address. The request still names the URL's host
  (``Host``) and TLS checks the certificate against it (SNI). Connections are pooled per host.
* A connect timeout and a total timeout; at most ``pircan.webhook_max_response_bytes`` of the
  response are read (raw, never decompressed); redirects are not followed; no proxy from the
  environment.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from ext.pircan.ids import hexid
from ext.pircan.webhooks.rules import Network, Target, address_refusal, networks, parse_url, signature_header
from ext.pircan.webhooks.store import Endpoint

__all__ = ["USER_AGENT", "DestinationError", "Outcome", "Policy", "Sender", "check_url", "resolve", "signed_headers"]

USER_AGENT = "pircd-webhooks/0.1"
KEEPALIVE_S = 30.0  # an idle connection is kept this long for the next request to its host
_ERROR_CHARS = 200


@dataclass(frozen=True, slots=True)
class Policy:
    connect_timeout_s: float
    timeout_s: float
    max_response_bytes: int
    allowed: list[Network]

    @staticmethod
    def from_config(cfg: Any) -> Policy:
        """The policy of PIRCAN's configuration (``ext.pircan.config.PircanConfig``)."""
        return Policy(cfg.webhook_connect_timeout_ms / 1000, cfg.webhook_timeout_ms / 1000,
                      cfg.webhook_max_response_bytes, networks(cfg.webhook_allowed_networks))


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one request ended: ``status`` None when no HTTP response came (``error`` says why)."""

    status: int | None
    error: str
    elapsed_ms: int
    body: bytes = b""  # what was read of the answer, when the caller asked for it

    @property
    def ok(self) -> bool:
        """A 2xx answer that reported no failure (an A2A endpoint can answer 200 with an error)."""
        return self.status is not None and 200 <= self.status < 300 and not self.error


class DestinationError(Exception):
    """The URL's host does not resolve (``INVALID_URL``) or resolves to an address that is not
    allowed (``ADDRESS_NOT_ALLOWED``)."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def signed_headers(endpoint: Endpoint, delivery_id: int | str, kind: str, body: bytes, now: float) -> dict[str, str]:
    """The headers of one request: ``PIRCAN-Signature`` signs ``<PIRCAN-Timestamp>.<body>`` (unix seconds)."""
    stamp = str(int(now))
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "pircan-delivery": delivery_id if isinstance(delivery_id, str) else hexid(delivery_id),
        "pircan-event": kind,
        "pircan-timestamp": stamp,
        "pircan-signature": signature_header(endpoint.secrets(int(now * 1000)), stamp, body),
    }


async def resolve(host: str, port: int, allowed: list[Network]) -> list[str]:
    """The addresses to connect to for ``host``, each one checked; raises DestinationError."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise DestinationError("INVALID_URL", f"{host} does not resolve ({exc})"[:_ERROR_CHARS]) from None
    addresses: list[str] = []
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # an IPv6 scope id is not part of the address
        ip = ipaddress.ip_address(text)
        why = address_refusal(ip, allowed)
        if why is not None:
            raise DestinationError(
                "ADDRESS_NOT_ALLOWED", f"{host} resolves to {ip}, a {why} address (pircan.webhook_allowed_networks)"
            )
        if text not in addresses:
            addresses.append(text)
    if not addresses:
        raise DestinationError("INVALID_URL", f"{host} does not resolve")
    return addresses


async def check_url(url: str, allowed: list[Network]) -> Target:
    """A webhook URL as it may be set: well-formed, and resolving to allowed addresses only (it is
    checked again at every connection). Raises DestinationError."""
    target = parse_url(url)
    if isinstance(target, str):
        raise DestinationError("INVALID_URL", target)
    await resolve(target.host, target.port, allowed)
    return target


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


class Sender:
    """One pooled HTTP client for every webhook request of the server (made on first use, on the
    running loop)."""

    def __init__(self, policy: Callable[[], Policy], max_idle: int) -> None:
        """``max_idle``: kept-alive connections at most (the worker bounds the requests in flight)."""
        self.policy = policy
        self.max_idle = max_idle
        self._client: httpx.AsyncClient | None = None
        self._pool: _Pool | None = None

    def _make_client(self) -> httpx.AsyncClient:
        self._pool = _Pool(_CheckedBackend(lambda: self.policy().allowed), max_idle=self.max_idle)
        return httpx.AsyncClient(transport=_Transport(self._pool), follow_redirects=False, trust_env=False)

    async def prune(self) -> None:
        """Close kept-alive connections that were not used for a while."""
        if self._pool is not None:
            await self._pool.prune()

    async def post(self, url: str, body: bytes, headers: dict[str, str], keep: int = 0) -> Outcome:
        """POST ``body``; with ``keep``, the answer's first ``keep`` bytes (at least
        ``max_response_bytes``) are read and returned in the outcome."""
        if self._client is None:
            self._client = self._make_client()
        policy = self.policy()
        started = time.monotonic()
        timeout = httpx.Timeout(policy.timeout_s, connect=policy.connect_timeout_s)
        status: int | None = None
        error = ""
        kept = bytearray()
        try:
            async with asyncio.timeout(policy.timeout_s):
                async with self._client.stream("POST", url, content=body, headers=headers, timeout=timeout) as resp:
                    status = resp.status_code
                    await _read_some(resp, max(keep, policy.max_response_bytes), kept if keep else None)
        except DestinationError as exc:
            error = exc.text
        except (TimeoutError, httpcore.TimeoutException, httpx.TimeoutException):
            error = f"no answer within {policy.timeout_s:g} s" if status is None else ""
        except (httpcore.NetworkError, httpx.NetworkError, OSError) as exc:
            error = f"connection failed: {exc or type(exc).__name__}" if status is None else ""
        except Exception as exc:  # noqa: BLE001 - a malformed answer, ...: a failed try, whatever it was
            error = f"{type(exc).__name__}: {exc}" if status is None else ""
        elapsed = int((time.monotonic() - started) * 1000)
        if status is not None and not 200 <= status < 300:
            error = f"HTTP {status}" + (" (redirects are not followed)" if 300 <= status < 400 else "")
        return Outcome(status, " ".join(error.split())[:_ERROR_CHARS], elapsed, bytes(kept))

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


async def _read_some(resp: httpx.Response, limit: int, kept: bytearray | None = None) -> None:
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
