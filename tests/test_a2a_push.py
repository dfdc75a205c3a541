"""The network delivers an agent's events to the A2A endpoint it published, as an A2A client, through
the webhook queue: the same retry schedule, dead letters, 410 and address rules. Socket-free harness
with the fake clock, a real HTTP receiver on port 0; the requests are read with the A2A SDK's types
and the push token checked with the network's public keys."""

from __future__ import annotations

import json

import jwt
from a2a.types import a2a_pb2 as pb
from a2a.utils.proto_utils import parse_lenient
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf.json_format import MessageToDict

from ext.pircan.a2a import store as astore
from tests import dbs
from tests.test_pircan import T0_MS, P, agree, sent_id
from tests.test_webhooks import make, pending, receiver, set_hook, state_of  # noqa: F401 - fixtures

S = ":irc.test"


NETWORK = "https://net.example"


def network(tmp_path, **pircan) -> P:
    """test_webhooks' accounts and logins; the network's base URL (the issuer of its tokens) is set as
    an HTTP listener would set it (the harness has none)."""
    p = make(tmp_path, **pircan)
    p.h.server.http.base_url = NETWORK
    return p


def publish(p: P, conn: str, url: str) -> None:
    out = [line for line in p.cmd(conn, f"PROFILE ENDPOINT * {url}") if ":NOTIFY " not in line]
    assert out == [f"{S} PROFILE {conn} ENDPOINT {conn} {url}"], out


def sent(got) -> tuple[dict, pb.SendMessageRequest]:
    """The JSON-RPC request a receiver got, and its params as the SDK reads them."""
    rpc = json.loads(got.body)
    return rpc, parse_lenient(rpc["params"], pb.SendMessageRequest())


def network_key(p: P) -> Ed25519PrivateKey:
    conn = dbs.connect(p.path)
    try:
        key = astore.signing_key(conn)
    finally:
        conn.close()
    return Ed25519PrivateKey.from_private_bytes(key.private_key)


def test_a_message_to_an_agent_with_an_a2a_endpoint_is_an_a2a_send_message(tmp_path, receiver):  # noqa: F811
    p = network(tmp_path)
    try:
        publish(p, "bob", receiver.url)
        agree(p, "alice", "bob")
        receiver.requests.clear()
        mid = sent_id(p.cmd("alice", "SEND bob :Build 1234 is green"))
        got = receiver.wait_for(1)[-1]
        rpc, request = sent(got)
        assert (rpc["jsonrpc"], rpc["method"]) == ("2.0", "SendMessage")
        message = request.message
        assert message.parts[0].text == "Build 1234 is green" and message.role == pb.ROLE_USER
        assert message.context_id == mid
        meta = MessageToDict(message.metadata)
        assert {k: meta[k] for k in ("event", "recipient", "sender", "message_id", "conversation_id")} == {
            "event": "message", "recipient": "bob", "sender": "alice", "message_id": mid, "conversation_id": mid}
        document = MessageToDict(message.parts[1].data)
        assert document["type"] == "message" and document["message"]["body"] == "Build 1234 is green"
        assert message.message_id == meta["delivery_id"] == rpc["id"]
        assert got.headers["a2a-version"] == "1.0"
        # the network identifies itself: a token it signed, checked with its public key
        token = got.headers["authorization"].removeprefix("Bearer ")
        assert jwt.get_unverified_header(token)["typ"] == "pircan-push+jwt"
        claims = jwt.decode(token, network_key(p).public_key(), algorithms=["EdDSA"], audience="bob",
                            issuer=NETWORK, options={"verify_exp": False, "verify_iat": False, "verify_nbf": False})
        assert (claims["sub"], claims["jti"]) == (NETWORK, meta["delivery_id"])
        assert (claims["iat"], claims["exp"] - claims["iat"]) == (int(p.h.clock.now), 300)  # the server's clock
        assert p.rows("SELECT COUNT(*) FROM pircan_webhook_deliveries") == [(0,)]
        # the roster and receipts know it is pushed to: a pusher answers for it
        assert state_of(p).pushed("bob") and not state_of(p).pushed("carol")
        # other events are A2A messages too: a line of text and the event's document
        receiver.requests.clear()
        p.cmd("carol", "CONTACT REQUEST bob message 30 :more builds")
        rpc, request = sent(receiver.wait_for(1)[-1])
        assert request.message.parts[0].text.startswith("Contact request ") and \
            request.message.parts[0].text.endswith("from carol: more builds")
        assert MessageToDict(request.message.metadata)["event"] == "request"
        # away from the network, bob is still reached: the receipt says the message was pushed
        p.h.send("bob", "QUIT :away")
        receipt = [line for line in p.cmd("alice", "SEND bob :still there?") if " SEND " in line]
        assert receipt[0].split(" ")[3:7] == ["OK", receipt[0].split(" ")[4], "bob", "pushed"], receipt
    finally:
        p.close()


def test_retries_dead_letters_and_410_are_the_webhook_queues(tmp_path, receiver):  # noqa: F811
    p = network(tmp_path)
    try:
        publish(p, "bob", receiver.url)
        agree(p, "alice", "bob")
        receiver.wait_for(1)
        before = len(receiver.requests)
        receiver.script = [500]
        start = p.now_ms()
        sent_id(p.cmd("alice", "SEND bob :hello"))
        assert len(receiver.wait_for(before + 1)) == before + 1
        assert pending(p) == [(1, 60_000, 500, "HTTP 500")]
        p.at(start - T0_MS + 60_000 - 1)
        assert len(receiver.requests) == before + 1  # a millisecond early: nothing
        p.at(start - T0_MS + 60_000)
        tries = receiver.wait_for(before + 2)[before:]
        assert len(tries) == 2 and tries[0].body == tries[1].body  # the same request, the same message id
        assert pending(p) == []
        # 410: disabled, the pending deliveries are dead letters, the owner is told
        receiver.script = [410]
        sent_id(p.cmd("alice", "SEND bob :gone?"))
        receiver.wait_for(before + 3)
        assert p.rows("SELECT protocol, enabled, disabled_reason FROM pircan_webhook_endpoints") == [
            ("a2a", 0, "HTTP 410")]
        assert p.rows("SELECT reason, last_status FROM pircan_webhook_dead") == [("gone", 410)]
        # published again: enabled again
        publish(p, "bob", receiver.url + "/again")
        assert p.rows("SELECT protocol, enabled, url FROM pircan_webhook_endpoints") == [
            ("a2a", 1, receiver.url + "/again")]
    finally:
        p.close()


def test_the_webhook_takes_the_place_of_the_a2a_endpoint_and_withdrawing_stops_it(tmp_path, receiver):  # noqa: F811
    p = network(tmp_path)
    try:
        publish(p, "bob", receiver.url + "/a2a")
        assert p.cmd("bob", "WEBHOOK SHOW") == [f"{S} FAIL WEBHOOK NO_WEBHOOK bob :No webhook is set"] or \
            p.cmd("bob", "WEBHOOK SHOW")[0].split(" ")[1:4] == ["FAIL", "WEBHOOK", "NO_WEBHOOK"]
        secret = set_hook(p, "bob", receiver.url + "/hook")
        assert secret.startswith("whsec_")  # a new secret, shown: the A2A row's was never shown
        assert p.rows("SELECT protocol, url FROM pircan_webhook_endpoints") == [("webhook", receiver.url + "/hook")]
        agree(p, "alice", "bob")
        receiver.wait_for(1)
        assert receiver.requests[-1].path == "/hook/hook" and "pircan-signature" in receiver.requests[-1].headers
        # without the webhook, the A2A endpoint gets them again
        assert p.cmd("bob", "WEBHOOK CLEAR")[0].split(" ")[3] == "CLEARED"
        assert p.rows("SELECT protocol, url FROM pircan_webhook_endpoints") == [("a2a", receiver.url + "/a2a")]
        count = len(receiver.requests)
        sent_id(p.cmd("alice", "SEND bob :to a2a"))
        got = receiver.wait_for(count + 1)[-1]
        assert got.path == "/hook/a2a" and sent(got)[1].message.parts[0].text == "to a2a"
        # withdrawn: nothing more is sent, nothing stays queued
        assert p.cmd("bob", "PROFILE ENDPOINT * *") == [f"{S} PROFILE bob ENDPOINT bob *"]
        assert p.rows("SELECT COUNT(*) FROM pircan_webhook_endpoints") == [(0,)]
        sent_id(p.cmd("alice", "SEND bob :nobody listens"))
        assert p.rows("SELECT COUNT(*) FROM pircan_webhook_deliveries") == [(0,)]
    finally:
        p.close()


def test_the_address_rules_hold_for_a2a_endpoints(tmp_path, receiver):  # noqa: F811
    p = P(tmp_path)  # loopback is not allowed by default
    p.h.server.http.base_url = NETWORK
    try:
        p.account("olive", kind="person")
        for name in ("alice", "bob"):
            p.account(name)
        for conn in ("alice", "bob"):
            p.login(conn)
        publish(p, "bob", receiver.url)
        agree(p, "alice", "bob")
        sent_id(p.cmd("alice", "SEND bob :hello"))
        p.h.settle()
        assert receiver.requests == []
        # the first try (of the contact request's event) was refused at the connection; the endpoint
        # waits for its next try, the message with it
        rows = p.rows("SELECT e.type, d.tries, d.last_error FROM pircan_webhook_deliveries d JOIN pircan_events e "
                      "ON e.id = d.event_id ORDER BY d.id")
        assert [(kind, tries) for kind, tries, _ in rows][-2:] == [("request", 1), ("message", 0)]
        assert "127.0.0.1, a loopback address (pircan.webhook_allowed_networks)" in rows[-2][2]
    finally:
        p.close()
