"""Migration tracks: each component's tables, brought up to date step by step on either database.

A track is a list of steps (``ircd.store.dialect.Migration``); its version is the number of
steps applied, kept in ``schema_versions``. Each step commits together with its version bump,
under the writers' lock (SQLite's BEGIN IMMEDIATE; on PostgreSQL the advisory lock the
adapter takes), so that the server and a command-line tool, or several servers sharing one
PostgreSQL database, starting on a new database at once apply each step exactly once.
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any, Sequence

from ircd.store.dialect import POSTGRESQL, Migration, dialect_of, step_sql
from ircd.store.errors import NewerSchema

__all__ = ["migrate", "version", "NewerSchema"]

log = logging.getLogger("pircd.store")


def version(conn: Any, track: str) -> int:
    row = conn.execute("SELECT version FROM schema_versions WHERE track = ?", (track,)).fetchone()
    return row[0] if row else 0


def migrate(conn: Any, track: str, migrations: Sequence[Migration]) -> int:
    """Bring ``track`` up to ``len(migrations)``; each step commits with its version bump.

    The version is read again inside each step's write lock: another process may be
    migrating the same database at the same moment, and the one that waited for the
    lock must not repeat a step the other has committed."""
    current = version(conn, track)
    if current > len(migrations):
        raise _newer(track, current, len(migrations))
    if current == len(migrations):
        return current  # up to date: no write lock needed
    dialect = dialect_of(conn)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = version(conn, track)
            if current > len(migrations):
                raise _newer(track, current, len(migrations))
            if current == len(migrations):
                conn.execute("COMMIT")
                return current
            _apply(conn, migrations[current], dialect)
            conn.execute(
                "INSERT INTO schema_versions (track, version) VALUES (?, ?) "
                "ON CONFLICT(track) DO UPDATE SET version = excluded.version",
                (track, current + 1),
            )
            conn.execute("COMMIT")
        except BaseException:
            if not getattr(conn, "broken", False):
                conn.execute("ROLLBACK")
            raise
        log.info("migrated track=%s version=%d", track, current + 1)


def _newer(track: str, found: int, known: int) -> NewerSchema:
    return NewerSchema(f"database schema {track} is at version {found}, newer than this pircd knows ({known}): "
                       "run the pircd that wrote it, or upgrade this one")


def _apply(conn: Any, step: Migration, dialect: str) -> None:
    if callable(step):
        step(conn)
        return
    sql = step_sql(step, dialect)
    if dialect == POSTGRESQL:
        conn.script(sql)  # one simple query: dollar-quoted function bodies need no splitting
        return
    for statement in _split_sql(sql):
        conn.execute(statement)


def _split_sql(script: str) -> list[str]:
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        joined = "\n".join(current)
        if sqlite3.complete_statement(joined):
            if joined.strip():
                statements.append(joined)
            current = []
    if "".join(current).strip():
        statements.append("\n".join(current))
    return statements
