"""The captured output of hosted processes: one log per agent, read with byte cursors.

Invariant: a cursor is an offset in everything the agent's processes ever wrote (across
restarts and rotations), so a reader that follows resumes exactly where it stopped. The current
file ``<account>.log`` starts at the offset stored in ``<account>.log.base``; when it would pass
``max_bytes`` it becomes ``<account>.log.1`` (the one rotated file kept) and a new one starts.
The server writes; the CLI reads the same files without the server (``pircd host logs``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["AgentLog", "Window", "read_window", "tail"]


def _paths(directory: Path, account: str) -> tuple[Path, Path, Path]:
    current = directory / f"{account}.log"
    return current, directory / f"{account}.log.1", directory / f"{account}.log.base"


def _base(path: Path) -> int:
    try:
        return int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


class AgentLog:
    """The writer (the server's, one per hosted agent)."""

    def __init__(self, directory: Path, account: str, max_bytes: int) -> None:
        self.directory = directory
        self.current, self.rotated, self.base_file = _paths(directory, account)
        self.max_bytes = max_bytes
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.base = _base(self.base_file)
        self.file = open(self.current, "ab")
        self.size = self.file.tell()

    @property
    def end(self) -> int:
        """The cursor after the last byte written."""
        return self.base + self.size

    def write(self, data: bytes) -> None:
        while data:
            room = self.max_bytes - self.size
            if room <= 0:
                self._rotate()
                continue
            chunk, data = data[:room], data[room:]
            self.file.write(chunk)
            self.size += len(chunk)
        self.file.flush()

    def _rotate(self) -> None:
        self.file.close()
        os.replace(self.current, self.rotated)
        self.base += self.size
        tmp = self.base_file.with_suffix(".tmp")
        tmp.write_text(str(self.base))
        os.replace(tmp, self.base_file)
        self.file = open(self.current, "ab")
        self.size = 0

    def close(self) -> None:
        self.file.close()


@dataclass(frozen=True, slots=True)
class Window:
    data: bytes
    start: int  # the cursor of data[0] (later than asked when that part was rotated away)
    cursor: int  # the cursor after data: give it to the next read


def _span(directory: Path, account: str) -> tuple[int, int, int, Path, Path]:
    current, rotated, base_file = _paths(directory, account)
    base = _base(base_file)
    size = current.stat().st_size if current.exists() else 0
    old = rotated.stat().st_size if rotated.exists() else 0
    return base - old, base, base + size, current, rotated


def read_window(directory: Path, account: str, cursor: int, limit: int) -> Window:
    """Up to ``limit`` bytes from ``cursor`` on (a negative cursor: the last ``-cursor`` bytes)."""
    first, base, end, current, rotated = _span(directory, account)
    if cursor < 0:
        cursor = max(first, end + cursor)
    start = min(max(cursor, first), end)
    stop = min(end, start + limit)
    parts = []
    if start < base:
        with open(rotated, "rb") as f:
            f.seek(start - first)
            parts.append(f.read(min(stop, base) - start))
    if stop > base:
        with open(current, "rb") as f:
            f.seek(max(start, base) - base)
            parts.append(f.read(stop - max(start, base)))
    data = b"".join(parts)
    return Window(data, start, start + len(data))


def tail(directory: Path, account: str, lines: int, grep: str | None = None) -> Window:
    """The last ``lines`` lines (of those matching ``grep``), and the cursor at the end."""
    first, _, end, _, _ = _span(directory, account)
    window = read_window(directory, account, first, end - first)
    text = window.data.splitlines(keepends=True)
    if grep is not None:
        pattern = re.compile(grep)
        text = [line for line in text if pattern.search(line.decode("utf-8", "replace"))]
    return Window(b"".join(text[-lines:] if lines else []), window.start, window.cursor)
