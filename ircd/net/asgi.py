"""The ASGI layer in front of the HTTP application (``ircd.net.http.HttpListener._app``): the
client's address behind trusted proxies, the Host/Origin check, the body limit, IRC over WebSocket
on its path, the exact paths of ASGI apps served without Starlette's router, and 503 while the
database is away.

One layer, not one per concern: each pure-Python ASGI wrapper costs every request a coroutine, its
closures and, for most, a pass over the headers; an MCP call crossed about a dozen of them."""

from __future__ import annotations

from typing import Any, Protocol

from ircd.net.addresses import in_networks
from ircd.store.errors import StoreUnavailable

__all__ = ["Direct", "Front", "HostPolicy", "Unavailable", "client_address", "guarded"]


class HostPolicy(Protocol):
    """Which Host and Origin headers the listener serves (``HttpListener`` is one)."""

    def host_allowed(self, host: str) -> bool: ...
    def origin_allowed(self, origin: str) -> bool: ...


def _forwarded_for(value: str) -> list[str]:
    """The ``for=`` addresses of a ``Forwarded`` header (RFC 7239), nearest the client first."""
    found = []
    for element in value.split(","):
        for pair in element.split(";"):
            name, _, item = pair.strip().partition("=")
            if name.strip().lower() != "for":
                continue
            item = item.strip().strip('"')
            if item.startswith("["):
                item = item[1:].partition("]")[0]
            elif item.count(":") == 1:
                item = item.partition(":")[0]
            found.append(item)
    return found


def client_address(peer: str, headers: list[tuple[bytes, bytes]], trusted: list[Any]) -> str:
    """The client's address: ``peer`` itself, unless ``peer`` is a trusted proxy; then the nearest
    address of ``X-Forwarded-For`` (or, without it, of ``Forwarded``) that is not a trusted proxy
    too, reading from the proxy back towards the client (the farther entries are the client's
    word, not a proxy's)."""
    if not trusted or not in_networks(peer, trusted):
        return peer
    xff: list[str] = []
    forwarded: list[str] = []
    for key, value in headers:
        name = key.lower()
        if name == b"x-forwarded-for":
            xff += [item.strip() for item in value.decode("latin-1").split(",") if item.strip()]
        elif name == b"forwarded":
            forwarded += _forwarded_for(value.decode("latin-1"))
    chain = xff or forwarded
    for item in reversed(chain):
        if not in_networks(item, trusted):
            return item.removeprefix("::ffff:")
    return chain[0] if chain else peer


# A body over the limit but at most this long (declared, or counted as a chunked one arrives) is
# read to its end and dropped before the 413: a connection closed with a request's bytes unread is
# reset by the kernel, and a client still sending its body then loses the answer. A longer one is
# answered at once (its sender may see the reset); the body's deadline (http.body_timeout) bounds
# the reading.
_DRAINED = 1 << 20


_FORBIDDEN_BODY = b"Forbidden: this Host or Origin is not served here\n"
_FORBIDDEN = {"type": "http.response.start", "status": 403,
              "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                          (b"content-length", str(len(_FORBIDDEN_BODY)).encode())]}


class Direct:
    """An exact path whose endpoint is an ASGI app, served without Starlette's router (its
    middleware, the Request it makes, and a regular expression per route). What the request sees
    is what Starlette gave it: the same scope keys, 503 while the database is away (``Unavailable``),
    a Starlette ``HTTPException`` rendered as Starlette renders it, any other exception 500 (then
    raised on, for uvicorn to log)."""

    def __init__(self, app: Any, starlette: Any, route: Any, handlers: tuple[Any, Any]) -> None:
        self.app = app
        self.keys = {"app": starlette, "router": starlette.router, "starlette.exception_handlers": handlers,
                     "route": route, "endpoint": route.endpoint}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        scope.update(self.keys)
        scope["path_params"] = {}
        started = False

        async def sending(message: dict) -> None:
            nonlocal started
            started = True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except StoreUnavailable:
            if not started:
                await send({"type": "http.response.start", "status": 503, "headers": _UNAVAILABLE_HEADERS})
                await send({"type": "http.response.body", "body": _UNAVAILABLE_BODY})
        except Exception as exc:
            await _failed(exc, started, scope, receive, send)


async def _failed(exc: Exception, started: bool, scope: dict, receive: Any, send: Any) -> None:
    """As Starlette's exception middleware and its server error middleware answer ``exc``."""
    from starlette.exceptions import HTTPException
    from starlette.responses import PlainTextResponse, Response

    if isinstance(exc, HTTPException):
        if started:
            raise RuntimeError("Caught handled exception, but response already started.") from exc
        if exc.status_code in {204, 304}:
            await Response(status_code=exc.status_code, headers=exc.headers)(scope, receive, send)
        else:
            await PlainTextResponse(exc.detail, status_code=exc.status_code, headers=exc.headers)(scope, receive, send)
        exc.__traceback__ = None
        return
    if not started:
        await PlainTextResponse("Internal Server Error", status_code=500)(scope, receive, send)
    raise exc


class Front:
    """Every request, in one pass over its headers, before any route sees it:

    * behind ``http.trusted_proxies``, its client is the address the proxy names (``client_address``),
      for every limit, log line and IRC connection made over WebSocket;
    * a Host that is not one of ours (DNS rebinding) or a browser's foreign Origin: 403 (a WebSocket:
      closed with 1008);
    * a WebSocket to ``websocket``'s path is an IRC connection (``ircd/net/websocket.py``);
    * a request body over ``limit`` bytes: 413, a declared length at once, a chunked body when its
      bytes pass the limit (``_limited``); either read to its end first, up to ``_DRAINED`` bytes;
    * an exact path of ``direct`` goes to its app (``Direct``), the rest to ``app`` (Starlette)."""

    def __init__(self, app: Any, policy: HostPolicy, limit: int, trusted: list[Any],
                 websocket: tuple[str, Any] | None = None, direct: dict[str, Any] | None = None) -> None:
        self.app = app
        self.policy = policy
        self.limit = limit
        self.trusted = trusted
        self.websocket = websocket
        self.direct = direct or {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if kind == "websocket":
            await self._websocket(scope, receive, send)
            return
        if kind != "http":
            await self.app(scope, receive, send)
            return
        host, origin, length, chunked = b"", None, None, False
        for key, value in scope["headers"]:  # HTTP header names come lowercased (ASGI)
            if key == b"host":
                host = value
            elif key == b"origin":
                origin = value
            elif key == b"content-length":
                if value.isdigit() and int(value) > self.limit:
                    length = int(value)
            elif key == b"transfer-encoding":
                chunked = True
        policy = self.policy
        if not policy.host_allowed(host.decode("latin-1")) or (
                origin is not None and not policy.origin_allowed(origin.decode("latin-1"))):
            await send(_FORBIDDEN)
            await send({"type": "http.response.body", "body": _FORBIDDEN_BODY})
            return
        if self.trusted:
            scope = self._client(scope)
        if length is not None:  # declared over the limit
            if length <= _DRAINED:
                await _drain(receive)
            await _too_large(send)
            return
        app = self.direct.get(scope["path"]) if not scope.get("root_path") else None
        if chunked:  # counted as it arrives
            await _limited(app or self.app, self.limit, scope, receive, send)
        else:  # no body, or a declared length within the limit: the parser reads no byte past it
            await (app or self.app)(scope, receive, send)

    def _client(self, scope: dict) -> dict:
        peer = scope.get("client")
        if peer:
            ip = client_address(peer[0], scope.get("headers", ()), self.trusted)
            if ip != peer[0]:
                scope = dict(scope)
                scope["client"] = (ip, 0)
        return scope

    async def _websocket(self, scope: dict, receive: Any, send: Any) -> None:
        # the WebSocket protocol leaves header names as the client wrote them
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        origin = headers.get("origin")
        if not self.policy.host_allowed(headers.get("host", "")) or (
                origin is not None and not self.policy.origin_allowed(origin)):
            await send({"type": "websocket.close", "code": 1008})
            return
        if self.trusted:
            scope = self._client(scope)
        if self.websocket is not None and scope.get("path") == self.websocket[0]:
            await self.websocket[1](scope, receive, send)
        else:
            await self.app(scope, receive, send)


async def _limited(app: Any, limit: int, scope: dict, receive: Any, send: Any) -> None:
    """``app`` with a body counted as it arrives: past ``limit``, 413; then the application hears that
    the client went away, and what it sends is dropped (an exception raised into it would have become
    its 500)."""
    seen = 0
    started = refused = False

    async def limited() -> Any:
        nonlocal seen, refused
        if refused:
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                refused = True
                if not started:
                    if message.get("more_body", False):
                        await _drain(receive, seen)  # the rest, before the answer, as for a declared length
                    await _too_large(send)
                return {"type": "http.disconnect"}
        return message

    async def sending(message: dict) -> None:
        nonlocal started
        if refused:
            return
        started = True
        await send(message)

    try:
        await app(scope, limited, sending)
    except Exception:
        if not refused:
            raise
        # the application's reaction to the disconnect (Starlette: ClientDisconnect): answered


async def _drain(receive: Any, seen: int = 0) -> None:
    """Read what is left of a request's body, until its end or ``_DRAINED`` bytes in all."""
    while seen <= _DRAINED:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        seen += len(message.get("body", b""))


class Unavailable:
    """A request that needs the database while it cannot be reached (PostgreSQL restarting): 503
    with Retry-After, rather than a 500 and a traceback per request (the store says once that the
    database went away, and once that it is back). Around each route, inside Starlette, which would
    have made any exception its 500."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        started = False

        async def sending(message: dict) -> None:
            nonlocal started
            started = started or message["type"] in ("http.response.start", "websocket.accept")
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except StoreUnavailable:
            if scope["type"] != "http" or started:
                return  # too late for a status: the connection ends
            await send({"type": "http.response.start", "status": 503, "headers": _UNAVAILABLE_HEADERS})
            await send({"type": "http.response.body", "body": _UNAVAILABLE_BODY})


_UNAVAILABLE_BODY = b"Service Unavailable: the database is unavailable; try again in a moment\n"
_UNAVAILABLE_HEADERS = [(b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(_UNAVAILABLE_BODY)).encode()), (b"retry-after", b"1")]


def guarded(endpoint: Any) -> Any:
    """A route's endpoint answering 503 while the database is away: an ASGI app wrapped in
    ``Unavailable``, a request handler (a function Starlette calls with the request) in a handler."""
    import inspect

    if not (inspect.isfunction(endpoint) or inspect.ismethod(endpoint)):
        return Unavailable(endpoint)
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response

    async def handler(request: Any) -> Any:
        try:
            if inspect.iscoroutinefunction(endpoint):
                return await endpoint(request)
            return await run_in_threadpool(endpoint, request)  # as Starlette runs a plain function
        except StoreUnavailable:
            return Response(_UNAVAILABLE_BODY, 503, headers={"retry-after": "1"}, media_type="text/plain")

    return handler


async def _too_large(send: Any) -> None:
    body = b"Request body too large\n"
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})
