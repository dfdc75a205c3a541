"""PostgreSQL as the store: what only a database server brings. Bad URLs and credentials stop
start-up with one line, a password never shows, a database of a newer schema is refused, and
the server rides out the database server restarting under load (FAIL TEMPORARILY_UNAVAILABLE,
503) and recovers by itself. The adapter's translations are checked against a live server.

Every test here is about PostgreSQL only (its name says so); the rest of the suite runs on
PostgreSQL as a whole with PIRCD_TEST_DB=postgresql.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx2
import pytest

from ircd.store.db import connect_sync, describe, migrate
from ircd.store.errors import IntegrityError, OperationalError, StoreUnavailable, missing_table, unique_violation
from ircd.store.pg import redact, translate
from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK
from tests import dbs
from tests.live import IRCClient
from tests.proc import ServerProcess, cli, write_config
from tests.test_durability import agreed, olives_agents, sasl_client
from tests.test_mcp import call, mcp


def _serve(url: str) -> list[str]:
    """The lines ``pircd serve`` ends with on standard error (it must not start)."""
    served = cli("serve", "--db", url, "--listen", "127.0.0.1:0", "--no-http")
    assert served.returncode == 1, served.stderr
    return served.stderr.splitlines()


def test_postgresql_bad_urls_and_credentials_stop_start_up_with_one_line():
    pg = dbs.server()
    wrong = dbs.PASSWORD + "-wrong"
    cases = [
        (pg.url("postgres", dbs.PASSWORD_ROLE, wrong), f'password authentication failed for user "{dbs.PASSWORD_ROLE}"'),
        (f"postgresql://postgres:{wrong}@127.0.0.1:{dbs.free_port()}/pircd",
         "Connection refused (is the server running on that host and accepting TCP/IP connections?)"),
        (pg.url("no_such_database"), 'database "no_such_database" does not exist'),
        (f"postgresql://postgres:{wrong}@[::1/pircd", None),  # not a URL libpq can read
    ]
    for url, reason in cases:
        lines = _serve(url)
        assert wrong not in "\n".join(lines)
        last = lines[-1]
        assert last.startswith(f"pircd: cannot start: cannot connect to {redact(url)}: "), last
        if reason is not None:
            assert last.endswith(reason), last
        listed = cli("account", "list", "--db", url)
        assert listed.returncode == 1 and wrong not in listed.stderr
        assert listed.stderr.splitlines() == [f"error: {last.removeprefix('pircd: cannot start: ')}"]


def test_postgresql_a_password_in_the_url_is_never_logged(tmp_path):
    url = dbs.server().url(dbs.name_for(tmp_path / "pw.db"), dbs.PASSWORD_ROLE, dbs.PASSWORD)
    dbs.fresh_url(dbs.name_for(tmp_path / "pw.db"))
    added = cli("account", "add", "alice", "--password-stdin", "--db", url, stdin="sesame123\n")
    assert added.returncode == 0, added.stderr
    assert added.stderr == f"using database postgresql://{dbs.PASSWORD_ROLE}@127.0.0.1:{dbs.server().port}/" \
                           f"{dbs.name_for(tmp_path / 'pw.db')} (new database)\n"
    config = write_config(tmp_path, server={"db": url})
    server = ServerProcess(config)
    try:
        sasl_client(server.port, "alice", "sesame123").close()
    finally:
        server.terminate()
    log = "".join(server.log)
    assert f"using database {describe(url)}" in log
    assert dbs.PASSWORD not in log and dbs.PASSWORD not in added.stdout + added.stderr


def test_postgresql_a_database_of_a_newer_schema_is_refused(tmp_path):
    url = dbs.database(tmp_path / "newer.db")
    conn = connect_sync(url)
    migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
    conn.execute("UPDATE schema_versions SET version = 99 WHERE track = 'core'")
    conn.close()
    expected = (f"cannot open database {describe(url)}: database schema core is at version 99, newer than this "
                f"pircd knows ({len(CORE_MIGRATIONS)}): run the pircd that wrote it, or upgrade this one")
    assert _serve(url)[-1] == f"pircd: cannot start: {expected}"
    listed = cli("account", "list", "--db", url)
    assert (listed.returncode, listed.stderr) == (1, f"error: {expected}\n")


def test_postgresql_the_adapter_speaks_the_sqlite_surface(tmp_path):
    """``?`` placeholders (not inside literals), a literal %, an empty IN list, errors by kind."""
    assert translate("SELECT '?', ? FROM t WHERE a LIKE 'x%' AND b IN () AND c NOT IN ()") == (
        "SELECT '?', %s FROM t WHERE a LIKE 'x%%' AND b = ANY('{}') AND c <> ALL('{}')")
    conn = connect_sync(dbs.database(tmp_path / "adapter.db"))
    conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT)")
    assert conn.execute("INSERT INTO t (id, v) VALUES (?, ?), (?, ?)", (1, "a%", 2, True)).rowcount == 2
    assert conn.execute("SELECT id, v FROM t WHERE v LIKE 'a%' OR id IN () ORDER BY id", ()).fetchall() == [(1, "a%")]
    assert conn.execute("SELECT v FROM t WHERE id NOT IN () AND id = ?", (2,)).fetchone() == ("1",)  # a bool is 0/1
    with pytest.raises(IntegrityError) as duplicate:
        conn.execute("INSERT INTO t (id, v) VALUES (?, ?)", (1, "again"))
    assert unique_violation(duplicate.value)
    with pytest.raises(OperationalError) as missing:
        conn.execute("SELECT * FROM no_such_table")
    assert missing_table(missing.value)
    with pytest.raises(OperationalError, match="SQLite-only SQL"):
        conn.execute("INSERT OR IGNORE INTO t (id) VALUES (?)", (3,))
    conn.close()


# the database server restarting under load -------------------------------------------------------


class _Load:
    """Agents that SEND to bob, each one after another (paced: the agreement budget is 120 an
    hour) until told to stop, remembering each receipt: OK with its id, or the FAIL code."""

    def __init__(self, port: int, senders: list[str]) -> None:
        self.clients = [sasl_client(port, name, "sesame123") for name in senders]
        self.oks: list[str] = []
        self.fails: list[str] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(c,), daemon=True) for c in self.clients]
        for thread in self.threads:
            thread.start()

    def _run(self, client: IRCClient) -> None:
        for i in range(5_000):  # bounded; stopped long before
            if self.stop.wait(0.05):  # pacing, not synchronisation
                return
            client.send(f"SEND bob :load {i}")
            reply = client.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
            if reply.command == "SEND":
                self.oks.append(reply.params[2])
            else:
                self.fails.append(reply.params[1])

    def until(self, predicate, what: str) -> None:
        deadline = time.monotonic() + 60
        while not predicate():  # a condition with a deadline; the load runs meanwhile
            assert time.monotonic() < deadline and all(t.is_alive() for t in self.threads), what
            time.sleep(0.02)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        for client in self.clients:
            client.close()


def _mcp_status(url: str, token: str) -> int:
    async def call() -> int:
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(url + "/mcp", headers={"Authorization": f"Bearer {token}",
                                                                "Accept": "application/json, text/event-stream"},
                                       json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            return response.status_code

    return asyncio.run(call())


def test_postgresql_restarting_under_load_refuses_writes_then_recovers_by_itself(tmp_path):
    pg = dbs.PgServer().start()
    try:
        pg.admin("CREATE DATABASE pircd")
        url = pg.url("pircd")
        config = write_config(tmp_path, server={"extensions": ["pircan"], "db": url})
        senders = ["alice", "carol", "dave"]
        olives_agents(config, "bob", *senders)
        token = cli("token", "add", "bob", "--config", str(config)).stdout.splitlines()[1]
        server = ServerProcess(config)
        try:
            bob = agreed(server.port, "bob", senders)
            load = _Load(server.port, senders)
            load.until(lambda: len(load.oks) >= 20, "no SEND was acknowledged before the restart")
            pg.stop()
            load.until(lambda: "TEMPORARILY_UNAVAILABLE" in load.fails, "no SEND was refused while it was down")
            assert set(load.fails) == {"TEMPORARILY_UNAVAILABLE"}
            assert _mcp_status(server.http_url, token) == 503
            acknowledged_while_down = len(load.oks)
            pg.start()
            load.until(lambda: len(load.oks) > acknowledged_while_down + 20, "SEND did not recover")
            load.finish()
            bob.send("INBOX")  # the server never restarted: bob's connection is the same
            unread = bob.read_until(lambda m: m.command == "INBOX" and m.params[1] == "UNREAD")[-1]
            assert int(unread.params[2]) == len(load.oks)
            bob.close()

            async def inbox() -> dict:
                async with mcp(server, token) as client:
                    return await call(client, "get_inbox")

            assert asyncio.run(inbox())["messages"]  # MCP works again too
        finally:
            server.terminate()
        stored = {f"{row[0]:016x}" for row in dbs.rows(url, "SELECT id FROM pircan_messages")}
        assert set(load.oks) <= stored  # every acknowledged SEND is there
        log = "".join(server.log)
        assert "Traceback" not in log, log
        assert log.count("unavailable:") >= 1 and log.count(" is back") >= 1
    finally:
        pg.destroy()


def test_postgresql_reads_and_writes_fail_fast_while_it_is_down(tmp_path):
    """The store's own view: StoreUnavailable at once (no wait for a timeout per request), then
    the same Database works again once the server is back."""
    from ircd.store.db import Database

    pg = dbs.PgServer().start()
    try:
        pg.admin("CREATE DATABASE d")

        def create(conn) -> None:
            conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")

        def put(conn, ident: int) -> None:
            conn.execute("INSERT INTO t (id) VALUES (?)", (ident,))

        def count(conn) -> int:
            return conn.execute("SELECT COUNT(*) FROM t").fetchone()[0]

        async def main() -> None:
            database = Database(pg.url("d"), durability="off")
            await database.open()
            await database.write(create)
            await database.write(put, 1)
            pg.stop()
            with pytest.raises(StoreUnavailable):
                await database.write(put, 2)
            with pytest.raises(StoreUnavailable):
                await database.read(count)
            pg.start()
            deadline = time.monotonic() + 30
            while True:  # the writer reconnects by itself within its backoff (at most 2 s)
                try:
                    await database.write(put, 3)
                    break
                except StoreUnavailable:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.05)
            assert await database.read(count) == 2
            await database.close()

        asyncio.run(main())
    finally:
        pg.destroy()
