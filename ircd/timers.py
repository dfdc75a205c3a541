"""Timers for the core and extensions, independent of any event loop.

``Timers.call_later(delay, fn)`` returns a handle with ``cancel()``. The
network layer plugs in the event loop's own ``call_later``; without it (the
socket-free test harness) timers wait in a heap and fire when the harness
advances its clock and calls ``run_due()``.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import deque
from typing import Any, Callable, TypeVar

__all__ = ["Timers", "TimerHandle", "forget_idle"]

_K = TypeVar("_K")

log = logging.getLogger("pircd")


class TimerHandle:
    __slots__ = ("deadline", "fn", "cancelled", "_inner")

    def __init__(self, deadline: float, fn: Callable[[], None]) -> None:
        self.deadline = deadline
        self.fn = fn
        self.cancelled = False
        self._inner: Any = None

    def cancel(self) -> None:
        self.cancelled = True
        if self._inner is not None:
            self._inner.cancel()


class Timers:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = itertools.count()
        self.backend: Callable[[float, Callable[[], None]], Any] | None = None

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(self.clock() + max(0.0, delay), fn)
        if self.backend is not None:
            handle._inner = self.backend(max(0.0, delay), lambda: _fire(handle))
        else:
            heapq.heappush(self._heap, (handle.deadline, next(self._seq), handle))
        return handle

    def run_due(self) -> None:
        now = self.clock()
        while self._heap and self._heap[0][0] <= now:
            _, _, handle = heapq.heappop(self._heap)
            _fire(handle)


def _fire(handle: TimerHandle) -> None:
    if handle.cancelled:
        return
    handle.cancelled = True
    try:
        handle.fn()
    except Exception:
        log.exception("timer callback failed")


def forget_idle(records: dict[_K, deque[float]], cutoff: float) -> int:
    """Drop the keys of a sliding-window record (times, oldest first) whose newest
    time is at or before ``cutoff``; returns how many. The once-a-minute sweep uses
    it for the connection throttle and the login throttle."""
    stale = [key for key, times in records.items() if not times or times[-1] <= cutoff]
    for key in stale:
        del records[key]
    return len(stale)
