"""Listening sockets (plain and TLS) and the once-a-second tick."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING

from ircd.config import parse_hostport
from ircd.net.connection import Connection

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")


def make_tls_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if client_ca:
        # ask for a client certificate (SASL EXTERNAL) without requiring one
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(client_ca)
    return ctx


async def start_listeners(server: "Server") -> list[asyncio.base_events.Server]:
    """Bind every configured listener; returns the asyncio servers (for their ports)."""
    cfg = server.config.server
    loop = asyncio.get_running_loop()
    server.schedule = loop.call_soon

    def call_later(delay: float, fn):  # timers fire on the loop, then outboxes are flushed
        def run() -> None:
            fn()
            server.flush_all()

        return loop.call_later(delay, run)

    server.timers.backend = call_later
    servers = []
    tls_ctx = None
    if cfg.tls_listen:
        if not cfg.tls_cert or not cfg.tls_key:
            raise ValueError("server.tls_listen needs server.tls_cert and server.tls_key")
        tls_ctx = make_tls_context(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca)
    for addresses, ctx in ((cfg.listen, None), (cfg.tls_listen, tls_ctx)):
        for address in addresses:
            host, port = parse_hostport(address)
            srv = await loop.create_server(
                lambda port=port: Connection(server, port),
                host or None,
                port,
                ssl=ctx,
                reuse_address=True,
                backlog=4096,
            )
            for sock in srv.sockets:
                log.info("listening on %s%s", _addr(sock.getsockname()), " (TLS)" if ctx else "")
            servers.append(srv)
    return servers


def _addr(sockname: tuple) -> str:
    host, port = sockname[0], sockname[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
