"""PIRCAN's workers on a cluster (docs/scaling.md, "Workers: webhooks, A2A push and hosted agents"):
two nodes on one PostgreSQL database and NATS (tests/clusters.py). Each webhook delivery is sent by
one node, once; a hosted agent runs on exactly one node, and the other starts it after a kill -9 of
that node within the lease's bound (``host.lease_seconds`` and a third of it)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from ext.pircan.ids import hexid
from tests import dbs
from tests.clusters import start_node
from tests.live import IRCClient
from tests.proc import ServerProcess, cli
from tests.test_host import until
from tests.webhook_receiver import Received, Receiver

PASSWORD = "sesame123"
LOOPBACK = {"webhook_allowed_networks": ["127.0.0.0/8"]}
LEASE_S = 3  # host.lease_seconds of these nodes: a dead node's agent starts elsewhere within 4 s
# (the deadlines below add room for a slow machine: they bound a wait, they do not measure speed)


def _accounts(url: str, *specs: tuple[str, str, str | None]) -> None:
    for name, kind, owner in specs:
        args = ["account", "add", name, "--kind", kind, "--password-stdin", "--db", url]
        result = cli(*args, *(["--owner", owner] if owner else []), stdin=PASSWORD + "\n")
        assert result.returncode == 0, result.stderr


def _irc(client: IRCClient, line: str, verb: str) -> list[str]:
    """The params of the reply to ``line``: its first ``verb`` or FAIL line."""
    client.send(line)
    return client.read_until(lambda m: m.command in (verb, "FAIL"))[-1].params


def _login(node: ServerProcess, account: str, clients: list[IRCClient], nick: str | None = None) -> IRCClient:
    client = IRCClient(node.port)
    clients.append(client)
    client.login(account, PASSWORD, nick=nick)
    return client


# webhooks ---------------------------------------------------------------------------------------


def _deliveries_done(url: str) -> bool:
    return dbs.rows(url, "SELECT COUNT(*) FROM pircan_webhook_deliveries")[0][0] == 0


def _events_of(url: str, account: str) -> list[int]:
    return [r[0] for r in dbs.rows(url, "SELECT id FROM pircan_events WHERE recipient = ? ORDER BY id", (account,))]


def _document(request: Received) -> dict[str, Any]:
    """The event's JSON document in a request: a webhook's body, or an A2A push's data part."""
    body = json.loads(request.body)
    if "jsonrpc" not in body:
        return body
    data: dict[str, Any] = body["params"]["message"]["parts"][1]["data"]
    return data


def _delivered(receiver: Receiver) -> list[tuple[str, str]]:
    """(delivery id, event id) of every request the receiver got, in order."""
    return [(doc["delivery_id"], doc["event_id"]) for doc in map(_document, receiver.requests)]


def _hex(event_id: int) -> str:
    return hexid(event_id)


@pytest.mark.parametrize("protocol", ["webhook", "a2a"])
def test_each_push_delivery_is_sent_once_by_the_cluster(tmp_path, nats, protocol):
    """Events for bob caused on both nodes (both wake their worker for bob's push endpoint, set on
    a: a webhook, or the A2A endpoint it publishes) reach bob's receiver once each; after a kill -9
    of a, what is queued meanwhile comes from b."""
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))
    _accounts(url, ("olive", "person", None), ("alice", "agent", "olive"), ("carol", "agent", "olive"),
              ("bob", "agent", "olive"))
    http = ("--http-listen", "127.0.0.1:0")  # an A2A push is signed for the network's HTTP address
    a, b = (start_node(tmp_path, url, nats[0].url, name, *http, pircan=LOOPBACK) for name in ("a", "b"))
    receiver = Receiver()
    clients: list[IRCClient] = []
    try:
        bob = _login(a, "bob", clients)
        alice, carol = _login(a, "alice", clients), _login(b, "carol", clients)
        if protocol == "webhook":
            assert _irc(bob, f"WEBHOOK SET {receiver.url}", "WEBHOOK")[1] == "SET"
        else:
            assert _irc(bob, f"PROFILE ENDPOINT * {receiver.url}", "PROFILE")[1:3] == ["ENDPOINT", "bob"]
        # each request accepted on the node where it was made (bob's owner on b for carol's)
        olive = _login(b, "olive", clients)
        for sender, accepter in ((alice, bob), (carol, olive)):
            request_id = _irc(sender, "CONTACT REQUEST bob message 30 :work", "CONTACT")[2]
            assert _irc(accepter, f"CONTACT ACCEPT {request_id}", "CONTACT")[1] == "ACCEPTED"
        # the receiver holds its answers: a runner stays on bob's endpoint while both nodes queue more
        receiver.hang()
        for i in range(10):
            for sender in (alice, carol):
                assert _irc(sender, f"SEND bob :n{i}", "SEND")[1] == "OK"
        receiver.wait_for(1)
        receiver.release()
        events = _events_of(url, "bob")
        kinds = dbs.rows(url, "SELECT type, COUNT(*) FROM pircan_events WHERE recipient = 'bob' GROUP BY type")
        assert dict(kinds)["message"] == 20 and len(events) > 20  # and the requests, the agreement made for it
        receiver.wait_for(len(events), 60)
        until(lambda: _deliveries_done(url), 60)
        got = _delivered(receiver)
        assert sorted(e for _, e in got) == [_hex(e) for e in events]  # each event once
        assert len({d for d, _ in got}) == len(got)
        assert {"jsonrpc" in json.loads(r.body) for r in receiver.requests} == {protocol == "a2a"}
        # a killed (nothing of bob's was being sent: the queue was empty); carol goes on on b
        a.kill9()
        for i in range(5):
            assert _irc(carol, f"SEND bob :after {i}", "SEND")[1] == "OK"
        events = _events_of(url, "bob")
        receiver.wait_for(len(events), 60)
        until(lambda: _deliveries_done(url), 60)
        got = _delivered(receiver)
        assert sorted(e for _, e in got) == [_hex(e) for e in events]
        bodies = [_document(r)["message"]["body"] for r in receiver.requests[len(got) - 5:]]
        assert bodies == [f"after {i}" for i in range(5)]  # in order, from b
    finally:
        for client in clients:
            client.close()
        receiver.close()
        a.terminate()
        b.terminate()


# hosted agents ---------------------------------------------------------------------------------


def _agent_script(tmp_path: Path) -> Path:
    """A hosted agent that says "ready <pid>" and waits; its path names its processes in this test."""
    script = tmp_path / "hosted_bot.py"
    script.write_text("import os, time\nprint('ready', os.getpid(), flush=True)\ntime.sleep(600)\n")
    return script


def _processes(script: Path) -> list[int]:
    """The pids of live processes running ``script``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                zombie = f.read().split(") ")[-1][:1] == "Z"
        except OSError:
            continue
        if str(script).encode() in argv and not zombie:
            found.append(int(entry))
    return found


def _host_node(tmp_path: Path, url: str, nats_url: str, name: str, script: Path) -> ServerProcess:
    logs = tmp_path / name / "pircd-host"
    logs.mkdir(parents=True)
    agent: dict[str, Any] = {"account": "bot", "command": [sys.executable, str(script)], "start": "always",
                             "ready": {"log": "^ready"}}
    return start_node(tmp_path, url, nats_url, name, host={"log_dir": str(logs), "lease_seconds": LEASE_S,
                                                            "stop_grace_seconds": 3, "agents": [agent]})


def _status(client: IRCClient) -> list[str]:
    """HOST STATUS bot: state, pid and note (the log cursor is each node's own log's)."""
    params = _irc(client, "HOST STATUS bot", "HOST")
    return [params[3], params[4], params[-1]]


def test_a_hosted_agent_runs_on_one_node_and_moves_when_it_dies(tmp_path, nats):
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))
    _accounts(url, ("olive", "person", None), ("bot", "agent", "olive"))
    script = _agent_script(tmp_path)
    nodes = {name: _host_node(tmp_path, url, nats[0].url, name, script) for name in ("a", "b")}
    clients: list[IRCClient] = []
    try:
        # both claimed it at start-up; the one that did not says so
        other = until(lambda: next((n for n, node in nodes.items()
                                    if any("bot runs on node" in line for line in node.log)), None), 30)
        holder = "b" if other == "a" else "a"
        nodes[other].wait_for_log(f"bot runs on node {holder}: not started here (always)")
        (pid,) = until(lambda: _processes(script) or None, 30)
        until(lambda: dbs.rows(url, "SELECT state FROM pircan_host WHERE account = 'bot'") == [("running",)], 30)
        assert dbs.rows(url, "SELECT node, pid FROM pircan_host WHERE account = 'bot'") == [(holder, pid)]
        olive = {n: _login(nodes[n], "olive", clients, f"olive{n}") for n in ("a", "b")}  # (a nick per node)
        assert [_status(olive[n]) for n in ("a", "b")] == [["running", str(pid), f"on node {holder}"]] * 2
        # process actions go to the node that runs it
        olive_other = olive[other]
        assert _irc(olive_other, "HOST STOP bot", "HOST")[:4] == ["HOST", "OTHER_NODE", "bot", holder]
        assert _irc(olive_other, "HOST START bot", "HOST")[3:5] == ["running", str(pid)]
        assert _processes(script) == [pid]
        ps = cli("host", "ps", "--config", str(tmp_path / other / "pircd.toml")).stdout.splitlines()
        assert [line.split()[:4] for line in ps] == [["ACCOUNT", "NODE", "STATE", "PID"],
                                                     ["bot", holder, "running", str(pid)]]
        # the operator's request, made with the other node's config, is the running node's to answer
        done = cli("host", "restart", "bot", "--config", str(tmp_path / other / "pircd.toml"))
        assert (done.returncode, done.stdout) == (0, "bot: restarting\n"), done.stderr
        (pid,) = until(lambda: [p for p in _processes(script) if p != pid] or None, 30)
        until(lambda: dbs.rows(url, "SELECT node, pid, state FROM pircan_host WHERE account = 'bot'")
              == [(holder, pid, "running")], 30)
        for client in clients:
            client.close()
        clients.clear()
        # its node killed: the agent dies with it (parent-death signal) and starts on the other
        nodes[holder].kill9()
        (moved,) = until(lambda: [p for p in _processes(script) if p != pid] or None, LEASE_S * 4 / 3 + 20)
        until(lambda: dbs.rows(url, "SELECT node, pid, state FROM pircan_host WHERE account = 'bot'")
              == [(other, moved, "running")], 30)
        assert _processes(script) == [moved]
        assert _status(_login(nodes[other], "olive", clients)) == ["running", str(moved), f"on node {other}"]
        actions = dbs.rows(url, "SELECT action, detail FROM pircan_audit WHERE subject = 'bot' "
                                "AND action = 'host.takeover'")
        assert actions == [("host.takeover", f"from node {holder}")]
    finally:
        for client in clients:
            client.close()
        for node in nodes.values():
            node.terminate()
    assert _processes(script) == []


def test_claim_and_lease_rules_on_the_store(tmp_path):
    """The rows behind both, on PostgreSQL with times given: a claim or lease is its holder's until
    it ends; renewed, it lasts; ended unrenewed, another node takes it; only its holder gives it
    up or writes the agent's row; a revival leaves a failed agent alone, a start by hand does not."""
    from ext.pircan import store_schema
    from ext.pircan.host import store as hdb
    from ext.pircan.webhooks import store as wdb
    from ircd.store.db import connect_sync
    from ircd.store.migrate import migrate

    conn = connect_sync(dbs.fresh_url(dbs.name_for(tmp_path / "claims")))
    try:
        for track, steps in ((store_schema.TRACK, store_schema.MIGRATIONS), (wdb.TRACK, wdb.MIGRATIONS),
                             (hdb.TRACK, hdb.MIGRATIONS)):
            migrate(conn, track, steps)
        ident = wdb.save_endpoint(conn, "bob", "https://example.org/hook", "secret", 0)[0].id
        assert wdb.claim(conn, ident, "a", 1_000, 31_000) is None
        assert wdb.claim(conn, ident, "b", 2_000, 32_000) == ("a", 31_000)
        assert wdb.claim(conn, ident, "a", 3_000, 33_000) is None  # its holder again
        wdb.renew_claims(conn, "a", 40_000)
        assert wdb.claim(conn, ident, "b", 39_999, 69_999) == ("a", 40_000)
        assert wdb.claim(conn, ident, "b", 40_000, 70_000) is None  # a's ended unrenewed
        wdb.unclaim(conn, ident, "a")  # not a's any more: nothing
        assert wdb.claim(conn, ident, "a", 41_000, 71_000) == ("b", 70_000)
        wdb.unclaim(conn, ident, "b")
        assert wdb.claim(conn, ident, "a", 42_000, 72_000) is None
        wdb.unclaim_all(conn, "a")
        wdb.disable(conn, ident, 0, 1, 43_000, "HTTP 410")
        assert wdb.claim(conn, ident, "b", 44_000, 74_000) == (None, 0)  # disabled: nobody sends

        cmd = '["agent"]'
        assert hdb.claim(conn, "bot", cmd, "a", 1_000, 4_000, True) is None
        held = hdb.claim(conn, "bot", cmd, "b", 2_000, 5_000, True)
        assert held is not None and (held.node, held.lease_until) == ("a", 4_000)
        assert hdb.renew(conn, "a", 7_000) == {"bot"}
        assert hdb.claim(conn, "bot", cmd, "b", 6_999, 9_999, True) is not None
        assert hdb.claim(conn, "bot", cmd, "b", 7_000, 10_000, True) is None  # a's lease ended: b's now
        assert hdb.renew(conn, "a", 11_000) == set()  # a finds it lost
        hdb.save_held(conn, hdb.Row("bot", "running", 11, cmd, 1_000, 0, None, 8_000), "a", None)
        assert hdb.get_row(conn, "bot") == hdb.Row("bot", "starting", None, cmd, None, 0, None, 1_000, "b", 10_000)
        hdb.save_held(conn, hdb.Row("bot", "failed", None, cmd, 7_000, 4, "exit 1", 9_000), "b", None)
        assert hdb.get_row(conn, "bot") == hdb.Row("bot", "failed", None, cmd, 7_000, 4, "exit 1", 9_000, "b", None)
        assert hdb.claim(conn, "bot", cmd, "a", 9_500, 12_500, True) is not None  # a revival: failed stays
        assert hdb.claim(conn, "bot", cmd, "a", 9_500, 12_500, False) is None  # a start by hand
        assert hdb.get_row(conn, "bot").node == "a"  # type: ignore[union-attr]
    finally:
        conn.close()
