"""Message history rows: all of the core's history and read-marker SQL.

A row's key is its msgid as an integer (``ircd.proto.msgid``: milliseconds
since 2015 shifted left by 22 bits, plus a sequence), so the primary key is
also the time order. Every query is one range scan over the ``history_target``
index, whose entries end with that id: no query sorts, and nothing at
start-up scans the table (the newest id is ``MAX(id)``, one b-tree descent).

Functions take a connection (``Conn``: SQLite's or PostgreSQL's) and run inside the caller's
transaction (the server's group commit, or a CLI ``transaction``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ircd.store.writes import Conn
from ircd.store.db import insert_rows

__all__ = [
    "ROW_COLUMNS",
    "Conversation",
    "HistoryRow",
    "conversations",
    "count",
    "find",
    "has_message",
    "insert",
    "load_markers",
    "newest_id",
    "newest_in",
    "prune",
    "redact",
    "retarget",
    "save_marker",
    "select",
]

# the columns of history, in the order insert() takes them
ROW_COLUMNS = ("id", "target", "time", "command", "source", "account", "param", "text", "tags", "lines")
_SELECT = "SELECT id, time, command, source, account, param, text, tags, lines FROM history"


@dataclass(frozen=True, slots=True)
class HistoryRow:
    id: int
    time: str
    command: str
    source: str
    account: str | None
    param: str
    text: str
    tags: dict[str, str] | None
    lines: list[tuple[str, bool]] | None


@dataclass(frozen=True, slots=True)
class Conversation:
    target: str  # the conversation key
    peer: str
    last_id: int
    time: str


def _row(r: tuple) -> HistoryRow:
    tags = json.loads(r[7]) if r[7] else None
    lines = [(text, bool(concat)) for text, concat in json.loads(r[8])] if r[8] else None
    return HistoryRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tags, lines)


def insert(
    conn: Conn,
    rows: Sequence[tuple],
    conversations: Iterable[tuple[str, str, str, int]] = (),
) -> int:
    """Store rows (tuples in ``ROW_COLUMNS`` order) and bump conversations
    ``(account, target, peer, last_id)``. A row whose id is already stored is skipped."""
    inserted = insert_rows(
        conn, "INSERT INTO history (id, target, time, command, source, account, param, text, tags, lines)", 10, rows,
        tail=" ON CONFLICT DO NOTHING",
    )
    conn.executemany(
        "INSERT INTO history_conversations (account, target, peer, last_id) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(account, target) DO UPDATE SET peer = excluded.peer, last_id = excluded.last_id "
        "WHERE excluded.last_id > history_conversations.last_id",
        conversations,
    )
    return inserted


def newest_id(conn: Conn) -> int | None:
    return conn.execute("SELECT MAX(id) FROM history").fetchone()[0]


def select(
    conn: Conn,
    target: str,
    low: int,
    high: int,
    limit: int,
    *,
    newest_first: bool,
    commands: Sequence[str] | None,
) -> list[HistoryRow]:
    """Rows of ``target`` with ``low <= id <= high``, at most ``limit``, taken from the
    oldest end (or the newest with ``newest_first``), returned in id order either way."""
    if limit <= 0 or low > high:
        return []
    sql = _SELECT + " WHERE target = ? AND id >= ? AND id <= ?"
    args: list[object] = [target, low, high]
    if commands is not None:
        sql += " AND command IN (%s)" % ",".join("?" * len(commands))
        args.extend(commands)
    sql += " ORDER BY id DESC LIMIT ?" if newest_first else " ORDER BY id LIMIT ?"
    args.append(limit)
    rows = [_row(r) for r in conn.execute(sql, args)]
    if newest_first:
        rows.reverse()
    return rows


def has_message(conn: Conn, target: str, ident: int) -> bool:
    """Whether ``target`` has the message with id ``ident`` (one primary-key look-up)."""
    found = conn.execute("SELECT 1 FROM history WHERE id = ? AND target = ?", (ident, target)).fetchone()
    return found is not None


def newest_in(
    conn: Conn, targets: Sequence[str], commands: Sequence[str] | None
) -> dict[str, tuple[int, str]]:
    """For each target that has history: (id, time) of its newest row."""
    sql = "SELECT id, time FROM history WHERE target = ?"
    if commands is not None:
        sql += " AND command IN (%s)" % ",".join("?" * len(commands))
    sql += " ORDER BY id DESC LIMIT 1"
    found = {}
    for target in targets:
        row = conn.execute(sql, (target, *(commands or ()))).fetchone()
        if row is not None:
            found[target] = (row[0], row[1])
    return found


def conversations(conn: Conn, account: str, low: int, high: int) -> list[Conversation]:
    """The direct-message conversations of ``account`` whose newest message has ``low <= id <= high``."""
    rows = conn.execute(
        "SELECT c.target, c.peer, c.last_id, h.time FROM history_conversations c "
        "JOIN history h ON h.id = c.last_id "
        "WHERE c.account = ? AND c.last_id >= ? AND c.last_id <= ? ORDER BY c.last_id",
        (account, low, high),
    ).fetchall()
    return [Conversation(*r) for r in rows]


def prune(conn: Conn, before_id: int, target: str | None = None, chunk: int = 5000) -> int:
    """Delete up to ``chunk`` rows older than ``before_id`` (of one target, or all); returns how many.

    Callers repeat until fewer than ``chunk`` go, one transaction each, so a
    prune of millions of rows never holds the write lock for long. A
    conversation whose newest message went goes too.
    """
    if target is None:
        deleted = conn.execute(
            "DELETE FROM history WHERE id IN (SELECT id FROM history WHERE id < ? ORDER BY id LIMIT ?)",
            (before_id, chunk),
        ).rowcount
        conn.execute("DELETE FROM history_conversations WHERE last_id < ?", (before_id,))
    else:
        deleted = conn.execute(
            "DELETE FROM history WHERE id IN "
            "(SELECT id FROM history WHERE target = ? AND id < ? ORDER BY id LIMIT ?)",
            (target, before_id, chunk),
        ).rowcount
        conn.execute(
            "DELETE FROM history_conversations WHERE target = ? AND last_id < ?", (target, before_id)
        )
    return deleted


def find(conn: Conn, target: str, ident: int) -> HistoryRow | None:
    """The row with id ``ident`` if it belongs to ``target``."""
    row = conn.execute(_SELECT + " WHERE id = ? AND target = ?", (ident, target)).fetchone()
    return _row(row) if row is not None else None


def redact(conn: Conn, target: str, ident: int) -> bool:
    """Delete a redacted message (draft/message-redaction: CHATHISTORY then excludes it); a
    conversation whose newest message it was falls back to the message before it."""
    if not conn.execute("DELETE FROM history WHERE id = ? AND target = ?", (ident, target)).rowcount:
        return False
    previous = conn.execute(
        "SELECT MAX(id) FROM history WHERE target = ? AND id < ? AND command != 'TAGMSG'", (target, ident)
    ).fetchone()[0]
    if previous is None:
        conn.execute("DELETE FROM history_conversations WHERE target = ? AND last_id = ?", (target, ident))
    else:
        conn.execute(
            "UPDATE history_conversations SET last_id = ? WHERE target = ? AND last_id = ?", (previous, target, ident)
        )
    return True


def retarget(conn: Conn, old: str, new: str, name: str) -> int:
    """Move a channel's rows from the folded name ``old`` to ``new`` (RENAME), their target
    parameter becoming ``name``; returns how many moved."""
    return conn.execute("UPDATE history SET target = ?, param = ? WHERE target = ?", (new, name, old)).rowcount


def count(conn: Conn, target: str | None = None) -> int:
    if target is None:
        return conn.execute("SELECT COUNT(*) FROM history").fetchone()[0]
    return conn.execute("SELECT COUNT(*) FROM history WHERE target = ?", (target,)).fetchone()[0]


# read markers ------------------------------------------------------------------


def load_markers(conn: Conn, account: str) -> dict[str, str]:
    return dict(conn.execute("SELECT target, time FROM read_markers WHERE account = ?", (account,)))


def save_marker(conn: Conn, account: str, target: str, time: str) -> None:
    """Store a read marker; it only ever moves forward (server-time strings sort as times)."""
    conn.execute(
        "INSERT INTO read_markers (account, target, time) VALUES (?, ?, ?) "
        "ON CONFLICT(account, target) DO UPDATE SET time = excluded.time WHERE excluded.time > read_markers.time",
        (account, target, time),
    )
