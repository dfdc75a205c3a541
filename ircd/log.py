"""Logging: one line per event on stderr, plain text or JSON.

Handlers log with ``key=value`` pairs in the message; nothing logs a
password, a SASL payload or any other secret (see ``server._redact``).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

__all__ = ["CountedLog", "setup_logging"]

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
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        text = f"{stamp}.{int(record.msecs):03d}Z {record.levelname:<7} {record.name}: {record.getMessage()}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        data = {
            "time": f"{stamp}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


def setup_logging(fmt: str = "plain", level: str = "info") -> None:
    root = logging.getLogger("pircd")
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else PlainFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
