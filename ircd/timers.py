"""Timers for the core and extensions, independent of any event loop.

``Timers.call_later(delay, fn)`` returns a handle with ``cancel()``. The
network layer plugs in the event loop's own ``call_later`` (``backend``);
without it (the socket-free test harness) timers wait in a heap and fire when
the harness advances its clock and calls ``run_due()``.

Invariant: no timer is stranded in the heap. Start-up hooks (the history
writer's first prune, PIRCAN's sweep) set timers before the network layer
plugs in the loop; plugging it in hands every timer still waiting in the heap
to the loop, with the time it has left.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections import deque
from typing import Any, Callable, TypeVar

__all__ = ["Timers", "TimerHandle", "forget_idle"]

_K = TypeVar("_K")

# an event loop's call_later: (delay in seconds, callback) -> a handle with cancel()
Backend = Callable[[float, Callable[[], None]], Any]

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
        self._backend: Backend | None = None

    @property
    def backend(self) -> Backend | None:
        return self._backend

    @backend.setter
    def backend(self, backend: Backend | None) -> None:
        """Plug in (or unplug) an event loop's ``call_later``; timers set before move to it."""
        self._backend = backend
        if backend is None:
            return
        waiting, self._heap = self._heap, []
        now = self.clock()
        for deadline, _, handle in sorted(waiting):
            if not handle.cancelled:
                _schedule(backend, handle, deadline - now)

    def call_later(self, delay: float, fn: Callable[[], None]) -> TimerHandle:
        handle = TimerHandle(self.clock() + max(0.0, delay), fn)
        if self._backend is not None:
            _schedule(self._backend, handle, delay)
        else:
            heapq.heappush(self._heap, (handle.deadline, next(self._seq), handle))
        return handle

    def run_due(self) -> None:
        now = self.clock()
        while self._heap and self._heap[0][0] <= now:
            _, _, handle = heapq.heappop(self._heap)
            _fire(handle)


def _schedule(backend: Backend, handle: TimerHandle, delay: float) -> None:
    handle._inner = backend(max(0.0, delay), lambda: _fire(handle))


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
