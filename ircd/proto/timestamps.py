"""IRCv3 server-time strings and their place among the time-ordered message ids.

A timestamp is ``YYYY-MM-DDThh:mm:ss.sssZ`` (millisecond precision, UTC), as
the server-time extension sends it. Because a message id starts with the
milliseconds at which it was made (``ircd.proto.msgid``), a timestamp maps to
a range of ids: ``first_id_at(ms)`` .. ``last_id_at(ms)``. History queries by
timestamp are therefore range scans on the integer id, with no time index.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

from ircd.proto.msgid import EPOCH_MS, SEQ_BITS

__all__ = ["MAX_ID", "first_id_at", "format_ms", "last_id_at", "parse_timestamp"]

MAX_ID = (1 << 63) - 1  # the largest id SQLite can hold
_FORMAT = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{3})Z$")


def parse_timestamp(text: str) -> int | None:
    """Unix milliseconds of a server-time string, or None when it is not one."""
    match = _FORMAT.match(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, millis = (int(g) for g in match.groups())
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    return int(moment.timestamp()) * 1000 + millis


_last_second: tuple[int, str] = (-1, "")  # the second formatted last, and its "YYYY-MM-DDThh:mm:ss."
_MILLIS: Final = [f"{ms:03d}Z" for ms in range(1000)]  # "000Z" to "999Z": 1,000 short strings, 60 KiB


def format_ms(ms: int) -> str:
    """The server-time string of Unix milliseconds (integer arithmetic, no float rounding).

    Every message is stamped, so the date and time of day are formatted once per
    second (strftime costs about 40 times the rest) and reused for its milliseconds,
    whose text is looked up rather than formatted.
    """
    global _last_second
    second, millis = divmod(ms, 1000)
    cached_second, prefix = _last_second  # one tuple: threads never see half an update
    if cached_second != second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S.")
        _last_second = (second, prefix)
    return prefix + _MILLIS[millis]


def first_id_at(ms: int) -> int:
    """The smallest message id made at or after Unix millisecond ``ms``."""
    return min(max(ms - EPOCH_MS, 0) << SEQ_BITS, MAX_ID)


def last_id_at(ms: int) -> int:
    """The largest message id made at or before Unix millisecond ``ms``."""
    if ms < EPOCH_MS:
        return -1
    return min(first_id_at(ms + 1) - 1, MAX_ID)
