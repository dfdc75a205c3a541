"""Done means: an agent that holds only the A2A SDK can do what an IRC agent does. After the operator's
set-up (the accounts, a token each, loopback allowed for outgoing requests) nothing but the SDK is
used: alice is an A2A client only (she pulls her inbox); bob is an A2A client and an A2A server of his
own (the SDK's), to which the network delivers his events as A2A messages.

They identify themselves, find each other, make an agreement (bob grants fewer scopes and days), send
and receive whole 40,000-byte bodies (bob's answer to a delivered message is his reply in the
conversation; alice waits for hers without polling), run a task (bob completes it when its event is
delivered to him), read a resource, use a public and a private channel (pircan:channels: bob cannot
even see alice's private channel until she invites him), and end the agreement.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import jwt
from a2a.helpers import get_data_parts, new_text_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from tests.live import LiveServer
from tests.test_a2a import BIG, a2a, answers, live, refusal, request
from tests.test_a2a_direct import serve
from tests.test_a2a_parity import call, call_request
from tests.test_mcp import token_for, until_waiting


class Bob:
    """bob's own A2A server: it takes only requests the network signed for him (checked with the
    network's published keys), keeps what it was sent, answers messages, and completes the tasks
    given to it through the gateway, with bob's token."""

    def __init__(self, network: str, token: str) -> None:
        self.network = network
        self.token = token
        self.received: list[tuple[dict[str, Any], pb.Message]] = []
        self.arrived = asyncio.Condition()  # notified with each push received
        self.moves: set[asyncio.Task[Any]] = set()

    async def heard(self, event: str) -> None:
        """Return once the network has pushed an ``event`` to bob (the push arrives on this loop)."""
        async with self.arrived:
            await asyncio.wait_for(
                self.arrived.wait_for(lambda: any(m.get("event") == event for m, _ in self.received)), 10)

    async def pushed_by_the_network(self, authorization: str) -> dict[str, Any] | None:
        token = authorization.removeprefix("Bearer ").strip()
        try:
            header = jwt.get_unverified_header(token)
            if header.get("typ") != "pircan-push+jwt":
                return None
            async with httpx.AsyncClient() as http:
                found = (await http.get(self.network + "/.well-known/jwks.json")).json()
            jwk = next(k for k in found["keys"] if k["kid"] == header["kid"])
            return jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["EdDSA"], audience="bob", issuer=self.network)
        except (jwt.PyJWTError, StopIteration):
            return None

    def app(self) -> Any:
        bob = self

        class Executor(AgentExecutor):
            async def execute(self, context: Any, event_queue: Any) -> None:
                message = context.message
                meta = MessageToDict(message.metadata)
                bob.received.append((meta, message))
                async with bob.arrived:
                    bob.arrived.notify_all()
                if meta["event"] == "message":
                    text = f"bob read {len(message.parts[0].text.encode())} bytes"
                elif meta["event"] == "task":
                    [document] = get_data_parts(message.parts)
                    move = asyncio.ensure_future(bob.complete(document["task"]))
                    bob.moves.add(move)
                    text = "on it"
                else:
                    text = "noted"
                await event_queue.enqueue_event(new_text_message(text, context_id=context.context_id,
                                                                 role=pb.ROLE_AGENT))

            async def cancel(self, context: Any, event_queue: Any) -> None:
                raise NotImplementedError

        class WithClaims(DefaultServerCallContextBuilder):
            def build(self, request: Any) -> Any:
                built = super().build(request)
                built.state["claims"] = request.scope["claims"]
                return built

        card = pb.AgentCard(name="bob", description="bob", version="1.0",
                            supported_interfaces=[pb.AgentInterface(url="http://127.0.0.1/", protocol_binding="JSONRPC",
                                                                    protocol_version="1.0")],
                            capabilities=pb.AgentCapabilities(), default_input_modes=["text/plain"],
                            default_output_modes=["text/plain"],
                            skills=[pb.AgentSkill(id="summarise", name="Summaries", description="Summaries",
                                                  tags=["task"])])
        handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(), agent_card=card)
        inner = Starlette(routes=create_jsonrpc_routes(handler, "/", context_builder=WithClaims()))

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                claims = await bob.pushed_by_the_network(dict(scope["headers"]).get(b"authorization", b"").decode())
                if claims is None:
                    await JSONResponse({"error": "the network's token is required"}, status_code=401)(
                        scope, receive, send)
                    return
                scope = {**scope, "claims": claims}
            await inner(scope, receive, send)

        return guarded

    async def complete(self, task: dict[str, Any]) -> None:
        """Move the task delivered to bob on, as its target, through the gateway."""
        async with a2a_client(self.network, self.token) as network:
            done = new_text_message(f"summary of {len(task['entries'][0]['text'])} characters",
                                    task_id=task["task_id"], role=pb.ROLE_USER)
            done.metadata.update({"state": "completed"})
            await answers(network, pb.SendMessageRequest(message=done))


@contextlib.asynccontextmanager
async def a2a_client(base: str, token: str) -> AsyncIterator[Any]:
    from a2a.client import A2ACardResolver, ClientConfig, ClientFactory

    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http)).create(card)


def test_an_a2a_only_agent_does_what_an_irc_agent_does(tmp_path):
    with live(tmp_path, webhook_allowed_networks=["127.0.0.0/8"]) as server:
        journey(server)


def journey(server: LiveServer) -> None:
    alice_token, bob_token = token_for(server, "alice"), token_for(server, "bob")  # the operator's set-up
    bob = Bob(server.http_url, bob_token)

    async def scenario() -> None:
        async with serve(bob.app()) as bob_url, a2a(server, alice_token) as alice, a2a(server, bob_token) as net_bob:
            # who am I; who is there
            assert (await call(alice, "pircan:profile", action="show"))["account"] == "alice"
            await call(net_bob, "pircan:profile", action="set", display_name="Bob",
                       add_skills={"summarise": "Summaries"}, a2a_endpoint=bob_url)
            roster = await call(alice, "pircan:agents", action="list")
            assert {(a["name"], a["display_name"]) for a in roster["agents"]} >= {("bob", "Bob")}
            # an agreement: bob decides, granting fewer scopes and days than asked
            asked = await call(alice, "pircan:contact", action="request", agent="bob", days=30, purpose="reports",
                               scopes=["message", "task:summarise", "task:translate", "resource:read"])
            assert asked["outcome"] == "pending"
            rid = asked["request"]["request_id"]
            await bob.heard("request")  # pushed to bob
            requests = (await call(net_bob, "pircan:contact", action="list", which="requests"))["requests"]
            assert [r["request_id"] for r in requests if r["state"] == "pending"] == [rid]
            accepted = await call(net_bob, "pircan:contact", action="accept", request_id=rid, days=7,
                                  scopes=["message", "task:summarise", "resource:read"])
            aid = accepted["agreement"]["agreement_id"]
            assert sorted(accepted["agreement"]["scopes"]) == ["message", "resource:read", "task:summarise"]
            lasts = (datetime.fromisoformat(accepted["agreement"]["expires_at"])
                     - datetime.fromisoformat(accepted["agreement"]["created_at"]))
            assert lasts == timedelta(days=7)
            # alice, who has no endpoint, hears of the decision by waiting for it (the pull), no polling
            decided = (await call(alice, "pircan:inbox", action="wait", kinds=["decision"], wait_ms=20000))["event"]
            assert (decided["kind"], decided["request"]["state"], decided["request"]["agreement_id"]) == (
                "decision", "accepted", aid)
            # a whole body to bob: delivered to his endpoint; his answer is his reply in the conversation
            async with a2a(server, alice_token, "bob") as to_bob:
                [answer] = await answers(to_bob, request(BIG))
            reply = answer.message
            assert reply.parts[0].text == f"bob read {len(BIG.encode())} bytes"
            assert MessageToDict(reply.metadata)["sender"] == "bob"
            meta, delivered = next((m, d) for m, d in bob.received if m["event"] == "message")
            assert delivered.parts[0].text == BIG and meta["sender"] == "alice"
            assert reply.context_id == meta["conversation_id"]
            # a whole body to alice, who has no endpoint: she waits for it (the pull), no polling
            waiting = asyncio.create_task(call(alice, "pircan:inbox", action="wait", wait_ms=20000))
            await until_waiting(server, "alice")
            async with a2a(server, bob_token, "alice") as to_alice:
                await answers(to_alice, request("Ω" * 20000, now=True))
            taken = (await waiting)["message"]
            assert (taken["sender"], taken["body"]) == ("bob", "Ω" * 20000)
            assert await call(alice, "pircan:inbox", action="ack", message_ids=[taken["message_id"]]) == {
                "marked_read": 1}
            # a task: delivered to bob, who completes it over the gateway; alice's request waits for the end
            async with a2a(server, alice_token, "bob") as to_bob:
                [event] = await answers(to_bob, request(BIG, skill="summarise"))
            assert event.task.status.state == pb.TASK_STATE_COMPLETED
            assert event.task.artifacts[0].parts[0].text == f"summary of {len(BIG)} characters"
            # a resource of bob's, read by alice (resource:read)
            await call(net_bob, "pircan:resources", action="put", name="notes", body=BIG)
            read = await call(alice, "pircan:resources", action="read", owner="bob", name="notes")
            assert read["resource"]["body"] == BIG
            await channels(alice, net_bob)
            # the end of the agreement, at once for every transport
            await call(alice, "pircan:contact", action="revoke", agreement_id=aid)
            async with a2a(server, alice_token, "bob") as to_bob:
                assert (await refusal(answers(to_bob, request("still there?"))))[1] == "NO_AGREEMENT"
            await asyncio.gather(*bob.moves)

    asyncio.run(scenario())


async def channels(alice: Any, bob: Any) -> None:
    """A public channel and a private one, with the pircan:channels skill only."""
    async def refused(client: Any, **args: Any) -> tuple[str, str]:
        return (await refusal(answers(client, call_request("pircan:channels", **args))))[1:]

    # public: alice creates it (its operator), bob joins, both post and read
    made = await call(alice, "pircan:channels", action="join", channel="#reports")
    assert (made["channel"], made["members"], made["joined"]) == ("#reports", ["@alice"], True)
    joined = await call(bob, "pircan:channels", action="join", channel="#reports")
    assert joined["members"] == ["@alice", "bob"]
    topic = await call(alice, "pircan:channels", action="topic", channel="#reports", topic="Weekly reports")
    assert topic["topic"] == "Weekly reports"
    posted = await call(alice, "pircan:channels", action="post", channel="#reports", text="the report is out")
    await call(bob, "pircan:channels", action="post", channel="#reports", text="thanks")
    lines = (await call(bob, "pircan:channels", action="history", channel="#reports"))["messages"]
    assert [(m["from"], m["text"]) for m in lines if m["command"] == "PRIVMSG"] == [
        ("alice", "the report is out"), ("bob", "thanks")]
    assert lines[-2]["msgid"] == posted["msgid"]
    # private: #alice/room is invisible to bob, answered as a name nobody uses, until alice invites him
    private = await call(alice, "pircan:channels", action="join", channel="#alice/room")
    assert "P" in private["modes"]
    await call(alice, "pircan:channels", action="post", channel="#alice/room", text="just us")
    listed = (await call(bob, "pircan:channels", action="list"))["channels"]
    assert "#alice/room" not in [c["name"] for c in listed] and "#reports" in [c["name"] for c in listed]
    for channel in ("#alice/room", "#alice/nothing"):
        assert await refused(bob, action="join", channel=channel) == ("NO_SUCH_CHANNEL", channel)
        assert await refused(bob, action="history", channel=channel) == ("NO_SUCH_CHANNEL", channel)
        assert await refused(bob, action="post", channel=channel, text="hi") == ("NO_SUCH_CHANNEL", channel)
    assert await refused(bob, action="invite", account="alice", channel="#alice/room") == (
        "NO_SUCH_CHANNEL", "#alice/room")
    assert await call(alice, "pircan:channels", action="invite", account="bob", channel="#alice/room") == {
        "channel": "#alice/room", "invited": "bob"}
    inside = await call(bob, "pircan:channels", action="join", channel="#alice/room")
    assert inside["members"] == ["@alice", "bob"]
    await call(bob, "pircan:channels", action="post", channel="#alice/room", text="glad to be here")
    room = (await call(alice, "pircan:channels", action="history", channel="#alice/room"))["messages"]
    assert [m["text"] for m in room if m["command"] == "PRIVMSG"] == ["just us", "glad to be here"]
    # only the owner invites; an invitation withdrawn; leaving ends reading and posting
    assert await refused(bob, action="invite", account="carol", channel="#alice/room") == (
        "NOT_ALLOWED", "#alice/room")
    await call(alice, "pircan:channels", action="invite", account="carol", channel="#alice/room")
    withdrawn = await call(alice, "pircan:channels", action="uninvite", account="carol", channel="#alice/room")
    assert withdrawn == {"channel": "#alice/room", "uninvited": "carol"}
    assert await call(bob, "pircan:channels", action="leave", channel="#reports") == {
        "channel": "#reports", "left": True}
    assert await refused(bob, action="post", channel="#reports", text="x") == ("NOT_MEMBER", "#reports")
