"""RPL_ISUPPORT (005) tokens: formatting and splitting into lines."""

from __future__ import annotations

__all__ = ["format_token", "split_tokens"]

_ESCAPES = {"\\": "\\x5C", " ": "\\x20", "=": "\\x3D"}


def escape_value(value: str) -> str:
    return "".join(_ESCAPES.get(ch, ch) for ch in value)


def format_token(name: str, value: str | int | None) -> str:
    if value is None or value == "":
        return name
    return f"{name}={escape_value(str(value))}"


def split_tokens(tokens: list[str], per_line: int = 13) -> list[list[str]]:
    """Group tokens so that each 005 line stays well under the line limit."""
    lines: list[list[str]] = []
    current: list[str] = []
    size = 0
    for tok in tokens:
        if current and (len(current) >= per_line or size + len(tok) + 1 > 300):
            lines.append(current)
            current, size = [], 0
        current.append(tok)
        size += len(tok) + 1
    if current:
        lines.append(current)
    return lines
