"""Reading messages the ways IRC's INBOX READ, TAKE, HISTORY and SEARCH do, over MCP (get_message,
take_message, get_conversation with an account, search_messages) and over A2A (pircan:inbox
actions read, take, history and search): the same service functions, the same messages, the same
refusals. Each transport's own SDK client, over real HTTP."""

from __future__ import annotations

import asyncio

from tests.test_a2a import a2a
from tests.test_a2a_parity import call as skill
from tests.test_mcp import call, irc, login, mcp, refused, srv, token_for  # noqa: F401 - fixtures


def _exchange(srv, clients) -> tuple[list[str], object]:  # noqa: F811
    """alice and bob under an agreement; alice sends two messages, bob answers the first. The ids
    of the three, in order, and bob's IRC connection."""
    alice, bob = login(srv, clients, "alice"), login(srv, clients, "bob")
    rid = irc(alice, "CONTACT REQUEST bob message 3 :talk")[0][2]
    irc(bob, f"CONTACT ACCEPT {rid}")
    first = irc(alice, "SEND bob :the plan is ready")[0][2]
    second = irc(alice, "SEND bob :and the budget")[0][2]
    answer = irc(bob, f"SEND alice {first} :thanks, reading the plan")[0][2]
    return [first, second, answer], bob


def test_mcp_reads_one_message_takes_the_oldest_and_lists_what_was_said_with_an_account(srv, clients):  # noqa: F811
    (first, second, answer), bob_irc = _exchange(srv, clients)

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "bob")) as bob:
            got = (await call(bob, "get_message", message_id=first))["message"]
            assert (got["message_id"], got["sender"], got["body"], got["read"]) == (
                first, "alice", "the plan is ready", False)  # reading changes nothing
            assert (await call(bob, "get_message", message_id=answer))["message"]["sender"] == "bob"  # sent
            assert await refused(bob, "get_message", message_id="0" * 16) == ("NO_SUCH_MESSAGE", ["0" * 16])
            taken = (await call(bob, "take_message"))["message"]
            assert (taken["message_id"], taken["read"]) == (first, True)
            assert (await call(bob, "get_inbox"))["unread"] == 1
            with_alice = await call(bob, "get_conversation", account="alice")
            assert [m["message_id"] for m in with_alice["messages"]] == [first, second, answer]
            assert (with_alice["account"], with_alice["more"]) == ("alice", False)
            paged = await call(bob, "get_conversation", account="alice", limit=2)
            assert ([m["message_id"] for m in paged["messages"]], paged["more"]) == ([second, answer], True)
            assert await refused(bob, "get_conversation") == ("NEED_MORE_PARAMS", [])
            assert await refused(bob, "get_conversation", account="nobody") == ("NO_SUCH_ACCOUNT", ["nobody"])
            assert (await call(bob, "take_message", sender="carol")) == {"message": None}
            assert (await call(bob, "take_message"))["message"]["message_id"] == second
            assert (await call(bob, "take_message")) == {"message": None}

    asyncio.run(scenario())
    # what IRC says of the same: both taken, so nothing unread; the history with alice is the three
    assert irc(bob_irc, "INBOX TAKE") == [["bob", "EMPTY", "No unread messages"]]
    history = irc(bob_irc, "INBOX HISTORY alice")
    assert [p[2] for p in history if p[1] == "MESSAGE"] == [first, second, answer]


def test_a2a_reads_one_message_lists_the_history_and_searches(srv, clients):  # noqa: F811
    (first, second, answer), _ = _exchange(srv, clients)

    async def scenario() -> None:
        async with a2a(srv, token_for(srv, "bob")) as bob, a2a(srv, token_for(srv, "carol")) as carol:
            got = await skill(bob, "pircan:inbox", action="read", message_id=second)
            assert (got["message"]["body"], got["message"]["read"]) == ("and the budget", False)
            history = await skill(bob, "pircan:inbox", action="history", **{"with": "alice"})
            assert [m["message_id"] for m in history["messages"]] == [first, second, answer]
            assert (history["with"], history["more"]) == ("alice", None)
            conversation = await skill(bob, "pircan:inbox", action="history", **{"with": first, "limit": 1})
            assert ([m["message_id"] for m in conversation["messages"]], conversation["more"]) == ([answer], answer)
            found = await skill(bob, "pircan:inbox", action="search", query="plan")
            assert [m["message_id"] for m in found["messages"]] == [answer, first]  # newest first
            # carol is no party: the messages do not exist for her
            for args in ({"action": "read", "message_id": first}, {"action": "history", "with": first}):
                try:
                    await skill(carol, "pircan:inbox", **args)
                except Exception as exc:  # noqa: BLE001 - the SDK raises the gateway's A2A error
                    assert exc.data["code"] == "NO_SUCH_MESSAGE", exc
                else:
                    raise AssertionError(f"not refused: {args}")
            assert (await skill(carol, "pircan:inbox", action="search", query="plan"))["messages"] == []

    asyncio.run(scenario())
