"""``GET /metrics``: the exact counts after known IRC, PIRCAN, MCP, A2A and webhook activity, and who
may read them (loopback, or the bearer token of an account in ``http.metrics_accounts``).

Live servers run in-process on port 0 (tests/live.py); the scrape is a plain HTTP GET parsed with
``prometheus_client``'s own parser. The webhook counts use the socket-free PIRCAN harness, whose
clock the test moves to the next try.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import Harness, config
from tests.live import IRCClient, LiveServer, pircan_server
from tests.test_a2a import a2a, agree, answers, db_rows, refusal, request
from tests.test_mcp import PASSWORD, call, irc, login, mcp, refused, run, token_for
from tests.test_pircan import P
from tests.test_webhooks import make, one_message, receiver, state_of  # noqa: F401 - receiver: a fixture

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def scrape(server: LiveServer, **headers: str) -> httpx.Response:
    return httpx.get(server.http_url + "/metrics", headers=headers, timeout=10)


class Counted(IRCClient):
    """An IRC client that counts the lines it sends and reads."""

    sent = 0
    read = 0

    def send(self, line: str | bytes) -> None:
        super().send(line)
        self.sent += 1

    def read_line(self) -> str | None:
        line = super().read_line()
        self.read += line is not None
        return line


# the core: connections, lines, registrations, the database -------------------------------------


def test_a_loopback_scrape_counts_every_irc_line_exactly(tmp_path, clients):
    srv = LiveServer(config(server={"listen": ["127.0.0.1:0"]}, flood={"enabled": False}),
                     db=str(tmp_path / "pircd.db")).start()
    try:
        alice, bob = Counted(srv.port), Counted(srv.port)
        clients += [alice, bob]
        alice.register("alice")
        bob.register("bob")
        for c in (alice, bob):
            c.send("JOIN #room")
            c.sync()
        alice.send("PRIVMSG #room :hello")
        alice.send("PRIVMSG bob :psst")
        alice.sync()
        got = bob.read_until(lambda m: m.command == "PRIVMSG" and m.params[0] == "bob")
        assert [m.params for m in got if m.command == "PRIVMSG"] == [["#room", "hello"], ["bob", "psst"]]
        bob.sync()  # everything the server sent either client has been read now
        batches = srv.call(lambda: srv.server.store.db.batches)

        answer = scrape(srv)
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/plain; version=")
        got_samples = parse(answer.text)
        expect = {
            "pircd_connections": [({"transport": "plain"}, 2), ({"transport": "tls"}, 0),
                                  ({"transport": "websocket"}, 0), ({"transport": "websocket_tls"}, 0)],
            "pircd_users": [({}, 2)],
            "pircd_channels": [({}, 1)],
            "pircd_http_connections": [({}, 1)],  # this scrape's own
            "pircd_connections_accepted_total": [({}, 2)],
            "pircd_connections_refused_total": [({"reason": r}, 0) for r in ("full", "per_ip", "throttle")],
            "pircd_registrations_total": [({}, 2)],
            "pircd_lines_in_total": [({}, alice.sent + bob.sent)],
            "pircd_lines_out_total": [({}, alice.read + bob.read)],
            "pircd_sendq_drops_total": [({}, 0)],
        }
        for name, rows in expect.items():
            assert [(labels, value(got_samples, name, **labels)) for labels, _ in rows] == rows, name
        commits = value(got_samples, "pircd_db_commit_seconds_count")
        assert batches <= commits <= srv.call(lambda: srv.server.store.db.batches)
        assert value(got_samples, "pircd_db_commit_seconds_bucket", le="+Inf") == commits
        assert value(got_samples, "pircd_db_write_seconds_count") >= commits  # one commit holds one write or more
        assert value(got_samples, "pircd_info", version="0.1.0", server="irc.test") == 1
        assert ("process_cpu_seconds_total", frozenset()) in got_samples
    finally:
        srv.stop()


def test_sendq_drops_and_the_lines_written_in_the_harness(make_harness):
    h = make_harness(limits={"sendq": 8192}, flood={"enabled": False})
    for name in ("alice", "slow"):
        h.register(name)
        h.send(name, "JOIN #a")
    for name in ("alice", "slow"):
        h.lines(name)  # the JOINs
    before = h.server.delivery.lines_out  # the welcomes and JOINs
    h.conns["slow"].backlog = 8000  # the kernel buffer is full: nothing drains
    for i in range(30):
        h.send("alice", f"PRIVMSG #a :{i} {'x' * 400}")
    slow = h.lines("slow")
    assert slow[-1] == "ERROR :Closing link: 127.0.0.1 (SendQ exceeded)"
    samples = parse(h.server.metrics.render()[0].decode())
    assert value(samples, "pircd_sendq_drops_total") == 1
    assert value(samples, "pircd_lines_out_total") == before + len(slow) + len(h.lines("alice"))
    assert value(samples, "pircd_lines_in_total") == 2 * 3 + 30  # NICK, USER, JOIN each; 30 PRIVMSG


def test_replies_and_multiline_batches_count_as_their_lines():
    """A reply and a batch each go out as one write of several lines: counted as the lines."""
    from tests.test_multiline import FULL, HOW_IS

    h = Harness()
    try:
        h.register("alice", caps=FULL)
        h.register("bob", caps=["message-tags", "batch", "server-time", "draft/multiline"])
        h.register("dave")
        for name in ("alice", "bob", "dave"):
            h.send(name, "JOIN #test")
        for name in ("alice", "bob", "dave"):
            h.take(name)
        before = h.server.delivery.lines_out
        got = 0
        for line in (*HOW_IS, "BATCH -123"):
            h.send("alice", line)
        h.send("dave", "WHOIS alice")
        for name in ("alice", "bob", "dave"):
            got += len(h.lines(name))
        assert got > 10
        assert h.server.delivery.lines_out - before == got
    finally:
        h.close()


def test_two_servers_in_one_process_count_apart():
    """Each server has a registry of its own: nothing is counted in the process-wide default."""
    first, second = Harness(), Harness()
    try:
        first.register("alice")
        assert value(parse(first.server.metrics.render()[0].decode()), "pircd_registrations_total") == 1
        assert value(parse(second.server.metrics.render()[0].decode()), "pircd_registrations_total") == 0
    finally:
        first.close()
        second.close()


# PIRCAN: SENDs and refusals, MCP and A2A calls ---------------------------------------------------


@pytest.fixture
def net(tmp_path):
    server = pircan_server(tmp_path, http={"metrics_accounts": ["Watcher"], "trusted_proxies": ["127.0.0.1"]})
    run(server, server.server.accounts.create("olive", PASSWORD, kind="person", owner=None))
    run(server, server.server.accounts.create("watcher", PASSWORD, kind="person", owner=None))
    for name in ("alice", "bob", "carol"):
        run(server, server.server.accounts.create(name, PASSWORD, kind="agent", owner="olive"))
    yield server
    server.stop()


def test_sends_refusals_and_calls_by_transport_and_code(net, clients):
    agree(net, clients, "alice", "bob", "message")
    alice, bob = login(net, clients, "alice"), login(net, clients, "bob")
    assert irc(alice, "SEND bob :one")[0][1] == "OK"
    assert irc(alice, "SEND bob :two")[0][1] == "OK"
    assert irc(alice, "SEND carol :no agreement")[0][:2] == ["SEND", "NO_AGREEMENT"]
    assert irc(alice, "SEND bob :" + "x" * 201)[0][:2] == ["SEND", "TOO_LONG"]
    token = token_for(net, "bob")

    async def scenario() -> None:
        async with mcp(net, token) as mcp_bob:
            await call(mcp_bob, "send_direct_message", recipient="alice", body="over MCP")
            await call(mcp_bob, "get_inbox")
            await call(mcp_bob, "get_inbox")
            assert (await refused(mcp_bob, "send_direct_message", recipient="carol", body="hi"))[0] == "NO_AGREEMENT"
        async with a2a(net, token_for(net, "alice"), "bob") as a2a_alice:
            await answers(a2a_alice, request("over A2A", now=True))
        async with a2a(net, token_for(net, "alice"), "carol") as a2a_alice:
            assert (await refusal(answers(a2a_alice, request("hi"))))[1] == "NO_AGREEMENT"

    asyncio.run(scenario())
    samples = parse(scrape(net).text)
    assert {t: value(samples, "pircd_pircan_sends_total", transport=t) for t in ("irc", "mcp", "a2a", "portal")} == {
        "irc": 2, "mcp": 1, "a2a": 1, "portal": 0}
    assert {c: value(samples, "pircd_pircan_send_refusals_total", code=c) for c in ("NO_AGREEMENT", "TOO_LONG")} == {
        "NO_AGREEMENT": 3, "TOO_LONG": 1}
    assert value(samples, "pircd_pircan_agreements") == 1
    mcp_calls = {k: v for k, v in samples.items() if k[0] == "pircd_mcp_calls_total"}
    assert mcp_calls == {
        ("pircd_mcp_calls_total", frozenset({("tool", "send_direct_message"), ("result", "ok")})): 1,
        ("pircd_mcp_calls_total", frozenset({("tool", "send_direct_message"), ("result", "NO_AGREEMENT")})): 1,
        ("pircd_mcp_calls_total", frozenset({("tool", "get_inbox"), ("result", "ok")})): 2,
    }
    assert value(samples, "pircd_mcp_call_seconds_count", tool="get_inbox") == 2
    assert value(samples, "pircd_mcp_call_seconds_bucket", tool="get_inbox", le="+Inf") == 2
    assert value(samples, "pircd_a2a_calls_total", method="message_send", result="ok") == 1
    assert value(samples, "pircd_a2a_calls_total", method="message_send", result="NO_AGREEMENT") == 1
    assert value(samples, "pircd_a2a_call_seconds_count", method="message_send") == 2
    assert value(samples, "pircd_registrations_total") == 4  # agree()'s two logins, then alice and bob
    # the audit says how each message came, as it does for every other action
    details = [d.split(" ", 3)[3:] for (d,) in db_rows(net, "SELECT detail FROM pircan_audit "
                                                            "WHERE action = 'message.send' ORDER BY id")]
    assert details == [[], [], ["through MCP"], ["through A2A"]]


# who may read them ------------------------------------------------------------------------------


def test_a_forwarded_client_needs_the_token_of_a_metrics_account(net):
    forwarded = {"X-Forwarded-For": "203.0.113.9"}  # from the trusted proxy on loopback: the client is remote
    ask = "Metrics are served to loopback clients and to the bearer token of an account in http.metrics_accounts\n"
    answer = scrape(net, **forwarded)
    assert (answer.status_code, answer.text) == (401, "Unauthorized: " + ask)
    assert answer.headers["www-authenticate"] == 'Bearer realm="pircd metrics"'
    answer = scrape(net, **forwarded, Authorization="Basic d2F0Y2hlcjp4")
    assert (answer.status_code, answer.text) == (401, "Unauthorized: " + ask)
    answer = scrape(net, **forwarded, Authorization="Bearer pircd_0000000000000000_nope")
    assert (answer.status_code, answer.text) == (
        401, "Unauthorized: the token is not valid (unknown, revoked, or its account suspended)\n")
    answer = scrape(net, **forwarded, Authorization=f"Bearer {token_for(net, 'olive')}")
    assert (answer.status_code, answer.text) == (403, "Forbidden: the account olive is not in http.metrics_accounts\n")
    answer = scrape(net, **forwarded, Authorization=f"Bearer {token_for(net, 'watcher')}")  # Watcher, folded
    assert answer.status_code == 200 and "pircd_lines_in_total" in answer.text
    assert scrape(net).status_code == 200  # loopback itself, no token
    assert httpx.post(net.http_url + "/metrics", timeout=10).status_code == 405


def test_failed_token_checks_are_throttled(tmp_path):
    server = pircan_server(tmp_path, http={"trusted_proxies": ["127.0.0.1"]}, accounts={"login_ip_attempts": 2})
    try:
        headers: dict[str, Any] = {"X-Forwarded-For": "203.0.113.10", "Authorization": "Bearer pircd_1_bad"}
        assert [scrape(server, **headers).status_code for _ in range(2)] == [401, 401]
        answer = scrape(server, **headers)
        assert answer.status_code == 429 and int(answer.headers["retry-after"]) > 0
        assert answer.text == "Too many failed token checks from your address; try again later\n"
    finally:
        server.stop()


# webhooks ---------------------------------------------------------------------------------------


def test_webhook_deliveries_retries_and_dead_letters(tmp_path, receiver):
    p: P = make(tmp_path)
    try:
        one_message(p, receiver, [500])  # the request event delivered, the message's first try: 500
        p.advance(60)  # its retry: 200
        assert len(receiver.requests) == 3
        receiver.script = [410]
        p.cmd("alice", "SEND bob :gone")  # 410: the endpoint is disabled, the delivery a dead letter
        samples = parse(p.h.server.metrics.render()[0].decode())
        for name, kind_values in (("pircd_webhook_deliveries_total", {"webhook": 2, "a2a": 0}),
                                  ("pircd_webhook_retries_total", {"webhook": 1, "a2a": 0})):
            assert {k: value(samples, name, kind=k) for k in kind_values} == kind_values, name
        dead = {(k, why): value(samples, "pircd_webhook_dead_letters_total", kind=k, reason=why)
                for k in ("webhook", "a2a") for why in ("tries", "expired", "gone")}
        assert {key: n for key, n in dead.items() if n} == {("webhook", "gone"): 1}
        assert value(samples, "pircd_webhook_requests_in_flight") == 0
        assert state_of(p).webhooks.counts == {("webhook", "delivered"): 2, ("webhook", "retry"): 1,
                                               ("webhook", "dead_gone"): 1}
    finally:
        p.close()
