"""The network's state behind one interface (``NetworkState``), and its in-memory
implementation (``LocalState``); ``Client`` and ``Channel`` are the records it holds."""

from __future__ import annotations

from ircd.state.base import NetworkState, WhowasEntry
from ircd.state.local import LocalState

__all__ = ["LocalState", "NetworkState", "WhowasEntry"]
