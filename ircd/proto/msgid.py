"""Time-ordered 64-bit ids.

Layout (as in PIRCAN.md): milliseconds since 2015-01-01T00:00:00Z shifted left
by 22 bits, OR a 22-bit sequence. On a node of a cluster (``set_node``) the
sequence's top bits are the node's number, so nodes sharing one database
never make the same id. Written as 16 lowercase hex digits, so the
text form sorts like the number. One generator per server: ids never repeat
and never go backwards, even when the wall clock does.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Final

__all__ = ["EPOCH_MS", "SEQ_BITS", "IdGenerator", "id_time_ms", "format_id", "parse_id"]

EPOCH_MS: Final = 1420070400000  # 2015-01-01T00:00:00Z
SEQ_BITS: Final = 22  # the low bits: a sequence within one millisecond
_SEQ_MASK: Final = (1 << SEQ_BITS) - 1


class IdGenerator:
    __slots__ = ("_last_ms", "_seq", "_clock", "_base", "_limit")

    def __init__(self, clock=time.time) -> None:
        self._last_ms = 0
        self._seq = 0
        self._clock = clock
        # one node of several sharing a database (ircd.cluster): the sequence runs in the node's
        # own band of the 22 bits, so two nodes never make the same id; alone, the whole range
        self._base = 0
        self._limit = _SEQ_MASK

    def set_node(self, number: int, bits: int) -> None:
        """From now on the top ``bits`` bits of every id's sequence are ``number``."""
        if not 0 <= number < (1 << bits) or bits >= SEQ_BITS:
            raise ValueError(f"node number {number} does not fit in {bits} bits")
        width = SEQ_BITS - bits
        self._base = number << width
        self._limit = self._base + (1 << width) - 1
        self._last_ms += 1  # ids made from here on come after any made before, in the band
        self._seq = self._base

    def next_int(self) -> int:
        ms = int(self._clock() * 1000) - EPOCH_MS
        if ms > self._last_ms:
            self._last_ms = ms
            self._seq = self._base
        else:
            self._seq += 1
            if self._seq > self._limit:  # the millisecond's ids are used up: borrow the next one
                self._last_ms += 1
                self._seq = self._base
        return (self._last_ms << SEQ_BITS) | self._seq

    def next(self) -> str:
        return format_id(self.next_int())

    def observe(self, ident: int) -> None:
        """Never hand out an id at or below one already stored (after a restart; on a cluster,
        also one another node made)."""
        ms = ident >> SEQ_BITS
        seq = ident & _SEQ_MASK
        if seq > self._limit:  # above this node's band in that millisecond: continue after it
            ms, seq = ms + 1, self._base - 1
        elif seq < self._base:  # below it: the band's first id is above it already
            seq = self._base - 1
        if ms > self._last_ms or (ms == self._last_ms and seq > self._seq):
            self._last_ms = ms
            self._seq = seq


def format_id(ident: int) -> str:
    """16 lowercase hex digits; ``to_bytes().hex()`` takes half the time of ``"%016x" %``."""
    return ident.to_bytes(8).hex()


def parse_id(text: str) -> int | None:
    """The integer of a 16-hex-digit id, or None when ``text`` is not one."""
    if len(text) != 16 or not (text.isascii() and text.isalnum()):  # int() also takes "-", "_", " "
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


def id_time_ms(ident: int) -> int:
    """Unix time in milliseconds at which ``ident`` was made."""
    return (ident >> SEQ_BITS) + EPOCH_MS


def server_time(ts: float | None = None) -> str:
    """``2026-11-30T10:00:00.000Z``: the IRCv3 server-time format."""
    if ts is None:
        ts = time.time()
    dt = datetime.fromtimestamp(ts, timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (dt.microsecond // 1000)
