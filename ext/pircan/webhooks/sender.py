"""Outgoing webhook requests (httpx, in ``client.py``), with the safety rules of docs/webhooks.md.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ext.pircan.ids import hexid
from ext.pircan.lazy import load
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


class Sender:
    """One pooled HTTP client for every webhook request of the server (made on first use, on the
    running loop)."""

    def __init__(self, policy: Callable[[], Policy], max_idle: int) -> None:
        """``max_idle``: kept-alive connections at most (the worker bounds the requests in flight)."""
        self.policy = policy
        self.max_idle = max_idle
        self._client: Any = None  # httpx.AsyncClient (ext/pircan/webhooks/client.py)
        self._pool: Any = None

    async def prune(self) -> None:
        """Close kept-alive connections that were not used for a while."""
        if self._pool is not None:
            await self._pool.prune()

    async def post(self, url: str, body: bytes, headers: dict[str, str], keep: int = 0) -> Outcome:
        """POST ``body``; with ``keep``, the answer's first ``keep`` bytes (at least
        ``max_response_bytes``) are read and returned in the outcome."""
        client = await load("ext.pircan.webhooks.client")  # httpx: loaded with the first request
        if self._client is None:
            self._client, self._pool = client.make_client(lambda: self.policy().allowed, self.max_idle)
        policy = self.policy()
        started = time.monotonic()
        timeout = client.timeout(policy.timeout_s, policy.connect_timeout_s)
        status: int | None = None
        error = ""
        kept = bytearray()
        try:
            async with asyncio.timeout(policy.timeout_s):
                async with self._client.stream("POST", url, content=body, headers=headers, timeout=timeout) as resp:
                    status = resp.status_code
                    await client.read_some(resp, max(keep, policy.max_response_bytes), kept if keep else None)
        except DestinationError as exc:
            error = exc.text
        except client.TIMEOUTS:
            error = f"no answer within {policy.timeout_s:g} s" if status is None else ""
        except client.NETWORK_ERRORS as exc:
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
