"""Webhooks on a live server (real sockets, the server's own event loop): a hanging receiver does
not delay another one nor IRC; the MCP tools; deliveries pending at kill -9 are all made after the
restart, with the same delivery ids and bytes."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests import dbs
from tests.live import IRCClient, pircan_server
from tests.proc import ServerProcess, cli, write_config
from tests.test_durability import sasl_client
from tests.test_mcp import PASSWORD, call, irc, login, mcp, refused, run, token_for
from tests.webhook_receiver import Receiver

LOOPBACK = {"webhook_allowed_networks": ["127.0.0.0/8"]}


@pytest.fixture
def srv(tmp_path):
    server = pircan_server(tmp_path, pircan={**LOOPBACK, "webhook_timeout_ms": 30_000})
    run(server, server.server.accounts.create("olive", PASSWORD, kind="person", owner=None))
    for name in ("alice", "bob", "carol"):
        run(server, server.server.accounts.create(name, PASSWORD, kind="agent", owner="olive"))
    yield server
    server.stop()


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make() -> Receiver:
        r = Receiver()
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def agree(a: IRCClient, a_name: str, b: IRCClient, b_name: str) -> None:
    rid = irc(a, f"CONTACT REQUEST {b_name} message 30 :work")[0][2]
    assert irc(b, f"CONTACT ACCEPT {rid}")[0][1] == "ACCEPTED"


def test_a_hanging_receiver_delays_neither_another_nor_irc(srv, clients, receivers):
    slow, fast = receivers(), receivers()
    alice, bob, carol = (login(srv, clients, n) for n in ("alice", "bob", "carol"))
    assert irc(bob, f"WEBHOOK SET {slow.url}")[0][1] == "SET"
    assert irc(carol, f"WEBHOOK SET {fast.url}")[0][1] == "SET"
    agree(alice, "alice", bob, "bob")
    agree(alice, "alice", carol, "carol")
    slow.wait_for(1)
    fast.wait_for(1)  # the request events
    slow.hang()
    assert irc(alice, "SEND bob :to the slow one")[0][1] == "OK"
    slow.wait_for(2)  # it arrived, and waits for an answer that does not come
    assert irc(alice, "SEND carol :to the fast one")[0][1] == "OK"
    got = json.loads(fast.wait_for(2)[-1].body)
    assert got["message"]["body"] == "to the fast one"
    for _ in range(3):  # IRC goes on meanwhile
        assert irc(alice, "PING :x") == []
    assert irc(alice, "SEND bob :second to the slow one")[0][1] == "OK"
    assert len(slow.requests) == 2  # one at a time per endpoint: the second waits for the first
    slow.release()
    bodies = [json.loads(r.body)["message"]["body"] for r in slow.wait_for(3)[1:]]
    assert bodies == ["to the slow one", "second to the slow one"]


def test_webhooks_over_mcp(srv, clients, receivers):
    hook = receivers()
    bob = login(srv, clients, "bob")
    olive = login(srv, clients, "olive")
    token = token_for(srv, "alice")
    owner_token = token_for(srv, "olive")

    async def scenario() -> None:
        async with mcp(srv, token) as alice:
            made = await call(alice, "set_webhook", url=hook.url)
            secret = made["secret"]
            assert secret.startswith("whsec_")
            assert made["webhook"]["url"] == hook.url and made["webhook"]["enabled"] is True
            shown = (await call(alice, "get_webhook"))["webhook"]
            assert (shown["pending"], shown["dead_letters"], shown["last_error"]) == (0, 0, None)
            tested = await call(alice, "test_webhook")
            assert (tested["ok"], tested["status"]) == (True, 200)
            assert hook.wait_for(1)[-1].headers["pircan-event"] == "test"
            assert await refused(alice, "set_webhook", url="http://10.0.0.1/") == (
                "ADDRESS_NOT_ALLOWED", ["http://10.0.0.1/"])
            assert await refused(alice, "get_webhook", account="bob") == ("NOT_ALLOWED", ["bob"])
            # a delivery answered 410: disabled, a dead letter; set again and replay it
            hook.script = [410]
            rid = (await call(alice, "request_contact", agent="bob", scopes=["message"], days=1,
                              purpose="x"))["request"]["request_id"]
            irc(bob, f"CONTACT ACCEPT {rid}")
            # the owner hears that the webhook was disabled (once the 410 is recorded)
            olive.read_until(lambda m: m.command == "NOTICE" and m.params[-1] == "NOTIFY webhook 1")
            dead = (await call(alice, "list_dead_letters"))["dead_letters"]
            assert [(d["type"], d["reason"], d["last_status"]) for d in dead] == [("decision", "gone", 410)]
            assert await refused(alice, "replay_dead_letters", all=True) == ("DISABLED", ["alice"])
            assert (await call(alice, "set_webhook", url=hook.url))["secret"] is None
            assert (await call(alice, "replay_dead_letters", delivery_ids=[dead[0]["delivery_id"]]))["replayed"] == 1
            again = hook.wait_for(3)[-1]
            assert again.headers["pircan-delivery"] == dead[0]["delivery_id"]
            assert again.body == hook.requests[1].body
            rotated = await call(alice, "rotate_webhook_secret")
            assert rotated["secret"] != secret
        async with mcp(srv, owner_token) as owner:
            assert (await call(owner, "get_webhook", account="alice"))["webhook"]["account"] == "alice"
            assert await call(owner, "clear_webhook", account="alice") == {"cleared": "alice", "dropped": 0}
        rows = irc(olive, "AUDIT alice 10")
        assert [r[5] for r in rows if r[1] == "ENTRY" and r[5].startswith("webhook.")] == [
            "webhook.set", "webhook.disable", "webhook.set", "webhook.replay", "webhook.rotate", "webhook.clear"]
        assert [r[-1] for r in rows if r[1] == "ENTRY" and r[5] == "webhook.clear"] == [
            f"{hook.url} dropped=0 by owner, through MCP"]

    asyncio.run(scenario())


def test_deliveries_pending_at_kill9_are_all_made_after_the_restart(tmp_path, receivers):
    """At-least-once: the receiver held the first delivery of each endpoint without answering when
    the server was killed; after the restart every delivery arrives, the held ones again with the
    same delivery id and the same bytes."""
    hook = receivers()
    cfg = write_config(tmp_path, pircan={**LOOPBACK, "webhook_timeout_ms": 60_000}, storage={"durability": "normal"})
    assert cli("account", "add", "olive", "--password-stdin", "--config", str(cfg),
               stdin="sesame123\n").returncode == 0
    server = ServerProcess(cfg)
    try:
        olive = sasl_client(server.port, "olive", "sesame123")
        passwords = {}
        for name in ("a1", "b1", "b2", "b3"):  # the owner makes its agents
            olive.send(f"AGENTS CREATE {name}")
            passwords[name] = olive.read_until(lambda m: m.command == "AGENTS")[-1].params[3]
        olive.close()
        a = sasl_client(server.port, "a1", passwords["a1"])
        targets = [sasl_client(server.port, n, passwords[n]) for n in ("b1", "b2", "b3")]
        for name, c in zip(("b1", "b2", "b3"), targets):
            c.send(f"WEBHOOK SET {hook.url}")
            assert c.read_until(lambda m: m.command in ("WEBHOOK", "FAIL"))[-1].params[1] == "SET"
            a.send(f"CONTACT REQUEST {name} message 30 :work")
            rid = a.read_until(lambda m: m.command == "CONTACT")[-1].params[2]
            c.send(f"CONTACT ACCEPT {rid}")
            assert c.read_until(lambda m: m.command == "CONTACT")[-1].params[1] == "ACCEPTED"
        hook.wait_for(3)  # the three request events
        hook.hang()
        for i in range(4):
            for name in ("b1", "b2", "b3"):
                a.send(f"SEND {name} :message {i}")
                assert a.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1].params[1] == "OK"
        held = hook.wait_for(6)[3:]  # the first message of each endpoint, unanswered
        server.kill9()
        for c in (a, *targets):
            c.close()
        hook.release()
        server = ServerProcess(cfg)
        got = hook.wait_for(6 + 12)[6:]
        by_body = {}
        for r in got:
            data = json.loads(r.body)
            by_body[(data["recipient"], data["message"]["body"])] = r
        assert sorted(by_body) == sorted((n, f"message {i}") for n in ("b1", "b2", "b3") for i in range(4))
        assert len(got) == 12  # each exactly once after the restart
        for r in held:
            data = json.loads(r.body)
            again = by_body[(data["recipient"], data["message"]["body"])]
            assert (again.headers["pircan-delivery"], again.body) == (r.headers["pircan-delivery"], r.body)
        for name in ("b1", "b2", "b3"):  # per endpoint, in the order they were sent
            order = [json.loads(r.body)["message"]["body"] for r in got if json.loads(r.body)["recipient"] == name]
            assert order == [f"message {i}" for i in range(4)]
    finally:
        server.terminate()


def test_shutdown_does_not_wait_for_a_hanging_receiver(srv, clients, receivers, tmp_path):
    """A request in flight at shutdown is cancelled; its delivery stays pending for the next start."""
    hook = receivers()
    alice, bob = login(srv, clients, "alice"), login(srv, clients, "bob")
    assert irc(bob, f"WEBHOOK SET {hook.url}")[0][1] == "SET"
    agree(alice, "alice", bob, "bob")
    hook.wait_for(1)
    hook.hang()
    assert irc(alice, "SEND bob :held")[0][1] == "OK"
    hook.wait_for(2)
    srv.stop()  # joins the server's thread for at most 10 s; the receiver holds the request for 60
    assert not srv._thread.is_alive()
    conn = dbs.connect(tmp_path / "pircd.db")
    try:
        assert conn.execute("SELECT tries, last_error FROM pircan_webhook_deliveries").fetchall() == [(0, None)]
    finally:
        conn.close()
    hook.release()
