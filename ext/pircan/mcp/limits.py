"""What one caller may cost the HTTP transports (MCP, A2A): call rates, and the refusals' shapes.

Every HTTP request to /mcp and the A2A gateway passes the bearer gate (``http.py``) once, and is
counted there once, in two token buckets: one per address (before the token is checked, so that
bad tokens cost their sender too), one per account (after). A bucket holds ``burst`` calls and
refills at ``per_second``; a request that finds it empty is refused at once, without running,
with the seconds until the next call would pass. Loopback (with ``connections.exempt_loopback``)
and the trusted proxies themselves have no per-address bucket, as at accept; behind a trusted
proxy the address is the client's (``http.trusted_proxies``).

A refusal is one ``Refused`` rendered in the caller's protocol: HTTP 429 with ``Retry-After`` and
a JSON body for plain HTTP; a JSON-RPC error (code, ``retry_after_s`` in its data) for MCP, whose
SDK client raises it from the call it made; an A2A error for A2A (``ext/pircan/a2a/web.py``).
A caller that comes back before its ``Retry-After`` gets its next refusal after a pause of up to a
second (``Holds``), so ignoring it buys no more than one answer a second per connection. The log
gets one line a minute per kind of refusal, with a count (``CountedLog``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ircd.api import CountedLog

__all__ = ["Buckets", "CallLimits", "Holds", "Refuser", "mcp_refusal", "plain_refusal", "rate_limited",
           "send_json"]

log = logging.getLogger("pircd.pircan")

_PRUNE_EVERY = 60.0
HOLD_MAX = 1.0  # seconds a refusal is held at most, for a caller that ignored its Retry-After

# renders a refusal: (the request's scope, its send, the HTTP status, the refusal)
Refuser = Callable[[dict, Any, int, Refused], Awaitable[None]]

# JSON-RPC's range for server-defined errors; the PIRCAN code is in the error's data
MCP_SERVER_ERROR = -32000


class Buckets:
    """Token buckets by key: ``burst`` calls at once, refilled at ``per_second``. A key whose bucket
    is full again is forgotten (at most once a minute), so idle callers cost nothing."""

    def __init__(self) -> None:
        self._state: dict[str, tuple[float, float]] = {}  # key -> (tokens, when they were counted)
        self._next_prune = 0.0

    def take(self, key: str, burst: int, per_second: float, now: float) -> float:
        """Take one call from ``key``'s bucket: 0.0, or (nothing taken) the seconds until one is there."""
        if now >= self._next_prune:
            self.prune(burst, per_second, now)
        tokens, at = self._state.get(key, (float(burst), now))
        tokens = min(float(burst), tokens + (now - at) * per_second)
        if tokens >= 1.0:
            self._state[key] = (tokens - 1.0, now)
            return 0.0
        self._state[key] = (tokens, now)
        return (1.0 - tokens) / per_second

    def prune(self, burst: int, per_second: float, now: float) -> int:
        self._next_prune = now + _PRUNE_EVERY
        full = [k for k, (tokens, at) in self._state.items() if tokens + (now - at) * per_second >= burst]
        for key in full:
            del self._state[key]
        return len(full)

    def __len__(self) -> int:
        return len(self._state)


def rate_limited(text: str, wait: float) -> Refused:
    return Refused("RATE_LIMITED", text=text, retry_after_s=max(1, math.ceil(wait)))


class Holds:
    """How long to hold a refusal before answering it: not at all the first time, so a client that
    honours ``Retry-After`` gets its answer at once; up to ``HOLD_MAX`` seconds when the same caller
    comes back before its retry time. A client that ignores ``Retry-After`` then gets at most one
    answer a second per connection, instead of as many refusals as the event loop can write, each
    of which would delay IRC."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}  # caller -> when its last refusal said to retry
        self._next_prune = 0.0

    def hold(self, key: str, wait: float, now: float) -> float:
        if now >= self._next_prune:
            self._next_prune = now + _PRUNE_EVERY
            for gone in [k for k, until in self._until.items() if until <= now]:
                del self._until[gone]
        until = self._until.get(key, 0.0)
        self._until[key] = max(until, now + wait)
        return min(HOLD_MAX, until - now) if until > now else 0.0

    def __len__(self) -> int:
        return len(self._until)


class CallLimits:
    """The call buckets of every gate (MCP's and A2A's share them), with ``[pircan]``'s limits."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.accounts = Buckets()
        self.addresses = Buckets()
        self.holds = Holds()
        self.log = CountedLog(log)

    def hold(self, key: str, refusal: Refused) -> float:
        """Seconds to hold this refusal of ``key`` (``Holds``)."""
        return self.holds.hold(key, float(refusal.retry_after_s or 0), self.state.api.now())

    def address(self, ip: str) -> Refused | None:
        """Count a request from ``ip``; the refusal when its address has no call left."""
        api, cfg = self.state.api, self.state.cfg
        if api.http_exempt(ip):
            return None
        burst, rate = cfg.http_address_calls_burst, cfg.http_address_calls_per_second
        wait = self.addresses.take(api.client_source(ip), burst, rate, api.now())
        if not wait:
            return None
        self.log.hit("calls_address", "http calls refused ip=%s reason='too many calls from the address' "
                     "(limit %d, then %g a second)", ip, burst, rate)
        return rate_limited(f"Too many calls from your address: {burst} at once, then {rate:g} a second", wait)

    def account(self, account: str, ip: str) -> Refused | None:
        """Count a request of ``account``; the refusal when it has no call left."""
        cfg = self.state.cfg
        burst, rate = cfg.http_calls_burst, cfg.http_calls_per_second
        wait = self.accounts.take(account, burst, rate, self.state.api.now())
        if not wait:
            return None
        self.log.hit("calls_account", "http calls refused account=%s ip=%s reason='too many calls from the "
                     "account' (limit %d, then %g a second)", account, ip, burst, rate)
        return rate_limited(f"Too many calls from your account: {burst} at once, then {rate:g} a second", wait)


async def send_json(send: Any, status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


def _retry_after(refusal: Refused) -> list[tuple[bytes, bytes]]:
    return [] if refusal.retry_after_s is None else [(b"retry-after", str(refusal.retry_after_s).encode())]


def error_data(refusal: Refused) -> dict[str, Any]:
    """A refusal as MCP's tool errors carry it: code, context, message, next_step, retry_after_s."""
    return {"code": refusal.code, "context": list(refusal.context), "message": refusal.text, **refusal.fields()}


async def plain_refusal(scope: dict, send: Any, status: int, refusal: Refused) -> None:
    """Plain HTTP: ``{"error": CODE, "message", "retry_after_s"}`` and ``Retry-After``."""
    await send_json(send, status, {"error": refusal.code, "message": refusal.full_text, **refusal.fields()},
                    _retry_after(refusal))


async def mcp_refusal(scope: dict, send: Any, status: int, refusal: Refused) -> None:
    """MCP: a JSON-RPC error (its data as a tool error's) at ``status`` with ``Retry-After``; the
    request is not read, so its id is null, which the SDK's client takes as its request's."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": MCP_SERVER_ERROR, "message": f"{refusal.code}: "
            f"{refusal.full_text}", "data": error_data(refusal)}}
    await send_json(send, status, body, _retry_after(refusal))
