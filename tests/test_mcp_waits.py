"""wait_for_messages over MCP, with the official SDK's client on real HTTP: every event kind ends a
wait, two sessions of one account are both told (a message taken by one), the modes, and the
refusal of a wait for an account that does not exist.

The server runs in-process (tests/live.py); the IRC side synchronises with PING/PONG; that a wait is
in place is watched on the server's own loop (until_waiting), never polled or slept on.
"""

from __future__ import annotations

import asyncio

from tests.test_mcp import call, irc, login, mcp, refused, srv, token_for, until_waiting  # noqa: F401 - srv is a fixture


def agreed(server, clients) -> tuple:
    """alice (IRC) and bob (IRC) with a message agreement bob accepted; the IRC clients."""
    alice, bob = login(server, clients, "alice"), login(server, clients, "bob")
    rid = irc(alice, "CONTACT REQUEST bob message 3 :talk")[0][2]
    aid = irc(bob, f"CONTACT ACCEPT {rid}")[0][3]
    return alice, bob, aid


def test_two_sessions_of_one_account_are_both_told_and_a_message_is_taken_once(srv, clients):  # noqa: F811
    _, bob, _ = agreed(srv, clients)
    token = token_for(srv, "alice")

    async def scenario() -> None:
        async with mcp(srv, token) as one, mcp(srv, token) as two:
            first = asyncio.ensure_future(call(one, "wait_for_messages", kinds=["message"], timeout_ms=30_000))
            second = asyncio.ensure_future(call(two, "wait_for_messages", kinds=["message"], timeout_ms=30_000))
            await until_waiting(srv, "alice", 2)
            mid = (await asyncio.to_thread(irc, bob, "SEND alice * :only once"))[0][2]
            answers = [await first, await second]
            taken = [a for a in answers if "message" in a]
            told = [a["event"] for a in answers if "event" in a]
            assert [m["message"]["message_id"] for m in taken] == [mid]
            assert taken[0]["message"]["body"] == "only once"
            assert [(e["kind"], e["id"], e["taken"], e["message"]["message_id"], "body" in e["message"])
                    for e in told] == [("message", mid, True, mid, False)]
            assert (await call(one, "get_inbox"))["unread"] == 0

            # an event is told to both sessions and consumed by neither
            first = asyncio.ensure_future(call(one, "wait_for_messages", kinds=["request"], timeout_ms=30_000))
            second = asyncio.ensure_future(call(two, "wait_for_messages", kinds=["request"], timeout_ms=30_000))
            await until_waiting(srv, "alice", 2)
            await asyncio.to_thread(irc, bob, "CONTACT REQUEST alice task:sum 3 :summaries")
            both = [(await first)["event"], (await second)["event"]]
            assert [(e["kind"], e["taken"], e["request"]["requester"], e["request"]["purpose"]) for e in both] == [
                ("request", False, "bob", "summaries")] * 2

    asyncio.run(scenario())


def test_a_revoke_ends_a_wait_with_the_agreement(srv, clients):  # noqa: F811
    alice, _, aid = agreed(srv, clients)

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "bob")) as bob:
            wait = asyncio.ensure_future(call(bob, "wait_for_messages", kinds=["agreement"], timeout_ms=30_000))
            await until_waiting(srv, "bob")
            await asyncio.to_thread(irc, alice, f"CONTACT REVOKE {aid}")
            event = (await wait)["event"]
            assert (event["kind"], event["id"], event["agreement"]["state"], event["agreement"]["revoked_by"]) == (
                "agreement", aid, "revoked", "alice")

    asyncio.run(scenario())


def test_mode_new_waits_past_an_old_unread_message(srv, clients):  # noqa: F811
    _, bob, _ = agreed(srv, clients)
    old = irc(bob, "SEND alice * :old")[0][2]

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            wait = asyncio.ensure_future(call(alice, "wait_for_messages", mode="new", timeout_ms=30_000))
            await until_waiting(srv, "alice")
            new = (await asyncio.to_thread(irc, bob, "SEND alice * :new"))[0][2]
            assert (await wait)["message"]["message_id"] == new
            unread = (await call(alice, "get_inbox"))["messages"]
            assert [m["message_id"] for m in unread] == [old]
            # the oldest mode answers it at once
            assert (await call(alice, "wait_for_messages", kinds=["message"], timeout_ms=30_000))[
                "message"]["message_id"] == old

    asyncio.run(scenario())


def test_a_wait_for_an_account_that_does_not_exist_is_refused(srv):  # noqa: F811
    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            assert await refused(alice, "wait_for_messages", sender=["bob", "nobody"], timeout_ms=60_000) == (
                "NO_SUCH_ACCOUNT", ["nobody"])
            bad = await alice.call_tool("wait_for_messages", {"kinds": ["gossip"]})
            assert bad.is_error  # not a kind: refused by the tool's schema

    asyncio.run(scenario())


def test_task_filters_and_the_snapshot_over_mcp(srv, clients):  # noqa: F811
    """alice (MCP) gave bob (IRC) two tasks: a wait for one answers its change only; an id that is not
    hers is refused; with every watched task finished there is nothing to wait for; task_snapshot
    shows both sections."""
    bob = login(srv, clients, "bob")

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            rid = (await call(alice, "request_contact", agent="bob", scopes=["message", "task:sum"], days=3,
                              purpose="sums"))["request"]["request_id"]
            await asyncio.to_thread(irc, bob, f"CONTACT ACCEPT {rid}")
            first = (await call(alice, "create_task", agent="bob", skill="sum", input="one"))["task"]["task_id"]
            second = (await call(alice, "create_task", agent="bob", skill="sum", input="two"))["task"]["task_id"]
            wait = asyncio.ensure_future(call(alice, "wait_for_messages", tasks=[second], timeout_ms=30_000))
            await until_waiting(srv, "alice")
            await asyncio.to_thread(irc, bob, "SEND alice * :not a task")
            await asyncio.to_thread(irc, bob, f"TASK UPDATE {first} completed :1")
            await asyncio.to_thread(irc, bob, f"TASK UPDATE {second} working")
            got = (await wait)["task"]
            assert (got["task_id"], got["state"]) == (second, "working")

            assert await refused(alice, "wait_for_messages", tasks=["0123456789abcdef"]) == (
                "NO_SUCH_TASK", ["0123456789abcdef"])
            snap = await call(alice, "task_snapshot")
            assert ([t["task_id"] for t in snap["completed"]], [t["task_id"] for t in snap["running"]]) == (
                [first], [second])
            await asyncio.to_thread(irc, bob, f"TASK UPDATE {second} completed :2")
            for task_id in (first, second):
                await call(alice, "get_task", task_id=task_id)  # seen: no change is news any more
            assert await call(alice, "wait_for_messages", tasks=[first, second], timeout_ms=30_000) == {
                "nothing": f"Nothing to wait for: task {first} is completed, task {second} is completed"}
            snap = await call(alice, "task_snapshot", task_ids=[first, second])
            assert (sorted(t["task_id"] for t in snap["completed"]), snap["running"]) == (sorted([first, second]), [])

    asyncio.run(scenario())


def test_send_and_await_returns_the_receipt_and_the_reply_or_a_clean_no_reply(srv, clients):  # noqa: F811
    alice_irc, bob, _ = agreed(srv, clients)
    alice_irc.send("QUIT :MCP from here on")

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            bob.send("INBOX WAIT alice 30000")  # bob waits: alice's message wakes him, and he answers
            await until_waiting(srv, "bob")
            asking = asyncio.ensure_future(call(alice, "send_direct_message", recipient="bob", body="Deploy?",
                                                await_reply=True, timeout_ms=30_000))
            got = await asyncio.to_thread(bob.read_until, lambda m: m.command == "INBOX" and m.params[1] == "END")
            mid = got[-1].params[2]
            await until_waiting(srv, "alice")
            reply_id = (await asyncio.to_thread(irc, bob, f"SEND alice {mid} :Deploying"))[0][2]
            done = await asking
            assert (done["message"]["message_id"], done["delivery"], done["created"]) == (mid, "woken", True)
            assert (done["reply"]["message_id"], done["reply"]["body"], done["reply"]["in_reply_to"]) == (
                reply_id, "Deploying", mid)
            assert (await call(alice, "get_inbox"))["unread"] == 0  # the reply was taken
            # bob is there but silent: no reply in time is a normal result, not an error
            quiet = await call(alice, "send_direct_message", recipient="bob", body="And now?", await_reply=True,
                               timeout_ms=200)
            assert (quiet["delivery"], quiet["reply"], quiet["no_reply"]) == (
                "delivered", None, {"reason": "timeout", "text": "No reply within 200 ms", "waited_ms": 200})

    asyncio.run(scenario())


def test_a_wait_watching_a_channel_gets_the_post_as_history_shows_it(srv):  # noqa: F811
    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice, mcp(srv, token_for(srv, "bob")) as bob:
            await call(alice, "join_channel", channel="#weekly")
            await call(bob, "join_channel", channel="#weekly")
            wait = asyncio.ensure_future(call(bob, "wait_for_messages", channels=["#weekly"], mode="new",
                                              timeout_ms=30_000))
            await until_waiting(srv, "bob")
            posted = await call(alice, "send_channel_message", channel="#weekly", text="report is out")
            event = (await wait)["event"]
            history = (await call(bob, "get_channel_history", channel="#weekly"))["messages"]
            assert (event["kind"], event["id"], event["taken"]) == ("channel", posted["msgid"], False)
            assert event["channel_message"] == {"channel": "#weekly", **history[-1]}
            assert await refused(alice, "wait_for_messages", channels=["#elsewhere"]) == (
                "NO_SUCH_CHANNEL", ["#elsewhere"])

    asyncio.run(scenario())


def modern_call(name: str, arguments: dict) -> tuple[dict[str, str], dict]:
    """Headers and body of a tools/call in the sessionless protocol (2026) the SDK's client speaks."""
    version = "2026-07-28"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": version, "Mcp-Method": "tools/call", "Mcp-Name": name}
    return headers, body


def test_a_sessionless_call_that_waits_keeps_its_event_stream_and_a_plain_one_is_json(srv, clients,  # noqa: F811
                                                                                      monkeypatch):
    """A wait past the SDK's keep-alive interval (15 s, here 0.2 s) is answered as an event stream
    with keep-alive pings, so that no proxy closes it as idle; a call that cannot wait is answered
    with plain JSON."""
    import httpx
    from mcp.server import _streamable_http_modern

    monkeypatch.setattr(_streamable_http_modern, "_SSE_PING_INTERVAL", 0.2)
    agreed(srv, clients)
    token = token_for(srv, "alice")
    url = srv.http_url + "/mcp"

    async def post(name: str, arguments: dict) -> tuple[str, str]:
        headers, body = modern_call(name, arguments)
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            r = await http.post(url, json=body, headers=headers)
        assert r.status_code == 200, r.text
        return r.headers["content-type"], r.text

    async def scenario() -> None:
        kind, text = await post("wait_for_messages", {"kinds": ["message"], "timeout_ms": 700})
        assert kind == "text/event-stream" and text.startswith(": ping\r\n\r\n") and '"timeout":true' in text
        kind, text = await post("send_direct_message", {"recipient": "bob", "body": "hi", "await_reply": True,
                                                        "timeout_ms": 700})
        assert kind == "text/event-stream" and ": ping" in text and '"reason":"timeout"' in text
        kind, text = await post("send_direct_message", {"recipient": "bob", "body": "plain"})
        assert kind == "application/json" and '"created":true' in text.replace(" ", "")

    asyncio.run(scenario())
