"""Extended list masks (ISUPPORT EXTBAN=,am): a:<account> and the mute m:<mask>."""

from __future__ import annotations

import base64

from tests import dbs
from tests.harness import Harness, config


def test_isupport_advertises_both_extbans(h):
    """ircdocs EXTBAN: "<prefix>,<types>"; no prefix here, so masks are a:<account> and m:<mask>
    (the form Ergo uses for mutes, EXTBAN=,m); IRCv3 account-extban names a in ACCOUNTEXTBAN."""
    h.connect("c")
    h.send("c", "NICK c")
    h.send("c", "USER c 0 * :c")
    isupport = " ".join(ln for ln in h.lines("c") if " 005 " in ln)
    assert " EXTBAN=,am " in isupport and " ACCOUNTEXTBAN=a " in isupport


def mute_setup(h) -> None:
    h.register("op", "chanop")
    h.send("op", "JOIN #chan")
    h.send("op", "MODE #chan +b m:bar!*@*")
    assert h.lines("op")[-1] == ":chanop!op@127.0.0.1 MODE #chan +b m:bar!*@*"
    h.register("bar", caps=["echo-message"])
    h.send("bar", "JOIN #chan")
    assert h.lines("bar")[0] == ":bar!bar@127.0.0.1 JOIN #chan"
    h.take("op")


def test_muted_member_joins_and_reads_but_does_not_speak(h):
    """A mute (m:<mask> in the ban list) lets the matched member join and read but not send; the
    refusal is 404 ERR_CANNOTSENDTOCHAN (for PRIVMSG and TAGMSG), and a NOTICE is dropped without a
    reply (RFC 2812 3.3.2)."""
    mute_setup(h)
    h.send("bar", "MODE #chan +b")
    assert h.lines("bar") == [
        ":irc.test 367 bar #chan m:bar!*@* chanop!op@127.0.0.1 1800000000",
        ":irc.test 368 bar #chan :End of channel ban list",
    ]
    h.send("bar", "PRIVMSG #chan :hi from bar")
    h.send("bar", "NOTICE #chan :hi again")
    h.send("bar", "TAGMSG #chan")
    assert h.lines("bar") == [":irc.test 404 bar #chan :Cannot send to channel (+b)"] * 2
    assert h.lines("op") == []
    h.send("op", "PRIVMSG #chan :you can read this")
    assert h.lines("bar") == [":chanop!op@127.0.0.1 PRIVMSG #chan :you can read this"]
    h.send("op", "MODE #chan -b m:bar")
    h.take("bar")
    h.send("bar", "PRIVMSG #chan :hi again from bar")
    assert h.lines("bar") == [":bar!bar@127.0.0.1 PRIVMSG #chan :hi again from bar"]
    assert h.lines("op") == [
        ":chanop!op@127.0.0.1 MODE #chan -b m:bar!*@*",
        ":bar!bar@127.0.0.1 PRIVMSG #chan :hi again from bar",
    ]


def test_voice_and_ban_exception_override_a_mute(h):
    mute_setup(h)
    h.send("op", "MODE #chan +v bar")
    h.take("bar")
    h.send("bar", "PRIVMSG #chan :voiced")
    assert h.lines("bar") == [":bar!bar@127.0.0.1 PRIVMSG #chan voiced"]
    h.send("op", "MODE #chan -v+e bar bar!*@*")
    h.take("bar")
    h.send("bar", "PRIVMSG #chan :excepted")
    assert h.lines("bar") == [":bar!bar@127.0.0.1 PRIVMSG #chan excepted"]


def test_a_mute_is_not_a_ban_and_a_ban_still_is(h):
    """A mute never keeps anyone out; an ordinary ban in the same list still does, and silences a
    member it matches."""
    mute_setup(h)
    h.register("baz")
    h.send("op", "MODE #chan +b m:baz")
    h.send("baz", "JOIN #chan")
    assert h.lines("baz")[0] == ":baz!baz@127.0.0.1 JOIN #chan"
    h.send("op", "MODE #chan +b baz")
    h.take("baz")
    h.send("baz", "PRIVMSG #chan :x")
    h.send("baz", "PART #chan")
    h.send("baz", "JOIN #chan")
    assert h.lines("baz") == [
        ":irc.test 404 baz #chan :Cannot send to channel (+b)",
        ":baz!baz@127.0.0.1 PART #chan",
        ":irc.test 474 baz #chan :Cannot join channel (+b)",
    ]


def test_mutes_belong_in_the_ban_and_exception_lists(h):
    h.register("op")
    h.send("op", "JOIN #c")
    h.take("op")
    h.send("op", "MODE #c +eI m:x m:y")
    assert h.lines("op") == [
        ":irc.test 696 op #c I m:y!*@* :Mutes (m:) belong in the b and e lists",
        ":op!op@127.0.0.1 MODE #c +e m:x!*@*",
    ]


def test_mute_exception_lifts_a_mute_but_not_a_ban(h):
    """irctest testMuteExtbanExempt: ``+e m:<mask>`` lets a muted member speak (as Ergo's mute
    exceptions do); it is no exception to an ordinary ban, which still keeps out and silences."""
    mute_setup(h)
    h.send("op", "MODE #chan +e m:*!*bar@*")
    h.take("bar")
    h.take("op")
    h.send("bar", "PRIVMSG #chan :mute-excepted")
    assert h.lines("bar") == [":bar!bar@127.0.0.1 PRIVMSG #chan mute-excepted"]
    assert h.lines("op") == [":bar!bar@127.0.0.1 PRIVMSG #chan mute-excepted"]
    h.send("op", "MODE #chan +b bar")
    h.take("bar")
    h.send("bar", "PRIVMSG #chan :x")
    h.send("bar", "PART #chan")
    h.send("bar", "JOIN #chan")
    assert h.lines("bar") == [
        ":irc.test 404 bar #chan :Cannot send to channel (+b)",
        ":bar!bar@127.0.0.1 PART #chan",
        ":irc.test 474 bar #chan :Cannot join channel (+b)",
    ]


def login(h: Harness, name: str, nick: str, account: str) -> None:
    h.register(name, nick)
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + base64.b64encode(f"\0{account}\0password123".encode()).decode())
    assert h.numerics(name) == ["AUTHENTICATE", "900", "903"]


def cfg():
    return config(storage={"durability": "off"}, accounts={"argon2_time_cost": 1, "argon2_memory_kib": 8192})


def test_account_mute_and_the_older_account_form(tmp_path):
    """m:a:<account> mutes an account whatever its nick; $a:<account>, the account mask of earlier
    versions, is still accepted and stored as a:<account> (also when read back from the database)."""
    db = str(tmp_path / "x.db")
    h = Harness(cfg(), db=db)
    try:
        h.run(h.server.accounts.create("bob", "password123"))
        h.run(h.server.accounts.create("alice", "password123"))
        login(h, "a", "al", "alice")
        h.send("a", "JOIN #club")
        h.send("a", "MODE #club +bb m:a:bob $a:carol")
        assert h.lines("a")[-1] == ":al!a@127.0.0.1 MODE #club +bb m:a:bob a:carol"
        login(h, "b", "robert", "bob")
        h.send("b", "JOIN #club")
        h.take("b")
        h.send("b", "PRIVMSG #club :hello")
        assert h.lines("b") == [":irc.test 404 robert #club :Cannot send to channel (+b)"]
        h.settle()
    finally:
        h.close()
    with dbs.connect(db) as conn:  # a row as an earlier version wrote it
        conn.execute("UPDATE channel_lists SET mask = '$a:carol' WHERE mask = 'a:carol'")
    h2 = Harness(cfg(), db=db)
    try:
        channel = h2.server.state.find_channel("#club")
        assert [e.mask for e in channel.lists["b"]] == ["m:a:bob", "a:carol"]
        login(h2, "a", "al", "alice")
        h2.send("a", "MODE #club -b $a:carol")
        assert h2.lines("a") == [":al!a@127.0.0.1 MODE #club -b a:carol"]
    finally:
        h2.close()
