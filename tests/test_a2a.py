"""A2A, end to end with the official A2A SDK's own client over real HTTP on port 0: the cards, the
gateway (a message from an A2A client reaches an IRC agent, which replies; a task sent over A2A is
completed by an MCP agent, and the A2A client sees its states by tasks/get and by streaming), and the
refusals, which carry the same codes as IRC's FAIL lines and MCP's tool errors.

The server runs in-process (tests/live.py); the A2A and MCP clients run on the test's own event loop,
and IRC clients in a worker thread while an A2A request waits. Nothing sleeps: the IRC side
synchronises with PING/PONG, the HTTP side awaits each answer or stream event.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import new_text_message
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict

from tests import dbs
from tests.live import LiveServer, pircan_server
from tests.test_mcp import PASSWORD, call, irc, login, mcp, run, srv, token_for  # noqa: F401 - fixtures

BIG = "résumé " * 5000  # 40,000 bytes: more than any IRC line


@contextlib.contextmanager
def live(tmp_path: Any, http: dict[str, Any] | None = None, **pircan: Any) -> Iterator[LiveServer]:
    """A server like the ``srv`` fixture's, with these ``[pircan]`` (and ``[http]``) settings."""
    server = pircan_server(tmp_path, pircan=pircan, http=http or {})
    try:
        run(server, server.server.accounts.create("olive", PASSWORD, kind="person", owner=None))
        for name in ("alice", "bob", "carol"):
            run(server, server.server.accounts.create(name, PASSWORD, kind="agent", owner="olive"))
        yield server
    finally:
        server.stop()


@contextlib.asynccontextmanager
async def a2a(server: LiveServer, token: str | None, agent: str | None = None,
              streaming: bool = False) -> AsyncIterator[Client]:
    """An SDK client for an agent's gateway endpoint (the network's for None), from its card."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        base = server.http_url + (f"/a2a/agents/{agent}" if agent else "")
        card = await A2ACardResolver(http, base).get_agent_card()
        yield ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)


def request(text: str, *, task_id: str = "", context_id: str = "", now: bool = False,
            **metadata: Any) -> pb.SendMessageRequest:
    message = new_text_message(text, context_id=context_id or None, task_id=task_id or None, role=pb.ROLE_USER)
    if metadata:
        message.metadata.update(metadata)
    return pb.SendMessageRequest(message=message, configuration=pb.SendMessageConfiguration(return_immediately=now))


async def answers(client: Client, req: pb.SendMessageRequest) -> list[pb.StreamResponse]:
    return [event async for event in client.send_message(req)]


async def refusal(coro: Any) -> tuple[type, str, str]:
    """The A2A error a call raises: (class, code, context)."""
    try:
        await coro
    except A2AError as exc:
        return type(exc), (exc.data or {}).get("code", ""), (exc.data or {}).get("context", "")
    raise AssertionError("not refused")


def meta(message: Any) -> dict[str, Any]:
    return MessageToDict(message.metadata)


def agree(server: LiveServer, made: list, requester: str, target: str, scopes: str) -> str:
    """An active agreement, made over IRC (the requester logs in for it and leaves); its id."""
    asker = login(server, made, requester)
    rid = irc(asker, f"CONTACT REQUEST {target} {scopes} 30 :for the tests")[0][2]
    asker.send("QUIT")
    asker.read_all_until_close()
    decider = login(server, made, target)
    accepted = irc(decider, f"CONTACT ACCEPT {rid}")[0]
    assert accepted[1] == "ACCEPTED", accepted
    decider.send("QUIT")
    decider.read_all_until_close()
    return accepted[3]


def db_rows(server: LiveServer, sql: str, *args: Any) -> list[tuple]:
    """Rows of the server's database, once everything it queued (audit rows of refusals) has committed."""

    async def committed() -> None:
        await server.server.store.write(lambda conn: None)  # writes commit in the order they were queued

    run(server, committed())
    conn = dbs.connect(server.server.store.path)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


# cards ------------------------------------------------------------------------------------------------


def test_cards_show_what_the_roster_shows_everyone(srv, clients):  # noqa: F811
    olive = login(srv, clients, "olive")
    irc(olive, "PROFILE NAME bob :Bob the builder")
    irc(olive, "PROFILE SKILL bob summarise :Summaries of long documents")
    irc(olive, "PROFILE ENDPOINT bob https://bob.example/a2a")
    irc(olive, "CONTACT POLICY carol deny")
    alice_token, carol_token = token_for(srv, "alice"), token_for(srv, "carol")
    agree(srv, clients, "carol", "bob", "message,task:summarise")

    async def scenario() -> None:
        async with httpx.AsyncClient() as http:
            network = await A2ACardResolver(http, srv.http_url).get_agent_card()
            assert network.name == "irc.test"
            assert [(i.url, i.protocol_binding) for i in network.supported_interfaces] == [
                (srv.http_url + "/a2a", "JSONRPC"), (srv.http_url + "/a2a", "HTTP+JSON")]
            assert [s.id for s in network.skills] == ["relay", "intro", "pircan:agents", "pircan:contact",
                                                      "pircan:profile", "pircan:inbox", "pircan:broadcast",
                                                      "pircan:resources", "pircan:introspect",
                                                      "pircan:channels"]
            assert network.security_schemes["pircan"].http_auth_security_scheme.scheme == "Bearer"
            card = await A2ACardResolver(http, srv.http_url + "/a2a/agents/bob").get_agent_card()
            assert card.name == "bob" and card.description.startswith("Bob the builder (bob), an agent")
            assert card.supported_interfaces[0].url == srv.http_url + "/a2a/agents/bob"
            assert [(s.id, s.description, list(s.tags)) for s in card.skills] == [
                ("pircan:message", card.skills[0].description, ["message"]),
                ("summarise", "Summaries of long documents", ["task"])]
            assert card.capabilities.streaming and card.capabilities.extended_agent_card
            assert "bob.example" not in MessageToDict(card).__repr__()  # the endpoint is not public
            # persons, agents that deny contact, names nobody uses: no card, all alike
            for name in ("olive", "carol", "nobody"):
                got = await http.get(srv.http_url + f"/a2a/agents/{name}/.well-known/agent-card.json")
                assert (got.status_code, got.json()["error"]["code"]) == (404, "NO_SUCH_ACCOUNT")
        # the extended card: the public one for alice (no agreement), the endpoint and scopes for carol
        async with a2a(srv, alice_token, "bob") as alice:
            extended = await alice.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
            assert extended == card
        async with a2a(srv, carol_token, "bob") as carol:
            extended = await carol.get_extended_agent_card(pb.GetExtendedAgentCardRequest())
            [direct] = extended.capabilities.extensions
            assert direct.uri == "https://pircan.dev/a2a/direct"
            params = MessageToDict(direct.params)
            assert params["endpoint"] == "https://bob.example/a2a" and params["scopes"] == ["message",
                                                                                             "task:summarise"]
            assert params["jwks_uri"] == srv.http_url + "/.well-known/jwks.json"

    asyncio.run(scenario())


# the gateway ------------------------------------------------------------------------------------------


def test_a_gateway_message_reaches_an_irc_agent_which_replies(srv, clients):  # noqa: F811
    agree(srv, clients, "alice", "bob", "message")
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")

    def bob_answers() -> str:
        bob.read_until(lambda m: m.command == "NOTICE" and m.params[-1] == "NOTIFY message 1")
        taken = irc(bob, "INBOX TAKE")
        assert [p[1] for p in taken] == ["MESSAGE", "BODY", "END"] and taken[0][3] == "alice"
        assert taken[1][3] == "Build 1234 is green. Deploy?"
        mid = taken[0][2]
        assert irc(bob, f"SEND alice {mid} :Deploying now")[0][1] == "OK"
        return mid

    async def scenario() -> str:
        async with a2a(srv, token, "bob") as alice:
            sending = asyncio.create_task(answers(alice, request("Build 1234 is green. Deploy?")))
            mid = await asyncio.to_thread(bob_answers)
            [answer] = await sending
            reply = answer.message
            assert reply.role == pb.ROLE_AGENT and reply.parts[0].text == "Deploying now"
            assert reply.context_id == mid  # the conversation is named by its first message
            assert {k: v for k, v in meta(reply).items() if k != "created_at"} == {
                "sender": "bob", "recipient": "alice", "agreement_id": meta(reply)["agreement_id"],
                "in_reply_to": mid, "hop_count": 1.0}
            # the reply was delivered: read, like a message answered by wait_for_messages
            assert db_rows(srv, "SELECT read_at IS NOT NULL FROM pircan_messages WHERE id = ?",
                           int(reply.message_id, 16)) == [(1,)]
            # the A2A context continues the conversation (a reply to its newest message); without waiting,
            # the answer is the receipt
            [receipt] = await answers(alice, request("Thanks!", context_id=reply.context_id, now=True))
            receipt_meta = meta(receipt.message)
            assert receipt_meta["receipt"] is True and receipt_meta["delivery"] == "delivered"
            assert receipt_meta["conversation_id"] == mid and receipt_meta["hop_count"] == 2
            # retrying with the same message id stores nothing new
            again = request("Thanks!", context_id=reply.context_id, now=True)
            again.message.message_id = "retry-1"
            first = meta((await answers(alice, again))[0].message)
            second = meta((await answers(alice, again))[0].message)
            assert first["message_id"] == second["message_id"] and second["created"] is False
            return reply.message_id

    reply_id = asyncio.run(scenario())
    lines = irc(bob, "INBOX")
    assert [(p[1], p[3], p[6], p[7], p[9]) for p in lines[:-1]] == [("MESSAGE", "alice", reply_id, "2", "Thanks!")] * 2
    assert lines[-1][1:3] == ["UNREAD", "2"]


def test_a_task_over_a2a_is_completed_by_an_mcp_agent_and_streamed(srv, clients):  # noqa: F811
    agree(srv, clients, "alice", "bob", "message,task:summarise")
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with a2a(srv, alice_token, "bob", streaming=True) as alice, mcp(srv, bob_token) as bob:
            stream = alice.send_message(request("Summarise the minutes", skill="summarise"))
            first = (await anext(stream)).task
            tid = first.id
            assert (first.status.state, first.context_id) == (pb.TASK_STATE_SUBMITTED, tid)
            assert [(m.role, m.parts[0].text) for m in first.history] == [(pb.ROLE_USER, "Summarise the minutes")]
            assert MessageToDict(first.metadata)["skill"] == "summarise"
            woke = await call(bob, "wait_for_messages", timeout_ms=5000)
            assert woke["task"]["task_id"] == tid
            await call(bob, "update_task", task_id=tid, state="working", text="Reading")
            working = (await anext(stream)).status_update
            assert (working.task_id, working.status.state) == (tid, pb.TASK_STATE_WORKING)
            assert working.status.message.parts[0].text == "Reading"
            await call(bob, "update_task", task_id=tid, state="input-required", text="English or German?")
            question = (await anext(stream)).status_update
            assert question.status.state == pb.TASK_STATE_INPUT_REQUIRED
            with pytest.raises(StopAsyncIteration):  # the stream ends where the task waits for input
                await anext(stream)
            # the answer, over A2A: a message naming the task
            stream = alice.send_message(request("English", task_id=tid))
            again = (await anext(stream)).task
            assert again.status.state == pb.TASK_STATE_WORKING and again.history[-1].parts[0].text == "English"
            woke = await call(bob, "wait_for_messages", sender=["alice"], timeout_ms=5000)
            assert woke["task"]["entries"][-1]["text"] == "English"
            await call(bob, "update_task", task_id=tid, state="completed", text=BIG)
            result = (await anext(stream)).artifact_update
            assert result.artifact.name == "result" and result.artifact.parts[0].text == BIG
            done = (await anext(stream)).status_update
            assert done.status.state == pb.TASK_STATE_COMPLETED
            with pytest.raises(StopAsyncIteration):
                await anext(stream)
            # tasks/get: the whole task
            task = await alice.get_task(pb.GetTaskRequest(id=tid))
            assert task.status.state == pb.TASK_STATE_COMPLETED and task.status.message.parts[0].text == BIG
            assert [(m.role, meta(m)["kind"], meta(m)["state"]) for m in task.history] == [
                (pb.ROLE_USER, "input", "submitted"), (pb.ROLE_AGENT, "status", "working"),
                (pb.ROLE_AGENT, "status", "input-required"), (pb.ROLE_USER, "input", "working"),
                (pb.ROLE_AGENT, "result", "completed")]
            assert [a.parts[0].text for a in task.artifacts] == [BIG]
            short = await alice.get_task(pb.GetTaskRequest(id=tid, history_length=1))
            assert len(short.history) == 1
            assert [t.id for t in (await alice.list_tasks(pb.ListTasksRequest())).tasks] == [tid]

    asyncio.run(scenario())


def test_a_sent_task_waits_for_its_end_and_sees_irc_changes(srv, clients):  # noqa: F811
    agree(srv, clients, "alice", "bob", "task:summarise")
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with a2a(srv, token, "bob") as alice:
            # without waiting: the task as created
            [created] = await answers(alice, request("first", skill="summarise", now=True))
            tid = created.task.id
            assert created.task.status.state == pb.TASK_STATE_SUBMITTED
            # waiting: the answer comes when bob (IRC) finishes it
            sending = asyncio.create_task(answers(alice, request("second", skill="summarise")))
            notified = await asyncio.to_thread(
                bob.read_until, lambda m: m.command == "NOTICE" and m.params[-1].startswith("NOTIFY task"))
            assert notified
            listed = await asyncio.to_thread(irc, bob, "TASK LIST role=target")
            second = listed[0][2]
            assert await asyncio.to_thread(irc, bob, f"TASK UPDATE {second} working :on it") == [
                ["bob", "UPDATED", second, "working"]]
            assert not sending.done()
            await asyncio.to_thread(irc, bob, f"TASK UPDATE {second} completed :Done: second")
            [finished] = await sending
            assert finished.task.id == second and finished.task.status.state == pb.TASK_STATE_COMPLETED
            assert finished.task.artifacts[0].parts[0].text == "Done: second"
        async with a2a(srv, token, "bob", streaming=True) as alice:
            # a subscription follows the first task while bob moves it over IRC
            stream = alice.subscribe(pb.SubscribeToTaskRequest(id=tid))
            assert (await anext(stream)).task.status.state == pb.TASK_STATE_SUBMITTED
            await asyncio.to_thread(irc, bob, f"TASK UPDATE {tid} rejected :Not today")
            rejected = (await anext(stream)).status_update
            assert rejected.status.state == pb.TASK_STATE_REJECTED
            assert rejected.status.message.parts[0].text == "Not today"
            with pytest.raises(StopAsyncIteration):
                await anext(stream)
            # nothing follows a final task; nor can it be canceled
            assert await refusal(anext(alice.subscribe(pb.SubscribeToTaskRequest(id=tid)))) == (
                UnsupportedOperationError, "INVALID_TRANSITION", tid)
            assert await refusal(alice.cancel_task(pb.CancelTaskRequest(id=tid))) == (
                TaskNotCancelableError, "INVALID_TRANSITION", f"{tid} canceled")

    asyncio.run(scenario())


def test_an_a2a_agent_moves_its_tasks_on_through_the_gateway(srv, clients):  # noqa: F811
    """The target's side over A2A: a message naming the task, with metadata ``state``, is TASK UPDATE."""
    agree(srv, clients, "alice", "bob", "task:summarise")
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with a2a(srv, alice_token, "bob", streaming=True) as alice, a2a(srv, bob_token) as bob:
            stream = alice.send_message(request("Summarise the minutes", skill="summarise"))
            tid = (await anext(stream)).task.id
            # bob, an A2A client of the network's endpoint, finds the task among its own
            listed = await bob.list_tasks(pb.ListTasksRequest(status=pb.TASK_STATE_SUBMITTED))
            assert [(t.id, meta(t)["requester"], meta(t)["target"]) for t in listed.tasks] == [(tid, "alice", "bob")]
            [moved] = await answers(bob, request("Reading", task_id=tid, state="working"))
            assert moved.task.status.state == pb.TASK_STATE_WORKING
            working = (await anext(stream)).status_update
            assert (working.status.state, working.status.message.parts[0].text) == (pb.TASK_STATE_WORKING, "Reading")
            # the same rules as TASK UPDATE: only the target moves it on, only where a task may go
            assert await refusal(answers(bob, request("Stop", task_id=tid, state="canceled"))) == (
                InvalidRequestError, "INVALID_TRANSITION", f"{tid} canceled")
            assert await refusal(answers(bob, request("Here is more", task_id=tid))) == (  # input is the requester's
                InvalidRequestError, "NOT_ALLOWED", tid)
            assert await refusal(answers(alice, request("Done", task_id=tid, state="completed"))) == (
                InvalidRequestError, "NOT_ALLOWED", tid)
            [done] = await answers(bob, request("The summary", task_id=tid, state="completed"))
            assert done.task.status.state == pb.TASK_STATE_COMPLETED
            assert done.task.artifacts[0].parts[0].text == "The summary"
            result = (await anext(stream)).artifact_update
            assert result.artifact.parts[0].text == "The summary"
            assert (await anext(stream)).status_update.status.state == pb.TASK_STATE_COMPLETED
            with pytest.raises(StopAsyncIteration):
                await anext(stream)

    asyncio.run(scenario())
    assert [(a, act, re.sub(r"[0-9a-f]{16}", "<id>", d)) for a, act, d in db_rows(
        srv, "SELECT actor, action, detail FROM pircan_audit WHERE action LIKE 'task.%' ORDER BY id")] == [
        ("alice", "task.create", "<id> skill=summarise agreement=<id> through A2A"),
        ("bob", "task.update", "<id> submitted->working through A2A"),
        ("bob", "task.update", "<id> working->completed through A2A")]


def test_refusals_carry_the_codes_of_fail_lines(srv, clients):  # noqa: F811
    agree(srv, clients, "alice", "bob", "message")
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with a2a(srv, token, "carol") as alice:
            assert await refusal(answers(alice, request("hi"))) == (InvalidRequestError, "NO_AGREEMENT", "carol")
        async with a2a(srv, token, "bob") as alice:
            assert await refusal(answers(alice, request("do it", skill="summarise"))) == (
                InvalidRequestError, "SCOPE_MISSING", "bob")
            assert await refusal(answers(alice, request("   "))) == (InvalidParamsError, "EMPTY", "bob")
            assert await refusal(answers(alice, request("x" * 60_001))) == (InvalidParamsError, "TOO_LONG", "bob")
            assert await refusal(answers(alice, request("hi", in_reply_to="0123456789abcdef"))) == (
                InvalidParamsError, "NO_SUCH_MESSAGE", "0123456789abcdef")
            assert await refusal(alice.get_task(pb.GetTaskRequest(id="0123456789abcdef"))) == (
                TaskNotFoundError, "NO_SUCH_TASK", "0123456789abcdef")
            data = request("hi")
            data.message.parts.append(pb.Part(url="https://example.org/file"))
            assert await refusal(answers(alice, data)) == (ContentTypeNotSupportedError, "INVALID_PARAMS", "parts")
        async with a2a(srv, token) as alice:  # the network's endpoint needs a recipient
            assert await refusal(answers(alice, request("hi"))) == (InvalidParamsError, "NEED_MORE_PARAMS", "to")
            [receipt] = await answers(alice, request("via the network", to="bob", now=True))
            assert meta(receipt.message)["recipient"] == "bob"
        async with httpx.AsyncClient() as http:  # no token, a bad token: 401, as for MCP
            for headers in ({}, {"Authorization": "Bearer pircd_0000000000000000_nope"}):
                got = await http.post(srv.http_url + "/a2a/agents/bob", json={}, headers=headers)
                assert got.status_code == 401 and got.headers["www-authenticate"].startswith("Bearer")

    asyncio.run(scenario())


def test_hops_and_budgets_count_a2a_with_the_other_transports(srv, clients):  # noqa: F811
    """The gateway's messages go through send_message: the hop limit holds across an A2A reply chain,
    and the agreement's hourly budget counts SEND over IRC and messages over A2A together."""
    agree(srv, clients, "alice", "bob", "message")
    agree(srv, clients, "bob", "alice", "message")
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")
    alice_irc = login(srv, clients, "alice")

    async def scenario() -> None:
        async with a2a(srv, alice_token, "bob") as alice, a2a(srv, bob_token, "alice") as bob:
            [sent] = await answers(alice, request("first", now=True))
            assert meta(sent.message)["hop_count"] == 0
            last = meta(sent.message)["message_id"]
            for hop in range(1, 9):  # replies, alternately bob's and alice's
                [sent] = await answers(alice if hop % 2 == 0 else bob, request(f"hop {hop}", now=True,
                                                                               in_reply_to=last))
                assert meta(sent.message)["hop_count"] == hop
                last = meta(sent.message)["message_id"]
            assert await refusal(answers(bob, request("hop 9", now=True, in_reply_to=last))) == (
                InvalidRequestError, "HOP_LIMIT", last)
            # alice has sent 5 messages under her agreement; 55 more over IRC and 60 over A2A use up 120
            for n in range(55):
                assert (await asyncio.to_thread(irc, alice_irc, f"SEND bob :irc {n}"))[0][1] == "OK"
            for n in range(60):
                await answers(alice, request(f"a2a {n}", now=True))
            assert (await refusal(answers(alice, request("one too many", now=True))))[:2] == (
                InvalidRequestError, "AGREEMENT_BUDGET")
            assert (await asyncio.to_thread(irc, alice_irc, "SEND bob :and over IRC"))[0][:2] == [
                "SEND", "AGREEMENT_BUDGET"]

    asyncio.run(scenario())


def test_a_gateway_request_answers_with_what_there_is_after_its_wait(tmp_path, clients):  # noqa: F811
    with live(tmp_path, a2a_wait_ms=200) as server:
        agree(server, clients, "alice", "bob", "message,task:summarise")
        token = token_for(server, "alice")

        async def scenario() -> None:
            async with a2a(server, token, "bob") as alice:
                [receipt] = await answers(alice, request("Anyone there?"))
                assert receipt.message.parts[0].text.endswith(
                    "(queued); no reply: Nothing to wait for: bob is not on the network, not hosted and without a push "
                    "endpoint")
                assert meta(receipt.message)["delivery"] == "queued"
                assert meta(receipt.message)["no_reply"] == "nothing"  # at once: nobody there to reply
                login(server, clients, "bob")  # bob is there now, but does not answer in time
                [receipt] = await answers(alice, request("Still there?"))
                assert receipt.message.parts[0].text.endswith("(delivered); no reply within 200 ms")
                assert meta(receipt.message)["no_reply"] == "timeout"
                [task] = await answers(alice, request("Summarise this", skill="summarise"))
                assert task.task.status.state == pb.TASK_STATE_SUBMITTED

        asyncio.run(scenario())


def test_the_http_json_binding_serves_the_same(srv, clients):  # noqa: F811
    agree(srv, clients, "alice", "bob", "message,task:summarise")
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            card = await A2ACardResolver(http, srv.http_url + "/a2a/agents/bob").get_agent_card()
            rest = ClientFactory(ClientConfig(httpx_client=http, streaming=False,
                                              supported_protocol_bindings=["HTTP+JSON"])).create(card)
            [receipt] = await answers(rest, request("over HTTP+JSON", now=True))
            assert meta(receipt.message)["recipient"] == "bob"
            [created] = await answers(rest, request("a task", skill="summarise", now=True))
            got = await rest.get_task(pb.GetTaskRequest(id=created.task.id))
            assert got.history[0].parts[0].text == "a task"
            assert await refusal(rest.get_task(pb.GetTaskRequest(id="0123456789abcdef"))) == (
                TaskNotFoundError, "NO_SUCH_TASK", "0123456789abcdef")
            assert await refusal(answers(rest, request("do", skill="translate", now=True))) == (
                InvalidRequestError, "SCOPE_MISSING", "bob")

    asyncio.run(scenario())


def test_open_streams_end_cleanly_when_the_server_stops(tmp_path, clients):  # noqa: F811
    """api.http_on_stop: a stream following a task ends before uvicorn waits for open responses, so the
    client gets a complete response (not a connection cut after the grace period)."""
    with live(tmp_path) as server:
        agree(server, clients, "alice", "bob", "task:summarise")
        token = token_for(server, "alice")

        async def scenario() -> None:
            async with a2a(server, token, "bob", streaming=True) as alice:
                stream = alice.send_message(request("Summarise this", skill="summarise"))
                assert (await anext(stream)).task.status.state == pb.TASK_STATE_SUBMITTED
                stopper = threading.Thread(target=server.stop)
                stopper.start()
                with pytest.raises(StopAsyncIteration):
                    await anext(stream)
                await asyncio.to_thread(stopper.join, 10)
                assert not stopper.is_alive()

        asyncio.run(scenario())
