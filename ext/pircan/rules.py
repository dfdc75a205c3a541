"""PIRCAN's rules as pure functions: no I/O, the time is always passed in.

Numbers are the seed's (PIRCAN Communication v0.1): durations 1-365 days,
requests wait 7 days, one pending request per target, 20 pending, 10
requests per sliding hour, 24 hours after a decline; 200-character IRC
SEND, 8 hops, 40 messages per conversation per hour, 120 per sender per
agreement per hour.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from typing import Iterable

__all__ = [
    "HOUR_MS",
    "DAY_MS",
    "parse_scopes",
    "parse_days",
    "is_narrowing",
    "auto_accept_scopes",
    "request_refusal",
    "request_expired",
    "allows",
    "normalize_timeout",
    "SlidingWindow",
    "Limits",
    "POLICIES",
]

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
POLICIES = ("agent-decides", "owner-decides", "auto-accept", "deny")
_SKILL = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


class Limits:
    """The seed's numbers (a config may lower the per-hour budgets for tests, never the meaning)."""

    request_ttl_ms = 7 * DAY_MS
    max_pending_per_target = 1
    max_pending = 20
    requests_per_hour = 10
    decline_cooldown_ms = DAY_MS
    min_days, max_days = 1, 365
    send_chars = 200
    body_bytes = 60_000
    max_hops = 8
    conversation_per_hour = 40
    sender_per_agreement_per_hour = 120
    notify_ttl_ms = DAY_MS


def parse_scopes(text: str) -> tuple[str, ...] | None:
    """``message,task:translate`` -> canonical tuple; None when any scope is unknown or the list is empty."""
    scopes = set()
    for raw in text.split(","):
        scope = raw.strip().lower()
        if scope in ("message", "resource:read"):
            scopes.add(scope)
        elif scope.startswith("task:") and _SKILL.match(scope[5:]):
            scopes.add(scope)
        else:
            return None
    if not scopes:
        return None
    return tuple(sorted(scopes, key=lambda s: (s != "message", s)))


def parse_days(text: str) -> int | None:
    """``1``..``365`` in ASCII digits; None otherwise (``str.isdigit`` alone passes ``²``, which ``int`` rejects)."""
    if not (text.isascii() and text.isdigit()):
        return None
    days = int(text)
    return days if Limits.min_days <= days <= Limits.max_days else None


def is_narrowing(requested: Iterable[str], granted: Iterable[str]) -> bool:
    """An acceptance may grant fewer scopes, never more (and never none)."""
    granted = set(granted)
    return bool(granted) and granted <= set(requested)


def auto_accept_scopes(requested: Iterable[str]) -> tuple[str, ...]:
    """auto-accept grants only the message scope; nothing when it was not asked for."""
    return ("message",) if "message" in requested else ()


def request_expired(created_at: int, now: int) -> bool:
    return now - created_at >= Limits.request_ttl_ms


def request_refusal(
    requester: str,
    target: str,
    now: int,
    pending_targets: list[str],
    recent_request_times: list[int],
    last_decline_at: int | None,
) -> str | None:
    """The FAIL code that refuses a new contact request, or None.

    ``pending_targets``: the targets of the requester's pending, unexpired requests;
    ``recent_request_times``: creation times of the requester's requests (any state);
    ``last_decline_at``: when ``target`` last declined the requester, if ever.
    """
    if requester == target:
        return "SELF_CONTACT"
    if pending_targets.count(target) >= Limits.max_pending_per_target:
        return "PENDING_EXISTS"
    if len(pending_targets) >= Limits.max_pending:
        return "PENDING_LIMIT"
    if sum(1 for t in recent_request_times if now - t < HOUR_MS) >= Limits.requests_per_hour:
        return "RATE_LIMITED"
    if last_decline_at is not None and now - last_decline_at < Limits.decline_cooldown_ms:
        return "COOLDOWN"
    return None


def allows(scopes: Iterable[str], requester: str, target: str, sender: str, scope: str) -> bool:
    """Whether an agreement's scopes let ``sender`` use ``scope`` toward the other party.

    ``message`` works both ways; ``task:*`` and ``resource:read`` only from requester to target.
    """
    if scope not in scopes:
        return False
    if scope == "message":
        return sender in (requester, target)
    return sender == requester


DEFAULT_TIMEOUT_MS = 120_000


def normalize_timeout(value: str | None, default: int = DEFAULT_TIMEOUT_MS) -> int | None:
    """A WAIT timeout in ms, like the agent mailbox's: 0 waits forever (None), a negative or
    non-numeric value falls back to the default, a positive one is truncated and at least 1."""
    if value is None or value == "":
        return default
    try:
        number = float(value)
    except ValueError:
        return default
    if not math.isfinite(number) or number < 0:
        return default
    if number == 0:
        return None
    return max(1, int(number))


class SlidingWindow:
    """Event times (ms) in the last ``span`` milliseconds, oldest first.

    A list, not a deque: every new conversation keeps a window for an hour, most of them with
    one time in it, and an empty deque alone is 760 bytes (a block of 64 slots) against a
    one-element list's 64. A window holds at most a limit's worth of times (a few hundred), so
    dropping the old ones from the front is a short copy."""

    __slots__ = ("span", "times")

    def __init__(self, span: int = HOUR_MS) -> None:
        self.span = span
        self.times: list[int] = []

    def count(self, now: int) -> int:
        times = self.times
        if times and times[0] <= now - self.span:
            del times[: bisect_right(times, now - self.span)]
        return len(times)

    def add(self, at: int) -> None:
        self.times.append(at)

    def retry_after_s(self, now: int) -> int:
        """Whole seconds until the oldest time leaves the window (a slot frees), at least 1."""
        self.count(now)
        if not self.times:
            return 1
        return max(1, -(-(self.times[0] + self.span - now) // 1000))

    def remove(self, at: int) -> None:
        try:
            self.times.remove(at)
        except ValueError:
            pass
