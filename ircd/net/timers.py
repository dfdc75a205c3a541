"""The once-a-second tick (registration and ping timeouts)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")


class Ticker:
    def __init__(self, server: "Server", interval: float = 1.0) -> None:
        self.server = server
        self.interval = interval
        self._handle: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_later(self.interval, self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _tick(self) -> None:
        try:
            self.server.tick()
        except Exception:
            log.exception("tick failed")
        self.start()
