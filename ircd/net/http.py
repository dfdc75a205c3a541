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
import math
import socket
import ssl
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlsplit

from ircd.config import parse_hostport
from ircd.log import CountedLog
from ircd.logins import source_of
from ircd.net.addresses import in_networks, is_loopback, networks
from ircd.net.asgi import Direct, Front, Unavailable, client_address, guarded
from ircd.net.connection import peer_ip

WS_MAX_MESSAGE = 65536  # the largest WebSocket message (ircd/net/websocket.py); past it, close 1009

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")

__all__ = ["HttpGate", "HttpListener", "allowed_hosts", "allowed_origins", "client_address", "is_loopback"]

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
    listeners and for those on every interface (which loopback reaches too: a container's health
    check asks for ``127.0.0.1:6680``; a page that rebinds its own name to 127.0.0.1 still sends
    that name), and the configured extras (``host:*`` accepts any port)."""
    cfg = server.config.http
    hosts: set[str] = set(cfg.allowed_hosts)
    for address in addresses:
        hosts.add(_hostport(address))
        if address[0] in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "::", ""):
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


_KINDS_KEPT = 4096  # addresses whose kind HttpGate remembers at most (then forgotten all at once)
_LINGER_SECONDS = 1.0  # how long a connection refused or timed out is read (and dropped) before it closes


def canned(status: int, reason: str, text: str, retry_after: int | None = None) -> bytes:
    """A whole HTTP/1.1 response that closes the connection, for answers given outside a request
    cycle (refused at accept, a request head or body too slow)."""
    body = text.encode() + b"\n"
    head = [f"HTTP/1.1 {status} {reason}", "content-type: text/plain; charset=utf-8",
            f"content-length: {len(body)}", "connection: close"]
    if retry_after is not None:
        head.append(f"retry-after: {retry_after}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class HttpGate:
    """Every HTTP connection, counted from its accept to its close (also once it became a
    WebSocket): at most ``http.max_connections`` at once, and per address (``source_of``) at most
    ``http.max_per_ip`` (never more than half of the total) and ``http.throttle_count`` new ones per
    ``connections.throttle_window``, as IRC's accept counts. Loopback (with
    ``connections.exempt_loopback``) and ``http.trusted_proxies`` are held only to the total."""

    def __init__(self, server: "Server") -> None:
        self.server = server
        self.open: dict[Any, str] = {}  # transport -> its source ("" when exempt)
        self.per_source: dict[str, int] = {}
        self.recent: dict[str, deque[float]] = {}
        self.alarm = CountedLog(log)  # one line a minute per kind of refusal
        self.trusted = networks(server.config.http.trusted_proxies)
        self._kinds: dict[str, tuple[bool, bool]] = {}  # address -> (loopback, a trusted proxy)

    def exempt(self, ip: str) -> bool:
        """Asked at accept and for every request (the call limits): an address is parsed once."""
        kind = self._kinds.get(ip)
        if kind is None:
            if len(self._kinds) >= _KINDS_KEPT:
                self._kinds.clear()
            kind = self._kinds[ip] = (is_loopback(ip), in_networks(ip, self.trusted))
        return (kind[0] and self.server.config.connections.exempt_loopback) or kind[1]

    def admit(self, transport: Any, ip: str) -> bytes | None:
        """Count a new connection, or return the response that refuses it."""
        cfg, limits = self.server.config.http, self.server.config.connections
        total = min(cfg.max_connections, self.server.http.fd_cap or cfg.max_connections)
        if len(self.open) >= total:
            self.alarm.hit("full", "http connection refused ip=%s reason='server is full' (limit %d)", ip, total)
            return canned(503, "Service Unavailable", "Too many HTTP connections; try again later", 5)
        source = "" if self.exempt(ip) else source_of(ip)
        if source:
            most = min(cfg.max_per_ip, max(1, cfg.max_connections // 2))
            if self.per_source.get(source, 0) >= most:
                self.alarm.hit("per_ip", "http connection refused ip=%s reason='too many connections from "
                               "the address' (limit %d)", ip, most)
                return canned(429, "Too Many Requests", "Too many HTTP connections from your address", 5)
            now = time.monotonic()
            times = self.recent.setdefault(source, deque())
            while times and times[0] <= now - limits.throttle_window:
                times.popleft()
            if len(times) >= cfg.throttle_count:
                wait = math.ceil(times[0] + limits.throttle_window - now)
                self.alarm.hit("throttle", "http connection refused ip=%s reason='too many new connections "
                               "from the address' (limit %d per %.0f s)", ip, cfg.throttle_count,
                               limits.throttle_window)
                return canned(429, "Too Many Requests", "Too many new HTTP connections from your address; "
                              f"retry in {wait} s", wait)
            times.append(now)
            self.per_source[source] = self.per_source.get(source, 0) + 1
        self.open[transport] = source
        return None

    def release(self, transport: Any) -> None:
        source = self.open.pop(transport, None)
        if source:
            count = self.per_source.get(source, 0) - 1
            if count > 0:
                self.per_source[source] = count
            else:
                self.per_source.pop(source, None)
                times = self.recent.get(source)
                if times is not None and not times:
                    del self.recent[source]

    def sweep(self) -> None:
        """Forget the throttle records of addresses without connections that left the window."""
        edge = time.monotonic() - self.server.config.connections.throttle_window
        for source in [s for s, times in self.recent.items() if not times or times[-1] <= edge]:
            if source not in self.per_source:
                del self.recent[source]




def _protocols(gate: HttpGate, ws: str) -> tuple[type, Callable[..., Any] | None]:
    """uvicorn's httptools and WebSocket protocols, counted by ``gate`` and held to deadlines: a
    complete request head within ``http.head_timeout`` of its first byte (or of the accept), a
    complete body within ``http.body_timeout`` of its head. uvicorn starts no timer before a
    request's head, and none for a body: a connection that sent nothing, half a head, or 1 byte of a
    long body was held open for ever. A late head or body gets 408 and the connection closes.

    httptools parses HTTP in C (llhttp); uvicorn's other protocol, h11, in Python, which took about
    a sixth of the server's work per MCP call. The parser reports a request's progress through the
    callbacks below (``_phase``)."""
    from uvicorn.config import WS_PROTOCOLS
    from uvicorn.importer import import_from_string
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    cfg = gate.server.config.http

    class Http(HttpToolsProtocol):  # type: ignore[misc]
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._timer: asyncio.TimerHandle | None = None
            self._waiting = ""  # "head", "body" or "" (no deadline running)
            self._phase = ""  # the request being read: "head", "body", "in" (all read), "" (none)
            self._upgraded = False
            self._ending = False
            refusal = gate.admit(transport, peer_ip(transport.get_extra_info("peername")))
            if refusal is not None:
                self._answer_and_close(refusal)
                return
            self._arm("head")

        def _answer_and_close(self, answer: bytes) -> None:
            """Write a last answer and close gently: what the client is still sending is read and
            dropped for a moment, as closing with unread data would reset the connection and could
            lose the answer."""
            self._disarm()
            self._ending = True
            transport = self.transport
            transport.write(answer)
            if transport.can_write_eof():
                transport.write_eof()
                self.loop.call_later(_LINGER_SECONDS, transport.close)
            else:
                transport.close()

        def _arm(self, what: str) -> None:
            self._disarm()
            self._waiting = what
            delay = cfg.head_timeout if what == "head" else cfg.body_timeout
            self._timer = self.loop.call_later(delay, self._expired)

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._waiting = ""

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._phase = "head"
            if self._waiting != "head":
                self._arm("head")  # the first byte of a request on a kept-alive connection

        def on_headers_complete(self) -> None:
            self._phase = "body"
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            self._phase = "in"
            super().on_message_complete()

        def data_received(self, data: bytes) -> None:
            if self._ending:
                return
            super().data_received(data)
            if self._upgraded or self.transport.is_closing():
                return
            if self._phase == "body":
                if self._waiting != "body":
                    self._arm("body")
            elif self._phase == "in" and self._waiting:
                self._disarm()  # the request is in: the application takes its time

        def handle_websocket_upgrade(self) -> None:
            self._disarm()
            self._upgraded = True
            super().handle_websocket_upgrade()

        def _expired(self) -> None:
            what, self._timer, self._waiting = self._waiting, None, ""
            if self.transport.is_closing():
                return
            ip = self.client[0] if self.client else "?"
            gate.alarm.hit("timeout_" + what, "http request %s too slow ip=%s: closed after %g s",
                           what, ip, cfg.head_timeout if what == "head" else cfg.body_timeout)
            cycle = self.cycle
            answered = what == "body" and cycle is not None and cycle.response_started
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True  # the application's answer, if any, is not written
                cycle.message_event.set()
            if answered:
                self.transport.close()
            else:
                self._answer_and_close(canned(408, "Request Timeout", f"The request {what} took too long"))

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            gate.release(self.transport)
            super().connection_lost(exc)

    if not ws:
        return Http, None
    made: list[Any] = []

    def websocket(*args: Any, **kwargs: Any) -> Any:
        """The protocol of one upgraded connection (uvicorn calls ``ws_protocol_class(...)`` and
        needs no more of it than a callable). Its class, uvicorn's with the websockets library
        (half a MiB), is made by the first upgrade, a few ms once: a server nobody reaches over
        WebSocket does not hold it."""
        if not made:
            base = import_from_string(WS_PROTOCOLS[ws])

            class WebSocket(base):  # type: ignore[misc, valid-type]
                def connection_lost(self, exc: Exception | None) -> None:
                    gate.release(self.transport)
                    super().connection_lost(exc)

            made.append(WebSocket)
        return made[0](*args, **kwargs)

    return Http, websocket


class HttpListener:
    """Binds ``[http] listen`` / ``tls_listen`` and serves the server's HTTP routes on them."""

    def __init__(self, server: "Server") -> None:
        self.server = server
        self.addresses: list[tuple[str, int]] = []
        self._uvicorn: list[Any] = []
        self._lifespans: contextlib.AsyncExitStack | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._hosts: set[str] = set()
        self.gate: HttpGate | None = None
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
        from starlette.middleware.exceptions import ExceptionMiddleware
        from starlette.responses import PlainTextResponse
        from starlette.routing import Mount, Route

        routes: list[Any] = [Route(path, endpoint=guarded(app)) for path, app in self.server.http.routes]
        routes += [Mount(prefix, app=Unavailable(app)) for prefix, app in self.server.http.mounts]  # type: ignore[arg-type]

        async def health(request: Any) -> Any:
            return PlainTextResponse("ok\n")

        routes.append(Route("/healthz", endpoint=health))
        from ircd.net.metrics import metrics_endpoint

        routes.append(Route("/metrics", endpoint=metrics_endpoint(self.server), methods=["GET"]))
        app = Starlette(routes=routes)
        # the exact paths of ASGI apps (each matches only itself, all methods): past Starlette's router
        handlers = ExceptionMiddleware(app)
        direct: dict[str, Any] = {}
        for route, (path, endpoint) in zip(routes, self.server.http.routes):
            if route.methods is None and "{" not in path and path not in direct:
                direct[path] = Direct(endpoint, app, route, (handlers._exception_handlers, handlers._status_handlers))
        cfg = self.server.config.http
        websocket = None
        if cfg.websocket_path:
            from ircd.net.websocket import irc_endpoint

            websocket = (cfg.websocket_path, irc_endpoint(self.server))
        return Front(app, self, cfg.max_body_bytes, networks(cfg.trusted_proxies), websocket, direct)

    async def start(self) -> list[tuple[str, int]]:
        """Bind, start the lifespans, serve; raises OSError naming the address that failed."""
        cfg = self.server.config.http
        if not cfg.enabled or not (cfg.listen or cfg.tls_listen):
            return []  # nothing of the HTTP side is imported
        import uvicorn

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
        self.gate = self.server.http.gate = HttpGate(self.server)
        http_protocol, ws_protocol = _protocols(self.gate, "websockets-sansio" if cfg.websocket_path else "")
        for sock, ctx in bound:
            # the gate counts connections (uvicorn's limit_concurrency would count them too, but only
            # answer 503 once a request head came in, while idle connections held every place)
            config = uvicorn.Config(
                app, log_config=None, access_log=False, lifespan="off", proxy_headers=False,
                server_header=False, limit_concurrency=None, timeout_graceful_shutdown=2,
                timeout_keep_alive=_KEEP_ALIVE_SECONDS, http=http_protocol,
                ws=ws_protocol or "none", ws_max_size=WS_MAX_MESSAGE,  # type: ignore[arg-type]  # a factory (_protocols)
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
            if self.gate is not None and int(time.monotonic()) % 60 == 0:
                self.gate.sweep()
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
