"""PIRCAN over real sockets: two agents and their owner log in with SASL PLAIN and go through a whole
exchange (request, accept, SEND with its receipt, NOTIFY, INBOX TAKE and WAIT); a plain IRC client
with no capabilities and no account is refused with ACCOUNT_REQUIRED.

The server runs in-process on 127.0.0.1 port 0 with a SQLite file in tmp_path. Clients synchronise
with PING/PONG or by reading until the line they expect (socket timeout 10 s), never with sleeps.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.live import IRCClient, LiveServer, pircan_server

LOBBY = "pircan.dev/lobby"
PASSWORD = "sesame123"


@pytest.fixture
def srv(tmp_path):
    server = pircan_server(tmp_path)

    def create(name: str, kind: str, owner: str | None = None) -> None:
        coro = server.server.accounts.create(name, PASSWORD, kind=kind, owner=owner)
        asyncio.run_coroutine_threadsafe(coro, server.loop).result(30)

    create("olive", "person")
    create("alice", "agent", "olive")
    create("bob", "agent", "olive")
    yield server
    server.stop()


def login(srv: LiveServer, clients: list, account: str, caps: tuple[str, ...] = ()) -> IRCClient:
    c = IRCClient(srv.port)
    clients.append(c)
    c.login(account, PASSWORD, caps)
    return c


def wire(messages) -> list[tuple[str | None, str, list[str]]]:
    return [(m.source, m.command, m.params) for m in messages]


def test_agents_and_owner_whole_exchange(srv, clients):
    alice = login(srv, clients, "alice", (LOBBY,))
    bob = login(srv, clients, "bob", (LOBBY,))
    olive = login(srv, clients, "olive")  # no capability: NOTIFY comes as a NOTICE from PIRCAN

    # request -> NOTIFY to the target (verb) and to its owner (NOTICE)
    alice.send("CONTACT REQUEST bob message 30 :Let us coordinate the build")
    (reply,) = alice.sync()
    assert reply.command == "CONTACT" and reply.params[:2] == ["alice", "REQUESTED"]
    rid = reply.params[2]
    assert reply.params[3:5] == ["bob", "pending"] and reply.params[5] == "agent"  # who decides, then until when
    assert wire(bob.read_until(lambda m: m.command == "NOTIFY")) == [("irc.test", "NOTIFY", ["bob", "request", "1"])]
    assert wire(olive.read_until(lambda m: m.command == "NOTICE")) == [
        ("PIRCAN!pircan@services.pircd", "NOTICE", ["olive", "NOTIFY request 1"])
    ]

    # the target sees the request and accepts it
    bob.send("CONTACT LIST requests")
    listing = bob.sync()
    assert wire(listing)[0][2][:8] == ["bob", "REQUEST", rid, "alice", "bob", "message", "30", "pending"]
    assert wire(listing)[-1] == ("irc.test", "CONTACT", ["bob", "END"])
    bob.send(f"CONTACT ACCEPT {rid}")
    (accepted,) = bob.sync()
    assert accepted.params[:3] == ["bob", "ACCEPTED", rid]
    assert accepted.params[4:6] == ["alice", "message"]
    assert wire(alice.read_until(lambda m: m.command == "NOTIFY")) == [
        ("irc.test", "NOTIFY", ["alice", "decision", "1"])
    ]

    # SEND: the receipt comes after the commit and says the recipient was online
    alice.send("SEND bob :Build 42 is green")
    (receipt,) = alice.sync()
    mid = receipt.params[2]
    assert wire([receipt]) == [("irc.test", "SEND", ["alice", "OK", mid, "bob", "delivered", mid, "0"])]
    assert wire(bob.read_until(lambda m: m.command == "NOTIFY")) == [("irc.test", "NOTIFY", ["bob", "message", "1"])]

    # the recipient takes it: whole message, read and acknowledged at once
    bob.send("INBOX TAKE alice")
    taken = wire(bob.sync())
    assert taken[0][1:] == ("INBOX", ["bob", "MESSAGE", mid, "alice", taken[0][2][4], mid, "*", "0", "17"])
    assert taken[1:] == [
        ("irc.test", "INBOX", ["bob", "BODY", mid, "Build 42 is green"]),
        ("irc.test", "INBOX", ["bob", "END", mid]),
    ]
    bob.send("INBOX")
    assert wire(bob.sync()) == [("irc.test", "INBOX", ["bob", "UNREAD", "0", "0 unread messages"])]

    # a threaded reply, picked up by INBOX WAIT while the connection keeps answering PING
    alice.send("INBOX WAIT bob 0")
    assert alice.sync() == []  # nothing yet, and the PONG came through
    bob.send(f"SEND alice {mid} :Thanks, deploying")
    (receipt2,) = bob.sync()
    reply_id = receipt2.params[2]
    assert receipt2.params == ["bob", "OK", reply_id, "alice", "woken", mid, "1"]  # alice waits for it
    got = wire(alice.read_until(lambda m: m.command == "INBOX" and m.params[1] == "END"))
    assert [g[2][1] for g in got] == ["MESSAGE", "BODY", "END"]
    assert got[0][2][2:4] == [reply_id, "bob"] and got[0][2][5:8] == [mid, mid, "1"]
    assert got[1][2][3] == "Thanks, deploying"

    # the owner sees its agents, and the agreement, and revokes it for bob
    olive.send("AGENTS")
    roster = [r for r in wire(olive.sync()) if r[1] == "AGENTS"]
    assert [r[2][1:5] + r[2][6:] for r in roster] == [
        ["AGENT", "alice", "running", "0", "owned", "olive", "agent", "*"],
        ["AGENT", "bob", "running", "0", "owned", "olive", "agent", "*"],
        ["END", "2"],
    ]
    olive.send("CONTACT LIST agreements")
    agreement = olive.sync()[0]
    aid = agreement.params[2]
    olive.send(f"CONTACT REVOKE {aid}")
    assert [m.params for m in olive.sync() if m.command == "CONTACT"] == [["olive", "REVOKED", aid, "bob"]]
    alice.send("SEND bob :still there?")
    assert wire(alice.sync())[-1] == (
        "irc.test", "FAIL", ["SEND", "NO_AGREEMENT", "bob", "You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    )


def test_a_plain_client_without_account_is_refused(srv, clients):
    guest = IRCClient(srv.port)
    clients.append(guest)
    guest.register("guest")  # no CAP, no SASL
    for line, verb in (("CONTACT REQUEST bob message 30 :hi", "CONTACT"), ("SEND bob :hi", "SEND"),
                       ("INBOX", "INBOX"), ("AGENTS", "AGENTS"), ("AUDIT", "AUDIT")):
        guest.send(line)
        assert wire(guest.sync()) == [
            ("irc.test", "FAIL", [verb, "ACCOUNT_REQUIRED",
                                  "You must be logged in to use PIRCAN: SASL (CAP REQ :sasl) or PRIVMSG NickServ :IDENTIFY <account> <password>"])
        ]
    # plain IRC still works with agents: a person-to-agent PRIVMSG is not agreement-checked
    bob = login(srv, clients, "bob")
    guest.send("PRIVMSG bob :hello agent")
    guest.sync()
    assert wire(bob.read_until(lambda m: m.command == "PRIVMSG")) == [
        ("guest!guest@127.0.0.1", "PRIVMSG", ["bob", "hello agent"])
    ]


def test_agent_to_agent_privmsg_needs_an_agreement_live(srv, clients):
    alice = login(srv, clients, "alice")
    login(srv, clients, "bob")
    alice.send("PRIVMSG bob :psst")
    assert wire(alice.sync()) == [
        ("irc.test", "FAIL", ["PRIVMSG", "NO_AGREEMENT", "bob",
                              "Agents need a message agreement to talk directly (CONTACT REQUEST)"])
    ]
