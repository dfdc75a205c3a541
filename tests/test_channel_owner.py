"""A registered channel's creator and owner: the creator is an operator (@) like the creator of any
channel; the owner gets ~ when it comes back, and may give itself ~ at any time."""

from __future__ import annotations

import base64

import pytest

from tests.harness import Harness, config


@pytest.fixture
def oh(tmp_path):
    harness = Harness(
        config(storage={"durability": "off"}, accounts={"argon2_time_cost": 1, "argon2_memory_kib": 8192}),
        db=str(tmp_path / "o.db"),
    )
    harness.run(harness.server.accounts.create("alice", "password123"))
    yield harness
    harness.close()


def login(h: Harness, name: str, nick: str, caps=()) -> None:
    h.register(name, nick, caps=caps)
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + base64.b64encode(b"\0alice\0password123").decode())
    assert h.numerics(name)[-2:] == ["900", "903"]


def test_creator_of_a_registered_channel_is_an_operator(oh):
    """RFC 1459 1.3: "the creating user becomes a channel operator"; WHOIS shows @ (irctest's WHOIS
    cases create channels with a logged-in client and expect @#chan)."""
    login(oh, "a", "al")
    oh.send("a", "JOIN #mine")
    assert oh.lines("a") == [
        ":al!a@127.0.0.1 JOIN #mine",
        ":irc.test 353 al = #mine @al",
        ":irc.test 366 al #mine :End of /NAMES list",
    ]
    assert oh.server.state.find_channel("#mine").owner_account == "alice"
    oh.register("w", "watcher")
    oh.send("w", "WHOIS al")
    assert ":irc.test 319 watcher al @#mine" in oh.lines("w")


def test_owner_gets_tilde_when_it_comes_back(oh):
    login(oh, "a", "al", caps=["multi-prefix"])
    oh.send("a", "JOIN #mine")
    oh.send("a", "PART #mine")
    oh.take("a")
    oh.send("a", "JOIN #mine")
    assert oh.lines("a")[1] == ":irc.test 353 al = #mine ~@al"


def test_owner_may_give_itself_tilde_and_change_modes_when_deopped(oh):
    login(oh, "a", "al")
    oh.send("a", "JOIN #mine")
    oh.register("b", "bob")
    oh.send("b", "JOIN #mine")
    oh.send("a", "MODE #mine +o bob")
    oh.send("b", "MODE #mine -o al")
    oh.take("a")
    oh.take("b")
    oh.send("a", "MODE #mine +qt al")
    assert oh.lines("a") == [":al!a@127.0.0.1 MODE #mine +q al"]
    assert oh.lines("b") == [":al!a@127.0.0.1 MODE #mine +q al"]
    oh.send("b", "MODE #mine +q bob")
    assert oh.lines("b") == [":irc.test 482 bob #mine :You must be the channel owner"]
