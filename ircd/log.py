"""Logging: one line per event on stderr, plain text or JSON.

Handlers log with ``key=value`` pairs in the message; nothing logs a
password, a SASL payload or any other secret (see ``server._redact``).
"""

from __future__ import annotations

import json
import logging
import sys
import time

__all__ = ["setup_logging"]


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
