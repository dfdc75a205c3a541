"""Broadcast: SEND * (IRC, through the harness), MCP broadcast_message and A2A pircan:broadcast (with
their SDKs' clients over real HTTP). One message to every live agent of the sender's message
agreements, each under its own agreement's rules, a receipt or refusal per recipient; parked and
offline agents are skipped (a hosted parked agent: tests/test_host.py); nobody live is an answer."""

from __future__ import annotations

import asyncio

import pytest
from a2a.utils.errors import InvalidParamsError

from tests.test_a2a import a2a, agree, answers, refusal
from tests.test_a2a_parity import call as skill
from tests.test_a2a_parity import call_request
from tests.test_mcp import PASSWORD, call, login, mcp, run, srv, state_of, token_for  # noqa: F401 - srv is a fixture
from tests.test_pircan import P, S, network, send, sent_id, word
from tests.test_pircan import agree as agree_here

HOOKS = {"webhook_allowed_networks": ["127.0.0.0/8"]}


@pytest.fixture
def p(tmp_path):
    harness = network(tmp_path, pircan=HOOKS)
    harness.account("eve")
    yield harness
    harness.close()


def four_peers(p: P) -> None:
    """alice has message agreements with bob (running), dave (running, alice's budget toward him
    used up), carol (parked: her events go to a webhook) and eve (offline)."""
    for conn in ("olive", "alice", "bob", "carol", "dave", "eve"):
        p.login(conn)
    for peer in ("bob", "carol", "dave", "eve"):
        agree_here(p, "alice", peer)
    for n in range(120):  # new conversations: only the agreement's hourly budget counts
        sent_id(send(p, "alice", "dave", f"n{n}"))
    assert p.cmd("olive", "WEBHOOK SET carol http://127.0.0.1:9/hook")[0].split()[3] == "SET"
    for gone in ("carol", "eve"):
        p.h.disconnect(gone)
    p.h.take("alice")


def test_send_star_reaches_the_live_agents_and_says_what_happened_to_each(p):
    four_peers(p)
    out = p.cmd("alice", "SEND * :standup at 10")
    mid = word(out[0], 4)
    assert out == [
        f"{S} SEND alice OK {mid} bob delivered {mid} 0",
        (f"{S} SEND alice REFUSED dave AGREEMENT_BUDGET :You sent 120 messages under this agreement in the last "
         "hour. Wait for the retry time. Retry in 3600 s"),
        f"{S} SEND alice SKIPPED carol parked",
        f"{S} SEND alice SKIPPED eve offline",
        f"{S} SEND alice BROADCAST 1 1 2 :Sent to 1, refused for 1, 2 not live and skipped",
    ]
    assert p.rows("SELECT sender, recipient, body FROM pircan_messages WHERE body = 'standup at 10'") == [
        ("alice", "bob", "standup at 10")]
    p.notifies()
    assert p.lines("bob")[-1].endswith("NOTIFY message 1")


def test_send_star_in_a_batch_and_retried_with_its_label(p):
    four_peers(p)
    p.h.disconnect("alice")
    p.login("alice2", "alice", caps=("batch", "labeled-response"))
    out = p.cmd("alice2", "@label=b1 SEND * :once only")
    outer, inner = word(out[0], 3)[1:], word(out[1], 3)[1:]
    assert out[0] == f"@label=b1 {S} BATCH +{outer} labeled-response"
    assert out[1] == f"@batch={outer} {S} BATCH +{inner} pircan/broadcast"
    assert [(word(line, 0), word(line, 4)) for line in out[2:7]] == [
        (f"@batch={inner}", kind) for kind in ("OK", "REFUSED", "SKIPPED", "SKIPPED", "BROADCAST")]
    assert out[7:] == [f"@batch={outer} {S} BATCH -{inner}", f"{S} BATCH -{outer}"]
    again = p.cmd("alice2", "@label=b1 SEND * :once only")
    assert word(again[2], 5) == word(out[2], 5)  # the first receipt, not a second message
    assert p.rows("SELECT COUNT(*) FROM pircan_messages WHERE body = 'once only'") == [(1,)]


def test_nobody_live_is_an_answer_and_bad_input_a_refusal(p):
    p.login("olive")
    assert p.cmd("olive", "SEND * :anyone?") == [
        (f"{S} SEND olive BROADCAST 0 0 0 :No live agent to send to: none of your message agreements is with an "
         "agent that is running or idle")]
    p.login("alice")
    p.login("carol")
    agree_here(p, "alice", "carol")
    p.h.disconnect("carol")
    assert p.cmd("alice", "SEND * :anyone?") == [
        f"{S} SEND alice SKIPPED carol offline",
        (f"{S} SEND alice BROADCAST 0 0 1 :No live agent to send to: none of your message agreements is with an "
         "agent that is running or idle (send to a parked one by name to wake it)")]
    assert p.cmd("alice", "SEND * :   ") == [f"{S} FAIL SEND EMPTY * :Empty message"]
    assert p.cmd("alice", "SEND * " + "x" * 201) == [f"{S} FAIL SEND TOO_LONG * :SEND text is at most 200 characters"]
    assert p.cmd("alice", "SEND * 0123456789abcdef :hi") == [
        (f"{S} FAIL SEND INVALID_PARAMS * :A broadcast starts a new conversation with each agent: SEND * :<text>, "
         "without in-reply-to")]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages") == [(0,)]


# MCP and A2A ------------------------------------------------------------------------------------------


def test_broadcast_over_mcp_and_a2a(srv, clients):  # noqa: F811
    """MCP's broadcast_message and A2A's pircan:broadcast run the same service: a receipt for bob
    (on IRC), a refusal in its own entry for dan (alice's budget toward him used up), carol skipped
    (offline), and nobody live is sent 0."""
    run(srv, srv.server.accounts.create("dan", PASSWORD, kind="agent", owner="olive"))
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with mcp(srv, alice_token) as alice:
            assert await call(alice, "broadcast_message", body="anyone?") == {
                "receipts": [], "sent": 0, "refused": 0, "skipped": []}
            for peer in ("bob", "carol", "dan"):
                await asyncio.to_thread(agree, srv, clients, "alice", peer, "message")
            dan_agreement = int(next(a for a in (await call(alice, "list_agreements"))["agreements"]
                                     if a["target"] == "dan")["agreement_id"], 16)
            state = state_of(srv)
            budget, now = state.budget_window("alice", dan_agreement), state.now_ms()
            for _ in range(120):
                budget.add(now)
            await asyncio.to_thread(login, srv, clients, "bob")
            await asyncio.to_thread(login, srv, clients, "dan")
            done = await call(alice, "broadcast_message", body="hello all", idempotency_key="k")
            [to_bob, to_dan] = done["receipts"]
            assert (to_bob["recipient"], to_bob["delivery"], to_bob["created"]) == ("bob", "delivered", True)
            assert "body" not in to_bob["message"] and to_bob["message"]["bytes"] == 9
            assert (to_dan["recipient"], "delivery" in to_dan, to_dan["error"]["code"]) == (
                "dan", False, "AGREEMENT_BUDGET")
            assert to_dan["error"]["next_step"] == "Wait for the retry time" and to_dan["error"]["retry_after_s"] > 0
            assert (done["sent"], done["refused"], done["skipped"]) == (
                1, 1, [{"recipient": "carol", "status": "offline"}])
            again = await call(alice, "broadcast_message", body="hello all", idempotency_key="k")
            assert again["receipts"][0]["message"]["message_id"] == to_bob["message"]["message_id"]
            assert again["receipts"][0]["created"] is False
            # over A2A: bob broadcasts to his only peer, alice (present through her MCP session)
            async with a2a(srv, bob_token) as bob:
                got = await skill(bob, "pircan:broadcast", action="send", body="from bob")
                assert [(r["recipient"], r["delivery"]) for r in got["receipts"]] == [("alice", "delivered")]
                assert await refusal(answers(bob, call_request("pircan:broadcast", body="  "))) == (
                    InvalidParamsError, "EMPTY", "*")
            inbox = await call(alice, "get_inbox")
            assert [(m["sender"], m["body"]) for m in inbox["messages"]] == [("bob", "from bob")]

    asyncio.run(scenario())
