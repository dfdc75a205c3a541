"""What an agent that holds only an A2A client can do with the network's own skills (metadata
``skill: pircan:...`` on ``/a2a``, the arguments in a data part): agreements (request, accept with
fewer scopes and days, decline, list, revoke), the profile and the roster, the pull of its inbox,
resources, and intro token introspection; and the card and metadata fixes. Only the SDK's client is
used after the operator's set-up (accounts and tokens)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import jwt
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, new_data_message
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import InvalidParamsError, InvalidRequestError

from ext.pircan.a2a import keys
from tests.live import whole_seconds_left
from tests.test_a2a import a2a, answers, refusal, request
from tests.test_a2a_direct import signing_key
from tests.test_mcp import PASSWORD, run, srv, state_of, token_for, until_waiting  # noqa: F401 - fixtures


def call_request(skill: str, **args: Any) -> pb.SendMessageRequest:
    message = new_data_message(args, role=pb.ROLE_USER)
    message.metadata.update({"skill": skill})
    return pb.SendMessageRequest(message=message)


async def call(client: Client, skill: str, **args: Any) -> dict[str, Any]:
    """A network skill's result (the answer's data part)."""
    [answer] = await answers(client, call_request(skill, **args))
    [data] = get_data_parts(answer.message.parts)
    return data


def test_agreements_over_a2a_only(srv):  # noqa: F811
    alice_token, bob_token, carol_token = token_for(srv, "alice"), token_for(srv, "bob"), token_for(srv, "carol")

    async def scenario() -> None:
        async with a2a(srv, alice_token) as alice, a2a(srv, bob_token) as bob, a2a(srv, carol_token) as carol:
            # without an agreement the refusal says how to get one, the A2A way
            async with a2a(srv, alice_token, "bob") as to_bob:
                try:
                    await answers(to_bob, request("hello"))
                except InvalidRequestError as exc:
                    assert exc.data["code"] == "NO_AGREEMENT"
                    assert "'skill': 'pircan:contact'" in exc.data["next_step"]
                    assert "pircan:contact" in exc.message
                else:
                    raise AssertionError("not refused")
            asked = await call(alice, "pircan:contact", action="request", agent="bob",
                               scopes=["message", "task:summarise"], days=30, purpose="builds")
            assert asked["outcome"] == "pending" and asked["agreement"] is None
            rid = asked["request"]["request_id"]
            listed = await call(bob, "pircan:contact", action="list", which="requests")
            assert [(r["request_id"], r["requester"], r["state"]) for r in listed["requests"]] == [
                (rid, "alice", "pending")]
            accepted = await call(bob, "pircan:contact", action="accept", request_id=rid, scopes=["message"], days=7)
            agreement = accepted["agreement"]
            assert (agreement["scopes"], agreement["requester"], agreement["target"]) == (["message"], "alice", "bob")
            aid = agreement["agreement_id"]
            mine = await call(alice, "pircan:contact", action="list", which="agreements")
            assert [(a["agreement_id"], a["state"]) for a in mine["agreements"]] == [(aid, "active")]
            async with a2a(srv, alice_token, "bob") as to_bob:
                [receipt] = await answers(to_bob, request("hello", now=True))
                assert receipt.message.metadata["recipient"] == "bob"
            # a second request, declined
            asked2 = await call(alice, "pircan:contact", action="request", agent="carol", purpose="more")
            declined = await call(carol, "pircan:contact", action="decline",
                                  request_id=asked2["request"]["request_id"])
            assert declined["request"]["state"] == "declined"
            revoked = await call(bob, "pircan:contact", action="revoke", agreement_id=aid)
            assert revoked["agreement"]["state"] == "revoked"
            async with a2a(srv, alice_token, "bob") as to_bob:
                assert (await refusal(answers(to_bob, request("again"))))[1] == "NO_AGREEMENT"
            # refusals are the service's, with its codes
            assert await refusal(answers(alice, call_request("pircan:contact", action="accept",
                                                             request_id="0123456789abcdef"))) == (
                InvalidRequestError, "NO_SUCH_REQUEST", "0123456789abcdef")
            assert await refusal(answers(alice, call_request("pircan:contact", action="sing"))) == (
                InvalidParamsError, "INVALID_PARAMS", "action")

    asyncio.run(scenario())


def test_a2a_requests_show_the_decider_and_refusals_the_way_out(srv):  # noqa: F811
    """Under owner-decides the A2A requester sees that a person decides, and until when; while the
    request is pending a message's NO_AGREEMENT says to wait (asking again would be PENDING_EXISTS),
    the A2A way; a budget refusal carries the seconds until a retry and the next step in its data."""
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with a2a(srv, alice_token) as alice, a2a(srv, bob_token) as bob:
            assert await call(bob, "pircan:contact", action="policy", policy="owner-decides") == {
                "account": "bob", "policy": "owner-decides"}
            asked = (await call(alice, "pircan:contact", action="request", agent="bob", days=3,
                                purpose="x"))["request"]
            assert (asked["state"], asked["decider"]) == ("pending", "owner")
            assert asked["expires_at"][:10] > asked["created_at"][:10]
            listed = (await call(alice, "pircan:contact", action="list", which="requests"))["requests"]
            assert [(r["request_id"], r["decider"], r["expires_at"]) for r in listed] == [
                (asked["request_id"], "owner", asked["expires_at"])]
            async with a2a(srv, alice_token, "bob") as to_bob:
                try:
                    await answers(to_bob, request("hello"))
                except InvalidRequestError as exc:
                    assert exc.data["code"] == "NO_AGREEMENT"
                    assert exc.data["next_step"] == (
                        "Wait for the decision: it is sent to your A2A endpoint if you published one, and "
                        "skill 'pircan:contact' with {'action': 'list', 'which': 'requests'} shows the "
                        "request's state")
                    assert exc.message.startswith(
                        f"Your contact request {asked['request_id']} is pending: its owner decides, until "
                        f"{asked['expires_at']}. Wait for the decision")
                else:
                    raise AssertionError("not refused")
            # the owner accepts; the agreement's hourly budget used up, a message is refused with a retry time
            async with a2a(srv, token_for(srv, "olive")) as olive:
                accepted = await call(olive, "pircan:contact", action="accept",
                                      request_id=asked["request_id"])
            aid = int(accepted["agreement"]["agreement_id"], 16)
            state = state_of(srv)
            budget, now = state.budget_window("alice", aid), state.now_ms()
            for _ in range(120):
                budget.add(now)
            async with a2a(srv, alice_token, "bob") as to_bob:
                try:
                    await answers(to_bob, request("one too many", now=True))
                except InvalidRequestError as exc:
                    data = dict(exc.data)
                    assert (data["code"], data["next_step"]) == (
                        "AGREEMENT_BUDGET", "Wait for the retry time")
                    assert data["retry_after_s"] in whole_seconds_left(3600, now / 1000)  # the window began at now
                    assert exc.message.endswith(f"Retry in {data['retry_after_s']} s")
                else:
                    raise AssertionError("not refused")

    asyncio.run(scenario())


def test_profile_roster_and_the_pull_over_a2a(srv):  # noqa: F811
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with a2a(srv, alice_token) as alice, a2a(srv, bob_token) as bob:
            shown = await call(bob, "pircan:profile", action="set", display_name="Bob the builder",
                               add_skills={"summarise": "Summaries of long documents"},
                               a2a_endpoint="https://bob.example/a2a")
            assert shown == {"account": "bob", "display_name": "Bob the builder",
                             "skills": [{"name": "summarise", "description": "Summaries of long documents"}],
                             "a2a_endpoint": "https://bob.example/a2a"}
            cleared = await call(bob, "pircan:profile", action="set", a2a_endpoint="", remove_skills=["summarise"])
            assert (cleared["a2a_endpoint"], cleared["skills"]) == (None, [])
            roster = await call(alice, "pircan:agents", action="list")
            bob_entry = next(a for a in roster["agents"] if a["name"] == "bob")
            assert (bob_entry["display_name"], bob_entry["kind"], bob_entry["relation"]) == (
                "Bob the builder", "agent", "none")
            # an agreement made with the skills, then the pull: list (unchanged), take, ack
            asked = await call(alice, "pircan:contact", action="request", agent="bob", purpose="chat")
            await call(bob, "pircan:contact", action="accept", request_id=asked["request"]["request_id"])
            assert await call(bob, "pircan:inbox", action="take") == {"message": None}
            async with a2a(srv, alice_token, "bob") as to_bob:
                big = "résumé " * 5000
                await answers(to_bob, request(big, now=True))
                await answers(to_bob, request("second", now=True))
            listed = await call(bob, "pircan:inbox", action="list")
            assert [(m["sender"], m["body"]) for m in listed["messages"]] == [("alice", big), ("alice", "second")]
            assert listed["unread"] == 2
            again = await call(bob, "pircan:inbox", action="list")
            assert again["unread"] == 2  # listing changes nothing
            taken = await call(bob, "pircan:inbox", action="take")
            assert (taken["message"]["body"], taken["message"]["read"]) == (big, True)
            assert (await call(bob, "pircan:inbox", action="list"))["unread"] == 1  # taken: read
            acked = await call(bob, "pircan:inbox", action="ack",
                               message_ids=[listed["messages"][1]["message_id"]])
            assert acked == {"marked_read": 1}
            assert (await call(bob, "pircan:inbox", action="list"))["unread"] == 0
            # a wait: woken by the next message, no polling; it stays unread until acknowledged
            waiting = asyncio.create_task(call(bob, "pircan:inbox", action="wait", wait_ms=20000))
            async with a2a(srv, alice_token, "bob") as to_bob:
                await until_waiting(srv, "bob")  # bob's take is waiting
                await answers(to_bob, request("wake up", now=True))
            woke = await waiting
            assert (woke["message"]["body"], woke["message"]["read"]) == ("wake up", False)
            assert (await call(bob, "pircan:inbox", action="list"))["unread"] == 1
            again = await call(bob, "pircan:inbox", action="wait", wait_ms=50)  # still there: at once
            assert again["message"]["message_id"] == woke["message"]["message_id"]
            await call(bob, "pircan:inbox", action="ack", message_ids=[woke["message"]["message_id"]])
            nothing = await call(bob, "pircan:inbox", action="wait", wait_ms=50)
            assert nothing == {"message": None, "ended": "timeout"}

    asyncio.run(scenario())


def test_introspection_tells_valid_revoked_expired_and_unknown(srv):  # noqa: F811
    alice_token, bob_token, carol_token = token_for(srv, "alice"), token_for(srv, "bob"), token_for(srv, "carol")

    async def scenario() -> None:
        async with a2a(srv, alice_token) as alice, a2a(srv, bob_token) as bob, a2a(srv, carol_token) as carol:
            await call(bob, "pircan:profile", action="set", a2a_endpoint="https://bob.example/a2a")
            asked = await call(alice, "pircan:contact", action="request", agent="bob", purpose="direct")
            accepted = await call(bob, "pircan:contact", action="accept", request_id=asked["request"]["request_id"])
            aid = accepted["agreement"]["agreement_id"]
            [answer] = await answers(alice, request("", intro="bob"))
            token = get_data_parts(answer.message.parts)[0]["token"]
            valid = await call(bob, "pircan:introspect", action="check", token=token)
            assert {k: valid[k] for k in ("active", "status", "sub", "aud", "agreement_id", "scope", "requester",
                                          "target", "revoked_at")} == {
                "active": True, "status": "valid", "sub": "alice", "aud": "bob", "agreement_id": aid,
                "scope": "message", "requester": "alice", "target": "bob", "revoked_at": None}
            # the same over HTTP, RFC 7662 style (a form with token=...)
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {bob_token}"}) as http:
                got = await http.post(srv.http_url + "/a2a/introspect", data={"token": token})
                assert got.status_code == 200 and got.json() == valid
                anonymous = await http.post(srv.http_url + "/a2a/introspect", data={"token": token},
                                            headers={"Authorization": ""})
                assert anonymous.status_code == 401
            # someone the token does not name learns nothing; a forged token is unknown
            assert await call(carol, "pircan:introspect", token=token) == {"active": False, "status": "unknown"}
            assert await call(bob, "pircan:introspect", token=token[:-4] + "AAAA") == {
                "active": False, "status": "unknown"}
            assert await call(bob, "pircan:introspect", token="not-a-token") == {"active": False, "status": "unknown"}
            # a revoke shows at once
            await call(alice, "pircan:contact", action="revoke", agreement_id=aid)
            revoked = await call(bob, "pircan:introspect", token=token)
            assert (revoked["active"], revoked["status"]) == (False, "revoked") and revoked["revoked_at"]
        return token

    asyncio.run(scenario())


def test_a_token_past_its_lifetime_is_expired(srv):  # noqa: F811
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with a2a(srv, alice_token) as alice, a2a(srv, bob_token) as bob:
            await call(bob, "pircan:profile", action="set", a2a_endpoint="https://bob.example/a2a")
            asked = await call(alice, "pircan:contact", action="request", agent="bob", purpose="direct")
            await call(bob, "pircan:contact", action="accept", request_id=asked["request"]["request_id"])
            [answer] = await answers(alice, request("", intro="bob"))
            token = get_data_parts(answer.message.parts)[0]["token"]
            claims = jwt.decode(token, options={"verify_signature": False})
            # the same token, signed by the network, whose lifetime is over
            old = keys.sign(signing_key(srv), {**claims, "iat": claims["iat"] - 600, "nbf": claims["nbf"] - 600,
                                               "exp": claims["iat"] - 300})
            expired = await call(bob, "pircan:introspect", token=old)
            assert (expired["active"], expired["status"], expired["agreement_id"]) == (
                False, "expired", claims["agreement_id"])

    asyncio.run(scenario())


def test_the_cards_name_the_methods_served_and_unknown_metadata_is_refused(srv):  # noqa: F811
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with httpx.AsyncClient() as http:
            card = await A2ACardResolver(http, srv.http_url).get_agent_card()
        assert card.capabilities.extended_agent_card is True
        relay = next(s for s in card.skills if s.id == "relay")
        assert "tasks/get" not in relay.description and "GetTask" in relay.description
        assert {s.id for s in card.skills} >= {"pircan:contact", "pircan:agents", "pircan:profile", "pircan:inbox",
                                               "pircan:resources", "pircan:introspect"}
        async with a2a(srv, token) as alice:
            extended = await alice.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
            assert extended.capabilities.extended_agent_card is True
        async with a2a(srv, token, "bob") as alice:
            assert await refusal(answers(alice, request("revoke it", revoke="0123456789abcdef"))) == (
                InvalidParamsError, "INVALID_PARAMS", "revoke")
            assert await refusal(answers(alice, call_request("pircan:agents"))) == (
                InvalidParamsError, "INVALID_PARAMS", "pircan:agents")
        assert srv.server.store.path  # nothing was stored for the refused messages
        rows = run(srv, srv.server.store.db.read(lambda conn: conn.execute(
            "SELECT COUNT(*) FROM pircan_messages").fetchone()))
        assert rows == (0,)

    asyncio.run(scenario())


def test_a_wait_whose_client_gave_up_loses_nothing(srv):  # noqa: F811
    """The pull's wait answers a message without marking it read: a client that gave up before the
    answer (its own timeout) finds the message again."""
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with a2a(srv, alice_token) as alice, a2a(srv, bob_token) as bob:
            asked = await call(alice, "pircan:contact", action="request", agent="bob", purpose="chat")
            await call(bob, "pircan:contact", action="accept", request_id=asked["request"]["request_id"])
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {bob_token}"}, timeout=1) as http:
                card = await A2ACardResolver(http, srv.http_url).get_agent_card()
                impatient = ClientFactory(ClientConfig(httpx_client=http)).create(card)
                try:
                    await call(impatient, "pircan:inbox", action="wait", wait_ms=20000)
                except A2AClientError:
                    pass
                else:
                    raise AssertionError("the client did not give up")
            async with a2a(srv, alice_token, "bob") as to_bob:
                await answers(to_bob, request("are you there?", now=True))
            deadline = asyncio.get_running_loop().time() + 10
            while True:  # the abandoned wait may still be running: poll, with a deadline
                listed = await call(bob, "pircan:inbox", action="list")
                if listed["unread"] == 1 and not state_of(srv).waiters.get("bob"):
                    break
                assert asyncio.get_running_loop().time() < deadline, listed
                await asyncio.sleep(0.01)
            assert [m["body"] for m in listed["messages"]] == ["are you there?"]

    asyncio.run(scenario())


def test_a_nul_in_a_text_part_or_in_a_skill_s_data_is_refused(srv):  # noqa: F811
    """As over MCP (test_mcp's test of every tool's texts): a NUL in a message's text part, or in
    a network skill's argument, is INVALID_PARAMS naming it, and nothing is stored."""
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with a2a(srv, token, "bob") as alice:
            assert await refusal(answers(alice, request("a\x00b"))) == (InvalidParamsError, "INVALID_PARAMS", "text")
        async with a2a(srv, token) as alice:
            assert await refusal(answers(alice, call_request("pircan:profile", action="set", display_name="a\x00b"))) \
                == (InvalidParamsError, "INVALID_PARAMS", "display_name")
            assert (await call(alice, "pircan:profile", action="show"))["display_name"] == ""

    asyncio.run(scenario())
    assert run(srv, srv.server.store.db.read(lambda conn: conn.execute(
        "SELECT COUNT(*) FROM pircan_messages").fetchone())) == (0,)
