"""Mode strings: splitting ``+ov-k alice bob key`` into single changes.

Channel modes come in the four ISUPPORT CHANMODES types plus prefix modes:
A (lists: a parameter to add or remove, none to query), B (a parameter both
ways), C (a parameter only when set), D (no parameter), and prefix modes
(a nick, both ways).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ModeChange", "parse_modes", "LIST", "ALWAYS", "SET_ONLY", "FLAG", "PREFIX"]

LIST = "A"
ALWAYS = "B"
SET_ONLY = "C"
FLAG = "D"
PREFIX = "P"


class ModeChange(NamedTuple):
    adding: bool
    mode: str
    arg: str | None


def parse_modes(
    modestring: str, args: list[str], kinds: dict[str, str]
) -> tuple[list[ModeChange], list[str]]:
    """Return (changes, unknown mode characters). Missing parameters give arg None."""
    changes: list[ModeChange] = []
    unknown: list[str] = []
    adding = True
    args = list(args)
    for ch in modestring:
        if ch == "+":
            adding = True
            continue
        if ch == "-":
            adding = False
            continue
        kind = kinds.get(ch)
        if kind is None:
            unknown.append(ch)
            continue
        takes = kind in (LIST, ALWAYS, PREFIX) or (kind == SET_ONLY and adding)
        arg = args.pop(0) if takes and args else None
        changes.append(ModeChange(adding, ch, arg))
    return changes, unknown


def format_changes(changes: list[ModeChange]) -> tuple[str, list[str]]:
    """The canonical ``+ab-c`` string and its parameters for applied changes."""
    out = []
    params = []
    sign = ""
    for change in changes:
        want = "+" if change.adding else "-"
        if want != sign:
            out.append(want)
            sign = want
        out.append(change.mode)
        if change.arg is not None:
            params.append(change.arg)
    return "".join(out), params
