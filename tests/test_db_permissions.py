"""The database holds password hashes, SCRAM keys and private messages: it is created readable by its
owner only, and the server warns about an existing one that others can read (issue 23.5)."""

from __future__ import annotations

import logging
import os
import stat

from tests.harness import Harness, config
from tests.proc import cli


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_sqlite_server_creates_the_database_and_its_wal_files_0600(tmp_path):
    db = tmp_path / "s.db"
    h = Harness(config(storage={"durability": "off"}), db=str(db))
    try:
        h.run(h.server.accounts.create("alice", "password123"))
        files = sorted(p.name for p in tmp_path.iterdir())
        assert files == ["s.db", "s.db-shm", "s.db-wal"]
        assert {name: oct(mode(tmp_path / name)) for name in files} == dict.fromkeys(files, "0o600")
    finally:
        h.close()


def test_sqlite_server_warns_about_a_database_others_can_read(tmp_path, caplog):
    db = tmp_path / "old.db"
    db.touch()
    db.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="pircd.store"):
        h = Harness(config(storage={"durability": "off"}), db=str(db))
        h.close()
    warning = f"{db} is open to other users (mode 0644); it holds password hashes and private messages: "
    warning += "chmod 600 it"
    assert [r.getMessage() for r in caplog.records if r.name == "pircd.store"] == [warning]
    assert mode(db) == 0o644  # a warning, not a change behind the operator's back


def test_sqlite_cli_creates_the_database_0600(tmp_path):
    db = tmp_path / "cli.db"
    assert cli("account", "add", "alice", "--generate", "--db", str(db)).returncode == 0
    assert mode(db) == 0o600


def test_init_makes_its_directory_0700(tmp_path):
    target = tmp_path / "conf"
    assert cli("init", str(target)).returncode == 0
    assert mode(target) == 0o700


def test_init_writes_its_config_and_keys_0600(tmp_path):
    """pircd.toml can hold SMTP and operator secrets: readable by its owner only, like the database,
    also when --force overwrites a file others could read."""
    target = tmp_path / "conf"
    assert cli("init", str(target)).returncode == 0
    config, key, ca_key = target / "pircd.toml", target / "tls" / "key.pem", target / "tls" / "client-ca.key"
    assert (mode(config), mode(key), mode(ca_key)) == (0o600, 0o600, 0o600)
    for path in (config, key):
        path.chmod(0o644)
    assert cli("init", str(target), "--force").returncode == 0
    assert (mode(config), mode(key)) == (0o600, 0o600)
