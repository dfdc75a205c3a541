"""Behaviours the public irctest suite checks (see docs/conformance.md), guarded here without sockets.

Each test names the irctest case that first showed the problem and quotes the
spec sentence it rests on.
"""

from __future__ import annotations

import re

import pytest

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"
MSGID = re.compile(r"msgid=[0-9a-f]{16}")


def strip_msgid(line: str) -> str:
    """A line with its ``msgid`` tag removed (after checking its format)."""
    if not line.startswith("@"):
        return line
    tags, rest = line[1:].split(" ", 1)
    kept = []
    for tag in tags.split(";"):
        if tag.startswith("msgid="):
            assert MSGID.fullmatch(tag), line
        else:
            kept.append(tag)
    return ("@" + ";".join(kept) + " " + rest) if kept else rest


# labeled-response ------------------------------------------------------------


@pytest.mark.parametrize("command", ["PRIVMSG", "NOTICE"])
def test_labeled_message_to_self_labels_only_the_echo(h, command):
    """labeled-response: "When a client sends a message to itself, the server MUST NOT include
    the label tag, except for any echo-message acknowledgment. This is because the delivered
    message is not a response, but a side effect." (irctest testLabeledPrivmsgResponsesToSelf)"""
    h.register("alice", caps=["echo-message", "batch", "labeled-response"])
    h.send("alice", f"@label=12345 {command} alice :hi")
    assert h.lines("alice") == [
        f":{A} {command} alice hi",
        f"@label=12345 :{A} {command} alice hi",
    ]


def test_labeled_tagmsg_to_self_labels_only_the_echo(h):
    """The same rule for TAGMSG (irctest testLabeledTagMsgResponsesToSelf)."""
    h.register("alice", caps=["echo-message", "batch", "labeled-response", "message-tags"])
    h.send("alice", "@label=12345;+draft/reply=x TAGMSG alice")
    lines = [strip_msgid(line) for line in h.lines("alice")]
    assert lines == [
        f"@+draft/reply=x :{A} TAGMSG alice",
        f"@+draft/reply=x;label=12345 :{A} TAGMSG alice",
    ]


def test_message_to_self_without_echo_is_delivered_once_and_acked(h):
    """Without echo-message the delivered copy is the only message, so the label goes on an ACK."""
    h.register("alice", caps=["batch", "labeled-response"])
    h.send("alice", "@label=x PRIVMSG alice :hi")
    assert h.lines("alice") == [f":{A} PRIVMSG alice hi", "@label=x :irc.test ACK"]


# message-tags size limit -----------------------------------------------------


@pytest.fixture
def tagged_room(h):
    h.register("alice", caps=["message-tags", "echo-message"])
    h.register("bob", caps=["message-tags"])
    h.send("alice", "JOIN #test")
    h.send("bob", "JOIN #test")
    h.take("alice")
    h.take("bob")
    return h


def test_client_tag_data_at_the_limit_is_relayed(tagged_room):
    """message-tags: "Clients MUST NOT send messages with tag data exceeding 4094 bytes, this
    includes tags with or without the client-only prefix." 4094 bytes exactly are accepted
    (irctest testLengthLimits)."""
    h = tagged_room
    line = f"@foo=bar;+baz={'a' * 4081} TAGMSG #test"
    assert line.index("TAGMSG") == 4096  # "@" + 4094 bytes of tag data + " "
    h.send("alice", line)
    expected = f"@+baz={'a' * 4081} :{A} TAGMSG #test"
    assert [strip_msgid(x) for x in h.lines("alice")] == [expected]
    assert [strip_msgid(x) for x in h.lines("bob")] == [expected]


@pytest.mark.parametrize("command", ["TAGMSG #test", "PRIVMSG #test " + "b" * 495])
def test_client_tag_data_over_the_limit_is_417(tagged_room, command):
    """message-tags: "Servers MUST reject messages that exceed these limits by sending the
    ERR_INPUTTOOLONG (417) numeric" -- counting every tag, not only client-only ones."""
    h = tagged_room
    h.send("alice", f"@foo=bar;+baz={'a' * 4082} {command}")
    assert h.lines("alice") == [":irc.test 417 alice :Input line was too long"]
    assert h.lines("bob") == []


# KICK with several targets -----------------------------------------------------


@pytest.fixture
def four(h):
    for name in ("foo", "bar", "baz", "qux"):
        h.register(name)
        h.send(name, "JOIN #chan")
    for name in ("foo", "bar", "baz", "qux"):
        h.take(name)
    return h


@pytest.mark.parametrize("channels", ["#chan", "#chan,#chan"])
def test_kick_several_users(four, channels):
    """RFC 2812 3.2.8: "there MUST be either one channel parameter and multiple user parameter, or
    as many channel parameters as there are user parameters" (irctest testDoubleKickMessages)."""
    h = four
    h.send("foo", f"KICK {channels} bar,baz :bye")
    kicks = [":foo!foo@127.0.0.1 KICK #chan bar bye", ":foo!foo@127.0.0.1 KICK #chan baz bye"]
    assert h.lines("qux") == kicks
    assert h.lines("foo") == kicks
    assert {c.nick for c in h.server.state.find_channel("#chan").members} == {"foo", "qux"}


def test_kick_pairs_channels_with_users(h):
    """Several channels go with the user in the same position."""
    h.register("op")
    h.register("u1")
    h.register("u2")
    for name, chans in (("op", "#a,#b"), ("u1", "#a"), ("u2", "#b")):
        h.send(name, f"JOIN {chans}")
    for name in ("op", "u1", "u2"):
        h.take(name)
    h.send("op", "KICK #a,#b u1,u2 :out")
    assert h.lines("op") == [
        ":op!op@127.0.0.1 KICK #a u1 out",
        ":op!op@127.0.0.1 KICK #b u2 out",
    ]


def test_kick_mismatched_lists_and_too_many_targets(four):
    h = four
    h.send("foo", "KICK #chan,#chan bar")
    assert h.lines("foo") == [":irc.test 461 foo KICK :Not enough parameters"]
    h.send("foo", "KICK #chan a,b,c,d,e")
    assert h.lines("foo") == [":irc.test 407 foo a,b,c,d,e :Too many targets (at most 4)"]
    assert h.lines("bar") == []


def test_kick_not_operator_answers_once_per_channel(four):
    h = four
    h.send("bar", "KICK #chan baz,qux")
    assert h.lines("bar") == [":irc.test 482 bar #chan :You're not channel operator"]


def test_targmax_advertises_kick_targets(h):
    """Modern IRC, TARGMAX: the server advertises how many targets KICK takes."""
    tokens = " ".join(h.server.isupport_tokens())
    assert "KICK:4," in tokens


# extended-monitor ----------------------------------------------------------------


@pytest.fixture
def watching(h):
    """foo watches bar with MONITOR and shares no channel with it."""

    def make(caps: list[str]):
        h.register("foo", caps=caps)
        h.register("bar")
        h.send("foo", "MONITOR + bar")
        assert h.lines("foo") == [":irc.test 730 foo bar!bar@127.0.0.1"]
        return h

    return make


def test_extended_monitor_away(watching):
    """extended-monitor: "If away-notify is also enabled, the client will get AWAY notifications
    for monitored nicks." (irctest testExtendedMonitorAway)"""
    h = watching(["extended-monitor", "away-notify"])
    h.send("bar", "AWAY :afk")
    assert h.lines("foo") == [":bar!bar@127.0.0.1 AWAY afk"]
    h.send("bar", "AWAY")
    assert h.lines("foo") == [":bar!bar@127.0.0.1 AWAY"]


def test_extended_monitor_setname(watching):
    """extended-monitor: "If setname is also enabled, the client will get SETNAME notifications
    for monitored nicks." (irctest testExtendedMonitorSetName)"""
    h = watching(["extended-monitor", "setname"])
    h.send("bar", "SETNAME :new name")
    assert h.lines("foo") == [":bar!bar@127.0.0.1 SETNAME :new name"]


def test_extended_monitor_chghost(watching):
    """extended-monitor: "If chghost is also enabled, the client will get CHGHOST notifications
    for monitored nicks." """
    from ircd.commands.query import change_host

    h = watching(["extended-monitor", "chghost"])
    change_host(h.server, h.clients["bar"], "bar", "example.org")
    h.server.flush_all()
    assert h.lines("foo") == [":bar!bar@127.0.0.1 CHGHOST bar example.org"]


@pytest.mark.parametrize("caps", [["extended-monitor"], ["away-notify", "setname"]])
def test_extended_monitor_needs_both_caps(watching, caps):
    """Nothing without extended-monitor, and nothing without the notification's own capability
    (irctest testExtendedMonitorAwayNoCap, testExtendedMonitorSetNameNoCap)."""
    h = watching(caps)
    h.send("bar", "AWAY :afk")
    h.send("bar", "SETNAME :new name")
    assert h.lines("foo") == []


def test_extended_monitor_no_duplicate_for_channel_peers(watching):
    """A watcher that also shares a channel gets the notification once."""
    h = watching(["extended-monitor", "away-notify"])
    h.send("foo", "JOIN #x")
    h.send("bar", "JOIN #x")
    h.take("foo")
    h.send("bar", "AWAY :afk")
    assert h.lines("foo") == [":bar!bar@127.0.0.1 AWAY afk"]


# LIST with ELIST C M N T U ------------------------------------------------------


@pytest.fixture
def listed(h):
    """#chan1 (foo, made at t0, topic at t0) and #chan2 (foo and bar, made 3 minutes later)."""
    h.register("foo")
    h.register("bar")
    h.register("baz")
    h.send("foo", "JOIN #chan1")
    h.send("foo", "TOPIC #chan1 :First")
    h.clock.advance(180)
    h.send("foo", "JOIN #chan2")
    h.send("bar", "JOIN #chan2")
    h.clock.advance(60)
    for name in ("foo", "bar", "baz"):
        h.take(name)
    return h


def listed_names(h, line: str) -> list[str]:
    h.send("baz", line)
    msgs = h.messages("baz")
    assert msgs[0].command == "321" and msgs[-1].command == "323", msgs
    return sorted(m.params[1] for m in msgs if m.command == "322")


@pytest.mark.parametrize(
    "terms, expected",
    [
        ("*an1", ["#chan1"]),  # M (irctest testListMask)
        ("#c*n2", ["#chan2"]),
        ("#ch*", ["#chan1", "#chan2"]),
        ("*an3", []),
        ("!*an1", ["#chan2"]),  # N (irctest testListNotMask)
        ("!#ch*", []),
        ("#chan1,*an2", ["#chan1", "#chan2"]),  # names and masks add up
        (">1", ["#chan2"]),  # U
        ("<2", ["#chan1"]),
        ("C>2", ["#chan1"]),  # C: created more than 2 minutes ago
        ("C<2", ["#chan2"]),
        ("C<0", []),
        ("C>0", ["#chan1", "#chan2"]),
        ("T>2", ["#chan1"]),  # T: only channels with a topic
        ("T<2", []),
        ("#ch*,>1", ["#chan2"]),  # conditions all hold
        ("#chan1,#nope", ["#chan1"]),
    ],
)
def test_list_elist_terms(listed, terms, expected):
    """Modern IRC ELIST: "M: Searching based on mask. N: Searching based on a non-matching mask.
    C: ... created either less than `val` minutes ago, or more than `val` minutes ago.
    T: ... topic time that was set less than `val` minutes ago, or more than `val` minutes ago.
    U: ... user count"; the time terms read as in ircdocs/modern-irc#171."""
    assert listed_names(listed, f"LIST {terms}") == expected


def test_list_masks_hide_secret_channels(listed):
    h = listed
    h.send("foo", "MODE #chan2 +s")
    assert listed_names(h, "LIST #ch*") == ["#chan1"]


def test_isupport_elist(h):
    assert "ELIST=CMNTU" in h.server.isupport_tokens()


# LINKS ------------------------------------------------------------------------


def test_links_lists_this_server(h):
    """RFC 2812 3.4.5: "a server must send replies back using the RPL_LINKS numeric and mark the
    end of the list using an RPL_ENDOFLINKS reply" (irctest testLinksSingleServer)."""
    h.register("alice")
    h.send("alice", "LINKS")
    assert h.lines("alice") == [
        ":irc.test 364 alice irc.test irc.test :0 pircd IRC server",
        ":irc.test 365 alice * :End of /LINKS list",
    ]


# capabilities added at run time -----------------------------------------------------


def test_added_capabilities_get_their_own_bits(h):
    """A capability added by accounts or an extension must not share a bit with a core one:
    it did (bit 32 = chghost), so CAP LIST showed draft/account-registration to anyone who
    enabled echo-message (irctest testCapRemovalByClient)."""
    from ircd.caps import Capability

    registry = h.server.caps
    for name in ("x.test/one", "x.test/two"):
        registry.add(Capability(name))
    bits = [cap.bit for cap in registry._by_name.values()]
    assert all(bit and bit & (bit - 1) == 0 for bit in bits)  # one bit each
    assert len(set(bits)) == len(bits)
    h.register("alice", caps=["echo-message", "server-time", "chghost"])
    h.send("alice", "CAP LIST")
    assert [m.params[-1] for m in h.messages("alice")] == ["cap-notify chghost echo-message server-time"]


# INVITE without parameters ------------------------------------------------------------


def test_invite_without_parameters_lists_invites(h):
    """Modern IRC: "Servers MAY allow the INVITE with no parameter, and reply with a list of
    channels the sender is invited to as RPL_INVITELIST (336) numerics, ending with a
    RPL_ENDOFINVITELIST (337) numeric." (irctest testInviteList)"""
    h.register("foo")
    h.register("bar")
    h.send("foo", "JOIN #chan")
    h.send("foo", "INVITE bar #chan")
    h.take("bar")
    h.send("bar", "INVITE")
    assert h.lines("bar") == [
        ":irc.test 336 bar #chan",
        ":irc.test 337 bar :End of /INVITE list",
    ]
    h.send("bar", "JOIN #chan")  # joining uses the invitation up
    h.take("bar")
    h.send("bar", "INVITE")
    assert h.lines("bar") == [":irc.test 337 bar :End of /INVITE list"]
    h.send("bar", "INVITE foo")
    assert h.lines("bar") == [":irc.test 461 bar INVITE :Not enough parameters"]


# the optional <target> of MOTD, VERSION, TIME, ADMIN, INFO -----------------------------


@pytest.mark.parametrize("command", ["MOTD", "VERSION", "TIME", "ADMIN", "INFO"])
def test_target_naming_another_server_is_402(h, command):
    """RFC 2812 3.4.10 (INFO, and likewise MOTD, VERSION, TIME, ADMIN): ERR_NOSUCHSERVER when
    <target> names no server (irctest testInfoNosuchserver, outside the default selection)."""
    h.register("alice")
    for target in ("invalid.server.example", "invalidserver"):
        h.send("alice", f"{command} {target}")
        assert h.lines("alice") == [f":irc.test 402 alice {target} :No such server"]


@pytest.mark.parametrize(
    "command, first",
    [
        ("MOTD", "375"),
        ("VERSION", "351"),
        ("TIME", "391"),
        ("ADMIN", "256"),
        ("INFO", "371"),
    ],
)
def test_target_naming_this_server(h, command, first):
    """This server by name, by a mask matching it, or by the nick of someone connected here."""
    h.register("alice")
    h.register("bob")
    for target in ("irc.test", "IRC.TEST", "*.test", "bob"):
        h.send("alice", f"{command} {target}")
        assert h.numerics("alice")[0] == first, (command, target)
