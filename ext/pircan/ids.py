"""Ids and small numbers as PIRCAN reads them from any transport, strictly, in one place."""

from __future__ import annotations

from datetime import datetime, timezone

from ircd.proto.msgid import format_id

__all__ = ["parse_id", "parse_count", "hexid", "ts", "MAX_ID", "NO_VALUE"]

NO_VALUE = "*"

# SQLite's INTEGER is signed 64-bit and the server's ids are below 2**63 (a 41-bit time in ms
# shifted left 22 bits): a larger number names nothing.
MAX_ID = (1 << 63) - 1
_HEX = frozenset("0123456789abcdefABCDEF")


def parse_id(text: str) -> int | None:
    """An id written as exactly 16 ASCII hex digits, below 2**63; None for anything else
    (``int()`` alone would also take '0x...', spaces, '_', signs and other scripts' digits)."""
    if len(text) != 16 or not _HEX.issuperset(text):
        return None
    value = int(text, 16)
    return value if value <= MAX_ID else None


def parse_count(text: str, low: int, high: int) -> int | None:
    """A whole number in ASCII digits, clamped to ``low``..``high``; None when it is not one."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    return max(low, min(high, int(text)))


def hexid(ident: int | None) -> str:
    """An id as 16 lowercase hex digits; * for none."""
    return NO_VALUE if ident is None else format_id(ident)


def ts(ms: int | None) -> str:
    """Milliseconds since the epoch in server-time format; * for none."""
    if ms is None:
        return NO_VALUE
    dt = datetime.fromtimestamp(ms / 1000, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)
