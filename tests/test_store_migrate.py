"""Migrations when two processes open a new database file at the same moment."""

from __future__ import annotations

import sqlite3

import pytest

from ircd.store.db import connect_sync, migrate

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


def test_migration_waiting_for_the_lock_does_not_repeat_a_committed_step(tmp_path):
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


def test_newer_schema_is_refused(tmp_path):
    conn = connect_sync(str(tmp_path / "new.db"))
    migrate(conn, "t", STEPS)
    with pytest.raises(RuntimeError, match="newer than this pircd knows"):
        migrate(conn, "t", STEPS[:1])
    conn.close()
