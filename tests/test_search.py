"""Searching message bodies (SQLite FTS5): IRC's INBOX SEARCH and MCP's search_messages, over one
service function (ext/pircan/service/search.py); the portal's search is in test_portal.py.

alice and bob (agents of olive) talk under an agreement; carol (olive's too) and eve (another
owner's) are no party of it, and find nothing of it however they ask. The IRC side synchronises
with PING/PONG, the MCP side awaits each call's answer.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from ext.pircan import store as db
from ext.pircan.service.refusals import Refused
from ext.pircan.service.search import fts_query
from tests.test_mcp import PASSWORD, call, irc, login, mcp, refused, run, token_for

TALK = [  # (sender, body), oldest first
    ("alice", "The weekly report is ready for review"),
    ("bob", "Thanks, I will review the report tonight"),
    ("alice", "Remember the budget meeting on Friday"),
    ("bob", "The café near the station, at noon?"),
    ("alice", "Reporting lines changed: see the e-mail"),
]


@pytest.fixture
def srv(tmp_path):
    from tests.live import pircan_server

    server = pircan_server(tmp_path)
    accounts = server.server.accounts
    run(server, accounts.create("olive", PASSWORD, kind="person", owner=None))
    run(server, accounts.create("peggy", PASSWORD, kind="person", owner=None))
    for name, owner in (("alice", "olive"), ("bob", "olive"), ("carol", "olive"), ("eve", "peggy")):
        run(server, accounts.create(name, PASSWORD, kind="agent", owner=owner))
    run(server, accounts.refresh())
    yield server
    server.stop()


def talk(srv, clients) -> tuple[dict[str, object], list[str]]:
    """alice and bob agree and exchange TALK; the IRC clients, and the message ids oldest first."""
    who = {name: login(srv, clients, name) for name in ("alice", "bob", "carol", "eve")}
    rid = irc(who["alice"], "CONTACT REQUEST bob message 30 :notes")[0][2]
    assert irc(who["bob"], f"CONTACT ACCEPT {rid}")[0][1] == "ACCEPTED"
    ids = []
    for sender, body in TALK:
        other = "bob" if sender == "alice" else "alice"
        answer = irc(who[sender], f"SEND {other} :{body}")
        assert answer[0][1] == "OK", answer
        ids.append(answer[0][2])
    return who, ids


def found(lines: list[list[str]]) -> tuple[list[str], list[str]]:
    """The ids of the MESSAGE lines and the closing SEARCH line of an INBOX SEARCH."""
    return [p[2] for p in lines if p[1] == "MESSAGE"], next(p for p in lines if p[1] == "SEARCH")[2:4]


def test_a_search_is_words_phrases_prefixes_and_or_not():
    assert fts_query("weekly report") == '"weekly" AND "report"'
    assert fts_query('"weekly report" OR budget') == '"weekly report" OR "budget"'
    assert fts_query("rep* NOT tonight") == '"rep"* NOT "tonight"'
    assert fts_query("(cafe OR café) noon") == '( "cafe" OR "café" ) AND "noon"'
    assert fts_query("e-mail v1.2") == '"e-mail" AND "v1.2"'  # punctuation is text to find, never syntax
    for bad, why in (("", "Nothing to search for"), ("OR report", "OR stands between two terms"),
                     ("NOT report", "NOT excludes from what comes before it"), ("(report", "Parentheses do not match"),
                     ("report)", "Parentheses do not match"), ("report AND", "The search ends in the middle"),
                     ("*", "A prefix needs at least one letter before *"), ("x" * 301, "A search is at most 300")):
        with pytest.raises(Refused) as refusal:
            fts_query(bad)
        assert (refusal.value.code, refusal.value.context) == ("INVALID_PARAMS", ("query",))
        assert refusal.value.text.startswith(why)


def test_inbox_search_finds_phrases_prefixes_and_alternatives_newest_first(srv, clients):
    who, ids = talk(srv, clients)
    alice = who["alice"]
    assert found(irc(alice, "INBOX SEARCH :report")) == ([ids[1], ids[0]], ["2", "*"])
    assert found(irc(alice, 'INBOX SEARCH :"review the report"')) == ([ids[1]], ["1", "*"])
    assert found(irc(alice, "INBOX SEARCH :report*")) == ([ids[4], ids[1], ids[0]], ["3", "*"])
    assert found(irc(alice, "INBOX SEARCH :budget OR cafe")) == ([ids[3], ids[2]], ["2", "*"])  # é matches e
    assert found(irc(alice, "INBOX SEARCH :report NOT tonight")) == ([ids[0]], ["1", "*"])
    assert found(irc(alice, "INBOX SEARCH :e-mail")) == ([ids[4]], ["1", "*"])
    assert found(irc(who["bob"], "INBOX SEARCH :REVIEW")) == ([ids[1], ids[0]], ["2", "*"])  # both directions
    # the MESSAGE lines are HISTORY's, byte for byte
    history = {p[2]: p for p in irc(alice, "INBOX HISTORY bob") if p[1] == "MESSAGE"}
    assert [p for p in irc(alice, "INBOX SEARCH :review") if p[1] == "MESSAGE"] == [history[ids[1]], history[ids[0]]]


def test_inbox_search_pages_newest_first(srv, clients):
    who, ids = talk(srv, clients)
    alice = who["alice"]
    first, more = found(irc(alice, "INBOX SEARCH 2 :the"))
    assert (first, more) == ([ids[4], ids[3]], ["2", ids[3]])
    assert found(irc(alice, f"INBOX SEARCH 2 {ids[3]} :the")) == ([ids[2], ids[1]], ["2", ids[1]])
    assert found(irc(alice, f"INBOX SEARCH 2 {ids[1]} :the")) == ([ids[0]], ["1", "*"])
    assert found(irc(alice, f"INBOX SEARCH {ids[0]} :the")) == ([], ["0", "*"])


def test_inbox_search_refuses_bad_input_with_its_reason(srv, clients):
    who, ids = talk(srv, clients)
    alice = who["alice"]
    assert irc(alice, "INBOX SEARCH") == [["INBOX", "NEED_MORE_PARAMS", "SEARCH",
                                           "Syntax: INBOX SEARCH [<limit>] [<before-id>] :<query>"]]
    answer = irc(alice, "INBOX SEARCH :OR report")
    assert answer[0][:3] == ["INBOX", "INVALID_PARAMS", "query"]
    assert answer[0][3].startswith("OR stands between two terms. A search is words (all must occur)")
    assert irc(alice, "INBOX SEARCH 5 zzzzzzzzzzzzzzzz :report")[0][:3] == ["INBOX", "NO_SUCH_MESSAGE",
                                                                           "zzzzzzzzzzzzzzzz"]
    assert irc(alice, "INBOX SEARCH weekly report") == [[
        "INBOX", "INVALID_PARAMS", "SEARCH",
        "Syntax: INBOX SEARCH [<limit>] [<before-id>] :<query> (a query of several words after a colon)"]]
    assert found(irc(alice, "INBOX SEARCH weekly")) == ([ids[0]], ["1", "*"])  # one word needs no colon


def test_a_non_party_finds_nothing_on_irc(srv, clients):
    who, _ = talk(srv, clients)
    for outsider in ("carol", "eve"):
        for query in ("report", "the", "report* OR budget OR cafe", '"weekly report"'):
            assert found(irc(who[outsider], f"INBOX SEARCH :{query}")) == ([], ["0", "*"])


def test_search_messages_over_mcp_returns_historys_objects_and_only_the_parties(srv, clients):
    _, ids = talk(srv, clients)

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            result = await call(alice, "search_messages", query="report*")
            assert [m["message_id"] for m in result["messages"]] == [ids[4], ids[1], ids[0]]
            assert (result["account"], result["more"]) == ("alice", None)
            thread = await call(alice, "get_conversation", conversation_id=ids[0])
            assert result["messages"][-1] == thread["messages"][0]  # the same object as history
            paged = await call(alice, "search_messages", query="the", limit=2)
            assert ([m["message_id"] for m in paged["messages"]], paged["more"]) == ([ids[4], ids[3]], ids[3])
            paged = await call(alice, "search_messages", query="the", limit=2, before=paged["more"])
            assert [m["message_id"] for m in paged["messages"]] == [ids[2], ids[1]]
            assert await refused(alice, "search_messages", query="report AND") == ("INVALID_PARAMS", ["query"])
            assert await refused(alice, "search_messages", query="report", account="bob") == ("NOT_ALLOWED", ["bob"])
        for outsider in ("carol", "eve"):
            async with mcp(srv, token_for(srv, outsider)) as client:
                for query in ("report", "the OR budget", '"weekly report"'):
                    assert (await call(client, "search_messages", query=query))["messages"] == []
                assert await refused(client, "search_messages", query="report", account="alice") == (
                    "NOT_ALLOWED", ["alice"])

    asyncio.run(scenario())


def test_messages_stored_before_the_index_existed_are_found():
    """The migration fills the index from the messages already stored, then triggers keep it."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE schema_versions (track TEXT PRIMARY KEY, version INTEGER NOT NULL)")
    from ircd.store.db import migrate

    migrate(conn, db.TRACK, db.MIGRATIONS[:7])
    conn.execute("INSERT INTO pircan_messages (id, sender, recipient, agreement_id, conversation_id, hop_count, "
                 "created_at, body) VALUES (10, 'alice', 'bob', 1, 10, 0, 0, 'an old weekly report')")
    migrate(conn, db.TRACK, db.MIGRATIONS)
    conn.execute("INSERT INTO pircan_messages (id, sender, recipient, agreement_id, conversation_id, hop_count, "
                 "created_at, body) VALUES (20, 'bob', 'alice', 1, 10, 1, 0, 'a new weekly report')")
    assert [m.id for m in db.search_messages(conn, "alice", '"weekly"', 10, None)] == [20, 10]
    assert db.search_messages(conn, "carol", '"weekly"', 10, None) == []
