"""Waits on every transport, end to end: a message counts as taken only once its answer reached a
client that is still there (MCP ``wait_for_messages``, the A2A gateway's blocking send).

Real clients over real HTTP on port 0: a raw streamable-HTTP MCP client that drops its connection
mid-wait, as a client-side timeout or a lost network does, and the A2A SDK's client cancelled
while its blocking send waits. Nothing sleeps: IRC synchronises with PING/PONG, and that the server
saw a caller go is watched on the server's own loop (until_gone).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

from tests.test_a2a import a2a, agree, db_rows, live, request
from tests.test_mcp import call, irc, login, mcp, token_for, until_gone


@pytest.fixture
def srv(tmp_path):
    """A server whose HTTP callers count as present for 1 s after their last request ends."""
    with live(tmp_path, mcp_presence_seconds=1) as server:
        yield server


MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def raw_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """An initialized MCP session over plain HTTP; the headers its later requests carry."""
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    r = await http.post(url, json=init, headers=MCP_HEADERS)
    assert r.status_code == 200, r.text
    headers = {**MCP_HEADERS, "mcp-session-id": r.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
    r = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert r.status_code == 202, r.text
    return headers


def offline(c: Any, account: str) -> bool:
    rows = [p for p in irc(c, "AGENTS ALL") if p[1] == "AGENT" and p[2] == account]
    return bool(rows) and rows[0][3] == "offline"


def test_an_mcp_wait_whose_client_disconnects_takes_nothing(srv, clients):
    agree(srv, clients, "alice", "bob", "message")
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")
    url = srv.http_url + "/mcp"

    async def drop_mid_wait() -> None:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            headers = await raw_session(http, url)
            wait = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "wait_for_messages", "arguments": {"timeout_ms": 60_000, "kinds": ["message"]}}}
            async with http.stream("POST", url, json=wait, headers=headers) as response:
                assert response.status_code == 200
            # leaving the block closes the connection: the client is gone, its session stays

    asyncio.run(drop_mid_wait())
    until_gone(srv, "alice")  # the server saw the request end
    assert offline(bob, "alice")
    sent = irc(bob, "SEND alice * :are you there?")
    assert sent[0][1] == "OK", sent
    mid = sent[0][2]

    async def inbox() -> dict[str, Any]:
        async with mcp(srv, token) as alice:
            return await call(alice, "get_inbox")

    got = asyncio.run(inbox())
    assert [m["message_id"] for m in got["messages"]] == [mid] and got["unread"] == 1
    assert db_rows(srv, "SELECT read_at FROM pircan_messages WHERE id = ?", int(mid, 16)) == [(None,)]


def test_an_mcp_wait_taken_after_the_client_left_is_put_back(srv, clients):
    """The message arrives while the dropped call still waits: the wait ends unanswered, the message
    is unread."""
    agree(srv, clients, "alice", "bob", "message")
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")
    url = srv.http_url + "/mcp"

    async def scenario() -> str:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            headers = await raw_session(http, url)
            wait = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "wait_for_messages", "arguments": {"timeout_ms": 60_000, "kinds": ["message"]}}}
            async with http.stream("POST", url, json=wait, headers=headers) as response:
                assert response.status_code == 200
                sent = await asyncio.to_thread(irc, bob, "SEND alice * :first")
                mid = sent[0][2]
                answer = b""
                async for chunk in response.aiter_bytes():
                    answer += chunk
                    if b'"result"' in answer:
                        break
                assert mid.encode() in answer  # a client still there is answered
            async with http.stream("POST", url, json={**wait, "id": 3}, headers=headers) as response:
                assert response.status_code == 200
            return mid

    first = asyncio.run(scenario())
    until_gone(srv, "alice")
    assert offline(bob, "alice")
    second = irc(bob, "SEND alice * :second")[0][2]
    rows = db_rows(srv, "SELECT id, read_at IS NULL FROM pircan_messages WHERE recipient = 'alice' ORDER BY id")
    assert rows == [(int(first, 16), 0), (int(second, 16), 1)]


def test_an_a2a_blocking_send_whose_client_left_leaves_the_reply_unread(srv, clients):
    agree(srv, clients, "alice", "bob", "message")
    bob = login(srv, clients, "bob")
    token = token_for(srv, "alice")
    gone = threading.Event()

    async def scenario() -> None:
        async with a2a(srv, token, "bob") as alice:
            sending = asyncio.create_task(alice.send_message(request("Deploy?")).__anext__())
            await asyncio.to_thread(bob.read_until, lambda m: m.command == "NOTICE" and "NOTIFY message" in m.params[-1])
            sending.cancel()  # a client-side timeout: the request's connection closes
            try:
                await sending
            except asyncio.CancelledError:
                pass
        gone.set()

    asyncio.run(scenario())
    assert gone.is_set()
    until_gone(srv, "alice")
    assert offline(bob, "alice")
    taken = irc(bob, "INBOX TAKE")
    mid = taken[0][2]
    reply = irc(bob, f"SEND alice {mid} :Deploying")
    assert reply[0][1] == "OK", reply
    rid = reply[0][2]
    # nothing in the gateway takes it for the departed client: it stays unread
    assert db_rows(srv, "SELECT read_at FROM pircan_messages WHERE id = ?", int(rid, 16)) == [(None,)]
