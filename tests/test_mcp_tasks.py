"""Tasks and resources across transports, live: an IRC agent gives an MCP agent a task and waits once;
the MCP agent asks for input, gets it and completes the task; the IRC agent wakes with the result.
MCP resources are scoped to agreements; kill -9 mid-task loses no state and no queued event.
"""

from __future__ import annotations

import asyncio

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests import dbs
from tests.proc import ServerProcess, cli, write_config
from tests.test_durability import sasl_client
from tests.test_mcp import call, irc, login, mcp, refused, srv, token_for  # noqa: F401 - fixtures

BIG = "x" * 10_000


def task_lines(messages: list) -> list:
    """The TASK lines of what a WAIT answered (NOTIFY notices may come in between)."""
    return [m for m in messages if m.command == "TASK"]


def test_an_irc_agent_waits_once_for_an_mcp_agents_task(srv, clients):  # noqa: F811
    alice = login(srv, clients, "alice")  # IRC, the requester
    token = token_for(srv, "bob")  # MCP, the target

    async def scenario() -> None:
        async with mcp(srv, token) as bob:
            await call(bob, "set_profile", display_name="Bob", add_skills={"translate": "de <-> en"})
            agents = (await call(bob, "list_agents"))["agents"]
            assert agents[0]["name"] == "alice" and agents[0]["skills"] == []
            rid = irc(alice, "CONTACT REQUEST bob task:translate 3 :translations")[0][2]
            await call(bob, "respond_to_contact", request_id=rid, decision="accept")
            tid = irc(alice, "TASK CREATE bob translate :Hallo Welt")[0][2]
            # bob waits on MCP and wakes with the new task, whole
            woke = await call(bob, "wait_for_messages", timeout_ms=30000)
            assert woke["task"]["task_id"] == tid and woke["task"]["state"] == "submitted"
            assert woke["task"]["entries"][0]["text"] == "Hallo Welt"
            # alice waits once over IRC; bob asks a question
            alice.send("INBOX WAIT bob 60000 kinds=task-update")
            await call(bob, "update_task", task_id=tid, state="input-required", text="Formal or informal?")
            got = task_lines(alice.read_until(lambda m: m.command == "TASK" and m.params[1] == "END"))
            assert got[0].params[1:7] == ["TASK", tid, "alice", "bob", "translate", "input-required"]
            assert irc(alice, f"TASK INPUT {tid} :informal") == [["alice", "UPDATED", tid, "working"]]
            woke = await call(bob, "wait_for_messages", sender=["alice"], timeout_ms=30000)
            assert woke["task"]["state"] == "working" and woke["task"]["entries"][-1]["text"] == "informal"
            # a result longer than any IRC line; alice waits again and reads it whole
            alice.send("INBOX WAIT * 60000 kinds=task-update")
            done = await call(bob, "update_task", task_id=tid, state="completed", text=BIG)
            assert done["task"]["state"] == "completed"
            got = task_lines(alice.read_until(lambda m: m.command == "TASK" and m.params[1] == "END"))
            assert got[0].params[6] == "completed"
            assert "".join(m.params[3] for m in got if m.params[1] in ("BODY", "BODY+")).endswith(BIG)
            assert (await refused(bob, "update_task", task_id=tid, state="failed", text="late")) == (
                "INVALID_TRANSITION", [tid, "failed"])

    asyncio.run(scenario())


def test_mcp_resources_are_scoped_to_agreements(srv, clients):  # noqa: F811
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with mcp(srv, bob_token) as bob:
            await call(bob, "publish_resource", name="glossary", body='{"hallo": "hello"}', content_type="json")
        async with mcp(srv, alice_token) as alice:
            assert (await alice.list_resources()).resources == []
            for uri in ("pircan://bob/resources/glossary", "pircan://bob/resources/none",
                        "pircan://nobody/resources/glossary"):
                try:
                    await alice.read_resource(uri)
                    raise AssertionError("read " + uri)
                except MCPError as exc:
                    assert str(exc) == f"Resource not found: {uri}"
            rid = (await call(alice, "request_contact", agent="bob", scopes=["resource:read"], days=2,
                              purpose="glossary"))["request"]["request_id"]
        async with mcp(srv, bob_token) as bob:
            await call(bob, "respond_to_contact", request_id=rid, decision="accept")
        async with mcp(srv, alice_token) as alice:
            listed = (await alice.list_resources()).resources
            assert [(str(r.uri), r.mime_type) for r in listed] == [("pircan://bob/resources/glossary",
                                                                     "application/json")]
            read = await alice.read_resource("pircan://bob/resources/glossary")
            assert read.contents[0].text == '{"hallo": "hello"}'

    asyncio.run(scenario())


def test_tasks_and_their_events_survive_kill9(tmp_path):
    path = write_config(tmp_path, server={"extensions": ["pircan"]})
    for args in (["account", "add", "olive"], ["agent", "add", "alice", "--owner", "olive"],
                 ["agent", "add", "bob", "--owner", "olive"]):
        assert cli(*args, "--password-stdin", "--config", str(path), stdin="sesame123\n").returncode == 0
    bob_token = cli("token", "add", "bob", "--config", str(path)).stdout.splitlines()[1]
    server = ServerProcess(path)
    try:
        alice = sasl_client(server.port, "alice", "sesame123")
        alice.send("CONTACT REQUEST bob message,task:summarise 2 :summaries")
        rid = alice.read_until(lambda m: m.command == "CONTACT")[-1].params[2]

        async def as_bob(tool: str, **args: object) -> dict:
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {bob_token}"}, timeout=30) as http:
                async with Client(streamable_http_client(server.http_url + "/mcp", http_client=http)) as c:
                    result = await c.call_tool(tool, args)
                    assert not result.is_error, result.content
                    return result.structured_content or {}

        asyncio.run(as_bob("respond_to_contact", request_id=rid, decision="accept"))
        alice.send("TASK CREATE bob summarise :the minutes")
        tid = alice.read_until(lambda m: m.command == "TASK")[-1].params[2]
        asyncio.run(as_bob("update_task", task_id=tid, state="working", text="reading"))
        server.kill9()  # right after bob's change was acknowledged
        alice.close()
        conn = dbs.connect(tmp_path / "pircd.db")
        try:
            assert conn.execute("SELECT state FROM pircan_tasks").fetchall() == [("working",)]
            assert conn.execute("SELECT recipient, type FROM pircan_events WHERE type LIKE 'task%' "
                                "ORDER BY id").fetchall() == [("bob", "task"), ("alice", "task-update")]
        finally:
            conn.close()
        server = ServerProcess(path)
        alice = sasl_client(server.port, "alice", "sesame123")
        alice.send("INBOX WAIT bob 10000")  # the change it had not seen is still news after the restart
        got = alice.read_until(lambda m: m.command == "TASK" and m.params[1] == "END")
        first = next(m for m in got if m.command == "TASK")
        assert first.params[1:7] == ["TASK", tid, "alice", "bob", "summarise", "working"]
        alice.close()
    finally:
        server.terminate()
