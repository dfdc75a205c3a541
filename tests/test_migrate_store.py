"""``pircd migrate-store FROM TO``: a stopped server's database copied from PostgreSQL to a SQLite
file and back, every row the same, and a server that runs on each copy.

It takes a PostgreSQL server, so it runs in the PostgreSQL runs of the suite (its name says so);
the copy goes through SQLite both ways.
"""

from __future__ import annotations

from ircd.store.copy import _columns
from ircd.store.db import describe
from ircd.store.dialect import tables
from tests import dbs
from tests.proc import ServerProcess, cli, write_config
from tests.test_durability import sasl_client
from tests.test_pircan import agree, network, send, sent_id
from tests.test_webhooks import set_hook


def _populated(tmp_path) -> str:
    """A PIRCAN network's database with rows in most tables, its server stopped; its URL."""
    p = network(tmp_path, pircan={"webhook_allowed_networks": ["127.0.0.0/8"]})
    try:
        for name in ("olive", "alice", "bob"):
            p.login(name)
        agree(p, "alice", "bob", scopes="message,task:summarise")
        for i in range(3):
            sent_id(send(p, "alice", "bob", f"note {i} about the café"))
        p.cmd("bob", "INBOX ACK ALL")
        p.cmd("alice", "TASK CREATE bob summarise :the minutes")
        p.cmd("alice", "PROFILE NAME * :Alice A.")
        set_hook(p, "bob", "http://127.0.0.1:9/hook")
        for line in ("JOIN #home", "TOPIC #home :ours", "MODE #home +b spam!*@*", "PRIVMSG #home :hello"):
            p.cmd("olive", line)
        p.h.settle()
    finally:
        p.close()
    assert cli("token", "add", "alice", "--db", p.path).returncode == 0
    return p.path


def _contents(target: str) -> dict[str, list[tuple]]:
    conn = dbs.connect(target)
    try:
        found = {}
        for table in tables(conn):
            cols = [c for c in _columns(conn, table) if c != "rowid"]
            found[table] = sorted(conn.execute(f"SELECT {', '.join(cols)} FROM {table}").fetchall(), key=repr)
        return found
    finally:
        conn.close()


def test_postgresql_migrate_store_copies_to_sqlite_and_back(tmp_path):
    source = _populated(tmp_path)
    copy = str(tmp_path / "copy.db")
    there = cli("migrate-store", source, copy)
    assert there.returncode == 0, there.stderr
    assert there.stderr == f"copying {describe(source)} to {copy}\n"
    counts = {line.split()[0]: line.split()[1:] for line in there.stdout.splitlines()[:-1]}
    assert counts["pircan_messages"] == ["3", "3"] and counts["channel_lists"] == ["1", "1"]
    assert all(source_rows == copied for source_rows, copied in counts.values())
    assert there.stdout.splitlines()[-1] == (
        f"copied {len(counts)} tables, {sum(int(n) for n, _ in counts.values())} rows: every table has as many "
        f"rows as in {describe(source)}")
    back = dbs.database(tmp_path / "back.db")  # an empty PostgreSQL database, as createdb makes it
    assert cli("migrate-store", copy, back).returncode == 0
    original, returned = _contents(source), _contents(back)
    assert sorted(original) == sorted(returned)
    for table in original:
        assert original[table] == returned[table], table
    assert dbs.rows(back, "SELECT mask FROM channel_lists ORDER BY rowid") == [("spam!*@*",)]
    # a server on the SQLite copy: the messages, their search index (rebuilt) and the logins are there
    server = ServerProcess(write_config(tmp_path, server={"extensions": ["pircan"], "db": copy}))
    try:
        bob = sasl_client(server.port, "bob", "sesame123")
        bob.send("INBOX SEARCH :cafe")
        found = bob.read_until(lambda m: m.command == "INBOX" and m.params[1] == "SEARCH")
        assert [m.params[1] for m in found].count("MESSAGE") == 3
        bob.close()
    finally:
        server.terminate()
    # and on the PostgreSQL copy, whose id sequences go on after the copied ids
    server = ServerProcess(write_config(tmp_path, server={"extensions": ["pircan"], "db": back},
                                        pircan={"webhook_allowed_networks": ["127.0.0.0/8"]}))
    try:
        bob = sasl_client(server.port, "bob", "sesame123")
        bob.send("WEBHOOK CLEAR")
        bob.send("WEBHOOK SET http://127.0.0.1:9/again")
        bob.read_until(lambda m: m.command == "WEBHOOK" and m.params[1] == "SET")
        bob.close()
    finally:
        server.terminate()
    ids = [r[0] for r in dbs.rows(back, "SELECT id FROM pircan_webhook_endpoints")]
    assert len(ids) == 1 and ids[0] > max(r[0] for r in dbs.rows(source, "SELECT id FROM pircan_webhook_endpoints"))


def test_postgresql_migrate_store_refuses_what_it_cannot_copy(tmp_path):
    source = _populated(tmp_path)
    copy = tmp_path / "copy.db"
    copy.write_text("")
    cases = [
        ((source, str(copy)), f"error: {copy} exists: TO must be a new file (or an empty PostgreSQL database)"),
        ((source, source), "error: FROM and TO are the same database"),
        ((str(tmp_path / "none.db"), str(tmp_path / "new.db")), f"error: no database at {tmp_path / 'none.db'}"),
    ]
    for args, line in cases:
        refused = cli("migrate-store", *args)
        assert (refused.returncode, refused.stderr.splitlines()) == (1, [line]), args
    copy.unlink()
    assert cli("migrate-store", source, str(copy)).returncode == 0
    into_full = cli("migrate-store", str(copy), source)  # the source has pircd's tables: not empty
    assert into_full.returncode == 1
    assert into_full.stderr.splitlines()[-1] == (
        f"error: cannot copy {copy}: the target is not empty: migrate-store copies into a new database")
    server = ServerProcess(write_config(tmp_path, server={"extensions": ["pircan"], "db": source}))
    try:
        busy = cli("migrate-store", source, str(tmp_path / "busy.db"))
        assert busy.returncode == 1
        assert busy.stderr.startswith(f"error: {describe(source)} is in use by ")
        assert busy.stderr.rstrip().endswith("pircd connections: stop the server first")
    finally:
        server.terminate()
    assert not (tmp_path / "busy.db").exists()
