"""The pircd command line: accounts, agents, audit, init, check-config."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from ircd.cli import main
from ircd.passwords import verify_sync
from tests import dbs
from tests.live import IRCClient
from tests.proc import ServerProcess, cli, write_config

ROOT = Path(__file__).resolve().parent.parent


def test_account_lifecycle(tmp_path):
    db = str(tmp_path / "c.db")
    using = f"using database {dbs.shown(db)}\n"
    added = cli("account", "add", "alice", "--password-stdin", "--db", db, stdin="pw123456\n")
    assert (added.stdout, added.stderr) == ("created person account alice\n", f"using database {dbs.shown(db)}{dbs.NEW}\n")
    out = cli("agent", "add", "bot1", "--owner", "alice", "--db", db)
    assert out.returncode == 0
    lines = out.stdout.splitlines()
    assert lines[0] == "created agent bot1 owned by alice" and lines[1].startswith("password: ")
    assert len(lines[1]) > len("password: ") + 16
    dup = cli("account", "add", "ALICE", "--generate", "--db", db)
    assert (dup.returncode, dup.stderr) == (1, using + "error: account 'ALICE' already exists\n")
    bad_owner = cli("agent", "add", "bot2", "--owner", "bot1", "--db", db)
    assert (bad_owner.returncode, bad_owner.stderr) == (1, using + "error: an agent's owner must be a person account\n")
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
    conn = dbs.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM accounts").fetchone() == (0,)  # the agent went with its owner
    assert conn.execute("SELECT COUNT(*) FROM account_certfps").fetchone() == (0,)
    missing = cli("account", "del", "alice", "--yes", "--db", db)
    assert (missing.returncode, missing.stderr) == (1, using + "error: no account named 'alice'\n")


def test_audit_command_on_a_fresh_database(tmp_path):
    db = str(tmp_path / "fresh.db")
    assert cli("account", "add", "olive", "--generate", "--db", db).returncode == 0  # no PIRCAN tables yet
    assert cli("audit", "--db", db).stdout == "no audit entries\n"


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


# running pircd in a directory of its own ----------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PIRCD_CONFIG"}
    env.update(extra)
    return env


def run(*args: str, cwd: Path, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ircd", *args], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=_env(PYTHONPATH=str(ROOT), **env), check=False)


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+ [A-Z]+ ")


def test_sqlite_unusable_files_are_one_line_not_a_traceback(tmp_path):
    """A config file that is not UTF-8, an unknown extension, a database that cannot be opened."""
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[server]\nname = "irc.tést.org"\n'.encode("latin-1"))
    nosuch = tmp_path / "nosuch.toml"
    nosuch.write_text('[server]\nextensions = ["nosuch"]\n')
    for path, problem in ((latin1, f"{latin1}: not UTF-8 (byte 22: 0xe9)"),
                          (nosuch, "server.extensions: no such extension 'nosuch'")):
        for args in (("check-config", str(path)), ("serve", "--config", str(path))):
            result = run(*args, cwd=tmp_path)
            lines = [ln for ln in result.stderr.splitlines() if not _LOG_LINE.match(ln)]
            assert (result.returncode, lines) == (2, ["configuration is not valid:", f"  {problem}"]), args
    (tmp_path / "adir").mkdir()
    (tmp_path / "notdb").write_text("not a database\n")
    for db, reason in (("/nonexistent/dir/x.db", "unable to open database file"),
                       (str(tmp_path / "adir"), "unable to open database file"),
                       (str(tmp_path / "notdb"), "file is not a database")):
        result = run("account", "add", "bob", "--password-stdin", "--db", db, cwd=tmp_path, stdin="pw123456\n")
        assert (result.returncode, result.stderr) == (1, f"error: cannot open database {db}: {reason}\n")
    long_name = str(tmp_path / ("x" * 300 + ".db"))  # cannot be opened, and found out only at start-up
    for _ in range(3):  # aiosqlite's thread used to outlive the loop now and then: "Event loop is closed"
        served = run("serve", "--listen", "127.0.0.1:0", "--db", long_name, cwd=tmp_path)
        assert served.returncode == 1
        assert [ln for ln in served.stderr.splitlines() if not _LOG_LINE.match(ln)] == [
            f"pircd: cannot start: cannot open database {long_name}: unable to open database file"
        ]


def test_serve_moves_or_drops_the_http_listener(tmp_path):
    """A second server on one machine: --http-listen (repeatable) replaces http.listen, --no-http
    starts none; the config file's http.listen is the fallback."""
    config = write_config(tmp_path, http={"listen": ["127.0.0.1:1"]})  # a port this test cannot bind
    two = ServerProcess(config, "--http-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
    try:
        http = [line for line in two.log if "(HTTP" in line and "listening on" in line]
        assert len(http) == 2 and two.http_port is not None and two.http_port != 1
        assert sum(" ready" in line for line in two.log) == 1
    finally:
        assert two.terminate() == 0
    none = ServerProcess(config, "--no-http")
    try:
        assert none.http_port is None and not [line for line in none.log if "(HTTP" in line]
    finally:
        assert none.terminate() == 0
    both = run("serve", "--config", str(config), "--no-http", "--http-listen", "127.0.0.1:0", cwd=tmp_path)
    assert (both.returncode, both.stderr) == (2, "error: --http-listen and --no-http exclude each other\n")
    bad = run("serve", "--config", str(config), "--http-listen", "nohost", cwd=tmp_path)
    assert (bad.returncode, bad.stderr.splitlines()) == (
        2, ["configuration is not valid:", "  http.listen: Value error, 'nohost' is not HOST:PORT"])


def test_account_add_without_a_terminal_names_password_stdin(tmp_path):
    db = str(tmp_path / "t.db")
    result = cli("account", "add", "bob", "--db", db, stdin="")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        "error: no terminal to ask for the password on: in a script, give it on standard input "
        "with --password-stdin")
    hashed = cli("hash-password", stdin="")
    assert (hashed.returncode, hashed.stderr) == (2, "error: no terminal to ask for the password on: in a "
                                                     "script, give it on standard input with --stdin\n")


# check-config refuses what serve refuses -------------------------------------------------------


def test_a_table_no_extension_reads_is_refused_by_serve_and_check_config(tmp_path):
    """A typo'd or foreign table ([pircann], [clustre]) is named, by both commands; [pircan] is the
    extension's own (declared with api.config), and without the extension enabled it is unknown too."""
    cases = {
        "[pircann]\nguests_may_join = true\n": ["  pircann: unknown table (no enabled extension reads it)"],
        "[clustre]\nx = 1\n[bogus]\n": [
            "  bogus: unknown table (no enabled extension reads it)",
            "  clustre: unknown table (no enabled extension reads it)",
        ],
        '[server]\nextensions = []\n[pircan]\nguests_may_join = true\n': [
            "  pircan: unknown table (no enabled extension reads it)"
        ],
    }
    for text, problems in cases.items():
        path = tmp_path / "c.toml"
        path.write_text(text)
        for args in (("check-config", str(path)), ("serve", "--config", str(path), "--listen", "127.0.0.1:0",
                                                   "--no-http", "--db", str(tmp_path / "x.db"))):
            result = run(*args, cwd=tmp_path)
            lines = [ln for ln in result.stderr.splitlines() if not _LOG_LINE.match(ln)]
            assert (result.returncode, lines) == (2, ["configuration is not valid:", *problems]), (text, args)
    assert not (tmp_path / "x.db").exists()
    path.write_text("[pircan]\nguests_may_join = true\n")
    assert run("check-config", str(path), cwd=tmp_path).returncode == 0



def test_check_config_refuses_what_serve_refuses(tmp_path):
    assert run("init", "demo", cwd=tmp_path).returncode == 0
    tls = tmp_path / "demo" / "tls"
    cases = {
        'tls_listen = ["127.0.0.1:6697"]\n': ["  server: Value error, tls_listen needs tls_cert and tls_key"],
        f'tls_listen = ["127.0.0.1:6697"]\ntls_cert = "{tmp_path}/gone.pem"\ntls_key = "{tls}/key.pem"\n': [
            f"  server.tls_cert: cannot read {tmp_path}/gone.pem: No such file or directory"
        ],
        f'tls_listen = ["127.0.0.1:6697"]\ntls_cert = "{tls}/cert.pem"\ntls_key = "{tls}/client-ca.key"\n': [
            f"  server.tls_cert: cannot use {tls}/cert.pem with {tls}/client-ca.key: KEY_VALUES_MISMATCH"
        ],
        f'db = "{tmp_path}/no/such/dir/pircd.db"\n': [
            f"  server.db: cannot create {tmp_path}/no/such/dir/pircd.db: no directory {tmp_path}/no/such/dir"
        ],
        '[http]\ntls_listen = ["127.0.0.1:0"]\n': ["  http.tls_listen: needs server.tls_cert and server.tls_key"],
        f'tls_cert = "{tmp_path}/gone.pem"\ntls_key = "{tls}/key.pem"\n[http]\ntls_listen = ["127.0.0.1:0"]\n': [
            f"  server.tls_cert: cannot read {tmp_path}/gone.pem: No such file or directory"
        ],
    }
    for server, problems in cases.items():
        path = tmp_path / "c.toml"
        path.write_text("[server]\n" + server)
        checked = run("check-config", str(path), cwd=tmp_path)
        assert (checked.returncode, checked.stderr.splitlines()) == (2, ["configuration is not valid:", *problems])
        served = run("serve", "--config", str(path), "--listen", "127.0.0.1:0", cwd=tmp_path)
        assert (served.returncode, served.stderr.splitlines()) == (2, ["configuration is not valid:", *problems])
    plain = tmp_path / "oper.toml"
    plain.write_text('[[opers]]\nname = "admin"\npassword = "correct horse"\n')
    assert run("check-config", str(plain), cwd=tmp_path).stderr.splitlines() == [
        "configuration is not valid:",
        ("  opers.0.password: Value error, not an argon2 hash (a plain-text password never matches); "
         "make one with `pircd hash-password`"),
    ]
    hashed = run("hash-password", "--stdin", cwd=tmp_path, stdin="correct horse\n").stdout.strip()
    plain.write_text(f'[[opers]]\nname = "admin"\npassword = "{hashed}"\n')
    assert run("check-config", str(plain), cwd=tmp_path).returncode == 0


# which database: the commands find the server's configuration like serve does -------------------


def _port_zero(config: Path) -> None:
    """The IRC, TLS and HTTP listeners of a config from `pircd init` on ephemeral ports."""
    text = config.read_text()
    for port in ("6667", "6697", "6680"):
        assert f'listen = ["127.0.0.1:{port}"]' in text
        text = text.replace(f'listen = ["127.0.0.1:{port}"]', 'listen = ["127.0.0.1:0"]')
    config.write_text(text)


def _sasl_plain(port: int, account: str, password: str) -> str:
    c = IRCClient(port)
    try:
        c.send("CAP REQ :sasl")
        c.send("NICK someone")
        c.send("USER someone 0 * :someone")
        c.send("AUTHENTICATE PLAIN")
        c.read_until(lambda m: m.command == "AUTHENTICATE")
        c.send("AUTHENTICATE " + base64.b64encode(f"\0{account}\0{password}".encode()).decode())
        return c.read_until(lambda m: m.command in ("903", "904"))[-1].command
    finally:
        c.close()


def test_readme_sequence_puts_the_account_in_the_servers_database(tmp_path):
    """README: `pircd init DIR`, `pircd serve` on DIR/pircd.toml, then `pircd account add NAME`: the
    account lands in DIR/pircd.db (PIRCD_CONFIG names the file for every command) and logs in."""
    assert run("init", "demo", "--name", "irc.example.org", cwd=tmp_path).returncode == 0
    config = tmp_path / "demo" / "pircd.toml"
    _port_zero(config)
    server = ServerProcess(config)
    try:
        server.wait_for_log("ready")
        added = run("account", "add", "alice", "--password-stdin", cwd=tmp_path, stdin="sesame123\n",
                    PIRCD_CONFIG="demo/pircd.toml")
        assert (added.returncode, added.stdout) == (0, "created person account alice\n")
        assert _sasl_plain(server.port, "alice", "sesame123") == "903"  # SASL reads the account row itself
        assert not (tmp_path / "pircd.db").exists()
        assert added.stderr == f"using database {tmp_path / 'demo' / 'pircd.db'}\n"
    finally:
        assert server.terminate() == 0


def test_database_commands_resolve_the_config_like_serve(tmp_path):
    assert run("init", "demo", cwd=tmp_path).returncode == 0
    demo = tmp_path / "demo"
    db = demo / "pircd.db"
    # PIRCD_CONFIG; and ./pircd.toml in the directory the command runs in
    assert run("account", "add", "alice", "--generate", cwd=tmp_path, PIRCD_CONFIG=str(demo / "pircd.toml")
               ).stderr == f"using database {db} (new file)\n"
    listed = run("account", "list", cwd=demo)
    assert (listed.stderr, listed.stdout.splitlines()[1].split()[:2]) == (f"using database {db}\n", ["alice", "person"])
    # --config wins over PIRCD_CONFIG
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text(f'[server]\ndb = "{tmp_path / "other.db"}"\n')
    missing = run("account", "list", "--config", str(elsewhere), cwd=demo, PIRCD_CONFIG=str(demo / "pircd.toml"))
    assert (missing.returncode, missing.stderr) == (
        1, f"error: no database at {tmp_path / 'other.db'}: give the server's --config (or set PIRCD_CONFIG) or --db\n"
    )
    # no configuration anywhere: ./pircd.db is not made by add, nor by any command that only reads
    for args in (("account", "list"), ("account", "add", "bob", "--generate"), ("agent", "list"),
                 ("history", "count"), ("audit",), ("account", "list", "--db", "new.db")):
        refused = run(*args, cwd=tmp_path)
        assert refused.returncode == 1, args
        assert refused.stderr.startswith(f"error: no database at {tmp_path}/"), refused.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo", "elsewhere.toml"]
    # serve finds its configuration the same way
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pircd.toml").write_text("[limits]\nnicklen = 3\n")
    for cwd, env in ((bad, {}), (tmp_path, {"PIRCD_CONFIG": str(bad / "pircd.toml")})):
        refused = run("serve", "--listen", "127.0.0.1:0", cwd=cwd, **env)
        assert (refused.returncode, refused.stderr.splitlines()) == (
            2, ["configuration is not valid:", "  limits.nicklen: Input should be greater than or equal to 9"]
        )


def test_agent_add_reads_the_password_from_stdin(tmp_path):
    db = str(tmp_path / "a.db")
    assert cli("account", "add", "olive", "--generate", "--db", db).returncode == 0
    out = cli("agent", "add", "scout", "--owner", "olive", "--password-stdin", "--db", db, stdin="s3cret-pass\n")
    assert (out.returncode, out.stdout) == (0, "created agent scout owned by olive\n")  # no password printed
    conn = dbs.connect(db)
    row = conn.execute("SELECT kind, owner, password_hash FROM accounts WHERE folded = 'scout'").fetchone()
    conn.close()
    assert row[:2] == ("agent", "olive")
    assert verify_sync(row[2], "s3cret-pass")
    empty = cli("agent", "add", "scout2", "--owner", "olive", "--password-stdin", "--db", db, stdin="")
    assert (empty.returncode, empty.stderr.splitlines()[-1]) == (1, "error: empty password")


# every subcommand: clear --help, and bad input ends in one line, never a traceback ------------------


def _leaf_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], click.Command]:
    found: dict[tuple[str, ...], click.Command] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found.update(_leaf_commands(command, (*prefix, name)))
        else:
            found[(*prefix, name)] = command
    return found


def _assert_one_clear_error(code: int, stderr: str, what: object) -> None:
    assert code != 0, what
    assert "Traceback" not in stderr and "Error" not in stderr.replace("Error: ", ""), (what, stderr)
    lines = [ln for ln in stderr.splitlines() if not ln.startswith("using database ") and not _LOG_LINE.match(ln)]
    if lines[:1] == ["configuration is not valid:"]:  # one line per problem, each naming its key
        assert code == 2 and len(lines) > 1 and all(ln.startswith("  ") for ln in lines[1:]), (what, stderr)
    elif any(ln.startswith("Error: ") for ln in lines):  # click's usage errors
        assert code == 2, (what, stderr)
    else:
        assert len(lines) == 1 and lines[0].startswith(("error: ", "pircd: ", "Aborted!")), (what, stderr)


_OTHER_COMMANDS = r'''
import json, sys
from ircd.cli import main
MODULES = ("ircd.cli_accounts", "ircd.cli_backup", "ircd.cli_history", "ircd.cli_store", "ircd.cli_tokens",
           "ext.pircan.cli")
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps([name for name in MODULES if name in sys.modules]))
'''


@pytest.mark.parametrize("args, others", [
    (["serve", "--help"], False), (["check-config", "--help"], False),
    (["--help"], True), (["account", "--help"], True), (["audit", "--help"], True), (["nosuch"], True),
])
def test_serve_does_not_import_the_other_commands(args, others):
    """Only the commands of ircd/cli.py are there from the start: ``serve`` runs without the modules of
    the others (accounts, backup, history, tokens, the extensions' commands); the list of all, any
    other command, and a name that is no command load them."""
    done = subprocess.run([sys.executable, "-c", _OTHER_COMMANDS, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded == ([] if not others else ["ircd.cli_accounts", "ircd.cli_backup", "ircd.cli_history",
                                             "ircd.cli_store", "ircd.cli_tokens", "ext.pircan.cli"])


def test_every_subcommand_has_help_and_fails_cleanly_on_bad_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PIRCD_CONFIG", raising=False)
    runner = CliRunner()
    good = str(tmp_path / "good.db")
    assert runner.invoke(main, ["account", "add", "alice", "--generate", "--db", good]).exit_code == 0
    copy = str(tmp_path / "copy.db")
    assert runner.invoke(main, ["backup", copy, "--db", good]).exit_code == 0
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[server]\nname = "irc.tést.org"\n'.encode("latin-1"))
    nosuch = tmp_path / "nosuch.toml"
    nosuch.write_text('[server]\nextensions = ["nosuch"]\n')
    ca_gone = tmp_path / "ca.toml"
    ca_gone.write_text(f'[server]\ntls_client_ca = "{tmp_path}/ca.pem"\ntls_client_ca_key = "{tmp_path}/ca.key"\n')
    (tmp_path / "adir").mkdir()
    (tmp_path / "notdb").write_text("not a database\n")
    (tmp_path / "afile").write_text("")
    unopenable = ["/nonexistent/dir/x.db", str(tmp_path / "adir"), str(tmp_path / "notdb")]
    missing = ["--db", str(tmp_path / "missing.db")]
    fp = "ab" * 32
    cases: dict[tuple[str, ...], list[tuple[list[str], str | None]]] = {
        ("check-config",): [([str(latin1)], None), ([str(nosuch)], None), (["gone.toml"], None), ([], None)],
        ("init",): [(["d", "--name", "bad name"], None), (["afile"], None), ([], None)],
        ("hash-password",): [(["--stdin"], ""), (["--stdin", "--config", str(latin1)], "pw\n")],
        ("account", "add"): [
            *[(["bob", "--password-stdin", "--db", path], "pw123456\n") for path in unopenable],
            (["9lives", "--generate", "--db", good], None), (["bob", "--password-stdin", "--db", good], b"\xff\n"),
            (["bob", "--kind", "agent", "--generate", "--db", good], None),
            (["bob", "--password-stdin", "--generate", "--db", good], None),
            (["bob", "--generate", "--config", str(latin1)], None),
        ],
        ("account", "list"): [(missing, None), (["--config", str(latin1)], None), (["--db", unopenable[2]], None)],
        ("account", "passwd"): [(["ghost", "--generate", "--db", good], None), (["alice", "--generate", *missing], None)],
        ("account", "suspend"): [(["ghost", "--db", good], None), (["alice", *missing], None)],
        ("account", "unsuspend"): [(["ghost", "--db", good], None)],
        ("account", "del"): [(["ghost", "--yes", "--db", good], None), (["alice", "--db", good], "")],
        ("account", "certfp"): [
            (["alice", "add", "xyz", "--db", good], None), (["alice", "add", "--db", good], None),
            (["ghost", "add", fp, "--db", good], None), (["alice", "frob", fp, "--db", good], None),
        ],
        ("account", "issue-cert"): [
            (["alice", "--db", good], None), (["alice", "--db", good, "--config", str(ca_gone)], None),
        ],
        ("agent", "add"): [
            (["bot", "--db", good], None), (["bot", "--owner", "ghost", "--db", good], None),
            (["bot", "--owner", "alice", "--db", unopenable[0]], None),
            (["bot", "--owner", "alice", "--password-stdin", "--db", good], ""),
        ],
        ("agent", "list"): [(missing, None)],
        ("history", "prune"): [
            (["--older-than", "nan", "--db", good], None), (["--older-than", "-1", "--db", good], None),
            (["--older-than", "1", "--channel", "nochan", "--db", good], None), (["--db", good], None),
            (["--older-than", "1", *missing], None),
        ],
        ("history", "count"): [(missing, None)],
        ("audit",): [(missing, None), (["--limit", "0", "--db", good], None)],
        ("a2a", "keys"): [(missing, None), (["--db", good], None)],
        ("a2a", "rotate-key"): [(missing, None), (["--db", good], None)],
        ("token", "add"): [(["ghost", "--db", good], None), (["alice", "--name", "no spaces", "--db", good], None),
                           (["alice", *missing], None)],
        ("token", "list"): [(["ghost", "--db", good], None), (["alice", *missing], None)],
        ("token", "revoke"): [(["alice", "--name", "nope", "--db", good], None), (["ghost", "--db", good], None)],
        ("webhook", "set"): [(["ghost", "https://example.com/", "--db", good], None),
                             (["alice", "ftp://example.com/", "--db", good], None),
                             (["alice", "http://127.0.0.1/", "--db", good], None),
                             (["alice", "http://8.8.8.8/", *missing], None)],
        ("webhook", "show"): [(["ghost", "--db", good], None), (["alice", "--db", good], None)],
        ("webhook", "clear"): [(["alice", "--db", good], None), (["alice", *missing], None)],
        ("webhook", "rotate"): [(["alice", "--db", good], None)],
        ("webhook", "test"): [(["alice", "--db", good], None), (["alice", "--config", str(latin1)], None)],
        ("webhook", "dead"): [(["alice", "--db", good], None), (["alice", "--limit", "0", "--db", good], None)],
        ("webhook", "replay"): [(["alice", "--db", good], None), (["alice", "zz", "--db", good], None),
                                (["alice", "--all", "0000000000000001", "--db", good], None)],
        ("backup",): [([str(tmp_path / "b.db"), *missing], None), ([good, "--db", good], None),
                      ([str(tmp_path / "no" / "dir" / "b.db"), "--db", good], None),
                      ([str(tmp_path / "b.db"), "--config", str(latin1)], None)],
        ("restore",): [([str(latin1), "--yes", "--db", good], None), ([str(tmp_path / "nofile.db"), "--db", good], None),
                       ([good, "--yes", "--db", good], None), ([copy, "--db", good], "n\n")],
        ("migrate-store",): [([str(tmp_path / "missing.db"), str(tmp_path / "to.db")], None), ([good, good], None),
                             ([good, copy], None), ([unopenable[2], str(tmp_path / "to.db")], None),
                             ([good, "postgresql://u:pw@[::1/x"], None), ([good], None)],
        ("host", "ps"): [(missing, None), (["--config", str(latin1)], None)],
        ("host", "logs"): [(["ghost", "--db", good], None), (["alice", *missing], None)],
        ("host", "start"): [(["ghost", "--db", good], None)],
        ("host", "stop"): [(["alice", "--db", good], None)],
        ("host", "restart"): [(["alice", *missing], None)],
        ("serve",): [],  # below, in a process of its own
    }
    commands = _leaf_commands(main)
    assert set(cases) == set(commands), "give every command its bad inputs here"
    for path, command in commands.items():
        helped = runner.invoke(main, [*path, "--help"])
        assert helped.exit_code == 0 and helped.exception is None, path
        assert command.get_short_help_str(80) and not command.get_short_help_str(80).endswith("..."), path
        for args, stdin in cases[path]:
            result = runner.invoke(main, [*path, *args], input=stdin)
            assert result.exception is None or isinstance(result.exception, SystemExit), (path, args, result.exc_info)
            _assert_one_clear_error(result.exit_code, result.stderr, (path, args))
    assert not (tmp_path / "missing.db").exists()
    long_name = str(tmp_path / ("x" * 300 + ".db"))  # a file that cannot be opened, found only at start-up
    for args in (["--config", str(latin1)], ["--config", str(nosuch)], ["--listen", "nohost"],
                 *[["--db", long_name]] * 3):
        served = run("serve", "--listen", "127.0.0.1:0", *args, cwd=tmp_path)
        _assert_one_clear_error(served.returncode, served.stderr, args)
    assert served.stderr.splitlines()[-1] == f"pircd: cannot start: cannot open database {long_name}: " \
        "unable to open database file"
