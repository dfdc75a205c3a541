"""The remembered sources of successful logins (ircd/store/accounts.py, core migration 3)."""

from __future__ import annotations

from ircd.store import accounts as rows
from ircd.store.db import connect_sync, migrate, transaction
from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK
from tests import dbs


def test_latest_sources_are_kept_and_go_with_their_account(tmp_path):
    conn = connect_sync(dbs.database(tmp_path / "s.db"), "off")
    migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
    with transaction(conn):
        rows.insert_account(conn, "alice", "alice", "person", None, 0, None, None)
        for i in range(20):
            rows.note_login_source(conn, "alice", f"192.0.2.{i}", 1000 + i, 16)
        rows.note_login_source(conn, "alice", "192.0.2.4", 5000, 16)  # seen again: the newest now
        rows.note_login_source(conn, "nobody", "192.0.2.99", 6000, 16)  # no such account: nothing kept
    loaded = rows.load_login_sources(conn)
    assert loaded == [("alice", f"192.0.2.{i}") for i in range(5, 20)] + [("alice", "192.0.2.4")]
    with transaction(conn):
        rows.delete_account(conn, "alice")
    assert rows.load_login_sources(conn) == []
    conn.close()
