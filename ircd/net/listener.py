"""Listening sockets (plain and TLS): accepting connections, within the process's file limit.

TLS listeners, and plain ones on asyncio's own event loop, accept their
connections themselves (``Listener``) rather than through
``loop.create_server``, for two things the loop's accept cannot do:

- Limits at the accept. A connection is counted against the per-IP and
  total limits as soon as it is accepted (``Server.reserve``), so a TLS
  connection is counted before its handshake: stalled handshakes hold a
  place like clients do. A refused connection is closed at once: a plain one
  after ``ERROR``, a TLS one before its handshake, since nothing can be said
  to it without doing the handshake whose cost the limit bounds.
- Descriptors running out. When ``accept`` fails for want of file
  descriptors (EMFILE, ENFILE) or memory, the listener stops reading its
  socket for ``_ACCEPT_RETRY`` seconds (the connections wait in the kernel's
  backlog) and logs the condition once per ``_FD_LOG_EVERY`` seconds, with a
  count. asyncio's accept logged a traceback for every failed attempt, up to
  4,096 per readable event: 100,000 tracebacks in seconds.

Plain listeners on uvloop keep uvloop's accept, which runs in C (a Python
accept costs about 40 us more per connection there) and deals with running
out of descriptors by itself, without a word in the log; a plain connection
has no handshake to count, and meets the limits when it is made.

At start-up ``limit_clients`` raises the soft open-file limit as far as the
hard one allows and lowers ``max_clients`` to what the limit leaves room
for after the reserve and ``http.max_connections``, so that a full server refuses
with ``ERROR`` (and a full HTTP listener with 503) before descriptors run out.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any

from ircd.config import parse_hostport
from ircd.net.connection import Arrivals, Connection, peer_ip

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")

_ACCEPT_BATCH = 128  # connections accepted per readable event before others get a turn
_ACCEPT_RETRY = 1.0  # seconds a listener stops accepting when descriptors run out
_FD_LOG_EVERY = 60.0  # seconds between two log lines about it
# Descriptors kept for everything that is not a client: the store and its WAL, log files,
# a certificate being read, the connection that is being refused because the server is full.
FD_RESERVE = 64
_OUT_OF_RESOURCES = frozenset((errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM))


def make_tls_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if client_ca:
        # ask for a client certificate (SASL EXTERNAL) without requiring one
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(client_ca)
    return ctx


def _open_files() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself opened
    except OSError:
        return 32  # not Linux: a typical start-up count


def limit_clients(server: Server) -> None:
    """Fit ``max_clients`` to the process's open-file limit (``ulimit -n``).

    The soft limit is raised towards the hard one first (as far as the configured
    ``max_clients`` needs); if the limit is still too low, the server serves at most
    what it leaves room for, and says so."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    wanted = server.config.connections.max_clients
    in_use = _open_files()
    http = http_descriptors(server)
    needed = wanted + http + in_use + FD_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        if target > soft:
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                log.info("open-file limit raised from %d to %d", soft, target)
                soft = target
            except (ValueError, OSError) as exc:
                log.info("open-file limit stays %d: %s", soft, exc)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    available = soft - in_use - FD_RESERVE
    if http:  # HTTP keeps its count as long as it is at most a quarter of what there is (at least 16)
        http = min(http, max(16, available // 4))
        server.http.fd_cap = http
    most = server.admission.cap_clients(available - http)
    log.warning(
        "connections.max_clients = %d is more than the open-file limit allows (ulimit -n: %d, %d in use, "
        "%d kept in reserve, %d for HTTP connections): serving at most %d clients; raise the limit to "
        "serve more",
        wanted, soft, in_use, FD_RESERVE, http, most,
    )


def http_descriptors(server: Server) -> int:
    """Descriptors the HTTP listener may hold: ``http.max_connections`` (its gate refuses more), none
    when it serves nothing. They come out of the open-file limit before IRC clients do."""
    cfg = server.config.http
    return cfg.max_connections if cfg.enabled and (cfg.listen or cfg.tls_listen) else 0


class _FdAlarm:
    """Logs that descriptors ran out at most once per interval, with how often it happened."""

    def __init__(self) -> None:
        self.last = -_FD_LOG_EVERY
        self.count = 0

    def hit(self, server: Server, exc: OSError) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.last < _FD_LOG_EVERY:
            return
        log.warning(
            "cannot accept connections: %s; new connections wait %.0f s at a time (%d time(s) since the "
            "last such line; %d clients, %d connections being set up)",
            exc.strerror or exc, _ACCEPT_RETRY, self.count, len(server.clients), server.admission.handshaking,
        )
        self.last = now
        self.count = 0


class Listener:
    """One listening socket; ``sockets`` and ``close()`` as on an asyncio server."""

    def __init__(
        self, server: Server, sock: socket.socket, port: int, tls: ssl.SSLContext | None, alarm: _FdAlarm
    ) -> None:
        self.server = server
        self.sock = sock
        self.sockets = [sock]
        self.port = port
        self.tls = tls
        self.alarm = alarm
        self.loop = asyncio.get_running_loop()
        self.tasks: set[asyncio.Task[Any]] = set()  # connections being set up (TLS: handshakes)
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self) -> None:
        self.loop.add_reader(self.sock.fileno(), self._accept)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
        else:
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        for task in list(self.tasks):
            task.cancel()

    def _accept(self) -> None:
        for _ in range(_ACCEPT_BATCH):
            try:
                conn, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:  # gone before it was accepted
                continue
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._back_off(exc)
                else:
                    log.warning("accept failed: %s", exc)
                return
            self._admit(conn, peer_ip(addr))

    def _back_off(self, exc: OSError) -> None:
        """Out of descriptors: stop reading the socket for a moment; the kernel keeps the
        new connections in its backlog meanwhile."""
        self.alarm.hit(self.server, exc)
        self.loop.remove_reader(self.sock.fileno())
        self._retry = self.loop.call_later(_ACCEPT_RETRY, self._resume)

    def _resume(self) -> None:
        self._retry = None
        if not self._closed:
            self.loop.add_reader(self.sock.fileno(), self._accept)
            self._accept()

    def _admit(self, conn: socket.socket, ip: str) -> None:
        """Check the limits at once: a refused connection holds its descriptor no longer than
        it takes to write ``ERROR`` (plain) or nothing (TLS) and close it."""
        conn.setblocking(False)
        refusal = self.server.reserve(ip, tls=self.tls is not None)
        if refusal is not None:
            if self.tls is None:
                try:
                    conn.send(refusal)
                except OSError:
                    pass
            conn.close()
            return
        protocol = Connection(self.server, self.port, reserved=True)
        task = self.loop.create_task(self._set_up(conn, protocol, ip))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _set_up(self, conn: socket.socket, protocol: Connection, ip: str) -> None:
        try:
            await self.loop.connect_accepted_socket(lambda: protocol, conn, ssl=self.tls)
        except asyncio.CancelledError:  # shutting down
            conn.close()
        except OSError as exc:  # a failed or abandoned TLS handshake (SSLError, timeout), a reset
            log.debug("connection set-up failed ip=%s: %r", ip, exc)
            conn.close()
        except Exception:
            log.exception("connection set-up failed ip=%s", ip)
            conn.close()
        finally:
            if protocol.reserved:  # the handshake never finished: give its place back
                protocol.reserved = False
                self.server.release(ip)


async def start_listeners(server: Server) -> list[Listener | asyncio.Server]:
    """Bind every configured listener; returns them (``sockets`` for their ports)."""
    cfg = server.config.server
    loop = asyncio.get_running_loop()
    server.delivery.schedule = loop.call_soon
    server.arrivals = Arrivals(loop)

    def call_later(delay: float, fn):  # timers fire on the loop, then outboxes are flushed
        def run() -> None:
            fn()
            server.flush_all()

        return loop.call_later(delay, run)

    server.timers.backend = call_later
    listeners: list[Listener | asyncio.Server] = []
    tls_ctx = None
    if cfg.tls_listen:
        if not cfg.tls_cert or not cfg.tls_key:
            raise ValueError("server.tls_listen needs server.tls_cert and server.tls_key")
        tls_ctx = make_tls_context(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca)
    alarm = _FdAlarm()
    native = _native_accept(loop)
    try:
        for addresses, ctx in ((cfg.listen, None), (cfg.tls_listen, tls_ctx)):
            for address in addresses:
                host, port = parse_hostport(address)
                if ctx is None and native:
                    # a partial, not a lambda: the compiled Connection is made without a Python frame
                    srv = await loop.create_server(
                        functools.partial(Connection, server, port), host or None, port,
                        reuse_address=True, backlog=4096,
                    )
                    listeners.append(srv)
                    socks = [sock.getsockname() for sock in srv.sockets]
                else:
                    own = [Listener(server, sock, port, ctx, alarm) for sock in _bind(host or None, port)]
                    listeners.extend(own)
                    socks = [listener.sock.getsockname() for listener in own]
                for name in socks:
                    if ctx is None:
                        server.plain_addresses.append((name[0], name[1]))
                    log.info("listening on %s%s", _addr(name), " (TLS)" if ctx else "")
    except BaseException:
        for listener in listeners:
            listener.close()
        raise
    limit_clients(server)
    for listener in listeners:
        if isinstance(listener, Listener):
            listener.start()
    return listeners


def _native_accept(loop: asyncio.AbstractEventLoop) -> bool:
    """uvloop accepts in C (about 40 us of CPU less per plain connection than a Python accept)
    and handles running out of descriptors quietly itself; asyncio's accept is Python too."""
    return type(loop).__module__.partition(".")[0] == "uvloop"


def _bind(host: str | None, port: int) -> list[socket.socket]:
    """Listening sockets for ``host`` (every interface when None), as ``create_server`` binds them."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    seen = set()
    try:
        for family, kind, proto, _, sockaddr in infos:
            if (family, sockaddr) in seen:
                continue
            seen.add((family, sockaddr))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # the IPv4 socket takes IPv4
            sock.bind(sockaddr)
            sock.listen(4096)
            sock.setblocking(False)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def _addr(sockname: tuple) -> str:
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
