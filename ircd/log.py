"""Logging: one line per event on stderr, plain text or JSON.

Handlers log with ``key=value`` pairs in the message; nothing logs a
password, a SASL payload or any other secret (see ``ircd.commands.intake._redact``).
In JSON, those pairs are fields of the object as well, so a log collector
can filter on ``ip`` or ``account`` without parsing the text.
"""

from __future__ import annotations

import ast
import json
import logging
import re
import sys
import time
from typing import Any

__all__ = ["CountedLog", "setup_logging", "fields_of"]

# key=value, the value a bare word or a quoted Python repr (reason='Ping timeout: 120 seconds'); a
# pair must stand alone (start of the line or after a space) so URLs and ratios are left alone
_PAIR = re.compile(r"""(?:^|(?<=\s))([a-z_][a-z0-9_]*)=(b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*"|[^\s'"]\S*)""")
_RESERVED = frozenset({"time", "level", "logger", "msg", "exc"})


def _value(text: str) -> Any:
    if text[0] in "'\"" or text[:2] in ("b'", 'b"'):
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    if re.fullmatch(r"-?\d{1,18}", text):
        return int(text)
    return {"True": True, "False": False, "None": None}.get(text, text)


def fields_of(message: str) -> dict[str, Any]:
    """The ``key=value`` pairs of a log message, with ints, booleans and quoted strings as such
    (``connect id=1 ip=127.0.0.1 tls=False`` -> ``{"id": 1, "ip": "127.0.0.1", "tls": False}``).
    The object's own keys (time, level, logger, msg, exc) are never taken from the message."""
    return {key: _value(raw) for key, raw in _PAIR.findall(message) if key not in _RESERVED}


_second: tuple[int, str] = (-1, "")  # the last whole second stamped, and its text


def _stamp(record: logging.LogRecord) -> str:
    """``2026-12-06T19:41:27.123Z``; the date and time of day are formatted once a second."""
    global _second
    whole = int(record.created)
    second, text = _second
    if whole != second:
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _second = (whole, text)
    return f"{text}.{int(record.msecs):03d}Z"


LOG_EVERY = 60.0  # seconds between two lines of one kind of refusal


class CountedLog:
    """One log line per ``every`` seconds for each kind of refusal, saying how many happened since
    the last line: a client that keeps being refused (a flood, a guesser) cannot fill the log, and
    the operator still sees that it happens, how often, and the latest address or account."""

    def __init__(self, logger: logging.Logger, every: float = LOG_EVERY, clock: Any = time.monotonic) -> None:
        self.logger = logger
        self.every = every
        self.clock = clock
        self.last: dict[str, float] = {}
        self.count: dict[str, int] = {}

    def hit(self, kind: str, text: str, *args: Any) -> None:
        self.count[kind] = self.count.get(kind, 0) + 1
        now = self.clock()
        last = self.last.get(kind)
        if last is not None and now - last < self.every:
            return
        self.logger.warning(text + " (%d time(s) since the last such line)", *args, self.count[kind])
        self.last[kind] = now
        self.count[kind] = 0


class PlainFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = f"{_stamp(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        data: dict[str, Any] = {
            "time": _stamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": message,
        }
        data.update(fields_of(message))
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


def setup_logging(fmt: str = "plain", level: str = "info") -> None:
    root = logging.getLogger("pircd")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
    # A record carries only what these formatters print. Without these switches the logging module
    # walks the stack for the caller's file and line and looks up the thread's and the process's
    # names for every record: a third of a line's cost, and a connection that comes and goes logs
    # three lines (the logging HOWTO's "Optimization" section names these switches).
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
