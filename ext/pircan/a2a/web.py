"""The A2A side on the HTTP listener: cards, the gateway's endpoints, the keys, the agreement check.

| Path | What |
|---|---|
| ``GET /.well-known/agent-card.json`` | the network's card: the gateway itself |
| ``POST /a2a`` (JSON-RPC), ``/a2a/message:send`` ... (HTTP+JSON) | the gateway, any agent (metadata ``to``), intro tokens |
| ``GET /a2a/agents/<name>/.well-known/agent-card.json`` | an agent's public card |
| ``POST /a2a/agents/<name>`` (JSON-RPC), ``/a2a/agents/<name>/message:send`` ... | the gateway to that agent |
| ``GET /.well-known/jwks.json`` | the public keys of intro tokens (JWK Set) |
| ``GET /a2a/agreements/<agreement-id>`` | is an agreement still active (for its parties, or an intro token naming it) |
| ``POST /a2a/introspect`` | token introspection (RFC 7662) of an intro token, for a party's account |

The SDK's route factories build the JSON-RPC and HTTP+JSON endpoints over one ``GatewayHandler``;
a bearer token of an account (the MCP gate, ``ext/pircan/mcp/http.py``) is required for them and
optional for cards.
"""

from __future__ import annotations

import re
from typing import Any

from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes, create_rest_routes
from a2a.utils.error_handlers import build_rest_error_payload
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from ext.pircan.a2a import PATHS, cards
from ext.pircan.a2a import store as astore
from ext.pircan.a2a.gateway import GatewayHandler, Watch, a2a_error
from ext.pircan.a2a.keys import jwk_set
from ext.pircan.delivery import Watched
from ext.pircan.ids import hexid, ts
from ext.pircan.lazy import Built
from ext.pircan.mcp.http import IDENTITY_KEY, UNAUTHORIZED, BearerGate, Presence, bearer_token
from ext.pircan.mcp.limits import plain_refusal, send_json
from ext.pircan.service import intro as intros
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ircd.api import TokenThrottled

__all__ = ["CARD_PATH", "build"]

CARD_PATH = PATHS.card
AGREEMENTS_PATH = PATHS.agreements
INTRO_CLAIMS_KEY = "pircan.intro"
INTROSPECT_PATH = "/introspect"  # under the gateway: /a2a/introspect


class _Account(User):
    def __init__(self, account: str) -> None:
        self.account = account

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self.account


class _Context(DefaultServerCallContextBuilder):
    """The SDK's call context, with the caller's identity and the agent the endpoint names."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state["identity"] = request.scope.get(IDENTITY_KEY)
        context.state["agent"] = request.path_params.get("agent")
        return context

    def build_user(self, request: Request) -> User:
        identity = request.scope.get(IDENTITY_KEY)
        return UnauthenticatedUser() if identity is None else _Account(identity.account)


def _unauthorized() -> JSONResponse:
    status, body, headers = UNAUTHORIZED
    return JSONResponse(body, status_code=status, headers={k.decode(): v.decode() for k, v in headers})


def _required(route: Any) -> Route:
    """The same route, answering 401 to a request without an account."""
    endpoint = route.endpoint

    async def guarded(request: Request) -> Response:
        if request.scope.get(IDENTITY_KEY) is None:
            return _unauthorized()
        return await endpoint(request)  # type: ignore[no-any-return]

    return Route(route.path, guarded, methods=sorted(m for m in route.methods if m != "HEAD"))


def _not_found(code: str, context: str, text: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "context": [context], "message": text}}, status_code=404)


class _IntroOrBearer:
    """The agreement check accepts an intro token (verified here) or an account's bearer token (the gate)."""

    def __init__(self, app: Any, state: Pircan, presence: Presence) -> None:
        self.app = app
        self.state = state
        self.gate = BearerGate(app, state, presence)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        token = bearer_token(scope) if scope["type"] == "http" else None
        if token is None or token.count(".") != 2:
            await self.gate(scope, receive, send)  # a bearer token
            return
        ip = (scope.get("client") or ("?", 0))[0]
        if not await self.gate.admit_address(scope, send, ip):
            return
        claims = await self.state.api.counted_check(ip, lambda: intros.verify_intro(self.state, token))
        if isinstance(claims, TokenThrottled):
            await self.gate.throttled(scope, send, ip, claims)
            return
        if claims is None:
            await _unauthorized()(scope, receive, send)
            return
        await self.app({**scope, INTRO_CLAIMS_KEY: claims}, receive, send)


_JSONRPC_PATH = re.compile(r"^" + re.escape(cards.GATEWAY_PATH) + r"(/agents/[^/]+)?/?$")


async def _a2a_refusal(scope: dict, send: Any, status: int, refusal: Refused) -> None:
    """A refusal of the gate as an A2A error: for JSON-RPC, the error object at HTTP 200 (the SDK's
    client reads a JSON-RPC error only there), with ``Retry-After``; for HTTP+JSON, the REST error
    at ``status``; the introspection and the cards answer plain HTTP."""
    path = scope.get("path", "")
    headers = [] if refusal.retry_after_s is None else [(b"retry-after", str(refusal.retry_after_s).encode())]
    if path.endswith((INTROSPECT_PATH, ".json")):
        await plain_refusal(scope, send, status, refusal)
    elif scope.get("method") == "POST" and _JSONRPC_PATH.match(path):
        await send_json(send, 200, build_error_response(None, a2a_error(refusal)), headers)
    else:
        payload = build_rest_error_payload(a2a_error(refusal))
        payload["error"].update(code=status, status="RESOURCE_EXHAUSTED" if status == 429 else "UNAVAILABLE")
        await send_json(send, status, payload, headers)


async def build(state: Pircan, presence: Presence, built: Built) -> None:
    """The gateway, the cards, the keys and the agreement check, as ``built.apps`` (``PATHS``)."""
    api = state.api
    watch = Watch(state)
    handler = GatewayHandler(state, watch)
    context = _Context()

    async def network_card(request: Request) -> Response:
        return JSONResponse(agent_card_to_dict(cards.network_card(state)), headers={"cache-control": "max-age=60"})

    async def agent_card(request: Request) -> Response:
        name = request.path_params["agent"]
        card = await cards.agent_card(state, api.casefold(name))
        if card is None:
            return _not_found("NO_SUCH_ACCOUNT", name, "No such agent (or it has no card)")
        return JSONResponse(agent_card_to_dict(card), headers={"cache-control": "max-age=60"})

    async def jwks(request: Request) -> Response:
        published = await state.database.read(astore.published_keys, state.now_ms())
        return JSONResponse(jwk_set(published), headers={"cache-control": "max-age=60"})

    async def agreement(request: Request) -> Response:
        identity = request.scope.get(IDENTITY_KEY)
        wanted = request.path_params["agreement_id"]
        try:
            found, now = await intros.check_agreement(
                state, wanted, account=None if identity is None else identity.account,
                claims=request.scope.get(INTRO_CLAIMS_KEY))
        except Refused as exc:
            return _not_found(exc.code, wanted, exc.text)
        return JSONResponse({
            "agreement_id": hexid(found.id), "requester": found.requester, "target": found.target,
            "scopes": list(found.scopes), "state": now, "active": now == "active",
            "expires_at": ts(found.expires_at), "revoked_at": None if found.revoked_at is None else ts(found.revoked_at),
        }, headers={"cache-control": "no-store"})

    async def introspect(request: Request) -> Response:
        """RFC 7662: POST token=<intro token> (a form, or a JSON object), by a party's account."""
        identity = request.scope.get(IDENTITY_KEY)
        if identity is None:  # the route lets nothing through without one
            return _unauthorized()
        if "json" in request.headers.get("content-type", ""):
            try:
                body = await request.json()
            except ValueError:
                body = None
            token = body.get("token") if isinstance(body, dict) else None
        else:
            token = (await request.form()).get("token")
        if not isinstance(token, str) or not token:
            return JSONResponse({"error": "invalid_request", "error_description": "POST token=<an intro token>"},
                                status_code=400)
        found = await intros.introspect(state, identity.account, token)
        return JSONResponse(found, headers={"cache-control": "no-store"})

    network = Router(routes=[_required(r) for r in create_jsonrpc_routes(handler, cards.GATEWAY_PATH, context)])
    # the SDK's REST routes also come mounted under /{tenant}: the network has no tenants
    rest = [r for prefix in ("/agents/{agent}", "") for r in create_rest_routes(handler, context, path_prefix=prefix)
            if isinstance(r, Route)]
    nested = Router(routes=[
        Route("/agents/{agent}" + CARD_PATH, agent_card, methods=["GET"]),
        _required(Route(INTROSPECT_PATH, introspect, methods=["POST"])),
        *(_required(r) for r in create_jsonrpc_routes(handler, "/agents/{agent}", context)),
        *(_required(r) for r in rest),
    ])
    checks = Router(routes=[Route("/{agreement_id}", agreement, methods=["GET"])])
    built.apps.update({
        "card": Router(routes=[Route(CARD_PATH, network_card)]),
        "jwks": Router(routes=[Route(intros.JWKS_PATH, jwks)]),
        "gateway": BearerGate(Watched(network), state, presence, refuse=_a2a_refusal),
        "agreements": _IntroOrBearer(checks, state, presence),
        "nested": BearerGate(Watched(nested), state, presence, optional=True, refuse=_a2a_refusal),
    })
    built.stop.append(watch.stop_all)  # open streams end, waiting requests answer: the shutdown does not wait
