"""What a reply acknowledges survives kill -9 of the server process.

The server runs as a real process on the same database across restarts (a SQLite file, or on
PostgreSQL runs a PostgreSQL database: tests/dbs.py); the kill is SIGKILL right after the
acknowledgement arrives, or in the middle of a load, so no shutdown hook and no flush runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest

from tests import dbs
from tests.live import IRCClient
from tests.proc import ServerProcess, cli, write_config


def sasl_client(port: int, name: str, password: str, caps: str = "") -> IRCClient:
    c = IRCClient(port)
    c.login(name, password, tuple(caps.split()), sync=False)
    return c


def olives_agents(config, *agents: str) -> None:
    """The person olive and her agents, made with the CLI (password sesame123)."""
    assert cli("account", "add", "olive", "--password-stdin", "--config", str(config),
               stdin="sesame123\n").returncode == 0
    for name in agents:
        assert cli("agent", "add", name, "--owner", "olive", "--password-stdin", "--config", str(config),
                   stdin="sesame123\n").returncode == 0


def agreed(port: int, recipient: str, senders) -> IRCClient:
    """Each sender asks ``recipient`` for a message agreement over IRC, and it accepts; the
    recipient's connection, logged in."""
    accepting = sasl_client(port, recipient, "sesame123")
    for name in senders:
        asking = sasl_client(port, name, "sesame123")
        asking.send(f"CONTACT REQUEST {recipient} message 30 :load")
        rid = asking.read_until(lambda m: m.command == "CONTACT")[-1].params[2]
        asking.close()
        accepting.send(f"CONTACT ACCEPT {rid}")
        answer = accepting.read_until(lambda m: m.command == "CONTACT" and m.params[1] != "REQUEST")[-1]
        assert answer.params[1] == "ACCEPTED", answer
    return accepting


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def test_cli_account_survives_kill9(workdir):
    """An account the CLI acknowledged (exit 0) while the server runs is there after kill -9."""
    config = write_config(workdir)
    server = ServerProcess(config)
    try:
        result = cli("account", "add", "alice", "--password-stdin", "--config", str(config), stdin="sesame123\n")
        assert result.returncode == 0, result.stderr
        assert result.stdout == "created person account alice\n"
        server.kill9()
        server = ServerProcess(config)
        c = sasl_client(server.port, "alice", "sesame123")
        c.close()
    finally:
        server.terminate()


def test_register_survives_kill9(workdir):
    config = write_config(workdir, accounts={"registration": True})
    server = ServerProcess(config)
    try:
        c = IRCClient(server.port)
        c.register("newbie")
        c.send("REGISTER * * password123")
        msgs = c.read_until(lambda m: m.command in ("REGISTER", "FAIL"))
        assert [m.params for m in msgs if m.command == "REGISTER"] == [["SUCCESS", "newbie", "Account created"]]
        server.kill9()
        c.close()
        server = ServerProcess(config)
        sasl_client(server.port, "newbie", "password123").close()
    finally:
        server.terminate()


def test_pircan_state_survives_kill9(workdir):
    """Acknowledged SENDs and contact decisions, and the pending NOTIFY, survive kill -9;
    nothing is half-written (every message has its event and its audit row)."""
    config = write_config(workdir)
    for args in (
        ("account", "add", "olive", "--password-stdin"),
        ("account", "add", "a1", "--kind", "agent", "--owner", "olive", "--password-stdin"),
        ("account", "add", "b1", "--kind", "agent", "--owner", "olive", "--password-stdin"),
    ):
        assert cli(*args, "--config", str(config), stdin="sesame123\n").returncode == 0
    server = ServerProcess(config)
    try:
        a = sasl_client(server.port, "a1", "sesame123")
        b = sasl_client(server.port, "b1", "sesame123")
        a.send("CONTACT REQUEST b1 message 30 :let us work together")
        requested = a.read_until(lambda m: m.command == "CONTACT")[-1]
        request_id = requested.params[2]
        b.send(f"CONTACT ACCEPT {request_id}")
        accepted = b.read_until(lambda m: m.command == "CONTACT")[-1]
        assert accepted.params[1] == "ACCEPTED"
        agreement_id = accepted.params[3]
        b.close()  # b1 goes offline: its notifications must wait for it
        receipts = []
        for i in range(25):
            a.send(f"SEND b1 :message {i}")
            receipt = a.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
            assert receipt.command == "SEND" and receipt.params[1] == "OK", receipt
            receipts.append(receipt.params[2])
        server.kill9()
        a.close()

        db = dbs.connect(workdir / "pircd.db")
        stored = [f"{row[0]:016x}" for row in db.execute("SELECT id FROM pircan_messages ORDER BY id")]
        assert stored == receipts
        assert db.execute(
            "SELECT COUNT(*) FROM pircan_messages m JOIN pircan_events e ON e.ref_id = m.id AND e.type = 'message'"
        ).fetchone() == (25,)
        assert db.execute("SELECT COUNT(*) FROM pircan_audit WHERE action = 'message.send'").fetchone() == (25,)
        db.close()

        server = ServerProcess(config)
        b = IRCClient(server.port)
        b.login("b1", "sesame123", ("pircan.dev/lobby",), sync=False)
        notify = b.read_until(lambda m: m.command == "NOTIFY")[-1]
        assert notify.params == ["b1", "message", "25"]
        b.send("INBOX")
        listing = b.read_until(lambda m: m.command == "INBOX" and m.params[1] == "UNREAD")
        assert [m.params[2] for m in listing if m.params[1] == "MESSAGE"] == receipts
        assert listing[-1].params[2] == "25"
        b.send("CONTACT LIST agreements")
        lines = b.read_until(lambda m: m.command == "CONTACT" and m.params[1] == "END")
        agreements = [m.params for m in lines if m.params[1] == "AGREEMENT"]
        assert [(p[2], p[3], p[4], p[5], p[8]) for p in agreements] == [
            (agreement_id, "a1", "b1", "message", "active")
        ]
        b.close()
    finally:
        server.terminate()


def test_clean_restart_keeps_registered_channel(workdir):
    config = write_config(workdir, pircan={"guests_may_join": True})
    assert cli("account", "add", "alice", "--password-stdin", "--config", str(config), stdin="sesame123\n").returncode == 0
    server = ServerProcess(config)
    try:
        c = sasl_client(server.port, "alice", "sesame123")
        c.send("JOIN #home")
        c.send("TOPIC #home :our place")
        c.send("MODE #home +k door")
        c.sync()
        c.close()
        assert server.terminate() == 0
        server = ServerProcess(config)
        other = IRCClient(server.port)
        other.register("visitor")
        other.send("TOPIC #home")
        other.send("JOIN #home")
        got = other.sync()
        assert [(m.command, m.params[1:]) for m in got] == [
            ("332", ["#home", "our place"]),
            ("333", ["#home", got[1].params[2], got[1].params[3]]),
            ("475", ["#home", "Cannot join channel (+k)"]),
        ]
        other.close()
    finally:
        server.terminate()


def test_acknowledged_messages_over_irc_mcp_and_a2a_survive_kill9_under_load(workdir):
    """Three agents send at once, one over each transport, until the server is killed -9 in the
    middle of it: every message whose receipt arrived is stored, with its event and audit row."""
    from tests.test_a2a import a2a, answers, meta, request
    from tests.test_mcp import call, mcp

    config = write_config(workdir, server={"extensions": ["pircan"]})
    senders = {"by_irc": "irc", "by_mcp": "mcp", "by_a2a": "a2a"}
    olives_agents(config, "inbox", *senders)
    tokens = {name: cli("token", "add", name, "--config", str(config)).stdout.splitlines()[1]
              for name in ("by_mcp", "by_a2a")}
    server = ServerProcess(config)
    acked: dict[str, list[str]] = {transport: [] for transport in senders.values()}
    try:
        agreed(server.port, "inbox", senders).close()

        killed = threading.Event()
        progress = threading.Condition()  # notified with each receipt, the kill and each sender's end
        running = [3]

        def ack(transport: str, message_id: str) -> None:
            with progress:
                acked[transport].append(message_id)
                progress.notify_all()

        def by_irc() -> None:
            c = sasl_client(server.port, "by_irc", "sesame123")
            with progress:  # the slower transports are sending too
                progress.wait_for(lambda: bool(acked["mcp"] and acked["a2a"]) or killed.is_set(), 120)
            assert not killed.is_set()
            for i in range(110):  # within the agreement's hourly budget; paced to outlast the others' start
                killed.wait(0.01)
                c.send(f"SEND inbox :irc {i}")
                receipt = c.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
                assert receipt.command == "SEND", receipt
                ack("irc", receipt.params[2])

        async def by_mcp() -> None:
            async with mcp(server, tokens["by_mcp"]) as client:
                for i in range(110):
                    sent = await call(client, "send_direct_message", recipient="inbox", body=f"mcp {i}")
                    ack("mcp", sent["message"]["message_id"])

        async def by_a2a() -> None:
            async with a2a(server, tokens["by_a2a"], "inbox") as client:
                for i in range(110):
                    [sent] = await answers(client, request(f"a2a {i}", now=True))
                    ack("a2a", meta(sent.message)["message_id"])

        def until_killed(work) -> None:
            try:
                # the server was killed under it: what it acknowledged is in ``acked``
                with contextlib.suppress(Exception):
                    work()
            finally:
                with progress:
                    running[0] -= 1
                    progress.notify_all()

        threads = [threading.Thread(target=until_killed, args=(work,), daemon=True) for work in (
            by_irc, lambda: asyncio.run(by_mcp()), lambda: asyncio.run(by_a2a()))]
        for thread in threads:
            thread.start()
        with progress:  # every transport under way
            progress.wait_for(lambda: min(len(ids) for ids in acked.values()) >= 10 or not running[0], 120)
            assert min(len(ids) for ids in acked.values()) >= 10, acked
        server.kill9()
        with progress:
            killed.set()
            progress.notify_all()
        for thread in threads:
            thread.join(60)
    finally:
        server.terminate()
    stored = {f"{row[0]:016x}" for row in dbs.rows(workdir / "pircd.db", "SELECT id FROM pircan_messages")}
    everything = [i for ids in acked.values() for i in ids]
    assert set(everything) <= stored, {t: sorted(set(ids) - stored) for t, ids in acked.items()}
    assert dbs.rows(workdir / "pircd.db",
                    "SELECT COUNT(*) FROM pircan_messages m JOIN pircan_events e ON e.ref_id = m.id "
                    "AND e.type = 'message'") == [(len(stored),)]
    assert dbs.rows(workdir / "pircd.db", "SELECT COUNT(*) FROM pircan_audit WHERE action = 'message.send'") == [
        (len(stored),)]
