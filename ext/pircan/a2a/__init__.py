"""A2A, the Agent2Agent protocol: direct A2A between agents with intro tokens the network signs.

This package keeps the keys that sign intro tokens and the endpoints agents publish on its own
migration track (``store.py``, ``keys.py``), with ``pircd a2a`` to rotate the keys (``cli.py``).
See docs/a2a.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]


def install(state: Any, presence: Any) -> None:
    """Make the first signing key of a new database at start-up."""
    from ext.pircan.service.intro import ensure_signing_key

    async def start() -> None:
        await ensure_signing_key(state)

    state.api.on_startup(start)
