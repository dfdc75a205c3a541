"""The ASGI layers around the HTTP application (``ircd.net.http.HttpListener._app``): the client's
address behind trusted proxies, the Host/Origin check, the body limit, 503 while the database is
away, and IRC over WebSocket on its path."""

from __future__ import annotations

from typing import Any, Protocol

from ircd.net.addresses import in_networks
from ircd.store.errors import StoreUnavailable

__all__ = ["BodyLimit", "ClientAddress", "HostCheck", "HostPolicy", "Unavailable", "WebSocketIrc", "client_address",
           "guarded"]


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


class ClientAddress:
    """Behind ``http.trusted_proxies``, the client of a request is the address the proxy names
    (``client_address``), for every limit, log line and IRC connection made over WebSocket."""

    def __init__(self, app: Any, trusted: list[Any]) -> None:
        self.app = app
        self.trusted = trusted

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("client"):
            peer = scope["client"][0]
            ip = client_address(peer, scope.get("headers", ()), self.trusted)
            if ip != peer:
                scope = dict(scope)
                scope["client"] = (ip, 0)
        await self.app(scope, receive, send)


class HostCheck:
    """Refuse requests whose Host is not one of ours (DNS rebinding), and browser requests from
    foreign origins, before any route sees them."""

    def __init__(self, app: Any, listener: HostPolicy) -> None:
        self.app = app
        self.listener = listener

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
            host = headers.get("host", "")
            origin = headers.get("origin")
            if not self.listener.host_allowed(host) or (origin is not None and not self.listener.origin_allowed(origin)):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = b"Forbidden: this Host or Origin is not served here\n"
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


# A declared body over the limit but at most this long is read (and dropped) before the 413: a
# connection closed with a request's bytes unread is reset by the kernel, and a client still
# sending its body then loses the answer. A longer one is answered at once (its sender may see
# the reset); the body's deadline (http.body_timeout) bounds the reading.
_DRAINED = 1 << 20


async def _drain(receive: Any) -> None:
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return


class BodyLimit:
    """Refuse request bodies over ``http.max_body_bytes`` (413), counted as they arrive: a declared
    length at once, a chunked body when its bytes pass the limit. Then the application hears that
    the client went away, and what it sends is dropped: an exception raised into it would have
    become its 500."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key.lower() == b"content-length" and value.isdigit() and int(value) > self.limit:
                if int(value) <= _DRAINED:
                    await _drain(receive)
                await _too_large(send)
                return
        seen = 0
        started = refused = False

        async def limited() -> Any:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    refused = True
                    if not started:
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
            await self.app(scope, limited, sending)
        except Exception:
            if not refused:
                raise
            # the application's reaction to the disconnect (Starlette: ClientDisconnect): answered


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


class WebSocketIrc:
    """WebSocket requests for ``path`` are IRC connections (``ircd/net/websocket.py``); the rest
    goes to the application."""

    def __init__(self, app: Any, path: str, endpoint: Any) -> None:
        self.app = app
        self.path = path
        self.endpoint = endpoint

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and scope.get("path") == self.path:
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)
