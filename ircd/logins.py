"""Login throttling: password checks per source and per target, in a sliding window.

A *target* is what a password is guessed for: an account (``a:<folded name>``) or an
operator name (``o:<name>``). A *source* is where the guesses come from: the client's IPv4
address, or the /64 network of an IPv6 address (one host usually holds a whole /64).

Three limits, each over ``accounts.login_window`` seconds:

* per source and target (``accounts.login_attempts``): a guesser's failures slow the
  guesser, never the owner connecting from elsewhere;
* per source (``accounts.login_ip_attempts``): one source guessing at many targets; a
  source the target logged in from before is held to the first limit only, so others'
  failures from a shared address (a reverse proxy, a NAT) do not lock out an account
  that uses it;
* per target, counting only sources that never logged in to it successfully
  (``accounts.login_account_attempts``): a guesser spread over many sources is still
  held to a fixed number of guesses per window, while the sources the owner logged in
  from before are never refused on its account.

An attempt is counted when it starts, before any password is checked, and taken back when
it succeeds. Checks take tens of milliseconds in a worker thread: counting only finished
failures would let any number of simultaneous guesses through before the first one is
recorded. An attempt that never finishes (a SCRAM exchange left half-way) stays counted.

Bearer tokens (``ircd/tokens.py``) keep their own keys in the same records, through
``wait_for`` and ``count``: their secrets cannot be guessed, so only finished failures count.

Records older than the window are forgotten at most once a minute, when an attempt starts.
"""

from __future__ import annotations

import functools
import ipaddress
import math
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ircd.timers import forget_idle

if TYPE_CHECKING:
    from ircd.config import AccountsSection

__all__ = ["KNOWN_PER_TARGET", "Attempt", "LoginLimits", "LoginThrottle", "login_limits", "source_of", "throttled_text"]

KNOWN_PER_TARGET = 16  # sources remembered per target (the most recent successful ones)
_PRUNE_EVERY = 60.0


@functools.lru_cache(maxsize=4096)
def source_of(ip: str) -> str:
    """The source an address counts as: an IPv4 address itself, an IPv6 address's /64. Asked for
    every HTTP request and login; ``ipaddress`` takes microseconds, so an address is parsed once
    (while among the last 4,096 asked about)."""
    try:
        address = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


@dataclass(frozen=True, slots=True)
class LoginLimits:
    per_pair: int  # per source and target
    per_source: int
    per_target: int  # per target, from sources that never logged in to it
    window: float


@dataclass(slots=True)
class Attempt:
    """A password check that has started; end it with ``succeeded`` or ``failed``."""

    source: str
    target: str | None
    at: float
    keys: tuple[str, ...]
    done: bool = False


class LoginThrottle:
    def __init__(self) -> None:
        self._times: dict[str, deque[float]] = {}  # key -> attempt times, oldest first
        # target -> sources that logged in to it, least recent first (a dict keeps the order)
        self._known: dict[str, dict[str, None]] = {}
        self._next_prune = 0.0

    def begin(self, source: str, target: str | None, now: float, limits: LoginLimits) -> Attempt | float:
        """Count an attempt of ``source`` on ``target`` (None: the per-source limit only), or
        return the seconds to wait."""
        if now >= self._next_prune:
            self.prune(now, limits.window)
        checks = [("s:" + source, limits.per_source)]
        if target is not None:
            pair = ("p:" + source + " " + target, limits.per_pair)
            # a source the target logged in from: only its own failures on the target hold it back
            known = self.is_known(target, source)
            checks = [pair] if known else [pair, *checks, ("t:" + target, limits.per_target)]
        wait = self._wait(checks, now, limits.window)
        if wait > 0:
            return wait
        for key, _ in checks:
            self._times.setdefault(key, deque()).append(now)
        return Attempt(source, target, now, tuple(key for key, _ in checks))

    def source_wait(self, source: str, now: float, limits: LoginLimits) -> float:
        """Seconds before ``source`` may try anything again (0: now); nothing is counted."""
        return self._wait([("s:" + source, limits.per_source)], now, limits.window)

    def wait_for(self, checks: list[tuple[str, int]], now: float, window: float) -> float:
        """Seconds before none of ``checks`` (key, limit) is at its limit (0: now); nothing is counted."""
        if now >= self._next_prune:
            self.prune(now, window)
        return self._wait(checks, now, window)

    def count(self, keys: list[str], now: float) -> None:
        """Record a failure under each key (for checks counted once they failed)."""
        for key in keys:
            self._times.setdefault(key, deque()).append(now)

    def forget(self, key: str) -> None:
        self._times.pop(key, None)

    def _wait(self, checks: list[tuple[str, int]], now: float, window: float) -> float:
        wait = 0.0
        for key, limit in checks:
            times = self._recent(key, now, window)
            if len(times) >= limit:
                wait = max(wait, times[-limit] + window - now)
        return wait

    def succeeded(self, attempt: Attempt) -> None:
        """Take the attempt back, forgive its source's earlier failures on the target, and
        remember the source as one the target's owner logs in from."""
        if attempt.done:
            return
        attempt.done = True
        for key in attempt.keys:
            times = self._times.get(key)
            if times is not None and attempt.at in times:
                times.remove(attempt.at)
                if not times:
                    del self._times[key]
        if attempt.target is not None:
            self._times.pop(attempt.keys[0], None)
            self.remember(attempt.target, attempt.source)

    def failed(self, attempt: Attempt) -> None:
        attempt.done = True  # it stays counted

    def is_known(self, target: str, source: str) -> bool:
        known = self._known.get(target)
        return known is not None and source in known

    def remember(self, target: str, source: str) -> None:
        known = self._known.setdefault(target, {})
        known.pop(source, None)
        known[source] = None
        while len(known) > KNOWN_PER_TARGET:
            del known[next(iter(known))]

    def _recent(self, key: str, now: float, window: float) -> deque[float]:
        times = self._times.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - window:
            times.popleft()
        return times

    def prune(self, now: float, window: float) -> int:
        """Forget keys whose last attempt left the window; returns how many."""
        self._next_prune = now + _PRUNE_EVERY
        return forget_idle(self._times, now - window)

    def __len__(self) -> int:
        return len(self._times)


def login_limits(cfg: AccountsSection) -> LoginLimits:
    """The login throttle's limits from ``[accounts]`` (SASL, NickServ and OPER share them)."""
    return LoginLimits(
        cfg.login_attempts, cfg.login_ip_attempts, cfg.login_account_attempts, cfg.login_window
    )


def throttled_text(wait: float) -> str:
    return f"Too many failed attempts; try again in {math.ceil(wait)} seconds"
