"""The pircd command line: accounts, agents, audit, init, check-config."""

from __future__ import annotations

import sqlite3

from tests.proc import cli


def test_account_lifecycle(tmp_path):
    db = str(tmp_path / "c.db")
    assert cli("account", "add", "alice", "--password-stdin", "--db", db, stdin="pw123456\n").stdout == (
        "created person account alice\n"
    )
    out = cli("agent", "add", "bot1", "--owner", "alice", "--db", db)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "created agent bot1 owned by alice" and lines[1].startswith("password: ")
    assert len(lines[1]) > len("password: ") + 16
    dup = cli("account", "add", "ALICE", "--generate", "--db", db)
    assert (dup.returncode, dup.stderr) == (1, "error: account 'ALICE' already exists\n")
    bad_owner = cli("agent", "add", "bot2", "--owner", "bot1", "--db", db)
    assert (bad_owner.returncode, bad_owner.stderr) == (1, "error: an agent's owner must be a person account\n")
    bad_name = cli("account", "add", "9lives", "--generate", "--db", db)
    assert bad_name.returncode == 1 and "not a valid account name" in bad_name.stderr
    listing = cli("account", "list", "--db", db).stdout.splitlines()
    assert [line.split()[:3] for line in listing[1:]] == [["alice", "person", "-"], ["bot1", "agent", "alice"]]
    assert cli("account", "suspend", "bot1", "--db", db).stdout == "bot1 suspended\n"
    assert cli("account", "list", "--db", db).stdout.splitlines()[2].endswith("suspended")
    assert cli("account", "passwd", "alice", "--password-stdin", "--db", db, stdin="new-pass-1\n").returncode == 0
    fp = "ab" * 32
    assert cli("account", "certfp", "alice", "add", fp, "--db", db).returncode == 0
    assert cli("account", "certfp", "alice", "list", "--db", db).stdout == fp + "\n"
    assert cli("account", "del", "alice", "--yes", "--db", db).stdout == "deleted alice\n"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM accounts").fetchone() == (0,)  # the agent went with its owner
    assert conn.execute("SELECT COUNT(*) FROM account_certfps").fetchone() == (0,)
    missing = cli("account", "del", "alice", "--yes", "--db", db)
    assert (missing.returncode, missing.stderr) == (1, "error: no account named 'alice'\n")


def test_audit_command_on_a_fresh_database(tmp_path):
    assert cli("audit", "--db", str(tmp_path / "fresh.db")).stdout == "no audit entries\n"


def test_check_config_names_the_bad_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[limits]\nnicklen = 3\n[server]\nlisten = ["nohost"]\n')
    result = cli("check-config", str(bad))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "configuration is not valid:",
        "  server.listen: Value error, 'nohost' is not HOST:PORT",
        "  limits.nicklen: Input should be greater than or equal to 9",
    ]
    ext_bad = tmp_path / "ext.toml"
    ext_bad.write_text('[pircan]\nprivmsg_policy = "x"\n')
    assert cli("check-config", str(ext_bad)).stderr.splitlines()[1:] == [
        "  pircan.privmsg_policy: Input should be 'agreement' or 'open'"
    ]
    unknown = tmp_path / "unknown.toml"
    unknown.write_text("[bogus]\nx = 1\n")
    assert cli("check-config", str(unknown)).stderr.splitlines()[1:] == [
        "  bogus: unknown section (no such extension enabled)"
    ]
    good = tmp_path / "good.toml"
    good.write_text('[server]\nname = "irc.example.org"\n')
    assert cli("check-config", str(good)).stdout == f"{good}: configuration is valid\n"


def test_init_writes_a_valid_config_with_tls(tmp_path):
    result = cli("init", str(tmp_path / "n"), "--name", "irc.example.org")
    assert result.returncode == 0
    for name in ("pircd.toml", "tls/cert.pem", "tls/key.pem", "tls/client-ca.pem", "tls/client-ca.key"):
        assert (tmp_path / "n" / name).exists()
    assert oct((tmp_path / "n" / "tls" / "key.pem").stat().st_mode & 0o777) == "0o600"
    assert cli("check-config", str(tmp_path / "n" / "pircd.toml")).returncode == 0
    again = cli("init", str(tmp_path / "n"))
    assert again.returncode == 1 and "exists" in again.stderr
