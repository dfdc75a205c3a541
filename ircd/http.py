"""What the HTTP listener serves: routes and lifespans that extensions register (no I/O here).

``ircd/net/http.py`` serves them; extensions add to them through ``ircd.api``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["HttpRoutes", "Lifespan"]

Lifespan = Callable[[], "contextlib.AbstractAsyncContextManager[Any]"]


@dataclass
class HttpRoutes:
    """Exact paths, path prefixes, and lifespans (entered before the listener serves, left after)."""

    routes: list[tuple[str, Any]] = field(default_factory=list)  # (path, ASGI app)
    mounts: list[tuple[str, Any]] = field(default_factory=list)  # (prefix, ASGI app)
    lifespans: list[Lifespan] = field(default_factory=list)
    stop_hooks: list[Callable[[], None]] = field(default_factory=list)  # called as the listener stops
    base_url: str = ""  # once listening: http.public_url, or the first listener's address
    addresses: list[tuple[str, int]] = field(default_factory=list)  # once listening
    # once listening: Host and Origin values accepted (``name:*`` for any port)
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    # the most HTTP connections the open-file limit leaves room for (None: http.max_connections)
    fd_cap: int | None = None
    gate: Any = None  # once listening: the HTTP connections counted at accept (ircd.net.http.HttpGate)
