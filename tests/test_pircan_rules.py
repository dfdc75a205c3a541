"""PIRCAN's rules as pure functions (ext/pircan/rules.py), with explicit times in milliseconds.

The numbers are the seed's (PIRCAN Communication v0.1, section 2): "Requests wait 7 days",
"one pending request per target, 20 pending, 10 requests per hour, 24 hours before asking an
agent that declined"; section 3: 8 hops, 40 messages per conversation per hour, 120 per sender
per agreement per hour.
"""

from __future__ import annotations

import pytest

from ext.pircan import rules
from ext.pircan.rules import DAY_MS, HOUR_MS, Limits, SlidingWindow

T0 = 1_800_000_000_000  # an arbitrary "now" in ms


def refusal(now=T0, pending=(), recent=(), declined=None, requester="alice", target="bob"):
    return rules.request_refusal(requester, target, now, list(pending), list(recent), declined)


# the numbers --------------------------------------------------------------------------


def test_limits_are_the_seeds_numbers():
    assert (Limits.request_ttl_ms, Limits.decline_cooldown_ms) == (7 * DAY_MS, DAY_MS)
    assert (Limits.max_pending_per_target, Limits.max_pending, Limits.requests_per_hour) == (1, 20, 10)
    assert (Limits.min_days, Limits.max_days) == (1, 365)
    assert (Limits.send_chars, Limits.body_bytes, Limits.max_hops) == (200, 60_000, 8)
    assert (Limits.conversation_per_hour, Limits.sender_per_agreement_per_hour) == (40, 120)
    assert Limits.notify_ttl_ms == DAY_MS
    assert HOUR_MS == 3_600_000 and DAY_MS == 86_400_000
    assert rules.POLICIES == ("agent-decides", "owner-decides", "auto-accept", "deny")


# request expiry: "Requests wait 7 days" ----------------------------------------------------


def test_request_expires_at_exactly_seven_days():
    assert rules.request_expired(T0, T0 + 7 * DAY_MS) is True
    assert rules.request_expired(T0, T0 + 7 * DAY_MS + 1) is True


def test_request_not_expired_one_ms_before_seven_days():
    assert rules.request_expired(T0, T0 + 7 * DAY_MS - 1) is False
    assert rules.request_expired(T0, T0) is False


# request_refusal ---------------------------------------------------------------------------


def test_no_refusal_for_a_first_request():
    assert refusal() is None


def test_self_contact():
    assert refusal(requester="alice", target="alice") == "SELF_CONTACT"


def test_one_pending_request_per_target():
    assert refusal(pending=["bob"]) == "PENDING_EXISTS"
    assert refusal(pending=["carol"]) is None


def test_twenty_pending_requests_at_most():
    nineteen = [f"agent{i}" for i in range(19)]
    assert refusal(pending=nineteen) is None
    assert refusal(pending=nineteen + ["agent19"]) == "PENDING_LIMIT"


def test_pending_exists_is_checked_before_the_pending_limit():
    assert refusal(pending=[f"agent{i}" for i in range(19)] + ["bob"]) == "PENDING_EXISTS"


def test_ten_requests_per_sliding_hour():
    """The 11th request inside the hour is refused; it is allowed again once the oldest is an hour old."""
    times = [T0 + i * 60_000 for i in range(10)]  # ten requests, one a minute
    inside = times[-1] + 1
    assert refusal(now=inside, recent=times[:9]) is None  # the 10th
    assert refusal(now=inside, recent=times) == "RATE_LIMITED"  # the 11th
    assert refusal(now=times[0] + HOUR_MS - 1, recent=times) == "RATE_LIMITED"
    assert refusal(now=times[0] + HOUR_MS, recent=times) is None  # the oldest is an hour old


def test_decline_cooldown_is_24_hours():
    declined = T0
    assert refusal(now=declined + 1, declined=declined) == "COOLDOWN"
    assert refusal(now=declined + DAY_MS - 1, declined=declined) == "COOLDOWN"
    assert refusal(now=declined + DAY_MS, declined=declined) is None
    assert refusal(now=declined + DAY_MS + 1, declined=declined) is None


def test_refusal_order():
    """Self-contact, then pending per target, pending total, hourly rate, cooldown."""
    busy = {"pending": ["bob"] + [f"a{i}" for i in range(19)], "recent": [T0] * 10, "declined": T0}
    assert refusal(requester="bob", target="bob", **busy) == "SELF_CONTACT"
    assert refusal(**busy) == "PENDING_EXISTS"
    busy["pending"] = [f"a{i}" for i in range(20)]
    assert refusal(**busy) == "PENDING_LIMIT"
    busy["pending"] = []
    assert refusal(**busy) == "RATE_LIMITED"
    busy["recent"] = []
    assert refusal(**busy) == "COOLDOWN"


# scopes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("message", ("message",)),
        ("resource:read", ("resource:read",)),
        ("task:translate", ("task:translate",)),
        ("task:translate,message", ("message", "task:translate")),
        ("resource:read,task:b,message,task:a", ("message", "resource:read", "task:a", "task:b")),
        ("MESSAGE,Task:Summarise", ("message", "task:summarise")),
        ("message,message", ("message",)),
        (" message , resource:read ", ("message", "resource:read")),
        ("task:a.b_c-9", ("task:a.b_c-9",)),
        ("task:" + "x" * 64, ("task:" + "x" * 64,)),
    ],
)
def test_parse_scopes_canonical_order(text, expected):
    """Canonical: message first, the rest sorted; duplicates merged; case folded."""
    assert rules.parse_scopes(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", ",", "message,", "messages", "task:", "task:-x", "task:a b", "task:" + "x" * 65, "resource:write",
     "resource", "message,bogus", "task:ü"],
)
def test_parse_scopes_invalid(text):
    assert rules.parse_scopes(text) is None


@pytest.mark.parametrize("text, days", [("1", 1), ("365", 365), ("30", 30), ("007", 7)])
def test_parse_days_valid(text, days):
    assert rules.parse_days(text) == days


@pytest.mark.parametrize("text", ["0", "366", "-1", "1.5", "", "x", " 7", "1e2", "²", "١٢"])
def test_parse_days_invalid(text):
    assert rules.parse_days(text) is None


def test_narrowing_grants_fewer_never_more_never_none():
    requested = ("message", "task:a", "resource:read")
    assert rules.is_narrowing(requested, ("message",))
    assert rules.is_narrowing(requested, requested)
    assert rules.is_narrowing(requested, ("task:a", "resource:read"))
    assert not rules.is_narrowing(requested, ("task:b",))
    assert not rules.is_narrowing(("message",), ("message", "task:a"))
    assert not rules.is_narrowing(requested, ())


def test_auto_accept_grants_only_message():
    assert rules.auto_accept_scopes(("message", "task:a", "resource:read")) == ("message",)
    assert rules.auto_accept_scopes(("message",)) == ("message",)
    assert rules.auto_accept_scopes(("task:a", "resource:read")) == ()


def test_allows_directions():
    """message: both ways; task:<skill> and resource:read: requester to target only."""
    scopes = ("message", "task:a", "resource:read")
    assert rules.allows(scopes, "alice", "bob", "alice", "message")
    assert rules.allows(scopes, "alice", "bob", "bob", "message")
    assert not rules.allows(scopes, "alice", "bob", "carol", "message")
    assert rules.allows(scopes, "alice", "bob", "alice", "task:a")
    assert not rules.allows(scopes, "alice", "bob", "bob", "task:a")
    assert rules.allows(scopes, "alice", "bob", "alice", "resource:read")
    assert not rules.allows(scopes, "alice", "bob", "bob", "resource:read")
    assert not rules.allows(scopes, "alice", "bob", "alice", "task:b")
    assert not rules.allows(("task:a",), "alice", "bob", "alice", "message")


# INBOX WAIT timeouts: the agent mailbox's normalisation ------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, 120_000),
        ("", 120_000),
        ("0", None),  # 0 waits forever
        ("0.0", None),
        ("-0", None),
        ("2.9", 2),  # truncated
        ("0.5", 1),  # at least 1 ms
        ("0.0001", 1),
        ("1", 1),
        ("5000", 5000),
        ("1e3", 1000),
        ("-1", 120_000),  # negative -> default
        ("-0.5", 120_000),
        ("NaN", 120_000),
        ("nan", 120_000),
        ("inf", 120_000),
        ("-inf", 120_000),
        ("garbage", 120_000),
        ("0x10", 120_000),
        ("5s", 120_000),
    ],
)
def test_normalize_timeout(value, expected):
    assert rules.normalize_timeout(value) == expected


def test_normalize_timeout_uses_the_given_default():
    assert rules.normalize_timeout(None, 5_000) == 5_000
    assert rules.normalize_timeout("-3", 5_000) == 5_000
    assert rules.normalize_timeout("0", 5_000) is None


# SlidingWindow (the conversation and agreement budgets) ------------------------------------------


def test_sliding_window_counts_the_last_hour():
    window = SlidingWindow()
    for i in range(3):
        window.add(T0 + i * 1000)
    assert window.count(T0 + 2000) == 3
    assert window.count(T0 + HOUR_MS - 1) == 3
    assert window.count(T0 + HOUR_MS) == 2  # the oldest is an hour old: out
    assert window.count(T0 + HOUR_MS + 2000) == 0


def test_sliding_window_remove():
    window = SlidingWindow(span=10)
    window.add(1)
    window.add(2)
    window.remove(1)
    window.remove(99)  # unknown: ignored
    assert window.count(3) == 1


def test_budget_windows_are_pruned_after_an_hour():
    from ext.pircan.rules import HOUR_MS
    from ext.pircan.state import Pircan

    state = Pircan(object(), object())  # type: ignore[arg-type]  # only the windows are exercised
    state.conversation_window(1).add(1_000)
    state.budget_window("a", 7).add(1_000)
    state.conversation_window(2).add(1_000 + HOUR_MS)
    state.prune_windows(1_000 + HOUR_MS)
    assert list(state.conversations) == [2]
    assert state.budgets == {}


def test_sliding_window_drops_exactly_the_times_an_hour_old_and_stays_small():
    """The oldest times leave in one cut (equal times included); a window of one time, what
    every new conversation keeps for an hour, is a few dozen bytes, not a deque's block."""
    import sys

    window = SlidingWindow(span=100)
    for at in (1, 5, 5, 5, 9, 50):
        window.add(at)
    assert window.count(104) == 5  # 1 is out (104 - 100 >= 1)
    assert window.count(105) == 2  # the three 5s leave together
    assert window.times == [9, 50]
    assert window.retry_after_s(105) == 1
    assert window.count(150) == 0 and window.times == []
    one = SlidingWindow()
    one.add(T0)
    assert sys.getsizeof(one) + sys.getsizeof(one.times) <= 160
