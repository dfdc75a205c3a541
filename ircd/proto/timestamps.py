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

from ircd.proto.msgid import EPOCH_MS

__all__ = ["MAX_ID", "first_id_at", "format_ms", "last_id_at", "parse_timestamp"]

_SEQ_BITS = 22
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


def format_ms(ms: int) -> str:
    """The server-time string of Unix milliseconds (integer arithmetic, no float rounding)."""
    moment = datetime.fromtimestamp(ms // 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def first_id_at(ms: int) -> int:
    """The smallest message id made at or after Unix millisecond ``ms``."""
    return min(max(ms - EPOCH_MS, 0) << _SEQ_BITS, MAX_ID)


def last_id_at(ms: int) -> int:
    """The largest message id made at or before Unix millisecond ``ms``."""
    if ms < EPOCH_MS:
        return -1
    return min(first_id_at(ms + 1) - 1, MAX_ID)
