"""Timers set at start-up fire in a live server.

Start-up hooks run before the listeners plug the event loop into ``Server.timers``; the timers they
set (PIRCAN's sweep of expired requests and agreements, the history writer's first prune) must still
fire. The server runs as a separate process (``pircd serve``) on a database prepared beforehand with
the store's own functions; the tests wait on its log or on a client's lines with a bounded deadline.
"""

from __future__ import annotations

import time
from pathlib import Path

from argon2 import PasswordHasher

from ext.pircan import store as pircan_rows
from ext.pircan.ids import hexid
from ircd.proto.timestamps import first_id_at
from ircd.sasl.scram import derive_keys
from ircd.store import accounts as account_rows
from ircd.store import history as history_rows
from ircd.store.db import Conn, connect_sync, migrate, transaction
from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK
from ircd.timers import Timers
from tests import dbs
from tests.live import IRCClient
from tests.proc import ServerProcess, write_config

DAY_MS = 86_400_000
PASSWORD = "sesame123"
PIRCAN = "PIRCAN!pircan@services.pircd"


def _database(path: Path) -> Conn:
    conn = connect_sync(dbs.database(path), "normal")
    migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
    return conn


def _accounts(conn: Conn, now: int) -> None:
    hashed = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(PASSWORD)
    keys = derive_keys(PASSWORD)
    for name, kind, owner in (("olive", "person", None), ("alice", "agent", "olive"), ("bob", "agent", "olive")):
        account_rows.insert_account(conn, name, name, kind, owner, now, hashed, keys)


def _login(port: int, account: str) -> IRCClient:
    c = IRCClient(port)
    c.login(account, PASSWORD, sync=False)
    return c


def _notifies_until(c: IRCClient, last: str) -> list[str]:
    """PIRCAN's NOTIFY notices up to and including ``last`` (the socket's 10 s timeout bounds the wait)."""
    got = c.read_until(lambda m: m.command == "NOTICE" and m.params[-1] == last)
    return [m.params[-1] for m in got if m.command == "NOTICE" and m.source == PIRCAN]


def test_pircan_sweep_expires_requests_and_agreements_in_a_live_server(tmp_path):
    """pircan.md: a request not decided within 7 days expires; an agreement "expires at its end time
    [...] The sweep audits the expiry and gives both parties an `agreement` event"."""
    cfg = write_config(
        tmp_path,
        server={"extensions": ["pircan"]},
        storage={"durability": "normal"},
        pircan={"sweep_interval_ms": 200},
    )
    now = int(time.time() * 1000)
    stale_at, accepted_at = now - 8 * DAY_MS, now - DAY_MS
    stale = pircan_rows.Request(first_id_at(stale_at), "alice", "bob", ("message",), 30, "weekly report",
                                "pending", stale_at, None, None, None)
    agreement_id = first_id_at(accepted_at) + 1
    accepted = pircan_rows.Request(first_id_at(accepted_at), "alice", "bob", ("message",), 1, "a day",
                                   "accepted", accepted_at, accepted_at, "bob", agreement_id)
    end = now + 3000  # the agreement ends a few seconds after the server starts
    agreement = pircan_rows.Agreement(agreement_id, accepted.id, "alice", "bob", ("message",), accepted_at, end,
                                      None, None)
    conn = _database(tmp_path / "pircd.db")
    migrate(conn, pircan_rows.TRACK, pircan_rows.MIGRATIONS)
    with transaction(conn):
        _accounts(conn, now)
        pircan_rows.insert_request(conn, stale)
        pircan_rows.insert_request(conn, accepted)
        pircan_rows.insert_agreement(conn, agreement)
    conn.close()

    server = ServerProcess(cfg)
    try:
        assert "agreements=1 " in server.wait_for_log("pircan loaded"), "the agreement ended before start-up"
        alice, bob = _login(server.port, "alice"), _login(server.port, "bob")
        assert _notifies_until(alice, "NOTIFY agreement 1") == ["NOTIFY decision 1", "NOTIFY agreement 1"]
        assert _notifies_until(bob, "NOTIFY agreement 1") == ["NOTIFY agreement 1"]
        db = dbs.connect(tmp_path / "pircd.db")
        assert db.execute("SELECT id, state FROM pircan_requests ORDER BY id").fetchall() == [
            (stale.id, "expired"), (accepted.id, "accepted")
        ]
        audit = db.execute("SELECT at, actor, subject, action, detail FROM pircan_audit ORDER BY id").fetchall()
        assert [row[1:] for row in audit] == [
            ("server", "bob", "contact.expire", f"{hexid(stale.id)} from alice"),
            ("server", "alice", "agreement.expire", f"{hexid(agreement_id)} with bob"),
        ]
        assert end <= audit[1][0] < end + 60_000  # within a minute of the deadline
        assert db.execute("SELECT recipient, type, ref_id FROM pircan_events ORDER BY recipient, type").fetchall() == [
            ("alice", "agreement", agreement_id), ("alice", "decision", stale.id), ("bob", "agreement", agreement_id)
        ]
        db.close()
        alice.close()
        bob.close()
    finally:
        assert server.terminate() == 0


def test_history_retention_prunes_at_start_up_in_a_live_server(tmp_path):
    """configuration.md: history.retention_days deletes older history "at start-up and every hour"."""
    cfg = write_config(tmp_path, server={"extensions": []}, history={"retention_days": 1})
    now = int(time.time() * 1000)
    conn = _database(tmp_path / "pircd.db")
    old, recent = first_id_at(now - 3 * DAY_MS), first_id_at(now - 1000)
    with transaction(conn):
        history_rows.insert(conn, [
            (ident, "#a", "2026-01-01T00:00:00.000Z", "PRIVMSG", "alice!a@h", None, "#a", "hello", None, None)
            for ident in (old, recent)
        ])
    conn.close()

    server = ServerProcess(cfg)
    try:
        server.wait_for_log("history pruned lines=1")
        db = dbs.connect(tmp_path / "pircd.db")
        assert db.execute("SELECT id FROM history").fetchall() == [(recent,)]
        db.close()
    finally:
        assert server.terminate() == 0


def test_timers_set_before_the_loop_move_to_it_with_the_time_they_have_left():
    now = [100.0]
    timers = Timers(lambda: now[0])
    fired: list[str] = []
    timers.call_later(5.0, lambda: fired.append("late"))
    timers.call_later(1.0, lambda: fired.append("soon"))
    timers.call_later(2.0, lambda: fired.append("never")).cancel()
    now[0] = 100.5
    scheduled: list[tuple[float, object]] = []

    class Handle:
        def __init__(self) -> None:
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def backend(delay: float, fn) -> Handle:
        scheduled.append((delay, fn))
        return Handle()

    timers.backend = backend
    assert [delay for delay, _ in scheduled] == [0.5, 4.5]
    timers.run_due()  # nothing is left in the heap for a clock to fire
    now[0] = 200.0
    timers.run_due()
    assert fired == []
    for _, fn in scheduled:
        fn()  # type: ignore[operator]
    assert fired == ["soon", "late"]
    later = timers.call_later(3.0, lambda: fired.append("after"))
    assert scheduled[-1][0] == 3.0
    later.cancel()
    scheduled[-1][1]()  # type: ignore[operator]
    assert fired == ["soon", "late"]
