"""Parsing and formatting of IRC lines.

Framing (cutting a byte stream at ``\\n``) happens in ``ircd.net``; this module
turns one line into a :class:`Message` and a message back into bytes. The
parser follows the modern IRC grammar that irctokens also implements (several
spaces separate parameters, a parameter starting with ``:`` takes the rest of
the line, the last duplicate tag wins) and is checked against the shared
parser test vectors and against irctokens in the test suite; it is our own
because it sits on the hot path of every received line.

Limits (IRCv3 message-tags): the tag section, with its ``@`` and trailing
space, may be 8191 bytes; the rest of the line 512 bytes with its CR LF.

Forbidden characters: a line that still holds a CR or a NUL once its line
ending is cut is refused whole (``LineError.FORBIDDEN_CHARACTER``), never
parsed. The modern IRC grammar allows neither in any part of a message, and a
CR relayed inside a parameter ends the line early for a client that cuts
lines at CR, which then shows whatever follows as a line of its own (a forged
notice). Refusing rather than stripping: the sender is told, and nothing that
reaches other clients differs from what was sent.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final, Iterable

from ircd.proto.glob import mask_matches  # re-exported: masks have their own module

__all__ = [
    "MAX_LINE",
    "MAX_TAGS",
    "MAX_CLIENT_TAGS",
    "LineError",
    "Message",
    "parse_line",
    "label_of",
    "command_of",
    "format_line",
    "format_tags",
    "escape_tag_value",
    "unescape_tag_value",
    "safe_param",
    "mask_matches",
]

MAX_LINE: Final = 512  # message part including CR LF
MAX_TAGS: Final = 8191  # tag section including "@" and the separating space
MAX_CLIENT_TAGS: Final = 4094  # tag data (without "@" and the space) a client may send


class LineError(Exception):
    """A line that cannot be accepted; ``kind`` says why."""

    INPUT_TOO_LONG: ClassVar[str] = "input_too_long"
    TAGS_TOO_LONG: ClassVar[str] = "tags_too_long"
    INVALID_UTF8: ClassVar[str] = "invalid_utf8"
    NO_COMMAND: ClassVar[str] = "no_command"
    FORBIDDEN_CHARACTER: ClassVar[str] = "forbidden_character"  # CR or NUL

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class Message:
    """One parsed line. ``command`` is upper-cased; ``tags`` is None when absent."""

    __slots__ = ("tags", "source", "command", "params")

    def __init__(
        self,
        command: str,
        params: list[str],
        source: str | None = None,
        tags: dict[str, str] | None = None,
    ) -> None:
        self.tags = tags
        self.source = source
        self.command = command
        self.params = params

    def __repr__(self) -> str:
        return f"Message({self.command!r}, {self.params!r}, source={self.source!r}, tags={self.tags!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Message)
            and self.command == other.command
            and self.params == other.params
            and self.source == other.source
            and (self.tags or {}) == (other.tags or {})
        )

    def format(self) -> bytes:
        return format_line(self.command, self.params, self.source, self.tags)


_UNESCAPES = {":": ";", "s": " ", "\\": "\\", "r": "\r", "n": "\n"}
_ESCAPE_TABLE = str.maketrans({";": "\\:", " ": "\\s", "\\": "\\\\", "\r": "\\r", "\n": "\\n"})


def unescape_tag_value(value: str) -> str:
    if "\\" not in value:
        return value
    out = []
    i = 0
    n = len(value)
    while i < n:
        ch = value[i]
        if ch == "\\":
            i += 1
            if i < n:
                nxt = value[i]
                out.append(_UNESCAPES.get(nxt, nxt))
            # a lone trailing backslash is dropped
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def escape_tag_value(value: str) -> str:
    return value.translate(_ESCAPE_TABLE)


def _parse_tags(section: str) -> dict[str, str]:
    tags: dict[str, str] = {}
    for part in section.split(";"):
        if not part:
            continue
        key, _, value = part.partition("=")
        if key:
            tags[key] = unescape_tag_value(value)
    return tags


def parse_line(line: bytes, *, utf8only: bool = True, max_tag_data: int = MAX_TAGS - 2) -> Message | None:
    """Parse one line (without its line ending). Returns None for a blank line.

    Raises :class:`LineError` for a CR or NUL anywhere in the line, tag data
    (the bytes between ``@`` and the space) longer than ``max_tag_data``,
    invalid UTF-8 (when ``utf8only``) and lines with tags or a source but no
    command. The server parses what clients send with
    ``max_tag_data=MAX_CLIENT_TAGS``: the message-tags spec gives clients
    4094 bytes of tag data, client-only prefix or not.
    """
    # CR (13) or NUL (0): an int is looked for with memchr, several times faster than b"\r"
    if 13 in line or 0 in line:
        raise LineError(LineError.FORBIDDEN_CHARACTER)
    tags = None
    if line[:1] == b"@":
        space = line.find(b" ")
        if space < 0:
            raise LineError(LineError.NO_COMMAND)
        if space - 1 > max_tag_data:
            raise LineError(LineError.TAGS_TOO_LONG)
        try:
            tag_text = line[1:space].decode("utf-8")
        except UnicodeDecodeError:
            raise LineError(LineError.INVALID_UTF8) from None
        tags = _parse_tags(tag_text)
        line = line[space + 1 :]
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        if utf8only:
            raise LineError(LineError.INVALID_UTF8) from None
        text = line.decode("latin-1")
    text = text.lstrip(" ")
    if not text:
        if tags is not None:
            raise LineError(LineError.NO_COMMAND)
        return None

    source = None
    if text[0] == ":":
        source, _, text = text[1:].partition(" ")
        text = text.lstrip(" ")
        if not text:
            raise LineError(LineError.NO_COMMAND)

    head, sep, trailing = text.partition(" :")
    if head[:1] == ":":  # the command itself cannot be trailing
        raise LineError(LineError.NO_COMMAND)
    params = head.split()
    if not params:
        raise LineError(LineError.NO_COMMAND)
    command = params.pop(0).upper()
    if sep:
        params.append(trailing)
    return Message(command, params, source, tags)


_MAX_VERB = 32  # longer is not a command (and would not fit in a FAIL line)


def label_of(line: bytes) -> str | None:
    """The ``label`` tag of a line refused before it was parsed (too long, invalid), so that
    the refusal still answers the command it belongs to (IRCv3 labeled-response)."""
    if line[:1] != b"@":
        return None
    space = line.find(b" ")
    section = line[1:space] if space >= 0 else line[1:]
    if b"label=" not in section:
        return None
    try:
        label = _parse_tags(section.decode("utf-8")).get("label")
    except UnicodeDecodeError:
        return None
    if not label or "\x00" in label or "\r" in label or "\n" in label:
        return None
    return label


def command_of(line: bytes) -> str:
    """The command of a line refused before it was parsed, upper-cased, or ``*`` when it has none
    that could be one (letters or digits only)."""
    rest = line
    if rest[:1] == b"@":
        space = rest.find(b" ")
        rest = rest[space + 1 :] if space >= 0 else b""
    rest = rest.lstrip(b" ")
    if rest[:1] == b":":
        space = rest.find(b" ")
        rest = rest[space + 1 :].lstrip(b" ") if space >= 0 else b""
    verb = rest.split(b" ", 1)[0]
    if not verb or len(verb) > _MAX_VERB or not verb.isalnum():  # bytes: ASCII letters and digits
        return "*"
    return verb.decode("ascii").upper()


def format_tags(tags: dict[str, str]) -> str:
    return ";".join(
        f"{key}={escape_tag_value(value)}" if value else key for key, value in tags.items()
    )


def format_line(
    command: str,
    params: Iterable[str] = (),
    source: str | None = None,
    tags: dict[str, str] | None = None,
) -> bytes:
    """Format a line with CR LF. The last parameter becomes a trailing one when needed."""
    # A typed list: compiled, indexing it and reading its strings need no generic calls. (Narrowed by
    # the type test rather than typing.cast, which is a function call in the interpreter.)
    args: list[str] = params if type(params) is list else list(params)
    count = len(args)
    if count == 0:
        head = f":{source} {command}" if source else command
        if tags:
            head = f"@{format_tags(tags)} {head}"
        return (head + "\r\n").encode("utf-8", "replace")
    last = args[count - 1]
    colon = ":" if not last or last[0] == ":" or " " in last else ""
    if source and not tags:  # a relayed message or a numeric: one f-string for the whole line
        if count == 1:
            line = f":{source} {command} {colon}{last}\r\n"
        elif count == 2:
            line = f":{source} {command} {args[0]} {colon}{last}\r\n"
        else:
            line = f":{source} {command} {' '.join(args[:-1])} {colon}{last}\r\n"
        return line.encode("utf-8", "replace")
    head = f":{source} {command}" if source else command
    if tags:
        head = f"@{format_tags(tags)} {head}"
    if count == 1:
        line = f"{head} {colon}{last}\r\n"
    else:
        line = f"{head} {' '.join(args[:-1])} {colon}{last}\r\n"
    return line.encode("utf-8", "replace")


_UNSAFE = re.compile(r"[\x00\r\n]")


def safe_param(text: str) -> str:
    """Make user text safe as a middle parameter: no spaces, no leading colon, not empty.

    Used where a user-chosen value (a channel key, a realname in WHOX) lands
    somewhere other than the trailing parameter.
    """
    text = _UNSAFE.sub("", text).replace(" ", "_")
    if not text:
        return "*"
    if text[0] == ":":
        return "*" + text
    return text


def strip_line_breaks(text: str) -> str:
    return _UNSAFE.sub("", text)
