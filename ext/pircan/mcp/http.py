"""The HTTP side of PIRCAN's transports (MCP, and A2A in ext/pircan/a2a): bearer-token
authentication, presence, revocation.

Every request to /mcp (and to the A2A gateway) must carry ``Authorization: Bearer <token>`` (a
token of ``pircd token add`` or ``TOKEN ADD``). The token is checked against the
database on every request, so a revoked token is refused at its next
request; requests in flight with it (a long ``wait_for_messages``, an A2A
stream) are cancelled when it is revoked. Failed checks count against the
client's IP like failed SASL logins, and an IP past the limit gets 429 before any check.
An account is *present* on the network while an HTTP request of it is in
flight and for ``pircan.mcp_presence_seconds`` after its last one.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from ext.pircan.state import Pircan

__all__ = ["BearerGate", "Presence", "IDENTITY_KEY", "UNAUTHORIZED", "bearer_token"]

log = logging.getLogger("pircd.pircan")
IDENTITY_KEY = "pircan.identity"


class Presence:
    """Counts an account present elsewhere than IRC while its requests run, and a while after."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.active: dict[str, int] = {}
        self.lingering: dict[str, Any] = {}

    def enter(self, account: str) -> None:
        count = self.active.get(account, 0) + 1
        self.active[account] = count
        timer = self.lingering.pop(account, None)
        if timer is not None:
            timer.cancel()  # still counted from before
        elif count == 1:
            self.state.arrived_elsewhere(account)

    def leave(self, account: str) -> None:
        count = self.active.get(account, 0) - 1
        if count > 0:
            self.active[account] = count
            return
        self.active.pop(account, None)
        linger = self.state.cfg.mcp_presence_seconds
        self.lingering[account] = self.state.api.call_later(linger, lambda: self._gone(account))

    def _gone(self, account: str) -> None:
        if self.lingering.pop(account, None) is not None:
            self.state.left_elsewhere(account)


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def bearer_token(scope: dict) -> str | None:
    """The token of an ``Authorization: Bearer`` header ('' for a malformed one), None without the header."""
    header = _header(scope, b"authorization")
    if header is None:
        return None
    return header[7:].strip() if header[:7].lower() == "bearer " else ""


# the answer to a request without a valid token: (status, body, headers)
UNAUTHORIZED = (
    401,
    {"error": "invalid_token", "message": "Send Authorization: Bearer <token> with a valid token "
     "(pircd token add ACCOUNT, or TOKEN ADD over IRC)"},
    [(b"www-authenticate", b'Bearer realm="pircd", error="invalid_token"')],
)


async def _json_response(send: Any, status: int, body: dict, headers: list[tuple[bytes, bytes]]) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})


class BearerGate:
    """ASGI middleware in front of an HTTP transport: who is calling, or 401/429. ``optional``: a
    request without an Authorization header goes on without an identity (an A2A card)."""

    def __init__(self, app: Any, state: Pircan, presence: Presence, *, optional: bool = False) -> None:
        self.app = app
        self.state = state
        self.presence = presence
        self.optional = optional
        self.inflight: dict[int, set[anyio.CancelScope]] = {}
        state.api.on_token_revoked(self.revoked)

    def revoked(self, ids: set[int]) -> None:
        for ident in ids:
            for scope in list(self.inflight.get(ident, ())):
                scope.cancel()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = self.state.api
        token = bearer_token(scope)
        if token is None:
            if self.optional:
                await self.app(scope, receive, send)
                return
            token = ""
        ip = (scope.get("client") or ("?", 0))[0]
        wait = api.token_retry_after(ip)
        if wait > 0:
            await _json_response(send, 429, {"error": "RATE_LIMITED",
                                             "message": f"Too many failed token checks; retry in {math.ceil(wait)} s"},
                                 [(b"retry-after", str(math.ceil(wait)).encode())])
            return
        identity = await api.verify_token(token, ip) if token else None
        if identity is None:
            if token:
                log.info("http token refused ip=%s path=%s", ip, scope.get("path", ""))
            await _json_response(send, *UNAUTHORIZED)
            return
        scope = dict(scope)
        scope[IDENTITY_KEY] = identity
        # the SDK binds a legacy session to the credential's principal: the account
        scope["user"] = AuthenticatedUser(AccessToken(token=token, client_id=identity.account, scopes=[]))
        cancel = anyio.CancelScope()
        held = self.inflight.setdefault(identity.token_id, set())
        held.add(cancel)
        api.hold_token(identity.token_id)
        self.presence.enter(identity.account)
        try:
            with cancel:
                await self.app(scope, receive, send)
        finally:
            held.discard(cancel)
            if not held:
                self.inflight.pop(identity.token_id, None)
            api.release_token(identity.token_id)
            self.presence.leave(identity.account)
