"""The HTTP listener: one ASGI application served by uvicorn inside the server's own event loop.

Every HTTP transport of the network (MCP at /mcp, IRC over WebSocket at
``http.websocket_path``, and what extensions add) is a route of one
Starlette application or the WebSocket endpoint beside it, so HTTP handlers run on the same
loop as IRC and see the same in-memory state and store, with no locks and
no second process. The core knows no extension: extensions register their
ASGI apps and lifespans through ``ircd.api`` (``Server.http``), and this
module binds the sockets, runs uvicorn's protocol on them, runs the
lifespans, checks Host and Origin against DNS rebinding, and stops it all
before the store closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any

from ircd.config import parse_hostport

WS_MAX_MESSAGE = 65536  # the largest WebSocket message (ircd/net/websocket.py); past it, close 1009

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")

__all__ = ["HttpListener", "allowed_hosts", "allowed_origins"]

# How long an idle keep-alive connection stays open. Longer than clients keep idle connections in
# their pools (httpx, the MCP SDK's client: 5 s; aiohttp: 15 s), so that a client does not send a
# request on a connection the server is closing at that moment: with uvicorn's default (5 s, the
# same as httpx's) 2-3 of about 300 MCP calls made after 5 s of idleness failed with a read error.
_KEEP_ALIVE_SECONDS = 75


def _hostport(address: tuple[str, int]) -> str:
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def allowed_hosts(server: "Server", addresses: list[tuple[str, int]]) -> list[str]:
    """Host header values accepted: the listeners' own, public_url's, loopback names for loopback
    listeners, and the configured extras (``host:*`` accepts any port)."""
    cfg = server.config.http
    hosts: set[str] = set(cfg.allowed_hosts)
    for address in addresses:
        hosts.add(_hostport(address))
        if address[0] in ("127.0.0.1", "::1", "localhost"):
            hosts.update(f"{name}:{address[1]}" for name in ("127.0.0.1", "localhost", "[::1]"))
    if cfg.public_url:
        hosts.add(urlsplit(cfg.public_url).netloc)
    return sorted(hosts)


def allowed_origins(server: "Server", addresses: list[tuple[str, int]], tls: bool) -> list[str]:
    cfg = server.config.http
    origins = set(cfg.allowed_origins)
    for host in allowed_hosts(server, addresses):
        if host != "*" and not host.endswith(":*"):
            origins.add(f"{'https' if tls else 'http'}://{host}")
    if cfg.public_url:
        public = urlsplit(cfg.public_url)
        origins.add(f"{public.scheme}://{public.netloc}")
    return sorted(origins)


class _HostCheck:
    """Refuse requests whose Host is not one of ours (DNS rebinding), and browser requests from
    foreign origins, before any route sees them."""

    def __init__(self, app: Any, listener: "HttpListener") -> None:
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


class _BodyLimit:
    """Refuse request bodies over ``http.max_body_bytes`` (413), counted as they arrive."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", ()):
            if key.lower() == b"content-length" and value.isdigit() and int(value) > self.limit:
                await _too_large(send)
                return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge()
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            with contextlib.suppress(Exception):
                await _too_large(send)


class _TooLarge(Exception):
    pass


async def _too_large(send: Any) -> None:
    body = b"Request body too large\n"
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class _WebSocketIrc:
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


class HttpListener:
    """Binds ``[http] listen`` / ``tls_listen`` and serves the server's HTTP routes on them."""

    def __init__(self, server: "Server") -> None:
        self.server = server
        self.addresses: list[tuple[str, int]] = []
        self._uvicorn: list[Any] = []
        self._lifespans: contextlib.AsyncExitStack | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._hosts: set[str] = set()
        self._any_port: set[str] = set()
        self._origins: set[str] = set()

    # checks -----------------------------------------------------------------------

    def host_allowed(self, host: str) -> bool:
        if "*" in self._hosts or host in self._hosts:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name in self._any_port

    def origin_allowed(self, origin: str) -> bool:
        return "*" in self._origins or origin in self._origins

    # start and stop ---------------------------------------------------------------

    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse
        from starlette.routing import Mount, Route

        routes: list[Any] = [Route(path, endpoint=app) for path, app in self.server.http.routes]
        routes += [Mount(prefix, app=app) for prefix, app in self.server.http.mounts]

        async def health(request: Any) -> Any:
            return PlainTextResponse("ok\n")

        routes.append(Route("/healthz", endpoint=health))
        app: Any = _BodyLimit(Starlette(routes=routes), self.server.config.http.max_body_bytes)
        path = self.server.config.http.websocket_path
        if path:
            from ircd.net.websocket import irc_endpoint

            app = _WebSocketIrc(app, path, irc_endpoint(self.server))
        return _HostCheck(app, self)

    async def start(self) -> list[tuple[str, int]]:
        """Bind, start the lifespans, serve; raises OSError naming the address that failed."""
        import uvicorn

        cfg = self.server.config.http
        if not cfg.enabled or not (cfg.listen or cfg.tls_listen):
            return []
        tls_ctx: ssl.SSLContext | None = None
        if cfg.tls_listen:
            from ircd.net.listener import make_tls_context

            scfg = self.server.config.server
            if not scfg.tls_cert or not scfg.tls_key:
                raise ValueError("http.tls_listen needs server.tls_cert and server.tls_key")
            tls_ctx = make_tls_context(scfg.tls_cert, scfg.tls_key)
        bound: list[tuple[socket.socket, ssl.SSLContext | None]] = []
        try:
            for addresses, ctx in ((cfg.listen, None), (cfg.tls_listen, tls_ctx)):
                for address in addresses:
                    bound.append((_bind(address), ctx))
        except OSError:
            for sock, _ in bound:
                sock.close()
            raise
        self.addresses = [sock.getsockname()[:2] for sock, _ in bound]
        self.server.http.addresses = list(self.addresses)
        tls = tls_ctx is not None and not cfg.listen
        self.server.http.base_url = cfg.public_url or (
            f"{'https' if tls else 'http'}://{_hostport(self.addresses[0])}"
        )
        hosts = allowed_hosts(self.server, self.addresses)
        self._hosts = {h for h in hosts if not h.endswith(":*")}
        self._any_port = {h[:-2] for h in hosts if h.endswith(":*")}
        self._origins = set(allowed_origins(self.server, self.addresses, tls))
        self.server.http.allowed_hosts = hosts
        self.server.http.allowed_origins = sorted(self._origins)
        self._lifespans = contextlib.AsyncExitStack()
        for lifespan in self.server.http.lifespans:
            await self._lifespans.enter_async_context(lifespan())
        app = self._app()
        for sock, ctx in bound:
            config = uvicorn.Config(
                app, log_config=None, access_log=False, lifespan="off", proxy_headers=False,
                server_header=False, limit_concurrency=cfg.max_connections, timeout_graceful_shutdown=2,
                timeout_keep_alive=_KEEP_ALIVE_SECONDS,
                ws="websockets-sansio" if cfg.websocket_path else "none", ws_max_size=WS_MAX_MESSAGE,
            )
            config.load()
            config.ssl = ctx
            srv = uvicorn.Server(config)
            srv.lifespan = config.lifespan_class(config)
            await srv.startup(sockets=[sock])
            self._uvicorn.append(srv)
            log.info("listening on %s (HTTP%s)", _hostport(sock.getsockname()), ", TLS" if ctx else "")
        self._ticker = asyncio.get_running_loop().create_task(self._tick())
        return self.addresses

    async def _tick(self) -> None:
        """uvicorn's own once-a-second work (the Date header) for each of its servers."""
        while True:
            for srv in self._uvicorn:
                await srv.on_tick(0)
            await asyncio.sleep(1.0)

    async def stop(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for hook in self.server.http.stop_hooks:
            try:
                hook()
            except Exception:
                log.exception("http stop hook failed")
        for srv in self._uvicorn:
            srv.should_exit = True
            try:
                await srv.shutdown()
            except Exception:
                log.exception("http shutdown failed")
        self._uvicorn = []
        if self._lifespans is not None:
            try:
                await self._lifespans.aclose()
            except Exception:
                log.exception("http lifespan shutdown failed")
            self._lifespans = None


def _bind(address: str) -> socket.socket:
    host, port = parse_hostport(address)
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, sockaddr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6 and host in ("", "::"):
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(sockaddr)
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"{address} (http): {exc.strerror}") from None
    return sock
