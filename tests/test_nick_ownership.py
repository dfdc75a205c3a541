"""An account's own name as nick: a logged-in client can always take it (issues 22.4 and 23.11).

An older connection of the same agent is closed; anyone else holding the name is renamed to a guest
nick (or, while still registering, gets 433)."""

from __future__ import annotations

import base64

import pytest

from tests.harness import Harness, config

AGENT_PASSWORD = "agent password"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def nh(tmp_path):
    harness = Harness(
        config(storage={"durability": "off"}, accounts={"argon2_time_cost": 1, "argon2_memory_kib": 8192}),
        db=str(tmp_path / "n.db"),
    )
    harness.run(harness.server.accounts.create("bob", "bob password"))
    harness.run(harness.server.accounts.create("helper", AGENT_PASSWORD, kind="agent", owner="bob"))
    yield harness
    harness.close()


def readme_login(h: Harness, name: str, account: str = "helper", password: str = AGENT_PASSWORD,
                 nick: str | None = None) -> None:
    """README.md, "An agent's session in raw IRC": CAP REQ sasl, NICK, USER, AUTHENTICATE PLAIN,
    the payload and CAP END, sent without waiting for any answer."""
    h.connect(name)
    for line in ("CAP REQ :sasl", f"NICK {nick or account}", f"USER {account} 0 * :{account} agent",
                 "AUTHENTICATE PLAIN", "AUTHENTICATE " + b64(f"\0{account}\0{password}"), "CAP END"):
        h.send(name, line)


def test_agent_reconnecting_with_its_own_nick_takes_it_over(nh):
    """issue 22.4: with the old connection still open, NICK <its own name> is refused (no one is logged
    in yet), but the login that follows takes the nick over and the client is welcomed."""
    readme_login(nh, "old")
    assert nh.clients["old"].registered
    nh.take("old")
    readme_login(nh, "new")
    assert nh.lines("new")[:6] == [
        ":irc.test CAP * ACK sasl",
        ":irc.test 433 * helper :Nickname is already in use",
        ":irc.test AUTHENTICATE +",
        ":irc.test 900 helper helper!helper@127.0.0.1 helper :You are now logged in as helper",
        ":irc.test 903 helper :SASL authentication successful",
        ":irc.test 001 helper :Welcome to the TestNet IRC Network helper!helper@127.0.0.1",
    ]
    assert nh.lines("old") == [
        "ERROR :Closing link: 127.0.0.1 (Nick taken over by a new connection of its account)"
    ]
    assert nh.server.state.find_nick("helper") is nh.clients["new"]


def test_guest_holding_an_agents_name_is_renamed(nh):
    """issue 23.11: a guest that took the name before the agent existed does not keep the agent out;
    the guest is renamed (its channel peers see the NICK) and told why."""
    nh.server.accounts.names.pop("helper")  # as before the agent was created
    nh.register("guest", "helper")
    nh.register("peer", "peer")
    nh.send("guest", "JOIN #room")
    nh.send("peer", "JOIN #room")
    nh.take("guest")
    nh.take("peer")
    nh.server.accounts.names["helper"] = "agent"
    readme_login(nh, "agent")
    guest_id = nh.clients["guest"].id
    assert nh.lines("guest") == [
        f":helper!guest@127.0.0.1 NICK Guest{guest_id}",
        (f":irc.test NOTICE Guest{guest_id} :The nick helper belongs to the account helper, which has "
         f"logged in; you are now Guest{guest_id}"),
    ]
    assert nh.lines("peer") == [f":helper!guest@127.0.0.1 NICK Guest{guest_id}"]
    welcome = ":irc.test 001 helper :Welcome to the TestNet IRC Network helper!helper@127.0.0.1"
    assert welcome in nh.lines("agent")
    assert not nh.conns["guest"].closed


def test_person_takes_its_nick_from_a_guest_after_logging_in(nh):
    nh.server.accounts.names.pop("bob")
    nh.register("guest", "bob")
    nh.server.accounts.names["bob"] = "person"
    nh.register("b", "robert")
    nh.send("b", "AUTHENTICATE PLAIN")
    nh.send("b", "AUTHENTICATE " + b64("\0bob\0bob password"))
    nh.take("b")
    nh.send("b", "NICK bob")
    guest_id = nh.clients["guest"].id
    assert nh.lines("b") == [":robert!b@127.0.0.1 NICK bob"]
    assert nh.lines("guest")[0] == f":bob!guest@127.0.0.1 NICK Guest{guest_id}"


def test_person_refused_its_nick_before_login_gets_it_at_login(nh):
    nh.server.accounts.names.pop("bob")
    nh.register("guest", "bob")
    nh.server.accounts.names["bob"] = "person"
    readme_login(nh, "b", account="bob", password="bob password")
    lines = nh.lines("b")
    assert ":irc.test 433 * bob :Nickname is already in use" in lines
    assert ":irc.test 001 bob :Welcome to the TestNet IRC Network bob!bob@127.0.0.1" in lines


def test_client_still_registering_loses_the_name_with_433(nh):
    nh.connect("early")
    nh.send("early", "NICK helper")  # allowed: not registered, the account check comes at registration
    assert nh.lines("early") == []
    readme_login(nh, "agent")
    assert nh.lines("early") == [":irc.test 433 * helper :Nickname is already in use"]
    assert nh.clients["agent"].registered and nh.clients["agent"].nick == "helper"
    nh.send("early", "NICK other")
    nh.send("early", "USER e 0 * :E")
    assert nh.numerics("early")[0] == "001"
