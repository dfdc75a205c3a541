"""Webhooks through the socket-free harness: real HTTP receivers on port 0, the fake clock for the
schedule, exact lines and stored rows.

The signature is checked here by its own implementation (hmac over "<timestamp>.<body>"), not by
the server's. Accounts as in test_pircan: olive is a person; alice, bob and carol are her agents.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from ext.pircan.ids import ts
from tests import dbs
from tests.test_pircan import DAY, T0_MS, P, agree, sent_id, word
from tests.test_pircan_deleted_accounts import delete_from_another_process
from tests.webhook_receiver import Receiver

S = ":irc.test"
LOOPBACK = {"webhook_allowed_networks": ["127.0.0.0/8"]}
MINUTE = 60


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def make(tmp_path, **pircan) -> P:
    p = P(tmp_path, pircan={**LOOPBACK, **pircan})
    p.account("olive", kind="person")
    for name in ("alice", "bob", "carol"):
        p.account(name)
    for conn in ("olive", "alice", "bob", "carol"):
        p.login(conn)
    return p


@pytest.fixture
def p(tmp_path):
    harness = make(tmp_path)
    yield harness
    harness.close()


def state_of(p: P):
    """PIRCAN's live state (the MCP route holds it)."""
    return next(app for path, app in p.h.server.http.routes if path == "/mcp").state


def set_hook(p: P, conn: str, url: str, account: str = "") -> str:
    """WEBHOOK SET; the secret shown."""
    out = p.cmd(conn, f"WEBHOOK SET {account + ' ' if account else ''}{url}")
    assert len(out) == 1 and word(out[0], 3) == "SET", out
    return word(out[0], 6)


def expected_signature(secret: str, stamp: str, body: bytes) -> str:
    return "v1=" + hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def test_set_shows_the_secret_once_and_is_audited(p, receiver):
    out = p.cmd("alice", f"WEBHOOK SET {receiver.url}")
    secret = word(out[0], 6)
    assert out == [(f"{S} WEBHOOK alice SET alice {receiver.url} {secret} "
                   ":Webhook set; store this secret now: it is not shown again")]
    assert secret.startswith("whsec_") and len(secret) == 49
    assert p.cmd("alice", "WEBHOOK SHOW") == [f"{S} WEBHOOK alice ENDPOINT alice {receiver.url} active 0 0 * ok"]
    # again: the URL changes, the secret stays and is not shown
    other = receiver.url + "2"
    assert p.cmd("alice", f"WEBHOOK SET {other}") == [
        f"{S} WEBHOOK alice SET alice {other} * :Webhook set; its secret is unchanged (WEBHOOK ROTATE makes a new one)"]
    assert p.rows("SELECT account, url, secret, enabled FROM pircan_webhook_endpoints") == [
        ("alice", other, secret, 1)]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action LIKE 'webhook.%' ORDER BY id") == [
        ("alice", "alice", "webhook.set", f"{receiver.url} new secret"),
        ("alice", "alice", "webhook.set", other),
    ]


def test_a_message_is_delivered_signed_with_the_json_of_mcp(p, receiver):
    secret = set_hook(p, "bob", receiver.url)
    agree(p, "alice", "bob")
    receiver.requests.clear()
    out = p.cmd("alice", "SEND bob :Build 1234 is green")
    mid = sent_id(out)
    got = receiver.wait_for(1)[-1]
    [(event_id,)] = p.rows("SELECT id FROM pircan_events WHERE type = 'message' AND ref_id = ?", int(mid, 16))
    stamp = got.headers["pircan-timestamp"]
    assert stamp == str(int(p.h.clock.now))
    assert got.headers["pircan-signature"] == expected_signature(secret, stamp, got.body)
    assert got.headers["pircan-event"] == "message"
    assert got.headers["content-type"] == "application/json"
    assert got.path == "/hook"
    data = json.loads(got.body)
    assert data == {
        "delivery_id": got.headers["pircan-delivery"],
        "event_id": f"{event_id:016x}",
        "type": "message",
        "recipient": "bob",
        "created_at": ts(p.now_ms()),
        "message": {
            "message_id": mid, "sender": "alice", "recipient": "bob", "agreement_id": data["message"]["agreement_id"],
            "conversation_id": mid, "in_reply_to": None, "hop_count": 0, "created_at": ts(p.now_ms()),
            "read": False, "bytes": 19, "body": "Build 1234 is green",
        },
    }
    # delivered: the row is gone, the endpoint remembers the success
    assert p.rows("SELECT COUNT(*) FROM pircan_webhook_deliveries") == [(0,)]
    assert p.rows("SELECT last_success_at FROM pircan_webhook_endpoints") == [(p.now_ms(),)]


def one_message(p: P, receiver: Receiver, script: tuple[int, ...] | list[int] = (), default: int = 200) -> tuple[str, int]:
    """bob has a webhook and an agreement with alice; then the receiver answers ``script`` (then
    ``default``) and alice sends one message. (message id, requests before it)."""
    set_hook(p, "bob", receiver.url)
    agree(p, "alice", "bob")
    before = len(receiver.wait_for(1))  # the request event
    receiver.script, receiver.default = list(script), default
    return sent_id(p.cmd("alice", "SEND bob :hello")), before


def pending(p: P) -> list[tuple]:
    return p.rows("SELECT tries, next_at - queued_at, last_status, last_error FROM pircan_webhook_deliveries")


def test_500_then_200_is_retried_on_the_schedule_with_the_same_bytes(p, receiver):
    """PIRCAN v0.1 section 4: "retried with backoff (1 min doubling, at most 6 h, 12 tries)"."""
    _, before = one_message(p, receiver, [500, 500, 500, 500])
    start = p.now_ms()
    assert len(receiver.requests) == before + 1  # the first try, at once
    assert pending(p) == [(1, 60_000, 500, "HTTP 500")]
    offsets = [60_000]
    for gap, tries in ((120_000, 2), (240_000, 3), (480_000, 4)):
        p.at(start - 1_800_000_000_000 + offsets[-1] - 1)  # a millisecond early: nothing
        assert len(receiver.requests) == before + tries - 1
        p.at(start - 1_800_000_000_000 + offsets[-1])
        assert len(receiver.requests) == before + tries
        offsets.append(offsets[-1] + gap)
        assert pending(p) == [(tries, offsets[-1], 500, "HTTP 500")]
    p.at(start - 1_800_000_000_000 + offsets[-1])  # the fifth try: 200
    tries = receiver.requests[before:]
    assert len(tries) == 5
    assert len({t.headers["pircan-delivery"] for t in tries}) == 1
    assert len({t.body for t in tries}) == 1
    assert pending(p) == []
    assert p.rows("SELECT COUNT(*) FROM pircan_webhook_dead") == [(0,)]


def test_twelve_tries_at_most_six_hours_apart_then_a_dead_letter(p, receiver):
    mid, before = one_message(p, receiver, default=503)
    start = p.now_ms()
    minutes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 360, 360]
    at = 0
    for n, gap in enumerate(minutes, start=2):
        at += gap * 60_000
        p.at(start - 1_800_000_000_000 + at)
        assert len(receiver.requests) == before + n, n
    assert at == 1231 * 60_000
    deliveries = receiver.requests[before:]
    assert len({d.headers["pircan-delivery"] for d in deliveries}) == 1
    assert pending(p) == []
    delivery = int(deliveries[0].headers["pircan-delivery"], 16)
    assert p.rows("SELECT id, account, tries, reason, last_status, last_error, died_at - queued_at "
                  "FROM pircan_webhook_dead") == [(delivery, "bob", 12, "tries", 503, "HTTP 503", at)]
    # /metrics: the request event delivered, 11 tries scheduled again, the 12th a dead letter
    assert state_of(p).webhooks.counts == {("webhook", "delivered"): 1, ("webhook", "retry"): 11,
                                           ("webhook", "dead_tries"): 1}
    p.advance(7 * DAY)
    assert len(receiver.requests) == before + 12  # nothing more
    p.lines("bob")
    out = p.cmd("bob", "WEBHOOK DEAD")
    [(event_id,)] = p.rows("SELECT id FROM pircan_events WHERE type = 'message' AND ref_id = ?", int(mid, 16))
    assert out == [
        f"{S} WEBHOOK bob DEAD {delivery:016x} {event_id:016x} message {ts(start + at)} 12 tries :HTTP 503",
        f"{S} WEBHOOK bob END bob 1",
    ]


def test_410_disables_tells_the_owner_and_replay_sends_the_same_delivery(p, receiver):
    owners = Receiver()
    try:
        set_hook(p, "olive", owners.url)
        mid, before = one_message(p, receiver, [410])
        gone_at = p.now_ms()
        first = receiver.requests[-1]
        assert p.rows("SELECT enabled, disabled_reason FROM pircan_webhook_endpoints WHERE account = 'bob'") == [
            (0, "HTTP 410")]
        delivery = int(first.headers["pircan-delivery"], 16)
        assert p.rows("SELECT id, tries, reason, last_status FROM pircan_webhook_dead") == [(delivery, 1, "gone", 410)]
        [(audit_id, detail)] = p.rows("SELECT id, detail FROM pircan_audit WHERE action = 'webhook.disable'")
        assert detail == f"HTTP 410 from {receiver.url}; 1 dead letter"
        assert p.rows("SELECT recipient, ref_id FROM pircan_events WHERE type = 'webhook' ORDER BY id") == [
            ("bob", audit_id), ("olive", audit_id)]
        p.notifies()
        assert p.lines("bob")[-1] == ":PIRCAN!pircan@services.pircd NOTICE bob :NOTIFY webhook 1"
        assert p.lines("olive")[-1] == ":PIRCAN!pircan@services.pircd NOTICE olive :NOTIFY webhook 1"
        # the owner's own webhook hears of it, with the audit entry
        told = json.loads(owners.wait_for(2)[-1].body)  # after the request event to bob
        assert (told["type"], told["recipient"], told["audit"]["action"], told["audit"]["subject"]) == (
            "webhook", "olive", "webhook.disable", "bob")
        # nothing more is queued or sent for bob
        p.cmd("alice", "SEND bob :are you there")
        assert p.rows("SELECT COUNT(*) FROM pircan_webhook_deliveries") == [(0,)]
        assert len(receiver.requests) == before + 1
        assert p.cmd("bob", "WEBHOOK SHOW") == [
            (f"{S} WEBHOOK bob ENDPOINT bob {receiver.url} disabled 0 1 {ts(T0_MS)} "
            f":disabled after HTTP 410 at {ts(gone_at)}")]
        assert p.cmd("bob", "WEBHOOK REPLAY ALL") == [
            f"{S} FAIL WEBHOOK DISABLED bob :The webhook was disabled after HTTP 410: set it again first"]
        # set again, replay: the same delivery id and the same bytes
        assert word(p.cmd("bob", f"WEBHOOK SET {receiver.url}")[0], 6) == "*"
        assert p.cmd("bob", f"WEBHOOK REPLAY {delivery:016x}") == [
            f"{S} WEBHOOK bob REPLAYED bob 1 :1 dead letter queued again"]
        again = receiver.wait_for(before + 2)[-1]
        assert (again.headers["pircan-delivery"], again.body) == (first.headers["pircan-delivery"], first.body)
        assert json.loads(again.body)["message"]["message_id"] == mid
        assert p.rows("SELECT COUNT(*) FROM pircan_webhook_dead") == [(0,)]
        assert p.rows("SELECT action, detail FROM pircan_audit WHERE action = 'webhook.replay'") == [
            ("webhook.replay", f"1 dead letters ({delivery:016x})")]
    finally:
        owners.close()


def test_three_days_pass_while_a_retry_waits(tmp_path, receiver):
    """The server is down for three days after a failed try: the delivery is not tried again."""
    p = make(tmp_path)
    try:
        _, before = one_message(p, receiver, [500])
        start = p.now_ms()
        assert pending(p) == [(1, 60_000, 500, "HTTP 500")]
        p.h.clock.advance(3 * DAY)  # the clock moves on, no timer fires: as a server that was down
    finally:
        p.close()
    p2 = P(tmp_path, clock_start=p.h.clock.now, pircan=LOOPBACK)
    try:
        assert p2.rows("SELECT tries, reason, died_at - ? FROM pircan_webhook_dead", start) == [
            (1, "expired", 3 * DAY * 1000)]
        assert state_of(p2).webhooks.counts == {("webhook", "dead_expired"): 1}  # for /metrics
        assert pending(p2) == []
        assert len(receiver.requests) == before + 1
    finally:
        p2.close()


REFUSALS = [
    ("WEBHOOK", ("FAIL WEBHOOK UNKNOWN_SUBCOMMAND * :Syntax: WEBHOOK SET|SHOW|CLEAR|ROTATE|TEST|DEAD|REPLAY ... "
                "(see HELP WEBHOOK)")),
    ("WEBHOOK PUT x", ("FAIL WEBHOOK UNKNOWN_SUBCOMMAND PUT :Syntax: WEBHOOK SET|SHOW|CLEAR|ROTATE|TEST|DEAD|REPLAY ... "
                      "(see HELP WEBHOOK)")),
    ("WEBHOOK :put it", ("FAIL WEBHOOK UNKNOWN_SUBCOMMAND PUT_IT :Syntax: WEBHOOK SET|SHOW|CLEAR|ROTATE|TEST|DEAD|"
                        "REPLAY ... (see HELP WEBHOOK)")),
    ("WEBHOOK SET", "FAIL WEBHOOK NEED_MORE_PARAMS SET :Syntax: WEBHOOK SET [<account>] <url>"),
    ("WEBHOOK REPLAY", ("FAIL WEBHOOK NEED_MORE_PARAMS REPLAY :Syntax: WEBHOOK REPLAY [<account>] "
                       "<delivery-id>[,...]|ALL")),
    ("WEBHOOK SET ftp://example.com/x", ("FAIL WEBHOOK INVALID_URL ftp://example.com/x :A webhook URL starts with "
                                        "http:// or https://")),
    ("WEBHOOK SET https://user:pw@example.com/x", ("FAIL WEBHOOK INVALID_URL https://user:pw@example.com/x :A webhook "
     "URL carries no user name or password (use the signature to check the origin)")),
    ("WEBHOOK SET https:///x", "FAIL WEBHOOK INVALID_URL https:///x :A webhook URL names a host"),
    ("WEBHOOK SET http://10.1.2.3/x", ("FAIL WEBHOOK ADDRESS_NOT_ALLOWED http://10.1.2.3/x :10.1.2.3 resolves to "
     "10.1.2.3, a private address (pircan.webhook_allowed_networks)")),
    ("WEBHOOK SET http://169.254.169.254/latest", ("FAIL WEBHOOK ADDRESS_NOT_ALLOWED http://169.254.169.254/latest "
     ":169.254.169.254 resolves to 169.254.169.254, a link-local address (pircan.webhook_allowed_networks)")),
    ("WEBHOOK SET http://[::ffff:10.0.0.1]/", ("FAIL WEBHOOK ADDRESS_NOT_ALLOWED http://[::ffff:10.0.0.1]/ "
     ":::ffff:10.0.0.1 resolves to ::ffff:a00:1, a private address (pircan.webhook_allowed_networks)")),
    ("WEBHOOK SET http://224.0.0.1/", ("FAIL WEBHOOK ADDRESS_NOT_ALLOWED http://224.0.0.1/ :224.0.0.1 resolves to "
     "224.0.0.1, a multicast address (pircan.webhook_allowed_networks)")),
    ("WEBHOOK SHOW", "FAIL WEBHOOK NO_WEBHOOK alice :No webhook is set for this account"),
    ("WEBHOOK CLEAR", "FAIL WEBHOOK NO_WEBHOOK alice :No webhook is set for this account"),
    ("WEBHOOK ROTATE", "FAIL WEBHOOK NO_WEBHOOK alice :No webhook is set for this account"),
    ("WEBHOOK TEST", "FAIL WEBHOOK NO_WEBHOOK alice :No webhook is set for this account"),
    ("WEBHOOK REPLAY ALL", "FAIL WEBHOOK NO_WEBHOOK alice :No webhook is set for this account"),
    ("WEBHOOK REPLAY 12zz", "FAIL WEBHOOK NO_SUCH_DELIVERY 12zz :No such dead letter for this account"),
    ("WEBHOOK SHOW bob", "FAIL WEBHOOK NOT_ALLOWED bob :An account manages its own webhook; an owner its agents'"),
    ("WEBHOOK SHOW nobody", "FAIL WEBHOOK NO_SUCH_ACCOUNT nobody :No such account"),
    ("WEBHOOK DEAD olive", "FAIL WEBHOOK NOT_ALLOWED olive :An account manages its own webhook; an owner its agents'"),
]


def test_refusals(p):
    """Every refusal of the verb, in one harness (one set of logins)."""
    for line, reply in REFUSALS:
        assert p.cmd("alice", line) == [f"{S} {reply}"], line
    assert p.cmd("olive", "WEBHOOK SET https://example.com/x y") == [
        f"{S} FAIL WEBHOOK NO_SUCH_ACCOUNT https://example.com/x :No such account"]
    guest = p.plain("guest")
    assert guest is not None
    assert p.cmd("guest", "WEBHOOK SHOW") == [
        (f"{S} FAIL WEBHOOK ACCOUNT_REQUIRED :You must be logged in to use PIRCAN: SASL (CAP REQ :sasl) or "
        "PRIVMSG NickServ :IDENTIFY <account> <password>")]


def test_loopback_is_refused_unless_allowed(tmp_path, receiver):
    p = P(tmp_path)
    try:
        p.account("olive", kind="person")
        p.account("alice")
        p.login("alice")
        assert p.cmd("alice", f"WEBHOOK SET {receiver.url}") == [
            (f"{S} FAIL WEBHOOK ADDRESS_NOT_ALLOWED {receiver.url} :127.0.0.1 resolves to 127.0.0.1, a loopback "
            "address (pircan.webhook_allowed_networks)")]
        url = f"http://localhost:{receiver.port}/x"
        assert p.cmd("alice", f"WEBHOOK SET {url}") == [
            (f"{S} FAIL WEBHOOK ADDRESS_NOT_ALLOWED {url} :localhost resolves to 127.0.0.1, a loopback "
            "address (pircan.webhook_allowed_networks)")]
        assert p.cmd("alice", "WEBHOOK SET http://nowhere.invalid/x")[0].startswith(
            f"{S} FAIL WEBHOOK INVALID_URL http://nowhere.invalid/x :nowhere.invalid does not resolve")
        assert p.rows("SELECT COUNT(*) FROM pircan_webhook_endpoints") == [(0,)]
    finally:
        p.close()


def test_the_address_is_checked_again_at_every_connection(p, receiver):
    """A host that resolved to an allowed address when the webhook was set may resolve elsewhere
    later: the check is made where the connection is made, on the address connected to."""
    set_hook(p, "bob", f"http://localhost:{receiver.port}/hook")
    agree(p, "alice", "bob")
    assert len(receiver.requests) == 1
    state = state_of(p)
    state.cfg = state.cfg.model_copy(update={"webhook_allowed_networks": []})  # as a REHASH would
    p.cmd("alice", "SEND bob :hello")
    assert len(receiver.requests) == 1  # nothing reached the receiver
    assert pending(p) == [(1, 60_000, None, ("localhost resolves to 127.0.0.1, a loopback address "
                                           "(pircan.webhook_allowed_networks)"))]


def test_the_request_names_the_url_host_and_tls_checks_it(p, receiver, tmp_path):
    """The socket goes to the checked address; the request still names the URL's host (Host) and
    TLS asks for it (SNI) and checks the certificate against it."""
    import socket
    import ssl
    import threading

    from ircd.tlsgen import write_self_signed

    set_hook(p, "bob", f"http://localhost:{receiver.port}/hook")
    agree(p, "alice", "bob")
    assert receiver.requests[0].headers["host"] == f"localhost:{receiver.port}"
    # a TLS receiver whose certificate nobody trusts: the handshake names the host, then fails
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    write_self_signed(cert, key, "localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc,func-returns-value]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            context.wrap_socket(conn, server_side=True).close()
        except (ssl.SSLError, OSError):
            pass
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    set_hook(p, "carol", f"https://localhost:{port}/hook")
    agree(p, "alice", "carol")
    thread.join(10)
    listener.close()
    assert names == ["localhost"]
    [(tries, error)] = p.rows("SELECT d.tries, d.last_error FROM pircan_webhook_deliveries d "
                              "JOIN pircan_webhook_endpoints e ON e.id = d.endpoint_id WHERE e.account = 'carol'")
    assert tries == 1 and error.startswith("connection failed: ") and "CERTIFICATE_VERIFY_FAILED" in error


def test_an_owner_manages_its_agents_webhook(p, receiver):
    secret = set_hook(p, "olive", receiver.url, account="bob")
    assert p.cmd("olive", "WEBHOOK SHOW bob") == [f"{S} WEBHOOK olive ENDPOINT bob {receiver.url} active 0 0 * ok"]
    assert p.cmd("bob", "WEBHOOK SHOW") == [f"{S} WEBHOOK bob ENDPOINT bob {receiver.url} active 0 0 * ok"]
    out = p.cmd("olive", "WEBHOOK ROTATE bob")
    new = word(out[0], 5)
    assert out == [(f"{S} WEBHOOK olive SECRET bob {new} :Store this secret now: it is not shown again; the old one "
                   "also signs for 24 hours")]
    assert new != secret
    assert p.cmd("olive", "WEBHOOK CLEAR bob") == [
        f"{S} WEBHOOK olive CLEARED bob 0 :Webhook removed; 0 pending deliveries dropped"]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action LIKE 'webhook.%' ORDER BY id") == [
        ("olive", "bob", "webhook.set", f"{receiver.url} new secret by owner"),
        ("olive", "bob", "webhook.rotate", "new secret by owner"),
        ("olive", "bob", "webhook.clear", f"{receiver.url} dropped=0 by owner"),
    ]
    assert p.rows("SELECT COUNT(*) FROM pircan_webhook_endpoints") == [(0,)]


def test_after_a_rotation_both_secrets_sign_for_a_day(p, receiver):
    old = set_hook(p, "bob", receiver.url)
    new = word(p.cmd("bob", "WEBHOOK ROTATE")[0], 5)
    agree(p, "alice", "bob")
    got = receiver.requests[-1]
    stamp = got.headers["pircan-timestamp"]
    assert got.headers["pircan-signature"] == ",".join(
        (expected_signature(new, stamp, got.body), expected_signature(old, stamp, got.body)))
    p.advance(DAY)
    p.cmd("alice", "SEND bob :later")
    got = receiver.requests[-1]
    assert got.headers["pircan-signature"] == expected_signature(new, got.headers["pircan-timestamp"], got.body)


def test_test_sends_a_signed_test_event(p, receiver):
    secret = set_hook(p, "alice", receiver.url)
    out = p.cmd("alice", "WEBHOOK TEST")
    assert word(out[0], 1) == "WEBHOOK" and out[0].split(" ")[3:6] == ["TESTED", "alice", "200"]
    assert out[0].endswith(" ok")
    got = receiver.requests[-1]
    assert got.headers["pircan-event"] == "test" and got.headers["pircan-delivery"].startswith("test-")
    assert got.headers["pircan-signature"] == expected_signature(secret, got.headers["pircan-timestamp"], got.body)
    assert json.loads(got.body) == {"delivery_id": got.headers["pircan-delivery"], "event_id": None, "type": "test",
                                    "recipient": "alice", "created_at": ts(p.now_ms()), "test": {"url": receiver.url}}
    receiver.script = [503]
    out = p.cmd("alice", "WEBHOOK TEST")
    assert out[0].split(" ")[3:6] == ["TESTED", "alice", "503"] and out[0].endswith(" :HTTP 503")
    assert p.rows("SELECT COUNT(*) FROM pircan_webhook_deliveries") == [(0,)]  # nothing queued


def test_every_event_type_carries_its_object(p, receiver):
    set_hook(p, "bob", receiver.url)
    set_hook(p, "alice", receiver.url)
    rid = p.cmd("alice", "CONTACT REQUEST bob message 30 :talk")[0].split(" ")[4]
    aid = p.cmd("bob", f"CONTACT ACCEPT {rid}")[0].split(" ")[5]
    p.cmd("alice", f"CONTACT REVOKE {aid}")
    got = [(json.loads(r.body), r.headers["pircan-event"]) for r in receiver.wait_for(3)]
    assert [(d["recipient"], d["type"], t) for d, t in got] == [
        ("bob", "request", "request"), ("alice", "decision", "decision"), ("bob", "agreement", "agreement")]
    request, decision, agreement = (d for d, _ in got)
    assert (request["request"]["request_id"], request["request"]["state"], request["request"]["purpose"]) == (
        rid, "pending", "talk")
    assert (decision["request"]["state"], decision["request"]["agreement_id"]) == ("accepted", aid)
    assert (agreement["agreement"]["agreement_id"], agreement["agreement"]["state"]) == (aid, "revoked")


def test_task_events_carry_the_task_with_its_entries(p, receiver):
    set_hook(p, "bob", receiver.url)
    set_hook(p, "alice", receiver.url)
    agree(p, "alice", "bob", scopes="message,task:translate")
    before = len(receiver.requests)
    tid = word(p.cmd("alice", "TASK CREATE bob translate :Hallo Welt")[0], 4)
    assert word(p.cmd("bob", f"TASK UPDATE {tid} working :on it")[0], 3) == "UPDATED"
    created, updated = (json.loads(r.body) for r in receiver.wait_for(before + 2)[before:])
    assert (created["type"], created["recipient"], created["task"]["task_id"], created["task"]["state"]) == (
        "task", "bob", tid, "submitted")
    assert [e["text"] for e in created["task"]["entries"]] == ["Hallo Welt"]
    assert (updated["type"], updated["recipient"], updated["task"]["state"]) == ("task-update", "alice", "working")
    assert [e["text"] for e in updated["task"]["entries"]] == ["Hallo Welt", "on it"]


def test_every_change_of_a_task_is_an_event_and_a_delivery(p, receiver):
    """HELP TASK: "Every change notifies the other party". A task-update event names the change
    (its entry), so a second change of the same task is queued too, and so reaches the webhook."""
    set_hook(p, "alice", receiver.url)
    agree(p, "alice", "bob", scopes="message,task:translate")
    before = len(receiver.requests)
    tid = word(p.cmd("alice", "TASK CREATE bob translate :Hallo Welt")[0], 4)
    p.cmd("bob", f"TASK UPDATE {tid} working :on it")
    p.cmd("bob", f"TASK UPDATE {tid} completed :Hello world")
    got = [json.loads(r.body) for r in receiver.wait_for(before + 2)[before:]]
    assert [(d["type"], d["task"]["state"], d["task"]["entries"][-1]["text"]) for d in got] == [
        ("task-update", "working", "on it"), ("task-update", "completed", "Hello world")]
    assert p.rows("SELECT COUNT(*) FROM pircan_events WHERE recipient = 'alice' AND type = 'task-update'") == [(2,)]
    p.notifies()
    assert p.lines("alice")[-1] == f"{S} NOTICE alice :NOTIFY task-update 2".replace(S, ":PIRCAN!pircan@services.pircd")


def test_clear_drops_what_is_pending(p, receiver):
    _, before = one_message(p, receiver, default=500)
    assert len(pending(p)) == 1
    assert p.cmd("bob", "WEBHOOK CLEAR") == [
        f"{S} WEBHOOK bob CLEARED bob 1 :Webhook removed; 1 pending delivery dropped"]
    p.advance(MINUTE)
    assert len(receiver.requests) == before + 1 and pending(p) == []


@pytest.mark.parametrize("how", ["cli", "server"])
def test_a_deleted_accounts_webhook_goes_with_it(p, receiver, how):
    """Nothing of a deleted account's webhook passes to a new account of the same name: not its URL
    (the new account's events would go to a receiver the old one chose), not what was pending, not
    its dead letters."""
    one_message(p, receiver, [410])  # bob's webhook: disabled, one dead letter
    assert word(p.cmd("bob", f"WEBHOOK SET {receiver.url}")[0], 6) == "*"
    receiver.script = [500]
    p.cmd("alice", "SEND bob :pending")
    sent = len(receiver.wait_for(3))
    assert len(pending(p)) == 1  # retried in a minute
    if how == "cli":
        delete_from_another_process(p, "bob")
    else:
        assert p.h.run(p.h.server_api("pircan").delete_account("bob")) is True
        p.h.settle()
    assert p.rows("SELECT COUNT(*) FROM pircan_webhook_endpoints") == [(0,)]
    assert pending(p) == []
    assert p.rows("SELECT COUNT(*) FROM pircan_webhook_dead") == [(0,)]
    p.account("bob")
    p.login("bob2", "bob")
    assert p.cmd("bob2", "WEBHOOK SHOW") == [f"{S} FAIL WEBHOOK NO_WEBHOOK bob :No webhook is set for this account"]
    assert p.cmd("bob2", "WEBHOOK DEAD") == [f"{S} WEBHOOK bob END bob 0"]
    assert word(p.cmd("alice", "CONTACT REQUEST bob message 3 :the new bob")[0], 3) == "REQUESTED"
    p.advance(10 * MINUTE)
    assert len(receiver.requests) == sent and pending(p) == []


def test_a_webhook_of_an_account_deleted_while_the_server_was_down_goes_at_start_up(tmp_path, receiver):
    first = make(tmp_path)
    set_hook(first, "bob", receiver.url)
    first.close()
    conn = dbs.connect(tmp_path / "p.db")
    with conn:
        conn.execute("DELETE FROM accounts WHERE folded = 'bob'")
    conn.close()
    again = P(tmp_path, pircan=LOOPBACK)
    try:
        assert again.rows("SELECT account FROM pircan_webhook_endpoints") == []
    finally:
        again.close()


def test_redirects_are_not_followed(p, receiver):
    _, before = one_message(p, receiver, [302])
    assert len(receiver.requests) == before + 1
    assert pending(p) == [(1, 60_000, 302, "HTTP 302 (redirects are not followed)")]


def test_only_the_head_of_a_large_answer_is_read(tmp_path, receiver):
    """The receiver promises 10 MB and sends 64 KiB, then nothing: the server reads 16 KiB and is done."""
    p = make(tmp_path, webhook_max_response_bytes=16_384, webhook_timeout_ms=20_000)
    try:
        set_hook(p, "bob", receiver.url)
        receiver.extra_body, receiver.content_length = b"x" * 65_536, 10_000_000
        agree(p, "alice", "bob")
        assert pending(p) == []
        assert p.rows("SELECT last_success_at FROM pircan_webhook_endpoints") == [(T0_MS,)]
    finally:
        receiver.release()
        p.close()


def test_no_answer_in_time_is_a_failure_and_pauses_the_endpoint(tmp_path, receiver):
    p = make(tmp_path, webhook_timeout_ms=300)
    try:
        set_hook(p, "bob", receiver.url)
        agree(p, "alice", "bob")
        receiver.hang()
        sent_id(p.cmd("alice", "SEND bob :one"))
        assert pending(p) == [(1, 60_000, None, "no answer within 0.3 s")]
        sent_id(p.cmd("alice", "SEND bob :two"))  # the endpoint is paused: not tried yet
        assert [row[0] for row in pending(p)] == [1, 0]
        assert len(receiver.requests) == 2
        receiver.release()
        p.advance(MINUTE)  # the pause ends: both, oldest first
        bodies = [json.loads(r.body)["message"]["body"] for r in receiver.wait_for(4)[2:]]
        assert bodies == ["one", "two"]
        assert pending(p) == []
    finally:
        receiver.release()
        p.close()


def test_an_endpoint_gets_its_deliveries_in_order(p, receiver):
    set_hook(p, "bob", receiver.url)
    agree(p, "alice", "bob")
    receiver.requests.clear()
    for i in range(12):  # more than a runner's batch
        sent_id(p.cmd("alice", f"SEND bob :m{i}"))
    bodies = [json.loads(r.body)["message"]["body"] for r in receiver.wait_for(12)]
    assert bodies == [f"m{i}" for i in range(12)]


def test_the_command_line_and_a_running_server(tmp_path, p, receiver):
    """``pircd webhook`` works on the server's database as the operator; the server takes the new
    webhook at its next sweep, and delivers what was queued for it meanwhile."""
    from click.testing import CliRunner

    from ircd.cli import main

    conf = tmp_path / "pircd.toml"
    conf.write_text(f'[server]\ndb = "{p.path}"\n[pircan]\nwebhook_allowed_networks = ["127.0.0.0/8"]\n')
    runner = CliRunner()

    def cli(*args: str) -> list[str]:
        result = runner.invoke(main, ["webhook", *args, "--config", str(conf)])
        assert result.exit_code == 0, (args, result.output, result.stderr)
        return [ln for ln in result.stdout.splitlines()]

    out = cli("set", "bob", receiver.url)
    assert out[:2] == [f"webhook of bob: {receiver.url}", "secret (shown once; store it now):"]
    secret = out[2]
    agree(p, "alice", "bob")
    assert receiver.requests == []  # the server does not know the webhook yet: the request event waits
    assert cli("show", "bob") == [f"bob {receiver.url} active pending=1 dead=0 last_success=* last_error=*"]
    p.advance(MINUTE)  # the sweep: the server reads the webhooks
    got = receiver.wait_for(1)[0]
    assert got.headers["pircan-event"] == "request"
    assert got.headers["pircan-signature"] == expected_signature(secret, got.headers["pircan-timestamp"], got.body)
    # a dead letter, listed and replayed from the command line
    receiver.script = [500] * 12
    p.cmd("alice", "SEND bob :one")
    for _ in range(11):
        p.advance(6 * 3600)
    [(delivery,)] = p.rows("SELECT id FROM pircan_webhook_dead")
    assert cli("dead", "bob")[0].startswith(f"{delivery:016x} ")
    assert cli("replay", "bob", "--all") == ["queued 1 dead letter of bob again"]
    p.advance(MINUTE)
    assert receiver.requests[-1].headers["pircan-delivery"] == f"{delivery:016x}"
    assert pending(p) == []
    assert cli("rotate", "bob")[0] == "new secret of bob's webhook (shown once; the old one also signs for 24 hours):"
    assert cli("clear", "bob") == ["removed the webhook of bob (0 pending deliveries dropped)"]
    assert p.rows("SELECT actor, action, detail FROM pircan_audit WHERE action LIKE 'webhook.%' ORDER BY id") == [
        ("operator", "webhook.set", f"{receiver.url} new secret through the command line"),
        ("operator", "webhook.replay", "1 dead letters (all) through the command line"),
        ("operator", "webhook.rotate", "new secret through the command line"),
        ("operator", "webhook.clear", f"{receiver.url} dropped=0 through the command line"),
    ]
    p.advance(MINUTE)
    p.cmd("alice", "SEND bob :after the clear")
    assert receiver.requests[-1].headers["pircan-delivery"] == f"{delivery:016x}"  # nothing new was sent


def docs_receiver() -> dict:
    """The receiver of docs/webhooks.md, run as written (its module namespace)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "webhooks.md").read_text(encoding="utf-8")
    section = text.split("## A receiver in Python", 1)[1]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found is not None
    code = found.group(1)
    namespace: dict = {"__name__": "docs_receiver"}
    exec(compile(code, "docs/webhooks.md", "exec"), namespace)  # noqa: S102 - the documented code, as written
    return namespace


def test_the_receiver_of_the_docs_verifies_and_refuses_replays(tmp_path):
    import threading
    import time
    import urllib.error
    import urllib.request
    from http.server import HTTPServer

    ns = docs_receiver()
    handled: list[dict] = []
    ns["handle"] = handled.append
    server = HTTPServer(("127.0.0.1", 0), ns["Receiver"])
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    p = P(tmp_path, clock_start=time.time(), pircan=LOOPBACK)  # the receiver checks times against the real clock
    try:
        p.account("olive", kind="person")
        for name in ("alice", "bob"):
            p.account(name)
            p.login(name)
        ns["SECRET"] = set_hook(p, "bob", url)
        agree(p, "alice", "bob")
        p.cmd("alice", "SEND bob :hello receiver")
        assert [(e["type"], e.get("message", {}).get("body")) for e in handled] == [
            ("request", None), ("message", "hello receiver")]
        assert pending(p) == []  # each was answered 204
        # what the server sent, sent again by someone who captured it: acknowledged, not handled twice
        body = json.dumps(handled[-1], ensure_ascii=False, separators=(",", ":")).encode()
        stamp = str(int(time.time()))
        sig = expected_signature(ns["SECRET"], stamp, body)
        headers = {"PIRCAN-Timestamp": stamp, "PIRCAN-Signature": sig, "PIRCAN-Delivery": handled[-1]["delivery_id"],
                   "Content-Type": "application/json"}

        def post(data: bytes, head: dict) -> int:
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=head)) as resp:
                    return resp.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert post(body, headers) == 204 and len(handled) == 2
        assert post(body + b" ", headers) == 401  # the body was changed
        old = str(int(time.time()) - 301)
        assert post(body, {**headers, "PIRCAN-Timestamp": old,
                           "PIRCAN-Signature": expected_signature(ns["SECRET"], old, body)}) == 401  # too old
        assert post(body, {**headers, "PIRCAN-Signature": "v1=" + "0" * 64}) == 401
        # after a rotation the old secret still verifies (two signatures are sent)
        p.cmd("bob", "WEBHOOK ROTATE")
        p.cmd("alice", "SEND bob :after the rotation")
        assert handled[-1]["message"]["body"] == "after the rotation"
    finally:
        p.close()
        server.shutdown()
        server.server_close()


def test_a_webhook_set_while_the_server_rereads_them_is_kept(p, receiver):
    """The sweep's reread of the webhooks may have read the table before a SET committed: the
    endpoint the SET announced stays known, and its deliveries go at once, not at the next sweep."""
    from ext.pircan.service import webhooks as service
    from ext.pircan.webhooks import store

    state = state_of(p)
    worker = state.webhooks
    read = state.database.read
    setting = []

    async def read_then_set(fn, *args):
        result = await read(fn, *args)
        if fn is store.enabled_endpoints and not setting:
            setting.append(await service.set_webhook(state, "bob", receiver.url))
        return result

    state.database.read = read_then_set
    try:
        p.h.run(worker.reload())
    finally:
        state.database.read = read
    assert setting and "bob" in worker.by_account
    agree(p, "alice", "bob")
    assert receiver.wait_for(1)[0].headers["pircan-event"] == "request"
