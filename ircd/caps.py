"""Capabilities as data.

Each capability gets one bit; a client's enabled set is an int, so a check on
the hot path is one ``&``. Extensions add capabilities through the api and get
the next free bit. CAP LS/LIST formatting (302 values, continuation lines) is
here; the CAP command itself is in ``commands/cap.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Final, Protocol

from ircd.proto.lines import MAX_LINE

if TYPE_CHECKING:
    from ircd.config import Config

__all__ = ["CapHost", "Capability", "CapRegistry"]


class CapHost(Protocol):
    """What the core's capabilities read of the server (``Server`` is one): its configuration,
    and whether it keeps history. Extensions' callables are given the same server."""

    @property
    def config(self) -> Config: ...

    @property
    def history(self) -> object | None: ...

# Bits of the core capabilities, fixed so the hot path can use constants.
ACCOUNT_NOTIFY: Final = 1 << 0
ACCOUNT_TAG: Final = 1 << 1
AWAY_NOTIFY: Final = 1 << 2
BATCH: Final = 1 << 3
CAP_NOTIFY: Final = 1 << 4
CHGHOST: Final = 1 << 5
ECHO_MESSAGE: Final = 1 << 6
EXTENDED_JOIN: Final = 1 << 7
INVITE_NOTIFY: Final = 1 << 8
LABELED_RESPONSE: Final = 1 << 9
MESSAGE_TAGS: Final = 1 << 10
MULTI_PREFIX: Final = 1 << 11
SERVER_TIME: Final = 1 << 12
SETNAME: Final = 1 << 13
USERHOST_IN_NAMES: Final = 1 << 14
STANDARD_REPLIES: Final = 1 << 15
NO_IMPLICIT_NAMES: Final = 1 << 16
SASL: Final = 1 << 17
CHATHISTORY: Final = 1 << 18
EVENT_PLAYBACK: Final = 1 << 19
MULTILINE: Final = 1 << 20
READ_MARKER: Final = 1 << 21
ACCOUNT_REGISTRATION: Final = 1 << 22
EXTENDED_MONITOR: Final = 1 << 23
CHANNEL_RENAME: Final = 1 << 24
MESSAGE_REDACTION: Final = 1 << 25
METADATA_2: Final = 1 << 26  # draft/metadata-2: changes arrive as METADATA lines
METADATA_3: Final = 1 << 27  # draft/metadata-3: changes arrive as 761/766 numerics
METADATA: Final = METADATA_2 | METADATA_3
# The first bit for capabilities added at run time (accounts, extensions): a bit
# past every fixed one above, so no added capability shares a bit with a core one.
_FIRST_FREE_BIT: Final = 1 << 28

# Bits that change how a relayed line is tagged; fan-out formats once per
# distinct combination of these.
TAG_PROFILE: Final = SERVER_TIME | MESSAGE_TAGS | ACCOUNT_TAG


@dataclass(frozen=True, slots=True)
class Capability:
    """A capability. ``value`` is shown in CAP LS 302 (a callable is asked each time)."""

    name: str
    value: str | Callable[[Any], str | None] | None = None  # called with the server (a CapHost)
    bit: int = 0
    # A callable saying whether the capability is offered right now (config-dependent).
    available: Callable[[Any], bool] | None = None


def _multiline_value(server: CapHost) -> str:
    limits = server.config.limits
    return f"max-bytes={limits.multiline_max_bytes},max-lines={limits.multiline_max_lines}"


def _history_on(server: CapHost) -> bool:
    return server.history is not None and server.config.history.enabled


def _metadata_on(server: CapHost) -> bool:
    return server.config.metadata.enabled


def _metadata_value(server: CapHost) -> str:
    cfg = server.config.metadata
    return f"before-connect,max-subs={cfg.max_subs},max-keys={cfg.max_keys},max-value-bytes={cfg.max_value_bytes}"


CORE_CAPS = [
    Capability("account-notify", bit=ACCOUNT_NOTIFY),
    Capability("account-tag", bit=ACCOUNT_TAG),
    Capability("away-notify", bit=AWAY_NOTIFY),
    Capability("batch", bit=BATCH),
    Capability("cap-notify", bit=CAP_NOTIFY),
    Capability("chghost", bit=CHGHOST),
    Capability("echo-message", bit=ECHO_MESSAGE),
    Capability("extended-join", bit=EXTENDED_JOIN),
    Capability("invite-notify", bit=INVITE_NOTIFY),
    Capability("labeled-response", bit=LABELED_RESPONSE),
    Capability("message-tags", bit=MESSAGE_TAGS),
    Capability("multi-prefix", bit=MULTI_PREFIX),
    Capability("server-time", bit=SERVER_TIME),
    Capability("setname", bit=SETNAME),
    Capability("userhost-in-names", bit=USERHOST_IN_NAMES),
    Capability("standard-replies", bit=STANDARD_REPLIES),
    Capability("draft/no-implicit-names", bit=NO_IMPLICIT_NAMES),
    Capability("extended-monitor", bit=EXTENDED_MONITOR),
    Capability("draft/multiline", value=_multiline_value, bit=MULTILINE),
    Capability("draft/read-marker", bit=READ_MARKER),
    Capability("draft/chathistory", bit=CHATHISTORY, available=_history_on),
    Capability("draft/event-playback", bit=EVENT_PLAYBACK, available=_history_on),
    Capability("draft/channel-rename", bit=CHANNEL_RENAME),
    Capability("draft/message-redaction", bit=MESSAGE_REDACTION),
    Capability("draft/metadata-2", value=_metadata_value, bit=METADATA_2, available=_metadata_on),
    Capability("draft/metadata-3", value=_metadata_value, bit=METADATA_3, available=_metadata_on),
]


class CapRegistry:
    def __init__(self) -> None:
        self._by_name: dict[str, Capability] = {}
        self._next_bit = _FIRST_FREE_BIT
        for cap in CORE_CAPS:
            self.add(cap)

    def add(self, cap: Capability) -> Capability:
        if cap.name in self._by_name:
            raise ValueError(f"capability {cap.name} registered twice")
        if not cap.bit:
            cap = Capability(cap.name, cap.value, self._next_bit, cap.available)
            self._next_bit <<= 1
        self._by_name[cap.name] = cap
        return cap

    def get(self, name: str, server: CapHost) -> Capability | None:
        cap = self._by_name.get(name)
        if cap is None or (cap.available is not None and not cap.available(server)):
            return None
        return cap

    def offered(self, server: CapHost) -> list[Capability]:
        return [
            cap
            for cap in self._by_name.values()
            if cap.available is None or cap.available(server)
        ]

    def names(self, mask: int) -> list[str]:
        return [cap.name for cap in self._by_name.values() if cap.bit & mask]

    def ls_tokens(self, server: CapHost, version: int) -> list[str]:
        tokens = []
        for cap in self.offered(server):
            value = cap.value(server) if callable(cap.value) else cap.value
            if version >= 302 and value:
                tokens.append(f"{cap.name}={value}")
            else:
                tokens.append(cap.name)
        return tokens


def chunk_tokens(tokens: list[str], limit: int, last_limit: int | None = None) -> list[str]:
    """Split a cap list into space-joined chunks of at most ``limit`` bytes, filling each one;
    the last chunk may take ``last_limit`` bytes (a line without the ``*`` continuation marker)."""
    last = limit if last_limit is None else last_limit
    chunks: list[str] = []
    current = ""
    size = 0  # bytes in current
    for i, tok in enumerate(tokens):
        width = len(tok.encode())
        if current and size + 1 + width > limit:
            rest = " ".join([current, *tokens[i:]])
            if len(rest.encode()) <= last:  # everything left fits the last line
                chunks.append(rest)
                return chunks
            chunks.append(current)
            current, size = tok, width
        else:
            current, size = (f"{current} {tok}", size + 1 + width) if current else (tok, width)
    chunks.append(current)
    return chunks


def ls_chunks(tokens: list[str], head: str) -> list[str]:
    """CAP LS / LIST 302 in as few lines of at most 512 bytes as it fits in, every line but the last
    with the ``*`` marker, ordered so that the last line carries the ratified capabilities (names
    without a ``draft/`` or vendor prefix) and is filled first. Capability negotiation lets the
    server split the list anywhere ("the server MAY send multiple lines"); a client that takes only
    the line without the marker for the list (pydle 1.0 reads ``*`` as the list of the first line,
    ends negotiation, then requests what the last line offers) still finds the common ones."""
    room = MAX_LINE - len(head.encode()) - len(" :\r\n")
    if len(" ".join(tokens).encode()) <= room:
        return [" ".join(tokens)] if tokens else [""]
    ordered = [t for t in tokens if "/" in t.partition("=")[0]] + [t for t in tokens if "/" not in t.partition("=")[0]]
    lines: list[list[str]] = []  # from the last line back
    current: list[str] = []
    size, limit = 0, room
    for tok in reversed(ordered):
        width = len(tok.encode())
        if current and size + 1 + width > limit:
            lines.append(current)
            current, size, limit = [], 0, room - 2
        size = size + 1 + width if current else width
        current.append(tok)
    lines.append(current)
    return [" ".join(reversed(line)) for line in reversed(lines)]


def line_chunks(tokens: list[str], head: str, *, continued: bool = True) -> list[str]:
    """Split a cap list into as few lines of at most 512 bytes as it fits in. ``head`` is what
    comes before the list on every line (``:server CAP nick LS``); with ``continued`` (CAP LS
    and LIST 302) each line but the last has the ``*`` marker as well."""
    room = MAX_LINE - len(head.encode()) - len(" :\r\n")
    return chunk_tokens(tokens, room - 2, room) if continued else chunk_tokens(tokens, room)
