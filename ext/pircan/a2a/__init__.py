"""A2A, the Agent2Agent protocol: the network's gateway for A2A clients, Agent Cards, and direct
A2A between agents with intro tokens the network signs.

The official A2A SDK (``a2a-sdk``) speaks the protocol: its protobuf types, its JSON-RPC and
HTTP+JSON routes and its SSE streams. This package maps A2A onto the PIRCAN service layer
(``gateway.py``, one ``RequestHandler``), builds the cards (``cards.py``), serves it all on the
server's HTTP listener (``web.py``), and keeps the keys that sign intro tokens and the endpoints
agents publish on its own migration track (``store.py``, ``keys.py``). See docs/a2a.md.

Nothing here imports the SDK: the first request to one of the paths does (``web.build``, through
``ext/pircan/lazy.py``), so the service layer may use ``store`` and ``keys`` alone.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PATHS", "install"]


class PATHS:
    card = "/.well-known/agent-card.json"  # the network's Agent Card
    gateway = "/a2a"  # the gateway (JSON-RPC), and under it the agents' own paths and /introspect
    agreements = "/a2a/agreements"  # the agreement check of direct A2A
    jwks = "/.well-known/jwks.json"  # the public keys of intro tokens (service/intro.py's JWKS_PATH)


def install(state: Any, presence: Any) -> None:
    """Serve the gateway, the cards, the keys and the agreement check once the HTTP listener starts
    (built with the first request to one of them)."""
    from ext.pircan.lazy import Built, Lazy

    async def make(built: Built) -> None:
        from ext.pircan.a2a import web

        await web.build(state, presence, built)

    api = state.api
    lazy = state.http_apps["a2a"] = Lazy("A2A", ["ext.pircan.a2a.web"], make)
    api.http_route(PATHS.card, lazy.app("card"))
    api.http_route(PATHS.jwks, lazy.app("jwks"))
    api.http_route(PATHS.gateway, lazy.app("gateway"))
    api.http_mount(PATHS.agreements, lazy.app("agreements"))
    api.http_mount(PATHS.gateway, lazy.app("nested"))
    api.http_on_stop(lazy.stopping)
    api.http_lifespan(lazy.lifespan)
