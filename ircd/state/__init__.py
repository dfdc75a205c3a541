"""The network's state behind one interface (``NetworkState``), and its in-memory
implementation (``LocalState``); ``Client`` and ``Channel`` are the records it holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ircd.state.base import NetworkState, WhowasEntry
from ircd.state.local import LocalState

__all__ = ["LocalState", "NetworkState", "WhowasEntry"]

if TYPE_CHECKING:
    # ``Server.state`` is annotated with the implementation (direct calls in the compiled build):
    # mypy checks here that it still is everything the interface promises
    def _implements(state: LocalState) -> NetworkState:
        return state
