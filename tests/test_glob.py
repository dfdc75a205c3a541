"""IRC glob masks (``ircd.proto.glob``): the same answers as the definition, in time that does not grow
with the number of wildcards, wherever a mask is matched (WHO, LIST, ban lists, stored bans).

Modern IRC, wildcard expressions: "``?`` matches exactly one character, ``*`` matches any number of
any characters"; pircd also reads ``\\`` as "the next character stands for itself". The matcher this
replaced turned a mask into a backtracking regular expression, whose cost grew about 26-fold per extra
``*a`` against a long run of ``a``: 18 bytes of WHO froze the server for 17 seconds.
"""

from __future__ import annotations

import random
import sys
import time

import pytest

from ircd.proto.casemap import casefold_ascii, casefold_rfc1459
from ircd.proto.glob import Glob, mask_matches
from tests.harness import Harness, config


def reference(mask: str, text: str) -> bool:
    """The definition, by dynamic programming over (mask position, text position)."""
    tokens: list[tuple[str, str]] = []  # ("*", "") / ("?", "") / ("=", char)
    i = 0
    while i < len(mask):
        ch = mask[i]
        if ch == "\\" and i + 1 < len(mask):
            i += 1
            tokens.append(("=", mask[i]))
        elif ch in "*?":
            tokens.append((ch, ""))
        else:
            tokens.append(("=", ch))
        i += 1
    # can[j]: tokens[:t] can match text[:j]
    can = [True] + [False] * len(text)
    for kind, ch in tokens:
        nxt = [False] * (len(text) + 1)
        for j in range(len(text) + 1):
            if kind == "*":
                nxt[j] = can[j] or (j > 0 and nxt[j - 1])
            elif j > 0 and can[j - 1] and (kind == "?" or text[j - 1] == ch):
                nxt[j] = True
        can = nxt
    return can[len(text)]


def test_agrees_with_the_definition():
    """Every mask over a small alphabet (stars, question marks, escapes) against many subjects."""
    rng = random.Random(1459)
    alphabet = "ab*?\\"
    for _ in range(6000):
        mask = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        text = "".join(rng.choice("ab*?\\") for _ in range(rng.randint(0, 9)))
        assert Glob(mask).matches(text) == reference(mask, text), (mask, text)


@pytest.mark.parametrize(
    ("mask", "text", "expected"),
    [
        ("*", "", True),
        ("*", "anything at all", True),
        ("", "", True),
        ("", "a", False),
        ("a*b", "ab", True),
        ("a*b", "aXXb", True),
        ("a*b", "aXXbc", False),
        ("*ab*ab", "abab", True),
        ("*ab*ab", "aab", False),  # the two segments may not overlap
        ("?", "", False),
        ("??", "ab", True),
        ("a?c*", "abcdef", True),
        ("*?b?*", "xbx", True),
        ("*b?", "xbxb", False),
        ("nick!*@*", "nick!user@host", True),
        ("*!*@127.0.0.*", "nick!user@127.0.0.1", True),
        ("*!*@127.0.0.*", "nick!user@127.0.1.1", False),
        ("a\\*b", "a*b", True),
        ("a\\*b", "aXb", False),
        ("a\\?b", "a?b", True),
        ("a\\?b", "aXb", False),
        ("a\\", "a\\", True),  # a backslash at the end stands for itself
        ("**a**", "xax", True),
    ],
)
def test_examples(mask, text, expected):
    assert Glob(mask).matches(text) is expected
    assert reference(mask, text) is expected


def test_casefolded_like_the_server():
    """The mask is folded with the server's casemapping; subjects are folded by the caller."""
    assert mask_matches("NICK[A]!*@*", "nick{a}!u@h", casefold_rfc1459)
    assert mask_matches("nick{a}!*@*", "NICK[A]!U@H", casefold_rfc1459)
    assert not mask_matches("NICK[A]!*@*", "nick{a}!u@h", casefold_ascii)
    assert mask_matches("NICK[A]!*@*", "nick[a]!u@h", casefold_ascii)


# cost ---------------------------------------------------------------------------------------


def _adversarial(stars: int) -> str:
    return "*a" * stars + "*b"


def test_thirty_wildcards_against_500_character_subjects_take_milliseconds():
    """A mask with 30 wildcards against 500-character subjects that almost match: the backtracking
    matcher needed far longer than the age of the universe for one of these; the whole batch must take
    well under a second (it takes about a millisecond)."""
    masks = [Glob(_adversarial(29)), Glob("*" + "a?" * 14 + "*b*"), Glob("?*" * 15 + "b")]
    subjects = ["a" * 500, "a" * 499 + "c", ("ab" * 250)[:-1] + "a", "a?" * 250]
    started = time.perf_counter()
    results = [m.matches(s) for m in masks for s in subjects]
    elapsed = time.perf_counter() - started
    assert results == [reference(m.mask, s) for m in masks for s in subjects]
    assert elapsed < 0.5, f"{elapsed:.3f}s for {len(results)} matches"


def _searches(glob: Glob, subject: str) -> int:
    """How many C-level string searches one match makes (profiled calls of built-in functions)."""
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "c_call":
            calls += 1

    sys.setprofile(profile)
    try:
        glob.matches(subject)
    finally:
        sys.setprofile(None)
    return calls


def test_work_is_one_forward_search_per_segment():
    """The matcher never backtracks: a match makes at most one search per segment of the mask (and a
    length check), whatever the subject's length; each search moves forward through the subject, so the
    whole match is linear in the subject for a given mask. The regex took ~26 times longer per ``*a``."""
    for stars in (1, 5, 10, 29):
        glob = Glob(_adversarial(stars))
        counts = {n: _searches(glob, "a" * n) for n in (50, 500, 5000)}
        assert len(set(counts.values())) == 1, counts  # the same for every length
        assert counts[500] <= stars + 4, counts  # head, tail, one per middle segment, len()


# where masks are matched -------------------------------------------------------------------


@pytest.fixture
def guest():
    h = Harness(config(flood={"enabled": False}, limits={"channellen": 64}))
    yield h
    h.close()


def test_who_with_many_wildcards_answers_at_once(guest):
    """The reported line: a guest whose realname is 150 ``a`` sends ``WHO *a*a*a*a*a*b`` (18 bytes)."""
    h = guest
    h.register("alice")
    h.connect("eve")
    h.send("eve", "NICK eve")
    h.send("eve", "USER eve 0 * :" + "a" * 150)
    h.take("eve")
    started = time.perf_counter()
    h.send("eve", "WHO " + _adversarial(12))
    h.send("eve", "WHO *aaa*")
    elapsed = time.perf_counter() - started
    assert h.lines("eve") == [
        f":irc.test 315 eve {_adversarial(12)} :End of WHO list",
        ":irc.test 352 eve * eve 127.0.0.1 irc.test eve H :0 " + "a" * 150,
        ":irc.test 315 eve *aaa* :End of WHO list",
    ]
    assert elapsed < 1.0, f"{elapsed:.3f}s"


def test_list_mask_with_many_wildcards_answers_at_once(guest):
    h = guest
    h.register("alice")
    name = "#" + "a" * 63
    h.send("alice", f"JOIN {name}")
    h.take("alice")
    started = time.perf_counter()
    h.send("alice", "LIST " + "#" + _adversarial(14))
    h.send("alice", "LIST #*aaa*,!#*b*")
    elapsed = time.perf_counter() - started
    lines = h.lines("alice")
    assert [ln.split()[1] for ln in lines] == ["321", "323", "321", "322", "323"]
    assert lines[3].split()[3] == name
    assert elapsed < 1.0, f"{elapsed:.3f}s"


def test_stored_ban_with_many_wildcards_costs_nothing_at_join(tmp_path):
    """A ban list entry is matched at every JOIN, and a registered channel keeps it across a restart:
    a hostile ban mask must not freeze the server at each JOIN."""
    h = Harness(config(flood={"enabled": False}, storage={"durability": "off"}), db=str(tmp_path / "b.db"))
    try:
        h.register("alice")
        h.send("alice", "JOIN #c")
        mask = _adversarial(14) + "!*@*"
        h.send("alice", f"MODE #c +b {mask}")
        h.send("alice", "MODE #c +b *a*a*a*!*@*")
        h.take("alice")
        nick = "a" * 31 + "c"
        h.register("victim", nick=nick)
        h.register("other", nick="zz")
        started = time.perf_counter()
        h.send("victim", "JOIN #c")
        h.send("other", "JOIN #c")
        elapsed = time.perf_counter() - started
        assert h.lines("victim") == [f":irc.test 474 {nick} #c :Cannot join channel (+b)"]
        assert h.numerics("other")[:1] == ["JOIN"]
        assert elapsed < 1.0, f"{elapsed:.3f}s"
    finally:
        h.close()
