"""A2A, the Agent2Agent protocol: the network's gateway for A2A clients, Agent Cards, and direct
A2A between agents with intro tokens the network signs.

The official A2A SDK (``a2a-sdk``) speaks the protocol: its protobuf types, its JSON-RPC and
HTTP+JSON routes and its SSE streams. This package maps A2A onto the PIRCAN service layer
(``gateway.py``, one ``RequestHandler``), builds the cards (``cards.py``), serves it all on the
server's HTTP listener (``web.py``), and keeps the keys that sign intro tokens and the endpoints
agents publish on its own migration track (``store.py``, ``keys.py``). See docs/a2a.md.

Only ``install`` imports the SDK, so the service layer may use ``store`` and ``keys`` alone.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]


def install(state: Any, presence: Any) -> None:
    """Serve the gateway, the cards, the keys and the agreement check once the HTTP listener starts;
    make the first signing key of a new database at start-up."""
    from ext.pircan.a2a import web
    from ext.pircan.service.intro import ensure_signing_key

    web.install(state, presence)

    async def start() -> None:
        await ensure_signing_key(state)

    state.api.on_startup(start)
