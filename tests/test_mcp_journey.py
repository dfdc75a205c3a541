"""Every goal of an IRC agent, reached by agents that hold nothing but an MCP client.

After the operator's set-up (the accounts and a bearer token each), two agents use only the
official MCP SDK's client over real HTTP: they find each other, make an agreement, exchange
full-length bodies, wait for what comes (the contact request, the decision, each message and task
change), run a task, read a published resource, talk in a public and in a private channel, and end
the agreement. No IRC client takes part; nothing sleeps (each
step awaits its call's answer, and the waits are long-polls that end when their event commits).
"""

from __future__ import annotations

import asyncio

from tests.test_mcp import BODY_60000, call, error_of, mcp, srv, token_for  # noqa: F401 - srv is a fixture


def test_two_mcp_only_agents_reach_every_goal(srv):
    alice_token, bob_token = token_for(srv, "alice"), token_for(srv, "bob")

    async def scenario() -> None:
        async with mcp(srv, alice_token) as alice, mcp(srv, bob_token) as bob:
            # bob publishes who he is and what he offers
            await call(bob, "set_profile", display_name="Bob the summariser",
                       add_skills={"summarise": "Summaries of long texts"})
            await call(bob, "publish_resource", name="notes", body='{"week": 49}', content_type="json")
            await call(bob, "set_contact_policy", policy="agent-decides")

            # find peers
            roster = {a["name"]: a for a in (await call(alice, "list_agents"))["agents"]}
            assert roster["bob"]["display_name"] == "Bob the summariser"
            assert roster["bob"]["skills"] == [{"name": "summarise", "description": "Summaries of long texts"}]
            assert roster["bob"]["relation"] == "none"

            # make an agreement
            asked = await call(alice, "request_contact", agent="bob",
                               scopes=["message", "task:summarise", "resource:read"], days=7,
                               purpose="Summaries for the weekly report")
            assert (asked["outcome"], asked["request"]["decider"]) == ("pending", "agent")
            rid = asked["request"]["request_id"]
            # bob hears of the request by waiting for it, alice of the decision: no polling
            told = (await call(bob, "wait_for_messages", kinds=["request"], timeout_ms=30_000))["event"]
            assert (told["kind"], told["id"], told["request"]["requester"], told["request"]["purpose"]) == (
                "request", rid, "alice", "Summaries for the weekly report")
            accepted = await call(bob, "respond_to_contact", request_id=rid, decision="accept")
            aid = accepted["agreement"]["agreement_id"]
            decided = (await call(alice, "wait_for_messages", kinds=["decision"], timeout_ms=30_000))["event"]
            assert (decided["kind"], decided["request"]["state"], decided["request"]["agreement_id"]) == (
                "decision", "accepted", aid)

            # send and receive full bodies; bob waits for the message, alice for the reply
            waiting = asyncio.ensure_future(call(bob, "wait_for_messages", sender=["alice"], timeout_ms=30_000))
            sent = await call(alice, "send_direct_message", recipient="bob", body=BODY_60000)
            mid = sent["message"]["message_id"]
            assert sent["message"]["bytes"] == 60_000 and "body" not in sent["message"]
            got = (await waiting)["message"]
            assert (got["message_id"], got["body"]) == (mid, BODY_60000)
            reply = "ü" * 30_000  # 60,000 bytes back
            waiting = asyncio.ensure_future(call(alice, "wait_for_messages", sender=["bob"], timeout_ms=30_000))
            await call(bob, "send_direct_message", recipient="alice", body=reply, in_reply_to=mid)
            answer = (await waiting)["message"]
            assert (answer["body"], answer["in_reply_to"], answer["hop_count"]) == (reply, mid, 1)
            thread = await call(alice, "get_conversation", conversation_id=mid)
            assert [(m["sender"], m["bytes"]) for m in thread["messages"]] == [("alice", 60_000), ("bob", 60_000)]

            # run a task: bob is woken by it, works it, alice is woken by the result
            waiting = asyncio.ensure_future(call(bob, "wait_for_messages", timeout_ms=30_000))
            task = (await call(alice, "create_task", agent="bob", skill="summarise", input=BODY_60000))["task"]
            given = (await waiting)["task"]
            assert (given["task_id"], given["state"], given["entries"][0]["text"]) == (
                task["task_id"], "submitted", BODY_60000)
            waiting = asyncio.ensure_future(call(alice, "wait_for_messages", timeout_ms=30_000))
            await call(bob, "update_task", task_id=task["task_id"], state="completed", text="Short: é and xy")
            done = (await waiting)["task"]
            assert (done["state"], done["entries"][-1]["text"]) == ("completed", "Short: é and xy")

            # read a resource bob published
            listed = await alice.list_resources()
            assert [str(r.uri) for r in listed.resources] == ["pircan://bob/resources/notes"]
            read = await alice.read_resource("pircan://bob/resources/notes")
            assert read.contents[0].text == '{"week": 49}'

            # a public channel: alice makes it, bob joins, both read what the other posts
            assert (await call(alice, "join_channel", channel="#weekly"))["members"] == ["@alice"]
            assert (await call(bob, "join_channel", channel="#weekly"))["members"] == ["@alice", "bob"]
            await call(alice, "set_channel_topic", channel="#weekly", topic="Week 49")
            await call(bob, "send_channel_message", channel="#weekly", text="summary is in alice's inbox")
            history = await call(alice, "get_channel_history", channel="#weekly")
            assert [(m["command"], m["from"], m["text"]) for m in history["messages"]] == [
                ("TOPIC", "alice", "Week 49"), ("PRIVMSG", "bob", "summary is in alice's inbox")]

            # a private channel: invisible to alice until bob invites her
            made = await call(bob, "join_channel", channel="#bob/lab")
            assert "P" in made["modes"]
            assert (await error_of(alice, "join_channel", channel="#bob/lab"))["code"] == "NO_SUCH_CHANNEL"
            assert "#bob/lab" not in [c["name"] for c in (await call(alice, "list_channels"))["channels"]]
            await call(bob, "invite_to_channel", account="alice", channel="#bob/lab")
            assert (await call(alice, "join_channel", channel="#bob/lab"))["members"] == ["alice", "@bob"]
            await call(alice, "send_channel_message", channel="#bob/lab", text="thanks")
            lab = await call(bob, "get_channel_history", channel="#bob/lab")
            assert [(m["from"], m["text"]) for m in lab["messages"]] == [("alice", "thanks")]
            await call(alice, "leave_channel", channel="#bob/lab")

            # end the agreement: nothing more passes, and the refusal says how to get a new one
            assert (await call(alice, "revoke_agreement", agreement_id=aid))["other"] == "bob"
            refused = await error_of(bob, "send_direct_message", recipient="alice", body="one more")
            assert refused["code"] == "NO_AGREEMENT" and "request_contact" in refused["next_step"]
            assert (await call(bob, "list_agreements", status="all"))["agreements"][0]["state"] == "revoked"

    asyncio.run(scenario())
