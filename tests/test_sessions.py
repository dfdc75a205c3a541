"""Several connections of one account sharing its nick (accounts.multiclient), and always-on
identities that keep their nick and channels while no connection is there (accounts.always_on)."""

from __future__ import annotations

import base64

import pytest

from ircd.config import from_dict
from ircd.store import accounts as rows
from tests.harness import Harness, config

PW = "password123"
AGENT_PW = "agent password"
RM = "draft/read-marker"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def make(tmp_path, **accounts) -> Harness:
    harness = Harness(
        config(storage={"durability": "off"}, flood={"enabled": False},
               accounts={"argon2_time_cost": 1, "argon2_memory_kib": 8192, **accounts}),
        db=str(tmp_path / "s.db"),
    )
    harness.run(harness.server.accounts.create("alice", PW))
    harness.run(harness.server.accounts.create("bob", PW))
    harness.run(harness.server.accounts.create("helper", AGENT_PW, kind="agent", owner="bob"))
    return harness


@pytest.fixture
def sh(tmp_path):
    harness = make(tmp_path)
    yield harness
    harness.close()


def sign_on(h: Harness, name: str, account: str, nick: str, caps: str = "", password: str = PW) -> None:
    """A new connection ``name``: SASL PLAIN before NICK and USER (as a bouncer-aware client does)."""
    h.connect(name)
    h.send(name, "CAP LS 302")
    h.send(name, ("CAP REQ :sasl " + caps).strip())
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + b64(f"\0{account}\0{password}"))
    h.send(name, f"NICK {nick}")
    h.send(name, f"USER {name} 0 * :{name}")
    h.send(name, "CAP END")


def connect(h: Harness, name: str, account: str, nick: str, caps: str = "", password: str = PW) -> list[str]:
    """``sign_on``; returns what the server sent but the welcome numerics, CAP and SASL lines."""
    sign_on(h, name, account, nick, caps, password)
    return [ln for ln in h.lines(name) if " 00" not in ln[:16] and " 2" not in ln[:14] and " 3" not in ln[:14]
            and " 4" not in ln[:14] and "CAP" not in ln and "AUTHENTICATE" not in ln and " 90" not in ln]


def burst(h: Harness, name: str) -> list[str]:
    """The lines after the welcome burst (after 376/422, the end of the MOTD)."""
    lines = h.lines(name)
    end = max(i for i, ln in enumerate(lines) if " 376 " in ln or " 422 " in ln)
    return lines[end + 1:]


def welcome(h: Harness, name: str, account: str, nick: str, caps: str = "", password: str = PW) -> list[str]:
    """``sign_on``, which must register; returns what came after the welcome burst."""
    sign_on(h, name, account, nick, caps, password)
    assert h.clients[name].registered
    return burst(h, name)


# multiclient ---------------------------------------------------------------------------------------


def test_second_connection_shares_the_nick_and_is_put_in_its_channels(sh):
    welcome(sh, "a1", "alice", "al")
    sh.send("a1", "JOIN #room")
    sh.send("a1", "TOPIC #room :the topic")
    welcome(sh, "b", "bob", "bob")
    sh.send("b", "JOIN #room")
    sh.take("a1")
    sh.take("b")
    assert welcome(sh, "a2", "alice", "al") == [
        ":al!a1@127.0.0.1 JOIN #room",
        ":irc.test 332 al #room :the topic",
        f":irc.test 333 al #room al!a1@127.0.0.1 {int(sh.server.state.find_channel('#room').topic_time)}",
        ":irc.test 353 al = #room :@al bob",
        ":irc.test 366 al #room :End of /NAMES list",
    ]
    assert sh.lines("a1") == []
    assert sh.lines("b") == []  # nothing changes for the others: still one user
    assert sh.server.state.find_nick("al") is sh.clients["a1"]
    sh.send("b", "NAMES #room")
    assert sh.lines("b") == [":irc.test 353 bob = #room :@al bob", ":irc.test 366 bob #room :End of /NAMES list"]
    sh.send("b", "LUSERS")
    assert ":irc.test 251 bob :There are 2 users and 0 invisible on 1 servers" in sh.lines("b")


def test_messages_reach_every_connection_of_the_nick(sh):
    welcome(sh, "a1", "alice", "al")
    sh.send("a1", "JOIN #room")
    welcome(sh, "b", "bob", "bob")
    sh.send("b", "JOIN #room")
    welcome(sh, "a2", "alice", "al")
    for name in ("a1", "b", "a2"):
        sh.take(name)
    sh.send("b", "PRIVMSG #room :hi all")
    sh.send("b", "PRIVMSG al :hi you")
    expected = [":bob!b@127.0.0.1 PRIVMSG #room :hi all", ":bob!b@127.0.0.1 PRIVMSG al :hi you"]
    assert sh.lines("a1") == expected
    assert sh.lines("a2") == expected
    # what one connection sends, the others see (as with a bouncer); the recipient sees it once
    sh.send("a2", "PRIVMSG #room :from two")
    sh.send("a2", "PRIVMSG bob direct")
    assert sh.lines("b") == [":al!a1@127.0.0.1 PRIVMSG #room :from two", ":al!a1@127.0.0.1 PRIVMSG bob direct"]
    assert sh.lines("a1") == [":al!a1@127.0.0.1 PRIVMSG #room :from two", ":al!a1@127.0.0.1 PRIVMSG bob direct"]
    assert sh.lines("a2") == []


def test_one_connection_leaving_is_silent_the_last_one_quits(sh):
    welcome(sh, "a1", "alice", "al")
    sh.send("a1", "JOIN #room")
    welcome(sh, "b", "bob", "bob")
    sh.send("b", "JOIN #room")
    welcome(sh, "a2", "alice", "al")
    for name in ("a1", "b", "a2"):
        sh.take(name)
    sh.send("a1", "QUIT :one out")
    assert sh.lines("a1") == ["ERROR :Closing link: 127.0.0.1 (Quit: one out)"]
    assert sh.lines("b") == []
    assert sh.lines("a2") == []
    assert sh.server.state.find_nick("al") is sh.clients["a2"]
    sh.send("b", "PRIVMSG #room :still there?")
    assert sh.lines("a2") == [":bob!b@127.0.0.1 PRIVMSG #room :still there?"]
    sh.send("a2", "QUIT :two out")
    assert sh.lines("b") == [":al!a1@127.0.0.1 QUIT :Quit: two out"]
    assert sh.server.state.find_nick("al") is None
    assert sh.server.state.find_channel("#room").user_count() == 1


def test_join_part_and_nick_of_one_connection_move_them_all(sh):
    welcome(sh, "a1", "alice", "al")
    welcome(sh, "a2", "alice", "al")
    welcome(sh, "b", "bob", "bob")
    sh.send("b", "JOIN #room")
    for name in ("a1", "b", "a2"):
        sh.take(name)
    sh.send("a2", "JOIN #room")
    assert sh.lines("b") == [":al!a1@127.0.0.1 JOIN #room"]
    assert sh.lines("a1") == [
        ":al!a1@127.0.0.1 JOIN #room",
        ":irc.test 353 al = #room :@bob al",
        ":irc.test 366 al #room :End of /NAMES list",
    ]
    sh.send("a1", "NICK alice2")
    assert sh.lines("b") == [":al!a1@127.0.0.1 NICK alice2"]
    assert sh.lines("a2")[-1] == ":al!a1@127.0.0.1 NICK alice2"
    assert sh.clients["a2"].nick == "alice2"
    sh.take("a1")
    sh.send("a2", "PART #room")
    assert sh.lines("b") == [":alice2!a1@127.0.0.1 PART #room"]
    assert sh.lines("a1") == [":alice2!a1@127.0.0.1 PART #room"]
    assert "#room" not in {c for c in sh.clients["a1"].channels}


def test_someone_else_still_gets_433(sh):
    welcome(sh, "a1", "alice", "al")
    sh.connect("b")
    sh.send("b", "CAP LS 302")
    sh.send("b", "CAP REQ :sasl")
    sh.send("b", "AUTHENTICATE PLAIN")
    sh.send("b", "AUTHENTICATE " + b64(f"\0bob\0{PW}"))
    sh.send("b", "NICK al")
    assert sh.lines("b")[-1] == ":irc.test 433 * al :Nickname is already in use"


def test_read_markers_reach_every_connection(sh):
    welcome(sh, "a1", "alice", "al", caps=RM)
    welcome(sh, "a2", "alice", "al", caps=RM)
    sh.take("a1")
    sh.send("a1", "MARKREAD #room timestamp=2022-11-11T11:11:11.111Z")
    assert sh.lines("a1") == [":irc.test MARKREAD #room timestamp=2022-11-11T11:11:11.111Z"]
    assert sh.lines("a2") == [":irc.test MARKREAD #room timestamp=2022-11-11T11:11:11.111Z"]


def test_multiclient_off_refuses_the_nick(tmp_path):
    h = make(tmp_path, multiclient="off")
    try:
        welcome(h, "a1", "alice", "al")
        h.connect("a2")
        for line in ("CAP LS 302", "CAP REQ :sasl", "AUTHENTICATE PLAIN", "AUTHENTICATE " + b64(f"\0alice\0{PW}"),
                     "NICK al"):
            h.send("a2", line)
        assert h.lines("a2")[-1] == ":irc.test 433 * al :Nickname is already in use"
    finally:
        h.close()


# always-on -----------------------------------------------------------------------------------------


def agent_login(h: Harness, name: str, caps: str = "") -> list[str]:
    lines = welcome(h, name, "helper", "helper", caps=caps, password=AGENT_PW)
    assert lines[0] == ":helper MODE helper +B"
    return lines[1:]


def test_agent_keeps_its_channels_while_disconnected_and_gets_them_back(sh):
    agent_login(sh, "h1", caps=RM)
    sh.send("h1", "JOIN #work")
    sh.send("h1", "MARKREAD #work timestamp=2022-11-11T11:11:11.111Z")
    welcome(sh, "b", "bob", "bob", caps="away-notify")
    sh.send("b", "JOIN #work")
    sh.take("b")
    sh.disconnect("h1")
    # the agent stays, away, in its channel: no QUIT
    assert sh.lines("b") == [":helper!h1@127.0.0.1 AWAY :Not connected"]
    sh.send("b", "NAMES #work")
    assert sh.lines("b") == [":irc.test 353 bob = #work :@helper bob", ":irc.test 366 bob #work :End of /NAMES list"]
    sh.send("b", "PRIVMSG helper :are you there")
    assert sh.lines("b") == [":irc.test 301 bob helper :Not connected"]
    assert "helper" not in sh.server.state.by_account  # not visible: no connection is logged in
    # the agent comes back: its channel, its read marker; the others see it come back from away
    assert agent_login(sh, "h2", caps=RM) == [
        ":helper!h1@127.0.0.1 JOIN #work",
        ":irc.test MARKREAD #work timestamp=2022-11-11T11:11:11.111Z",
        ":irc.test 353 helper = #work :bob @helper",
        ":irc.test 366 helper #work :End of /NAMES list",
    ]
    assert sh.lines("b") == [":helper!h1@127.0.0.1 AWAY"]
    assert sh.server.state.find_nick("helper") is sh.clients["h2"]
    assert sh.server.state.by_account["helper"] == {sh.clients["h2"]}


def test_agent_takeover_keeps_the_channels(sh):
    """An agent has one connection at a time: the new one closes the older and takes its place."""
    agent_login(sh, "h1")
    sh.send("h1", "JOIN #work")
    welcome(sh, "b", "bob", "bob")
    sh.send("b", "JOIN #work")
    sh.take("b")
    sh.take("h1")
    assert agent_login(sh, "h2") == [
        ":helper!h1@127.0.0.1 JOIN #work",
        ":irc.test 353 helper = #work :bob @helper",
        ":irc.test 366 helper #work :End of /NAMES list",
    ]
    assert sh.lines("h1") == ["ERROR :Closing link: 127.0.0.1 (Nick taken over by a new connection of its account)"]
    assert sh.lines("b") == []
    assert sh.server.state.find_nick("helper") is sh.clients["h2"]


def test_kill_ends_a_detached_identity(sh):
    agent_login(sh, "h1")
    sh.send("h1", "JOIN #work")
    welcome(sh, "b", "bob", "bob")
    sh.send("b", "JOIN #work")
    sh.disconnect("h1")
    sh.take("b")
    sh.server.disconnect(sh.server.state.find_nick("helper"), "Killed", quit_message="Killed (oper)")
    assert sh.lines("b") == [":helper!h1@127.0.0.1 QUIT :Killed (oper)"]
    assert sh.server.state.find_nick("helper") is None
    assert not sh.server.sessions.ghosts


def test_person_is_not_always_on_by_default_but_may_be(tmp_path, sh):
    welcome(sh, "a1", "alice", "al")
    sh.send("a1", "JOIN #room")
    sh.disconnect("a1")
    assert sh.server.state.find_nick("al") is None
    (tmp_path / "all").mkdir()
    h = make(tmp_path / "all", always_on="all")
    try:
        welcome(h, "a1", "alice", "al")
        h.send("a1", "JOIN #room")
        h.disconnect("a1")
        assert h.server.state.find_nick("al") is not None
        assert welcome(h, "a2", "alice", "al") == [
            ":al!a1@127.0.0.1 JOIN #room",
            ":irc.test 353 al = #room @al",
            ":irc.test 366 al #room :End of /NAMES list",
        ]
    finally:
        h.close()


def test_kill_closes_every_connection_and_ends_always_on(tmp_path):
    from ircd.passwords import hash_sync

    h = Harness(
        from_dict({"server": {"name": "irc.test", "network": "TestNet", "extensions": []},
                   "http": {"listen": ["127.0.0.1:0"]}, "storage": {"durability": "off"},
                   "flood": {"enabled": False}, "accounts": {"argon2_time_cost": 1, "argon2_memory_kib": 8192},
                   "opers": [{"name": "root", "password": hash_sync("s3cret")}]}),
        db=str(tmp_path / "k.db"),
    )
    try:
        h.run(h.server.accounts.create("alice", PW))
        h.run(h.server.accounts.create("bob", PW))
        h.run(h.server.accounts.create("helper", AGENT_PW, kind="agent", owner="bob"))
        welcome(h, "a1", "alice", "al")
        welcome(h, "a2", "alice", "al")
        agent_login(h, "h1")
        welcome(h, "o", "bob", "bob")
        for name in ("a1", "a2", "h1", "o"):
            h.send(name, "JOIN #room")
        h.send("o", "OPER root s3cret")
        for name in ("a1", "a2", "h1", "o"):
            h.take(name)
        h.send("o", "KILL al :bye")
        assert h.lines("a1") == ["ERROR :Closing link: 127.0.0.1 (Killed (bob (bye)))"]
        assert h.lines("a2") == ["ERROR :Closing link: 127.0.0.1 (Killed (bob (bye)))"]
        assert h.lines("o") == [":al!a1@127.0.0.1 QUIT :Killed (bob (bye))"]
        assert h.lines("h1") == [":al!a1@127.0.0.1 QUIT :Killed (bob (bye))"]
        h.send("o", "KILL helper :bye")  # connected: not left behind always-on
        assert h.lines("h1") == ["ERROR :Closing link: 127.0.0.1 (Killed (bob (bye)))"]
        assert h.lines("o") == [":helper!h1@127.0.0.1 QUIT :Killed (bob (bye))"]
        assert h.server.state.find_nick("helper") is None
        assert not h.server.sessions.ghosts
        assert h.server.state.find_channel("#room").user_count() == 1
    finally:
        h.close()


def test_deleting_the_account_ends_the_detached_identity(sh):
    agent_login(sh, "h1")
    sh.send("h1", "JOIN #work")
    welcome(sh, "a", "alice", "al")
    sh.send("a", "JOIN #work")
    sh.disconnect("h1")
    sh.take("a")
    assert sh.run(sh.server.store.write(rows.delete_account, "helper"))
    sh.run(sh.server.accounts.refresh())
    assert sh.lines("a") == [":helper!h1@127.0.0.1 QUIT :Account deleted"]
    assert sh.server.state.find_nick("helper") is None
    assert not sh.server.sessions.ghosts


def test_rehash_without_always_on_ends_detached_identities(sh):
    agent_login(sh, "h1")
    sh.send("h1", "JOIN #work")
    welcome(sh, "a", "alice", "al")
    sh.send("a", "JOIN #work")
    sh.disconnect("h1")
    sh.take("a")
    sh.server.rehash(config(storage={"durability": "off"}, flood={"enabled": False},
                            accounts={"argon2_time_cost": 1, "argon2_memory_kib": 8192, "always_on": "off"}))
    assert sh.lines("a") == [":helper!h1@127.0.0.1 QUIT :Always-on turned off"]
    assert sh.server.state.find_nick("helper") is None


def test_a_logged_in_connection_taking_the_nick_ends_its_detached_identity(tmp_path):
    """A connection of the account that registered under another nick and then asks for the
    account's name, held by the account's detached identity, ends that identity (peers see it quit);
    nothing is left renamed in its channels for a later disconnect to orphan."""
    h = make(tmp_path, always_on="all")
    try:
        welcome(h, "a1", "alice", "alice")
        h.send("a1", "JOIN #room")
        welcome(h, "b", "bob", "bob")
        h.send("b", "JOIN #room")
        h.disconnect("a1")
        welcome(h, "a2", "alice", "al2")
        h.take("b")
        h.send("a2", "NICK alice")
        assert h.lines("b") == [":alice!a1@127.0.0.1 QUIT :Nick taken over by a new connection of its account"]
        assert h.lines("a2")[-1] == ":al2!a2@127.0.0.1 NICK alice"
        h.disconnect("a2")  # alice's new always-on identity is a2, in no channel
        h.send("b", "NAMES #room")
        assert h.lines("b") == [":irc.test 353 bob = #room bob", ":irc.test 366 bob #room :End of /NAMES list"]
        assert h.server.sessions.ghosts == {"alice": h.clients["a2"]}
        assert h.server.state.registered_count == 2  # bob, and alice's identity
    finally:
        h.close()


def test_an_identity_ended_while_detached_leaves_no_oper_count_or_read_markers(tmp_path):
    from ircd.passwords import hash_sync

    h = Harness(
        from_dict({"server": {"name": "irc.test", "network": "TestNet"}, "http": {"listen": ["127.0.0.1:0"]},
                   "storage": {"durability": "off"}, "flood": {"enabled": False},
                   "accounts": {"argon2_time_cost": 1, "argon2_memory_kib": 8192},
                   "opers": [{"name": "root", "password": hash_sync("s3cret")}]}),
        db=str(tmp_path / "s.db"),
    )
    try:
        h.run(h.server.accounts.create("bob", PW))
        h.run(h.server.accounts.create("helper", AGENT_PW, kind="agent", owner="bob"))
        agent_login(h, "h1", caps=RM)
        h.send("h1", "OPER root s3cret")
        assert h.server.state.oper_count == 1
        h.disconnect("h1")
        assert h.server.state.oper_count == 1  # the always-on identity keeps +o, and its read markers
        assert "helper" in h.server.read_markers.by_account
        h.server.disconnect(h.server.state.find_nick("helper"), "Killed", quit_message="Killed (oper)")
        assert (h.server.state.oper_count, h.server.state.registered_count) == (0, 0)
        assert "helper" not in h.server.read_markers.by_account
    finally:
        h.close()


def test_redact_of_a_direct_message_reaches_every_connection_of_both_nicks(sh):
    caps = "message-tags echo-message batch draft/message-redaction"
    welcome(sh, "a1", "alice", "al", caps=caps)
    welcome(sh, "a2", "alice", "al", caps=caps)
    welcome(sh, "b1", "bob", "bob", caps=caps)
    welcome(sh, "b2", "bob", "bob", caps=caps)
    sh.send("a1", "PRIVMSG bob :oops")
    msgid = sh.messages("a1")[-1].tags["msgid"]
    for name in ("a1", "a2", "b1", "b2"):
        sh.take(name)
    sh.send("a1", f"REDACT bob {msgid}")
    for name in ("a1", "a2", "b1", "b2"):
        assert sh.lines(name) == [f":al!a1@127.0.0.1 REDACT bob {msgid}"], name
