"""``pircd backup`` of a live database and ``pircd restore`` into a stopped server's place.

Both are SQLite's (a file copied with its online backup API); on PostgreSQL they say to use
pg_dump and pg_restore, or ``pircd migrate-store`` (tests/test_migrate_store.py).

The server runs as a real process; agents send over real sockets while the backup is taken, and
the restored server must hold every message whose receipt arrived before the backup began.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import threading

from ircd.store.db import describe
from tests import dbs
from tests.live import IRCClient
from tests.proc import ServerProcess, cli, write_config

PASSWORD = "sesame123"
SENDERS = 6
PER_SENDER = 115  # within the per-agreement hourly budget (PIRCANBUDGET 120)


def _agents(config) -> None:
    for args in (
        ("account", "add", "olive", "--password-stdin"),
        ("account", "add", "inbox", "--kind", "agent", "--owner", "olive", "--password-stdin"),
        *[("account", "add", f"s{i}", "--kind", "agent", "--owner", "olive", "--password-stdin")
          for i in range(SENDERS)],
    ):
        assert cli(*args, "--config", str(config), stdin=PASSWORD + "\n").returncode == 0


def _agree(port: int, sender: str) -> IRCClient:
    """``sender`` logged in, with an accepted agreement to message ``inbox``."""
    a = IRCClient(port)
    a.login(sender, PASSWORD, sync=False)
    a.send("CONTACT REQUEST inbox message 30 :backup test")
    request_id = a.read_until(lambda m: m.command == "CONTACT")[-1].params[2]
    b = IRCClient(port)
    b.login("inbox", PASSWORD, sync=False)
    b.send(f"CONTACT ACCEPT {request_id}")
    assert b.read_until(lambda m: m.command == "CONTACT")[-1].params[1] == "ACCEPTED"
    b.close()
    return a


def _stored(db_path) -> set[str]:
    conn = sqlite3.connect(db_path)
    try:
        return {row[0] for row in conn.execute("SELECT printf('%016x', id) FROM pircan_messages")}
    finally:
        conn.close()


def test_sqlite_restore_of_a_backup_taken_under_send_load_has_every_acknowledged_message(tmp_path):
    config = write_config(tmp_path)
    _agents(config)
    backup_file = tmp_path / "backup.db"
    server = ServerProcess(config)
    try:
        senders = [_agree(server.port, f"s{i}") for i in range(SENDERS)]
        lock = threading.Lock()
        acked: list[str] = []  # receipts in the order they arrived
        started = threading.Event()
        errors: list[object] = []

        def send_all(client: IRCClient, n: int) -> None:
            try:
                for k in range(PER_SENDER):
                    client.send(f"SEND inbox :load {n}/{k}")
                    receipt = client.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
                    assert receipt.command == "SEND" and receipt.params[1] == "OK", receipt
                    with lock:
                        acked.append(receipt.params[2])
                        if len(acked) >= 20:
                            started.set()
            except BaseException as exc:  # surfaced below
                errors.append(exc)
                started.set()

        threads = [threading.Thread(target=send_all, args=(c, n)) for n, c in enumerate(senders)]
        for t in threads:
            t.start()
        assert started.wait(60) and not errors, errors
        with lock:
            before = list(acked)  # acknowledged before the backup began
        result = subprocess.run(
            [sys.executable, "-m", "ircd", "backup", str(backup_file), "--config", str(config)],
            capture_output=True, text=True, timeout=60, check=False,
        )
        with lock:
            during = len(acked) - len(before)
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"backed up {tmp_path / 'pircd.db'} to {backup_file} (")
        assert stat.S_IMODE(os.stat(backup_file).st_mode) == 0o600
        assert len(acked) == SENDERS * PER_SENDER
        in_backup = _stored(backup_file)
        assert set(before) <= in_backup <= set(acked)
        assert len(before) < len(in_backup) or during == 0  # the sends went on while it copied
        print(f"acknowledged before the backup {len(before)}, during it {during}, in it {len(in_backup)}")
        refused = cli("restore", str(backup_file), "--yes", "--config", str(config))
        assert (refused.returncode, refused.stderr.splitlines()[-1]) == (
            1, f"error: {tmp_path / 'pircd.db'} is in use (a running server?): stop the server, then restore")
    finally:
        assert server.terminate() == 0
    assert _stored(tmp_path / "pircd.db") == set(acked)  # the live database had them all

    restored = cli("restore", str(backup_file), "--yes", "--config", str(config))
    assert restored.returncode == 0, restored.stderr
    assert restored.stdout.splitlines() == [
        f"restored {backup_file} to {tmp_path / 'pircd.db'} (schema: {_schema(backup_file)})",
        f"the database it replaced is kept as {tmp_path / 'pircd.db'}.before-restore",
    ]
    assert stat.S_IMODE(os.stat(tmp_path / "pircd.db").st_mode) == 0o600
    server = ServerProcess(config)
    try:
        inbox = IRCClient(server.port)
        inbox.login("inbox", PASSWORD, sync=False)
        inbox.send("INBOX")
        unread = inbox.read_until(lambda m: m.command == "INBOX" and m.params[1] == "UNREAD")[-1]
        assert unread.params[2] == str(len(in_backup))  # the restored server serves them
        inbox.close()
    finally:
        assert server.terminate() == 0
    assert set(before) <= _stored(tmp_path / "pircd.db") == in_backup


def _schema(path) -> str:
    conn = sqlite3.connect(path)
    try:
        return ", ".join(f"{t} {v}" for t, v in conn.execute("SELECT track, version FROM schema_versions ORDER BY track"))
    finally:
        conn.close()


def test_sqlite_restore_refuses_a_damaged_or_newer_backup_and_keeps_the_database(tmp_path):
    db = tmp_path / "live.db"
    assert cli("account", "add", "alice", "--password-stdin", "--db", str(db), stdin=PASSWORD + "\n").returncode == 0
    good = tmp_path / "good.db"
    assert cli("backup", str(good), "--db", str(db)).returncode == 0
    again = cli("backup", str(good), "--db", str(db))
    assert (again.returncode, again.stderr.splitlines()[-1]) == (
        1, f"error: {good} exists: choose a new name (a backup never overwrites a file)")
    newer = tmp_path / "newer.db"
    assert cli("backup", str(newer), "--db", str(db)).returncode == 0
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE schema_versions SET version = 999 WHERE track = 'core'")
    conn.commit()
    conn.close()
    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(good.read_bytes()[:4096] + b"\xff" * 8192)
    notdb = tmp_path / "notdb.db"
    notdb.write_text("not a database\n")
    before = db.read_bytes()
    for path, problem in (
        (newer, f"{newer}: schema core is at version 999, newer than this pircd knows"),
        (notdb, f"{notdb} is not a usable database: file is not a database"),
        (damaged, f"{damaged} "),
    ):
        result = cli("restore", str(path), "--yes", "--db", str(db))
        assert result.returncode == 1 and result.stderr.splitlines()[-1].startswith("error: " + problem), result.stderr
    assert db.read_bytes() == before and not (tmp_path / "live.db.before-restore").exists()
    ok = cli("restore", str(good), "--yes", "--db", str(db))
    assert ok.returncode == 0, ok.stderr
    listing = cli("account", "list", "--db", str(db))
    assert listing.stdout.splitlines()[1].split()[0] == "alice"


def test_postgresql_backup_and_restore_point_to_pg_dump_and_migrate_store(tmp_path):
    db = tmp_path / "pg.db"
    assert cli("account", "add", "olive", "--generate", "--db", str(db)).returncode == 0
    url = describe(dbs.database(db))
    backed = cli("backup", str(tmp_path / "b.db"), "--db", str(db))
    assert (backed.returncode, backed.stderr.splitlines()) == (1, [
        f"error: {url} is a PostgreSQL database: back it up with pg_dump (or copy a stopped server's database "
        "to a SQLite file with pircd migrate-store)"])
    assert not (tmp_path / "b.db").exists()
    (tmp_path / "old.db").write_bytes(b"")
    restored = cli("restore", str(tmp_path / "old.db"), "--yes", "--db", str(db))
    assert (restored.returncode, restored.stderr.splitlines()) == (1, [
        f"error: {url} is a PostgreSQL database: restore it with pg_restore (or copy a SQLite backup into an "
        "empty database with pircd migrate-store FILE URL)"])
