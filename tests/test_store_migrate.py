"""Migrations when two processes open a new database at the same moment."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from ircd.store.db import connect_sync, migrate, transaction
from ircd.store.dialect import tables
from tests import dbs

STEPS = [
    "CREATE TABLE one (x INTEGER);",
    "CREATE TABLE two (y INTEGER);",
]


class _RacedConnection(sqlite3.Connection):
    """Before its first BEGIN IMMEDIATE, another process migrates the same file completely:
    what happens when the server and ``pircd account add`` start on a new file together."""

    other: str | None = None

    def execute(self, sql, *args):  # type: ignore[override]
        if sql == "BEGIN IMMEDIATE" and self.other is not None:
            path, self.other = self.other, None
            other = connect_sync(path)
            assert migrate(other, "t", STEPS) == 2
            other.close()
        return super().execute(sql, *args)


def test_sqlite_migration_waiting_for_the_lock_does_not_repeat_a_committed_step(tmp_path):
    path = str(tmp_path / "race.db")
    conn = sqlite3.connect(path, isolation_level=None, factory=_RacedConnection)
    conn.execute("CREATE TABLE IF NOT EXISTS schema_versions (track TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    conn.other = path
    assert migrate(conn, "t", STEPS) == 2
    assert conn.execute("SELECT version FROM schema_versions WHERE track = 't'").fetchone() == (2,)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")] == [
        "one",
        "schema_versions",
        "two",
    ]
    conn.close()


def _waiting_for_the_write_lock(conn) -> bool:
    return conn.execute("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[0] > 0


def test_postgresql_migration_waiting_for_the_advisory_lock_does_not_repeat_a_committed_step(tmp_path):
    """Two pircd processes (or a server and the CLI) migrating one PostgreSQL database at once: the
    second waits for the writers' advisory lock, then finds the steps done."""
    url = dbs.database(tmp_path / "race.db")
    first, second, watch = connect_sync(url), connect_sync(url), connect_sync(url)
    outcome: list[object] = []
    first.execute("BEGIN IMMEDIATE")  # the first process is migrating: it holds the lock
    waiter = threading.Thread(target=lambda: outcome.append(migrate(second, "t", STEPS)))
    waiter.start()
    deadline = time.monotonic() + 30
    while not _waiting_for_the_write_lock(watch):  # a condition with a deadline, not a sleep
        assert time.monotonic() < deadline, "the second migration never waited for the lock"
        time.sleep(0.01)
    for step in STEPS:  # the first applies both steps and commits
        first.execute(step.replace("INTEGER", "BIGINT"))
    first.execute("INSERT INTO schema_versions (track, version) VALUES ('t', 2)")
    first.execute("COMMIT")
    waiter.join(30)
    assert outcome == [2]  # no step repeated: a second CREATE TABLE would have failed
    assert [t for t in tables(watch) if t in ("one", "two")] == ["one", "two"]
    for conn in (first, second, watch):
        conn.close()


def test_newer_schema_is_refused(tmp_path):
    conn = connect_sync(dbs.database(tmp_path / "new.db"))
    migrate(conn, "t", STEPS)
    with pytest.raises(RuntimeError, match="newer than this pircd knows"):
        migrate(conn, "t", STEPS[:1])
    with transaction(conn):  # a version far ahead, as a newer pircd leaves it
        conn.execute("UPDATE schema_versions SET version = 999 WHERE track = 't'")
    with pytest.raises(RuntimeError, match="schema t is at version 999, newer than this pircd knows"):
        migrate(conn, "t", STEPS)
    conn.close()
