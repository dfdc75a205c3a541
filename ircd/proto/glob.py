"""IRC glob masks, matched without backtracking.

A mask has ``*`` (any run of characters, none included), ``?`` (exactly one
character) and ``\\`` (the next character stands for itself). It is used for
WHO and LIST masks, channel ban, exception and invite lists, operator host
masks and server-name targets. The mask is case-folded with the server's
casemapping first, then its escapes are read (as before this module
existed); subjects are folded by the caller.

Invariant: a match never backtracks. The mask is cut at its stars into
segments of fixed length (literal characters and ``?``). The first segment
must sit at the start of the subject, the last at its end, and every segment
in between is placed at its leftmost occurrence after the one before. The
leftmost placement is always safe: the star that follows a segment absorbs
whatever lies between it and the next one, so if any placement of the
segments matches, the leftmost one does. A match is therefore at most one
forward search per segment (``str.find``, or for a segment with ``?`` a
regular expression without any repetition), each over the part of the
subject the previous one left: the work grows with the subject's length
times the longest segment's, and not at all with the number of stars. The
regular expression this replaced (``.*a.*a.*b``) grew about 26-fold per
extra ``*a`` against a long run of ``a``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

__all__ = ["Glob", "compile_mask", "mask_matches"]


def _segment(chars: list[str | None]) -> tuple[str, re.Pattern[str] | None, int]:
    """A run of the mask between two stars (None for ``?``): its text, or for a run with ``?`` a
    regular expression without repetition (it can only ever try each position once), and its length."""
    if None in chars:
        pattern = "".join("." if ch is None else re.escape(ch) for ch in chars)
        return "", re.compile(pattern, re.DOTALL), len(chars)
    return "".join(ch for ch in chars if ch is not None), None, len(chars)


class Glob:
    """A compiled mask; ``matches`` takes a subject folded like the mask was."""

    __slots__ = ("_any", "_head", "_middle", "_star", "_tail", "mask")

    def __init__(self, mask: str, casefold: Callable[[str], str] | None = None) -> None:
        self.mask = mask
        folded = casefold(mask) if casefold is not None else mask
        runs: list[list[str | None]] = [[]]
        i = 0
        n = len(folded)
        while i < n:
            ch = folded[i]
            if ch == "\\" and i + 1 < n:
                i += 1
                runs[-1].append(folded[i])
            elif ch == "*":
                if runs[-1] or len(runs) == 1:  # a run of stars is one star
                    runs.append([])
            elif ch == "?":
                runs[-1].append(None)
            else:
                runs[-1].append(ch)
            i += 1
        self._star = len(runs) > 1
        self._any = runs == [[], []]  # "*"
        # without a star the head is the whole mask and the tail is empty
        self._head = _segment(runs[0])
        self._tail = _segment(runs[-1] if self._star else [])
        self._middle = [_segment(run) for run in runs[1:-1] if run]

    def __repr__(self) -> str:
        return f"Glob({self.mask!r})"

    def matches(self, subject: str) -> bool:
        if self._any:
            return True
        head, head_re, pos = self._head
        if not self._star:  # the whole subject against one segment
            if head_re is None:
                return subject == head
            return len(subject) == pos and head_re.match(subject) is not None
        tail, tail_re, tail_size = self._tail
        end = len(subject) - tail_size
        if end < pos:
            return False
        if head_re is None:
            if not subject.startswith(head):
                return False
        elif head_re.match(subject) is None:
            return False
        if tail_re is None:
            if not subject.endswith(tail):
                return False
        elif tail_re.match(subject, end) is None:
            return False
        for text, pattern, size in self._middle:  # each at its leftmost place after the previous one
            if pattern is None:
                found = subject.find(text, pos, end)
            else:
                hit = pattern.search(subject, pos, end)
                found = -1 if hit is None else hit.start()
            if found < 0:
                return False
            pos = found + size
        return True


@functools.lru_cache(maxsize=1024)  # the same few masks again and again (oper blocks, server names)
def compile_mask(mask: str, casefold: Callable[[str], str] | None = None) -> Glob:
    return Glob(mask, casefold)


def mask_matches(mask: str, text: str, casefold: Callable[[str], str] | None = None) -> bool:
    """Whether ``text`` matches ``mask``, both folded with ``casefold``."""
    if casefold is not None:
        text = casefold(text)
    return compile_mask(mask, casefold).matches(text)
