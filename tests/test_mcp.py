"""MCP at /mcp, end to end with the official MCP SDK's own client over real HTTP on port 0.

An MCP agent (alice, by bearer token) and an IRC agent (bob, SASL) make contact, agree, exchange a
60,000-byte message and a 200-character reply, and both read the whole thread; every refusal comes
back as a tool error with the same code as IRC's FAIL; a token revoked mid-session is refused at
the next request and cancels a wait in flight. The server runs in-process (tests/live.py); the MCP
client runs on the test's own event loop. Nothing sleeps: the IRC side synchronises with PING/PONG,
the MCP side awaits each call's answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.live import IRCClient, LiveServer, pircan_server, whole_seconds_left

PASSWORD = "sesame123"
BODY_60000 = ("é" * 29_999) + "xy"  # 60,000 bytes of UTF-8: 29,999 two-byte characters and two one-byte


@pytest.fixture
def srv(tmp_path):
    server = pircan_server(tmp_path)
    run(server, server.server.accounts.create("olive", PASSWORD, kind="person", owner=None))
    for name in ("alice", "bob", "carol"):
        run(server, server.server.accounts.create(name, PASSWORD, kind="agent", owner="olive"))
    yield server
    server.stop()


def run(server: LiveServer, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, server.loop).result(30)


def token_for(server: LiveServer, account: str, name: str | None = None) -> str:
    _, text = run(server, server.server.tokens.create(None, account, name))
    return text


@contextlib.asynccontextmanager
async def mcp(server: LiveServer, token: str) -> AsyncIterator[Client]:
    async with (httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http,
                Client(streamable_http_client(server.http_url + "/mcp", http_client=http)) as client):
        yield client


def state_of(server: LiveServer) -> Any:
    """PIRCAN's live state (the MCP route holds it)."""
    return next(app for path, app in server.server.http.routes if path == "/mcp").state


async def until_waiting(server: LiveServer, account: str, count: int = 1) -> None:
    """Return once ``account`` has ``count`` waits in place (INBOX WAIT, wait_for_messages,
    pircan:inbox wait): PIRCAN adds each with ``add_waiter``."""
    state = state_of(server)
    await asyncio.to_thread(server.until, state, "add_waiter", lambda: len(state.waiters.get(account, ())) == count)


def until_gone(server: LiveServer, account: str) -> None:
    """Return once ``account`` is present on no transport: an MCP caller leaves ``left_elsewhere``
    ``pircan.mcp_presence_seconds`` after its last request ended."""
    state = state_of(server)
    server.until(state, "left_elsewhere", lambda: not state.present(account))


async def call(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool's structured result; fails on a tool error."""
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content or {}


async def refused(client: Client, tool: str, **args: Any) -> tuple[str, list[str]]:
    """A tool error's (code, context)."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    error = (result.structured_content or {})["error"]
    assert result.content[0].text.startswith(error["code"] + ": ")
    return error["code"], error["context"]


async def error_of(client: Client, tool: str, **args: Any) -> dict[str, Any]:
    """A tool error's structured error (code, context, message, next_step, retry_after_s)."""
    result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    return (result.structured_content or {})["error"]


def test_refusals_say_what_to_do_next_and_who_decides_a_pending_request(srv, clients):
    bob = login(srv, clients, "bob")
    irc(bob, "CONTACT POLICY owner-decides")
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with mcp(srv, token) as alice:
            assert await error_of(alice, "send_direct_message", recipient="bob", body="hi") == {
                "code": "NO_AGREEMENT", "context": ["bob"], "message": "You have no active agreement with this account",
                "next_step": "Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), "
                             "then wait for the decision"}
            asked = await call(alice, "request_contact", agent="bob", scopes=["message"], days=3, purpose="x")
            req = asked["request"]
            assert (req["state"], req["decider"]) == ("pending", "owner")
            assert req["expires_at"][:10] > req["created_at"][:10]
            assert [(r["request_id"], r["decider"], r["expires_at"])
                    for r in (await call(alice, "list_requests"))["requests"]] == [
                (req["request_id"], "owner", req["expires_at"])]
            error = await error_of(alice, "send_direct_message", recipient="bob", body="hi")
            assert error["message"] == (f"Your contact request {req['request_id']} is pending: its owner decides, "
                                        f"until {req['expires_at']}")
            assert error["next_step"] == "Wait for the decision (INBOX WAIT; MCP: wait_for_messages, list_requests)"
            assert "retry_after_s" not in error
        # the owner declines: the request is no longer pending, so it names no decider
        olive = login(srv, clients, "olive")
        irc(olive, f"CONTACT DECLINE {req['request_id']}")
        async with mcp(srv, token) as alice:
            gone = (await call(alice, "list_requests", status="all"))["requests"][0]
            assert (gone["state"], gone["decider"], gone["expires_at"]) == ("declined", None, None)

    asyncio.run(scenario())


def test_the_contact_policy_over_mcp_is_irc_s_contact_policy(srv, clients):
    """set_contact_policy runs CONTACT POLICY's rule: the agent or its owner sets it; IRC sees it at
    once, and a request then waits for the owner."""
    bob_irc = login(srv, clients, "bob")

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "bob")) as bob:
            assert (await call(bob, "get_profile"))["policy"] == "agent-decides"
            assert await call(bob, "set_contact_policy", policy="owner-decides") == {
                "account": "bob", "policy": "owner-decides"}
            assert irc(bob_irc, "CONTACT POLICY") == [["bob", "POLICY", "bob", "owner-decides"]]
            assert await refused(bob, "set_contact_policy", policy="deny", account="carol") == (
                "NOT_ALLOWED", ["carol"])
            assert await refused(bob, "set_contact_policy", policy="deny", account="nobody") == (
                "NO_SUCH_ACCOUNT", ["nobody"])
            bad = await bob.call_tool("set_contact_policy", {"policy": "anyone"})
            assert bad.is_error  # not one of the four: refused by the tool's schema
            async with mcp(srv, token_for(srv, "alice")) as alice:
                asked = await call(alice, "request_contact", agent="bob", scopes=["message"], days=3, purpose="x")
                assert asked["request"]["decider"] == "owner"
                rid = asked["request"]["request_id"]
            assert await refused(bob, "respond_to_contact", request_id=rid, decision="accept") == (
                "NOT_ALLOWED", [rid])
        async with mcp(srv, token_for(srv, "olive")) as olive:  # the owner, for its agent
            assert await call(olive, "set_contact_policy", policy="auto-accept", account="bob") == {
                "account": "bob", "policy": "auto-accept"}
            profile = await call(olive, "get_profile", account="bob")
            assert (profile["account"], profile["policy"], profile["a2a_endpoint"]) == ("bob", "auto-accept", None)
        assert irc(bob_irc, "CONTACT POLICY") == [["bob", "POLICY", "bob", "auto-accept"]]
        rows = run(srv, srv.server.store.read(lambda conn: conn.execute(
            "SELECT actor, subject, detail FROM pircan_audit WHERE action = 'policy.set' ORDER BY id").fetchall()))
        assert rows == [("bob", "bob", "owner-decides through MCP"), ("olive", "bob", "auto-accept by owner, through MCP")]

    asyncio.run(scenario())


def login(server: LiveServer, clients: list, account: str) -> IRCClient:
    c = IRCClient(server.port)
    clients.append(c)
    c.login(account, PASSWORD)
    return c


def irc(c: IRCClient, line: str) -> list[list[str]]:
    """Send a line; the params of the replies with its verb, or FAIL (NOTIFY notices left out),
    up to the PONG of a PING sent after it."""
    c.send(line)
    verb = line.split(" ", 1)[0]
    return [m.params for m in c.sync() if m.command in (verb, "FAIL")]


def test_an_mcp_agent_and_an_irc_agent_talk_with_full_length_bodies(srv, clients):
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with mcp(srv, token) as alice:
            names = [t.name for t in (await alice.list_tools()).tools]
            assert names == ["send_direct_message", "get_inbox", "mark_messages_read", "wait_for_messages",
                             "get_conversation", "get_message", "take_message", "request_contact", "respond_to_contact", "revoke_agreement",
                             "list_requests", "list_agreements", "list_contacts", "list_agents", "list_channels",
                             "get_channel_history", "send_channel_message", "create_task", "update_task",
                             "provide_task_input", "cancel_task", "get_task", "list_tasks", "task_snapshot", "set_profile",
                             "publish_resource", "delete_resource", "request_intro_token",
                             "set_webhook", "get_webhook",
                             "clear_webhook", "rotate_webhook_secret", "test_webhook", "list_dead_letters",
                             "replay_dead_letters", "search_messages", "set_contact_policy", "get_profile",
                             "join_channel", "leave_channel", "invite_to_channel", "uninvite_from_channel",
                             "set_channel_topic",
                             "list_hosted_agents", "control_hosted_agent", "read_hosted_agent_logs",
                             "write_hosted_agent_stdin", "signal_hosted_agent", "broadcast_message",
                             "get_audit_trail", "create_agent"]
            # contact: alice asks over MCP, bob accepts over IRC
            asked = await call(alice, "request_contact", agent="bob", scopes=["message"], days=30,
                               purpose="Coordinate the report")
            assert asked["outcome"] == "pending"
            rid = asked["request"]["request_id"]
            accepted = irc(bob, f"CONTACT ACCEPT {rid}")
            assert accepted[0][:3] == ["bob", "ACCEPTED", rid]
            aid = accepted[0][3]
            listed = await call(alice, "list_agreements")
            assert [(a["agreement_id"], a["target"], a["scopes"], a["state"]) for a in listed["agreements"]] == [
                (aid, "bob", ["message"], "active")
            ]
            assert (await call(alice, "list_contacts"))["contacts"][0]["account"] == "bob"

            # a 60,000-byte message over MCP: stored once, read in full over IRC
            sent = await call(alice, "send_direct_message", recipient="bob", body=BODY_60000)
            mid = sent["message"]["message_id"]
            assert (sent["delivery"], sent["created"], sent["message"]["bytes"]) == ("delivered", True, 60_000)
            assert "body" not in sent["message"]  # the receipt: the stored message's size, not its 60,000 bytes again
            lines = irc(bob, "INBOX")
            assert lines[0][:3] == ["bob", "MESSAGE", mid]
            assert lines[0][-2] == "60000" and lines[0][-1] == "é" * 199 + "…"  # a preview, the full size
            read = irc(bob, f"INBOX READ {mid}")
            pieces = [p for p in read if p[1] in ("BODY", "BODY+")]
            assert "".join(p[3] for p in pieces) == BODY_60000
            assert read[-1] == ["bob", "END", mid]

            # a 200-character reply over IRC, read whole over MCP
            reply_text = "r" * 200
            got = irc(bob, f"SEND alice {mid} :{reply_text}")
            assert got[0][:2] == ["bob", "OK"] and got[0][4] == "delivered"  # alice is present over MCP
            rmid = got[0][2]
            taken = await call(alice, "wait_for_messages", sender=["bob"], timeout_ms=30000)
            assert taken["message"]["message_id"] == rmid and taken["message"]["body"] == reply_text
            assert taken["message"]["in_reply_to"] == mid and taken["message"]["hop_count"] == 1

            # both read the whole thread
            thread = await call(alice, "get_conversation", conversation_id=mid)
            assert [(m["sender"], m["bytes"]) for m in thread["messages"]] == [("alice", 60_000), ("bob", 200)]
            history = irc(bob, f"INBOX HISTORY {mid}")
            assert [(p[2], p[3]) for p in history if p[1] == "MESSAGE"] == [(mid, "alice"), (rmid, "bob")]

    asyncio.run(scenario())


NUL = "a\x00b"
# (tool, its arguments, the argument the refusal names): free text, names, URLs, texts inside objects
NUL_CALLS = [
    ("set_profile", {"display_name": NUL}, "display_name"),
    ("set_profile", {"add_skills": {"summarise": NUL}}, "summarise"),
    ("set_profile", {"a2a_endpoint": "https://a2a.example.org/" + NUL}, "a2a_endpoint"),
    ("publish_resource", {"name": "notes", "body": NUL}, "body"),
    ("set_channel_topic", {"channel": "#nul", "topic": NUL}, "topic"),
    ("send_channel_message", {"channel": "#nul", "text": NUL}, "text"),
    ("set_webhook", {"url": "https://hooks.example.org/" + NUL}, "url"),
    ("request_contact", {"agent": "bob", "scopes": ["message"], "days": 1, "purpose": NUL}, "purpose"),
    ("send_direct_message", {"recipient": "b\x00ob", "body": "hi"}, "recipient"),
    ("broadcast_message", {"body": NUL}, "body"),
    ("create_task", {"agent": "bob", "skill": "summarise", "input": NUL}, "input"),
]


def test_a_nul_in_any_text_is_refused_before_anything_is_stored(srv):
    """JSON carries a NUL where an IRC line cannot, and PostgreSQL stores no text with one (SQLite
    would, and IRC would drop it): every text a tool is given is refused with INVALID_PARAMS naming
    its argument, on both databases, before anything is stored or sent."""

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            assert (await call(alice, "join_channel", channel="#nul"))["topic"] == ""
            for tool, args, argument in NUL_CALLS:
                error = await error_of(alice, tool, **args)
                assert (tool, error["code"], error["context"], error["message"]) == (
                    tool, "INVALID_PARAMS", [argument], "A text cannot contain NUL characters")
            assert await call(alice, "get_profile") == {"account": "alice", "display_name": "", "skills": [],
                                                        "a2a_endpoint": None, "policy": "agent-decides"}
            assert [c["topic"] for c in (await call(alice, "list_channels"))["channels"]] == [""]
            assert (await call(alice, "get_channel_history", channel="#nul"))["messages"] == []

    asyncio.run(scenario())

    def stored(conn: Any) -> list[int]:
        tables = ("pircan_profiles", "pircan_skills", "pircan_resources", "pircan_webhook_endpoints",
                  "pircan_requests", "pircan_messages", "pircan_tasks")
        return [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables]

    assert run(srv, srv.server.store.db.read(stored)) == [0] * 7


def test_every_rule_refuses_with_the_irc_code(srv, clients):
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with mcp(srv, token) as alice:
            assert await refused(alice, "send_direct_message", recipient="bob", body="hi") == ("NO_AGREEMENT", ["bob"])
            assert await refused(alice, "send_direct_message", recipient="nobody", body="hi") == (
                "NO_SUCH_ACCOUNT", ["nobody"])
            assert await refused(alice, "send_direct_message", recipient="bob", body="  ") == ("EMPTY", ["bob"])
            assert await refused(alice, "send_direct_message", recipient="bob", body=BODY_60000 + "z") == (
                "TOO_LONG", ["bob"])
            # JSON carries a NUL (every text: test_a_nul_in_any_text_is_refused_before_anything_is_stored)
            assert await refused(alice, "send_direct_message", recipient="bob", body="a\x00b") == (
                "INVALID_PARAMS", ["body"])
            assert await refused(alice, "request_contact", agent="alice", scopes=["message"], days=1,
                                 purpose="me") == ("SELF_CONTACT", ["alice"])
            assert await refused(alice, "request_contact", agent="bob", scopes=["everything"], days=1,
                                 purpose="x") == ("INVALID_SCOPE", ["everything"])
            rid = (await call(alice, "request_contact", agent="bob", scopes=["message"], days=5,
                              purpose="x"))["request"]["request_id"]
            assert await refused(alice, "request_contact", agent="bob", scopes=["message"], days=5,
                                 purpose="again") == ("PENDING_EXISTS", ["bob"])
            assert await refused(alice, "respond_to_contact", request_id=rid, decision="accept") == (
                "NOT_ALLOWED", [rid])
            async with mcp(srv, token_for(srv, "bob")) as bob_mcp:  # the request as decided comes back
                empty = await bob_mcp.call_tool("respond_to_contact",
                                                 {"request_id": rid, "decision": "accept", "scopes": []})
                assert empty.is_error and empty.content[0].text == (
                    "INVALID_SCOPE: Grant at least one scope, or decline the request")
                decided = await call(bob_mcp, "respond_to_contact", request_id=rid, decision="accept")
            assert (decided["request"]["state"], decided["request"]["decided_by"]) == ("accepted", "bob")
            assert decided["request"]["agreement_id"] == decided["agreement"]["agreement_id"]
            assert decided["request"]["decided_at"] == decided["agreement"]["created_at"]
            # hop limit: a chain of nine replies
            parent = (await call(alice, "send_direct_message", recipient="bob", body="0"))["message"]["message_id"]
            for hop in range(1, 9):
                if hop % 2:
                    parent = irc(bob, f"SEND alice {parent} :{hop}")[0][2]
                else:
                    parent = (await call(alice, "send_direct_message", recipient="bob", body=str(hop),
                                         in_reply_to=parent))["message"]["message_id"]
            assert await refused(alice, "send_direct_message", recipient="bob", body="9", in_reply_to=parent) == (
                "HOP_LIMIT", [parent])
            assert await refused(alice, "get_conversation", conversation_id="1111111111111111") == (
                "NO_SUCH_MESSAGE", ["1111111111111111"])
            # bob's private channel: a stranger gets what a name nobody uses gets
            irc(bob, "JOIN #bob/secret")
            for name in ("#bob/secret", "#bob/nothing"):
                assert await refused(alice, "get_channel_history", channel=name) == ("NO_SUCH_CHANNEL", [name])
                assert await refused(alice, "send_channel_message", channel=name, text="hi") == (
                    "NO_SUCH_CHANNEL", [name])
            assert "#bob/secret" not in [c["name"] for c in (await call(alice, "list_channels"))["channels"]]

    asyncio.run(scenario())


def test_the_agreement_budget_counts_both_transports(srv, clients):
    """120 messages per sender per agreement per hour, from MCP and IRC together."""
    bob = login(srv, clients, "bob")
    alice_irc = login(srv, clients, "alice")
    token = token_for(srv, "alice")
    rid = irc(alice_irc, "CONTACT REQUEST bob message 1 :budget")[0][2]
    irc(bob, f"CONTACT ACCEPT {rid}")

    async def scenario() -> None:
        started = time.time()  # the hour of the budget runs from the first of the 120
        async with mcp(srv, token) as alice:
            for i in range(60):  # new conversations: only the agreement budget counts
                await call(alice, "send_direct_message", recipient="bob", body=f"m{i}")
        for i in range(60):
            assert irc(alice_irc, f"SEND bob :i{i}")[0][1] == "OK"
        assert irc(alice_irc, "SEND bob :one too many")[0][:3] == ["SEND", "AGREEMENT_BUDGET", irc_agreement()]
        async with mcp(srv, token) as alice:
            code, _ = await refused(alice, "send_direct_message", recipient="bob", body="and over MCP")
            assert code == "AGREEMENT_BUDGET"
            error = await error_of(alice, "send_direct_message", recipient="bob", body="and over MCP")
            assert error["next_step"] == "Wait for the retry time"
            assert error["retry_after_s"] in whole_seconds_left(3600, started)  # the first of the 120 leaves then

    def irc_agreement() -> str:
        return irc(bob, "CONTACT LIST agreements")[0][2]

    asyncio.run(scenario())


def test_a_revoked_token_is_refused_mid_session_and_its_wait_ends(srv, clients):
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice", "laptop")

    async def scenario() -> None:
        async with mcp(srv, token) as alice:
            assert (await call(alice, "list_agents"))["agents"][0]["name"] == "bob"
            # a wait in flight, cancelled by the revocation
            wait = asyncio.ensure_future(alice.call_tool("wait_for_messages", {"timeout_ms": 60_000}))
            await until_waiting(srv, "alice")
            # the owner revokes alice's token over IRC
            olive = login(srv, clients, "olive")
            assert irc(olive, "TOKEN REVOKE alice laptop") == [["olive", "REVOKED", "alice", "1"]]
            with pytest.raises(MCPError):
                await asyncio.wait_for(wait, 10)
            with pytest.raises(MCPError):
                await alice.call_tool("list_agents", {})
        async with httpx2.AsyncClient() as http:
            r = await http.post(srv.http_url + "/mcp", headers={"Authorization": f"Bearer {token}"}, json={})
            assert r.status_code == 401 and r.json()["error"] == "invalid_token"
        assert bob is not None

    asyncio.run(scenario())


def test_list_agents_tells_running_idle_parked_and_offline(srv, clients):
    """The owner's roster over MCP: bob on IRC is running, then idle when away; alice waiting in
    wait_for_messages is idle, running again once the wait answered; carol, not connected, is offline
    until her A2A endpoint makes her parked (a message reaches her there)."""
    bob = login(srv, clients, "bob")

    async def statuses(client: Any) -> dict[str, str]:
        return {a["name"]: a["status"] for a in (await call(client, "list_agents"))["agents"] if a["kind"] == "agent"}

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "olive")) as olive, mcp(srv, token_for(srv, "alice")) as alice:
            await call(alice, "get_inbox")  # alice is on the network through MCP
            assert await statuses(olive) == {"alice": "running", "bob": "running", "carol": "offline"}
            waiting = asyncio.ensure_future(call(alice, "wait_for_messages", timeout_ms=30_000))
            await until_waiting(srv, "alice")
            assert await statuses(olive) == {"alice": "idle", "bob": "running", "carol": "offline"}
            await call(olive, "set_profile", account="carol", a2a_endpoint="https://carol.example/a2a")
            await asyncio.to_thread(irc, bob, "AWAY :lunch")
            assert await statuses(olive) == {"alice": "idle", "bob": "idle", "carol": "parked"}
            await call(olive, "send_direct_message", recipient="alice", body="wake up")
            assert (await waiting)["message"]["body"] == "wake up"
            assert await statuses(olive) == {"alice": "running", "bob": "idle", "carol": "parked"}

    asyncio.run(scenario())


def test_tokens_are_checked_and_failures_throttled_per_address_not_for_valid_tokens(srv):
    """Tokens naming nothing count against the address (accounts.login_ip_attempts, 20); past it
    they get 429 with the code and the seconds to wait, as MCP's JSON-RPC error, while a valid
    token from the same address still gets its answer."""
    async def scenario() -> None:
        async with httpx2.AsyncClient() as http:
            url = srv.http_url + "/mcp"
            r = await http.post(url, json={})
            assert r.status_code == 401
            assert r.headers["www-authenticate"] == 'Bearer realm="pircd", error="invalid_token"'
            started = time.time()  # the window of accounts.login_window (60 s) opens with the first failure
            for _ in range(20):  # a request without a token is not a failure
                assert (await http.post(url, json={}, headers={"Authorization": "Bearer pircd_0_x"})).status_code == 401
            r = await http.post(url, json={}, headers={"Authorization": "Bearer pircd_0_x"})
            retry = r.json()["error"]["data"]["retry_after_s"]
            assert retry in whole_seconds_left(60, started)
            assert (r.status_code, r.headers["retry-after"]) == (429, str(retry))
            assert r.json() == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000,
                "message": f"RATE_LIMITED: Too many failed token checks from your address. Retry in {retry} s",
                "data": {"code": "RATE_LIMITED", "context": [],
                         "message": "Too many failed token checks from your address", "retry_after_s": retry}}}
        async with mcp(srv, token_for(srv, "alice")) as alice:
            assert (await call(alice, "get_profile"))["account"] == "alice"

    asyncio.run(scenario())


def test_a_foreign_host_header_is_refused(srv):
    """DNS rebinding: a page on evil.example resolving to 127.0.0.1 sends Host: evil.example."""
    async def scenario() -> None:
        async with httpx2.AsyncClient() as http:
            token = token_for(srv, "alice")
            r = await http.post(srv.http_url + "/mcp", json={},
                                headers={"Authorization": f"Bearer {token}", "Host": "evil.example:6680"})
            assert r.status_code == 403
            r = await http.post(srv.http_url + "/mcp", json={},
                                headers={"Authorization": f"Bearer {token}", "Origin": "http://evil.example"})
            assert r.status_code == 403

    asyncio.run(scenario())


def test_channels_over_mcp_for_members(srv, clients):
    bob = login(srv, clients, "bob")
    irc(bob, "JOIN #lobby")
    irc(bob, "PRIVMSG #lobby :hello from irc")
    irc(bob, "JOIN #bob/room")
    token = token_for(srv, "bob")

    async def scenario() -> None:
        async with mcp(srv, token) as b:
            channels = (await call(b, "list_channels"))["channels"]
            assert [(c["name"], c["member"]) for c in channels] == [("#bob/room", True), ("#lobby", True)]
            history = await call(b, "get_channel_history", channel="#lobby")
            assert [(m["from"], m["text"]) for m in history["messages"]] == [("bob", "hello from irc")]
            posted = await call(b, "send_channel_message", channel="#lobby", text="hello from mcp")
            assert posted["channel"] == "#lobby" and len(posted["msgid"]) == 16
            assert await refused(b, "send_channel_message", channel="#lobby", text="two\nlines") == (
                "TOO_LONG", ["#lobby"])
        got = [m for m in bob.sync() if m.command == "PRIVMSG"]  # posted over MCP: bob's connection hears it
        assert [(m.source.split("!")[0], m.params) for m in got] == [("bob", ["#lobby", "hello from mcp"])]

    asyncio.run(scenario())


def test_a_channel_post_over_mcp_obeys_the_channels_modes_bans_and_mutes(srv, clients):
    """The rules of a PRIVMSG: +m without voice, a ban or a mute (m:), and +C for a CTCP keep an
    account from speaking over MCP too (CANNOT_SEND, with the reason 404 gives)."""
    bob = login(srv, clients, "bob")
    carol = login(srv, clients, "carol")
    irc(bob, "JOIN #lobby")
    irc(carol, "JOIN #lobby")
    token = token_for(srv, "carol")

    async def post(text: str = "hi") -> tuple[str, list[str]] | dict:
        async with mcp(srv, token) as c:
            result = await c.call_tool("send_channel_message", {"channel": "#lobby", "text": text})
            if result.is_error:
                error = (result.structured_content or {})["error"]
                return error["code"], error["context"], result.content[0].text
            return result.structured_content or {}

    irc(bob, "MODE #lobby +m")
    assert asyncio.run(post()) == ("CANNOT_SEND", ["#lobby"], "CANNOT_SEND: Cannot send to channel (+m) (#lobby)")
    irc(bob, "MODE #lobby +v carol")
    assert asyncio.run(post())["channel"] == "#lobby"
    irc(bob, "MODE #lobby -mv+b carol m:carol!*@*")
    assert asyncio.run(post()) == ("CANNOT_SEND", ["#lobby"], "CANNOT_SEND: Cannot send to channel (+b) (#lobby)")
    irc(bob, "MODE #lobby -b+C m:carol!*@*")
    assert asyncio.run(post("\x01VERSION\x01")) == (
        "CANNOT_SEND", ["#lobby"], "CANNOT_SEND: Cannot send to channel (+C) (#lobby)")
    assert asyncio.run(post("\x01ACTION waves\x01"))["channel"] == "#lobby"


def test_the_gate_cancels_requests_in_flight_when_their_token_is_revoked():
    """The cancellation itself, without HTTP: a request that never ends on its own ends on revocation."""
    from ext.pircan.config import PircanConfig
    from ext.pircan.mcp.http import BearerGate
    from ext.pircan.mcp.limits import CallLimits
    from ircd.tokens import TokenIdentity

    class Api:
        def __init__(self) -> None:
            self.hooks: list = []

        def on_token_revoked(self, fn) -> None:
            self.hooks.append(fn)

        def http_exempt(self, ip: str) -> bool:
            return True

        def now(self) -> float:
            return 0.0

        async def verify_token(self, token: str, ip: str) -> TokenIdentity:
            return TokenIdentity(7, "alice", "agent", "laptop")

        def hold_token(self, token_id: int) -> None:
            pass

        def release_token(self, token_id: int) -> None:
            pass

    class Presence:
        def enter(self, account: str) -> None:
            pass

        def leave(self, account: str) -> None:
            pass

    class State:
        api = Api()
        cfg = PircanConfig()

    State.http_calls = CallLimits(State())  # type: ignore[arg-type]

    async def scenario() -> None:
        started = asyncio.Event()

        async def forever(scope, receive, send) -> None:
            started.set()
            await asyncio.Event().wait()

        gate = BearerGate(forever, State(), Presence())  # type: ignore[arg-type]
        scope = {"type": "http", "headers": [(b"authorization", b"Bearer pircd_x")], "client": ("127.0.0.1", 1)}
        request = asyncio.ensure_future(gate(scope, None, None))
        await started.wait()
        assert gate.inflight.keys() == {7}
        for hook in State.api.hooks:
            hook({7})
        await asyncio.wait_for(request, 5)  # returned: cancelled by the revocation
        assert gate.inflight == {}

    asyncio.run(scenario())


def test_presence_keeps_one_timer_per_account_and_moves_its_deadline(monkeypatch):
    """An account stays present for mcp_presence_seconds after its last request: a request that ends
    moves the deadline of the one timer the account has; a timer that fires early waits for the rest."""
    from ext.pircan.config import PircanConfig
    from ext.pircan.mcp import http as gate_module

    clock = [100.0]
    monkeypatch.setattr(gate_module.time, "monotonic", lambda: clock[0])
    timers: list[tuple[float, Any]] = []
    seen: list[str] = []

    class Api:
        def call_later(self, delay: float, fn) -> None:
            timers.append((delay, fn))

    class State:
        api = Api()
        cfg = PircanConfig(mcp_presence_seconds=30)

        def arrived_elsewhere(self, account: str) -> None:
            seen.append("arrived " + account)

        def left_elsewhere(self, account: str) -> None:
            seen.append("left " + account)

    presence = gate_module.Presence(State())  # type: ignore[arg-type]
    presence.enter("alice")
    presence.leave("alice")
    clock[0] = 110.0
    presence.enter("alice")  # within the 30 s: still present, not arrived again
    presence.leave("alice")  # present until 140
    assert (seen, [delay for delay, _ in timers]) == (["arrived alice"], [30])
    clock[0] = 130.0
    timers.pop(0)[1]()  # the first timer, 10 s early: waits for the rest
    assert (seen, [delay for delay, _ in timers]) == (["arrived alice"], [10])
    clock[0] = 140.0
    timers.pop(0)[1]()
    assert (seen, timers, presence.lingering) == (["arrived alice", "left alice"], [], {})
    presence.enter("alice")
    assert seen[-1] == "arrived alice"
