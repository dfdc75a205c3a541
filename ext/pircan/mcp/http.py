"""The HTTP side of PIRCAN's transports (MCP, and A2A in ext/pircan/a2a): bearer-token
authentication, presence, revocation.

Every request to /mcp (and to the A2A gateway) must carry ``Authorization: Bearer <token>`` (a
token of ``pircd token add`` or ``TOKEN ADD``). The token is checked against the
database on every request, so a revoked token is refused at its next
request; requests in flight with it (a long ``wait_for_messages``, an A2A
stream) are cancelled when it is revoked. Failed checks count against the token they name, or,
for a token that names none, against the client's address (``ircd/tokens.py``); a credential
past its limit gets 429 without a check. Each request is also counted once against its
address and its account's call limits (``limits.py``). The client's address is the one
``http.trusted_proxies`` name, behind one. An account is *present* on the network while an HTTP
request of it is in flight and for ``pircan.mcp_presence_seconds`` after its last one.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import anyio

from ext.pircan.mcp.limits import Refuser, plain_refusal, rate_limited, send_json
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ircd.api import TokenThrottled

__all__ = ["BearerGate", "Presence", "IDENTITY_KEY", "UNAUTHORIZED", "bearer_token"]

IDENTITY_KEY = "pircan.identity"
_PRINCIPALS_KEPT = 4096  # principals remembered at most (then forgotten all at once)


class Presence:
    """Counts an account present elsewhere than IRC while its requests run, and a while after.

    One timer per account at a time, not one per request: a request that ends moves the account's
    deadline, and the timer, when it fires early, waits for the rest."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.active: dict[str, int] = {}
        self.lingering: dict[str, float] = {}  # account -> when it stops being present (monotonic)
        self._timers: dict[str, Any] = {}

    def enter(self, account: str) -> None:
        count = self.active.get(account, 0) + 1
        self.active[account] = count
        if self.lingering.pop(account, None) is None and count == 1:
            self.state.arrived_elsewhere(account)
        # else: still counted from before

    def leave(self, account: str) -> None:
        count = self.active.get(account, 0) - 1
        if count > 0:
            self.active[account] = count
            return
        self.active.pop(account, None)
        linger = self.state.cfg.mcp_presence_seconds
        self.lingering[account] = time.monotonic() + linger
        if account not in self._timers:
            self._timers[account] = self.state.api.call_later(linger, lambda: self._due(account))

    def _due(self, account: str) -> None:
        self._timers.pop(account, None)
        until = self.lingering.get(account)
        if until is None:
            return  # present again
        left = until - time.monotonic()
        if left > 0:
            self._timers[account] = self.state.api.call_later(left, lambda: self._due(account))
            return
        del self.lingering[account]
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


def _principal(token: str, account: str) -> Any:
    """The MCP SDK binds a session of its 2025 protocol to the credential's principal: the account.
    (Imported here, not with the module: the SDK is loaded with the first request that needs it.)"""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken

    return AuthenticatedUser(AccessToken(token=token, client_id=account, scopes=[]))


class BearerGate:
    """ASGI middleware in front of an HTTP transport: who is calling, or 401/429 (rendered by
    ``refuse`` in the transport's own shape). ``optional``: a request without an Authorization
    header goes on without an identity (an A2A card), counted against its address only."""

    def __init__(self, app: Any, state: Pircan, presence: Presence, *, optional: bool = False,
                 refuse: Refuser = plain_refusal) -> None:
        self.app = app
        self.state = state
        self.presence = presence
        self.optional = optional
        self.refuse = refuse
        self.inflight: dict[int, set[asyncio.Timeout]] = {}
        self._principals: dict[tuple[int, str], Any] = {}  # (token id, token) -> the SDK's principal
        state.api.on_token_revoked(self.revoked)

    def revoked(self, ids: set[int]) -> None:
        for key in [k for k in self._principals if k[0] in ids]:
            del self._principals[key]
        for ident in ids:
            for cancel in list(self.inflight.get(ident, ())):
                if not cancel.expired():
                    cancel.reschedule(-1.0)  # due at once: the request's task is cancelled

    def principal(self, token: str, identity: Any) -> Any:
        """The SDK's principal of a token, made once (a pydantic model, a few microseconds)."""
        key = (identity.token_id, token)
        found = self._principals.get(key)
        if found is None:
            if len(self._principals) >= _PRINCIPALS_KEPT:
                self._principals.clear()
            found = self._principals[key] = _principal(token, identity.account)
        return found

    async def refused(self, scope: dict, send: Any, key: str, refusal: Refused) -> None:
        """Answer 429, after a pause when ``key`` comes back before its retry time (``Holds``)."""
        pause = self.state.http_calls.hold(key, refusal)
        if pause > 0:
            await anyio.sleep(pause)
        await self.refuse(scope, send, 429, refusal)

    async def admit_address(self, scope: dict, send: Any, ip: str) -> bool:
        """Count the request against its address's calls; False once it was refused."""
        refusal = self.state.http_calls.address(ip)
        if refusal is not None:
            await self.refused(scope, send, "address " + ip, refusal)
        return refusal is None

    async def throttled(self, scope: dict, send: Any, ip: str, checked: TokenThrottled) -> None:
        self.state.http_calls.log.hit("token_" + checked.reason, "http token refused without a check ip=%s "
                                      "reason='too many failed checks of the %s'", ip, checked.reason)
        text = ("Too many failed checks of this token" if checked.reason == "credential"
                else "Too many failed token checks from your address")
        await self.refused(scope, send, "token " + ip, rate_limited(text, checked.retry_after))

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = self.state.api
        ip = (scope.get("client") or ("?", 0))[0]
        refusal = self.state.http_calls.address(ip)
        if refusal is not None:
            await self.refused(scope, send, "address " + ip, refusal)
            return
        token = bearer_token(scope)
        if token is None and self.optional:
            await self.app(scope, receive, send)
            return
        checked = await api.verify_token(token, ip) if token else None
        if isinstance(checked, TokenThrottled):
            await self.throttled(scope, send, ip, checked)
            return
        if checked is None:
            if token:
                self.state.http_calls.log.hit("token_refused", "http token refused ip=%s path=%s",
                                              ip, scope.get("path", ""))
            await send_json(send, *UNAUTHORIZED)
            return
        refusal = self.state.http_calls.account(checked.account, ip)
        if refusal is not None:
            await self.refused(scope, send, "account " + checked.account, refusal)
            return
        await self._run(checked, token or "", scope, receive, send)

    async def _run(self, identity: Any, token: str, scope: dict, receive: Any, send: Any) -> None:
        """The request, as ``identity``: present, and cancelled if its token is revoked meanwhile (a
        timeout without a deadline, given one at once by ``revoked``: asyncio's own cancellation,
        which anyio's cancel scope, entered per request, cost about four times as much)."""
        api = self.state.api
        scope[IDENTITY_KEY] = identity  # the scope is this request's own (uvicorn makes one per request)
        scope["user"] = self.principal(token, identity)
        ident = identity.token_id
        held = self.inflight.get(ident)
        if held is None:
            held = self.inflight[ident] = set()
        api.hold_token(ident)
        self.presence.enter(identity.account)
        cancel = asyncio.timeout(None)
        try:
            async with cancel:
                held.add(cancel)
                await self.app(scope, receive, send)
        except TimeoutError:
            if not cancel.expired():
                raise  # the application's own
        finally:
            held.discard(cancel)
            if not held:
                self.inflight.pop(ident, None)
            api.release_token(ident)
            self.presence.leave(identity.account)
