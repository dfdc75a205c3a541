"""Channel commands: JOIN, PART, TOPIC, NAMES, LIST, INVITE, KICK."""

from __future__ import annotations

import pytest

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"
C = "carol!carol@127.0.0.1"


@pytest.fixture
def ab(h):
    """alice and bob registered, their outboxes empty."""
    h.register("alice")
    h.register("bob")
    return h


def in_channel(h, channel, *names):
    for name in names:
        h.send(name, f"JOIN {channel}")
    for name in names:
        h.take(name)


# JOIN ----------------------------------------------------------------------


def test_join_creates_channel_with_op(ab):
    """RFC 2812 3.2.1: "If a JOIN is successful, the user receives a JOIN message as confirmation and is
    then sent the channel's topic (using RPL_TOPIC) and the list of users who are on the channel (using
    RPL_NAMREPLY), which MUST include the user joining.\""""
    h = ab
    h.send("alice", "JOIN #Room")
    assert h.lines("alice") == [
        f":{A} JOIN #Room",
        ":irc.test 353 alice = #Room @alice",
        ":irc.test 366 alice #Room :End of /NAMES list",
    ]
    h.send("bob", "JOIN #room")
    assert h.lines("bob") == [
        f":{B} JOIN #Room",
        ":irc.test 353 bob = #Room :@alice bob",
        ":irc.test 366 bob #Room :End of /NAMES list",
    ]
    assert h.lines("alice") == [f":{B} JOIN #Room"]
    # joining again is a no-op
    h.send("bob", "JOIN #ROOM")
    assert h.lines("bob") == []


def test_join_list_and_bad_names(ab):
    """RFC 2812 3.2.1: "JOIN #foo,#bar ; Command to join channels #foo, and #bar.\""""
    h = ab
    h.send("alice", "JOIN #a,nochan,#b")
    assert h.lines("alice") == [
        f":{A} JOIN #a",
        ":irc.test 353 alice = #a @alice",
        ":irc.test 366 alice #a :End of /NAMES list",
        ":irc.test 403 alice nochan :No such channel",
        f":{A} JOIN #b",
        ":irc.test 353 alice = #b @alice",
        ":irc.test 366 alice #b :End of /NAMES list",
    ]
    h.send("alice", "JOIN")
    assert h.lines("alice") == [":irc.test 461 alice JOIN :Not enough parameters"]
    h.send("alice", "JOIN #" + "x" * 64)
    assert h.lines("alice") == [f":irc.test 403 alice #{'x' * 64} :No such channel"]


def test_join_with_keys(ab):
    """RFC 2812 3.2.1: "JOIN #foo,&bar fubar ; Command to join channel #foo using key "fubar" and &bar
    using no key.\""""
    h = ab
    h.send("alice", "JOIN #a,#b")
    h.send("alice", "MODE #a +k akey")
    h.send("alice", "MODE #b +k bkey")
    h.take("alice")
    h.send("bob", "JOIN #a,#b akey")
    assert h.lines("bob") == [
        f":{B} JOIN #a",
        ":irc.test 353 bob = #a :@alice bob",
        ":irc.test 366 bob #a :End of /NAMES list",
        ":irc.test 475 bob #b :Cannot join channel (+k)",
    ]
    h.send("bob", "JOIN #b,#a wrong,bkey")
    assert h.lines("bob") == [":irc.test 475 bob #b :Cannot join channel (+k)"]
    h.send("bob", "JOIN #b bkey")
    assert h.numerics("bob") == ["JOIN", "353", "366"]


def test_join_zero_parts_everything(ab):
    """RFC 2812 3.2.1: "Note that this message accepts a special argument ("0"), which is a special request
    to leave all channels the user is currently a member of.\""""
    h = ab
    in_channel(h, "#a,#b", "alice", "bob")
    h.send("bob", "JOIN 0")
    assert h.lines("bob") == [f":{B} PART #a", f":{B} PART #b"]
    assert h.lines("alice") == [f":{B} PART #a", f":{B} PART #b"]
    assert h.clients["bob"].channels == {}


def test_join_sends_topic(ab):
    """RFC 2812 3.2.1: "... and is then sent the channel's topic (using RPL_TOPIC)\""""
    h = ab
    h.send("alice", "JOIN #a")
    h.send("alice", "TOPIC #a :the topic")
    h.take("alice")
    h.send("bob", "JOIN #a")
    assert h.lines("bob") == [
        f":{B} JOIN #a",
        ":irc.test 332 bob #a :the topic",
        f":irc.test 333 bob #a {A} 1800000000",
        ":irc.test 353 bob = #a :@alice bob",
        ":irc.test 366 bob #a :End of /NAMES list",
    ]


def test_too_many_channels_405(make_harness):
    """RFC 2812 ERR_TOOMANYCHANNELS: "Sent to a user when they have joined the maximum number of allowed
    channels and they try to join another channel.\""""
    h = make_harness(limits={"channels_per_client": 1})
    h.register("alice")
    h.send("alice", "JOIN #a,#b")
    assert h.lines("alice")[-1] == ":irc.test 405 alice #b :You have joined too many channels"


# PART ----------------------------------------------------------------------


def test_part(ab):
    """RFC 2812 3.2.2: "The PART command causes the user sending the message to be removed from the list
    of active members for all given channels listed in the parameter string.\""""
    h = ab
    in_channel(h, "#a,#b", "alice", "bob")
    h.send("bob", "PART #a,#b,#nope :see you later")
    assert h.lines("bob") == [
        f":{B} PART #a :see you later",
        f":{B} PART #b :see you later",
        ":irc.test 403 bob #nope :No such channel",
    ]
    assert h.lines("alice") == [f":{B} PART #a :see you later", f":{B} PART #b :see you later"]
    h.send("bob", "PART #a")
    assert h.lines("bob") == [":irc.test 442 bob #a :You're not on that channel"]
    h.send("bob", "PART")
    assert h.lines("bob") == [":irc.test 461 bob PART :Not enough parameters"]


def test_last_part_destroys_channel(ab):
    """A channel ceases to exist when the last member leaves."""
    h = ab
    h.send("alice", "JOIN #a")
    h.send("alice", "TOPIC #a :old")
    h.send("alice", "PART #a")
    h.take("alice")
    h.send("bob", "JOIN #a")
    assert h.lines("bob") == [
        f":{B} JOIN #a",
        ":irc.test 353 bob = #a @bob",
        ":irc.test 366 bob #a :End of /NAMES list",
    ]


# TOPIC ---------------------------------------------------------------------


def test_topic(ab):
    """RFC 2812 3.2.4: "The TOPIC command is used to change or view the topic of a channel. The topic for
    channel <channel> is returned if there is no <topic> given. If the <topic> parameter is present, the
    topic for that channel will be changed\""""
    h = ab
    in_channel(h, "#a", "alice", "bob")
    h.send("bob", "TOPIC #a")
    assert h.lines("bob") == [":irc.test 331 bob #a :No topic is set"]
    h.send("alice", "TOPIC #a :Hello world")
    assert h.lines("alice") == [f":{A} TOPIC #a :Hello world"]
    assert h.lines("bob") == [f":{A} TOPIC #a :Hello world"]
    h.clock.advance(5)
    h.send("bob", "TOPIC #a")
    assert h.lines("bob") == [
        ":irc.test 332 bob #a :Hello world",
        f":irc.test 333 bob #a {A} 1800000000",
    ]
    h.send("alice", "TOPIC #a :")
    assert h.lines("bob") == [f":{A} TOPIC #a :"]
    h.send("bob", "TOPIC #a")
    assert h.lines("bob") == [":irc.test 331 bob #a :No topic is set"]


def test_topic_protected_and_errors(ab):
    """RFC 2812 3.2.4: "If RPL_TOPIC is returned to the client sending this command, ... ERR_CHANOPRIVSNEEDED
    ... if the channel mode +t is set and the client is not a channel operator.\""""
    h = ab
    in_channel(h, "#a", "alice", "bob")
    h.register("carol")
    h.send("bob", "TOPIC #a :mine now")
    assert h.lines("bob") == [":irc.test 482 bob #a :You're not channel operator"]
    h.send("carol", "TOPIC #a :outsider")
    h.send("carol", "TOPIC #nope")
    h.send("carol", "TOPIC")
    assert h.lines("carol") == [
        ":irc.test 442 carol #a :You're not on that channel",
        ":irc.test 403 carol #nope :No such channel",
        ":irc.test 461 carol TOPIC :Not enough parameters",
    ]
    h.send("alice", "MODE #a -t")
    h.take("bob")
    h.send("bob", "TOPIC #a :now I can")
    assert h.lines("bob") == [f":{B} TOPIC #a :now I can"]


def test_topic_is_truncated_to_topiclen(make_harness):
    """ISUPPORT TOPICLEN: "the maximum length of a topic that can be set.\""""
    h = make_harness(limits={"topiclen": 10})
    h.register("alice")
    h.send("alice", "JOIN #a")
    h.take("alice")
    h.send("alice", "TOPIC #a :0123456789abcdef")
    assert h.lines("alice") == [f":{A} TOPIC #a 0123456789"]


# NAMES ---------------------------------------------------------------------


def test_names(ab):
    """RFC 2812 3.2.5: "By using the NAMES command, a user can list all nicknames that are visible to him.\""""
    h = ab
    in_channel(h, "#a", "alice", "bob")
    h.send("alice", "MODE #a +v bob")
    h.take("bob")
    h.send("bob", "NAMES #A")
    assert h.lines("bob") == [
        ":irc.test 353 bob = #a :@alice +bob",
        ":irc.test 366 bob #a :End of /NAMES list",
    ]
    h.send("bob", "NAMES #nope")
    assert h.lines("bob") == [":irc.test 366 bob #nope :End of /NAMES list"]
    h.send("bob", "NAMES")
    assert h.lines("bob") == [":irc.test 366 bob * :End of /NAMES list"]


def test_names_several_channels_share_one_end(ab):
    """RFC 2812 3.2.5: "NAMES #twilight_zone,#42 ; Command to list visible users on #twilight_zone
    and #42"; Modern IRC: the server sends "a RPL_ENDOFNAMES numeric containing the list of channels
    (which MAY be the same as the client sent)" after the RPL_NAMREPLY lines. A channel that does not
    exist (or is hidden) has no 353 line; TARGMAX says how many channels one NAMES takes."""
    h = ab
    in_channel(h, "#a", "alice", "bob")
    in_channel(h, "#b", "bob")
    h.send("bob", "NAMES #a,#nope,#b")
    assert h.lines("bob") == [
        ":irc.test 353 bob = #a :@alice bob",
        ":irc.test 353 bob = #b @bob",
        ":irc.test 366 bob #a,#nope,#b :End of /NAMES list",
    ]
    h.send("bob", "NAMES #a,#b,#c,#d,#e")
    assert h.lines("bob") == [
        ":irc.test 407 bob #a,#b,#c,#d,#e :Too many targets (at most 4)",
    ]
    assert "NAMES:4" in next(t for t in h.server.isupport_tokens() if t.startswith("TARGMAX="))


def test_names_secret_channel_and_invisible_users(ab):
    """RFC 2812 3.2.5: "Channels which ... are private (+p) or secret (+s) ... are not listed" to
    non-members, and invisible users (+i) are only shown to those sharing the channel."""
    h = ab
    h.register("carol")
    in_channel(h, "#a", "alice", "bob")
    h.send("bob", "MODE bob +i")
    h.take("bob")
    h.send("carol", "NAMES #a")
    assert h.lines("carol") == [
        ":irc.test 353 carol = #a @alice",
        ":irc.test 366 carol #a :End of /NAMES list",
    ]
    h.send("alice", "MODE #a +s")
    h.send("carol", "NAMES #a")
    assert h.lines("carol") == [":irc.test 366 carol #a :End of /NAMES list"]
    h.send("bob", "NAMES #a")
    assert h.lines("bob")[-2:] == [
        ":irc.test 353 bob @ #a :@alice bob",
        ":irc.test 366 bob #a :End of /NAMES list",
    ]


def test_names_split_across_lines(h):
    """Each RPL_NAMREPLY stays within the 512-byte line limit."""
    names = [f"user{i:03d}xxxxxxxxxxxxxxxxxxxx" for i in range(40)]
    for n in names:
        h.register(n)
        h.send(n, "JOIN #big")
        h.take(n)
    h.register("viewer")
    h.send("viewer", "NAMES #big")
    msgs = h.messages("viewer")
    assert [m.command for m in msgs][-1] == "366"
    assert len(msgs) >= 3
    listed = " ".join(m.params[3] for m in msgs[:-1]).split()
    assert listed == ["@" + names[0], *names[1:]]
    for m in msgs:
        assert len(m.format()) <= 512


# LIST ----------------------------------------------------------------------


def test_list(ab):
    """RFC 2812 3.2.6: "The list command is used to list channels and their topics.\""""
    h = ab
    h.register("carol")
    in_channel(h, "#a", "alice", "bob")
    in_channel(h, "#b", "alice")
    h.send("alice", "TOPIC #a :talk here")
    h.send("carol", "LIST")
    assert h.lines("carol") == [
        ":irc.test 321 carol Channel :Users  Name",
        ":irc.test 322 carol #a 2 :talk here",
        ":irc.test 322 carol #b 1 :",
        ":irc.test 323 carol :End of /LIST",
    ]
    h.send("carol", "LIST #b,#nope")
    assert h.lines("carol") == [
        ":irc.test 321 carol Channel :Users  Name",
        ":irc.test 322 carol #b 1 :",
        ":irc.test 323 carol :End of /LIST",
    ]


def test_list_elist_user_count(ab):
    """Modern IRC ELIST U: "Searching based on user count within the channel, via the "<val" and ">val"
    modifiers to search for a channel that has less or more than val users, respectively.\""""
    h = ab
    h.register("carol")
    in_channel(h, "#one", "alice")
    in_channel(h, "#two", "alice", "bob")
    in_channel(h, "#three", "alice", "bob", "carol")
    h.send("carol", "LIST >1")
    assert h.lines("carol") == [
        ":irc.test 321 carol Channel :Users  Name",
        ":irc.test 322 carol #two 2 :",
        ":irc.test 322 carol #three 3 :",
        ":irc.test 323 carol :End of /LIST",
    ]
    h.send("carol", "LIST <3")
    assert h.lines("carol") == [
        ":irc.test 321 carol Channel :Users  Name",
        ":irc.test 322 carol #one 1 :",
        ":irc.test 322 carol #two 2 :",
        ":irc.test 323 carol :End of /LIST",
    ]
    h.send("carol", "LIST >1,<3")
    assert h.lines("carol") == [
        ":irc.test 321 carol Channel :Users  Name",
        ":irc.test 322 carol #two 2 :",
        ":irc.test 323 carol :End of /LIST",
    ]


def test_list_hides_secret_channels(ab):
    """RFC 2812 3.2.6: private and secret channels are not listed to non-members."""
    h = ab
    in_channel(h, "#hidden", "alice")
    h.send("alice", "MODE #hidden +s")
    h.send("bob", "LIST")
    assert h.lines("bob") == [
        ":irc.test 321 bob Channel :Users  Name",
        ":irc.test 323 bob :End of /LIST",
    ]
    h.take("alice")
    h.send("alice", "LIST")
    assert h.lines("alice") == [
        ":irc.test 321 alice Channel :Users  Name",
        ":irc.test 322 alice #hidden 1 :",
        ":irc.test 323 alice :End of /LIST",
    ]


# INVITE --------------------------------------------------------------------


def test_invite_to_invite_only_channel(ab):
    """RFC 2812 3.2.7: "The INVITE command is used to invite a user to a channel. ... Only the user inviting
    and the user being invited will receive notification of the invitation.\""""
    h = ab
    in_channel(h, "#a", "alice")
    h.send("alice", "MODE #a +i")
    h.take("alice")
    h.send("bob", "JOIN #a")
    assert h.lines("bob") == [":irc.test 473 bob #a :Cannot join channel (+i)"]
    h.send("alice", "INVITE bob #a")
    assert h.lines("alice") == [":irc.test 341 alice bob #a"]
    assert h.lines("bob") == [f":{A} INVITE bob #a"]
    h.send("bob", "JOIN #a")
    assert h.numerics("bob") == ["JOIN", "353", "366"]
    # an invitation is used up by the join
    h.send("bob", "PART #a")
    h.send("bob", "JOIN #a")
    assert h.lines("bob") == [f":{B} PART #a", ":irc.test 473 bob #a :Cannot join channel (+i)"]


def test_invite_errors(ab):
    """RFC 2812 3.2.7: "If the channel has invite only flag set, only channel operators may issue INVITE
    command.\""""
    h = ab
    h.register("carol")
    in_channel(h, "#a", "alice", "bob")
    h.send("alice", "MODE #a +i")
    h.take("bob")
    h.send("bob", "INVITE carol #a")
    h.send("bob", "INVITE nobody #a")
    h.send("bob", "INVITE carol #nope")
    h.send("carol", "INVITE bob #a")
    h.send("alice", "INVITE bob #a")
    h.send("bob", "INVITE carol")
    assert h.lines("bob") == [
        ":irc.test 482 bob #a :You're not channel operator",
        ":irc.test 401 bob nobody :No such nick/channel",
        ":irc.test 403 bob #nope :No such channel",
        ":irc.test 461 bob INVITE :Not enough parameters",
    ]
    assert h.lines("carol") == [":irc.test 442 carol #a :You're not on that channel"]
    assert h.lines("alice") == [f":{A} MODE #a +i", ":irc.test 443 alice bob #a :is already on channel"]


def test_invite_reports_away(ab):
    """RFC 2812 3.2.7: "RPL_AWAY" is among the replies to INVITE when the invited user is away."""
    h = ab
    in_channel(h, "#a", "alice")
    h.send("bob", "AWAY :lunch")
    h.send("alice", "INVITE bob #a")
    assert h.lines("alice") == [":irc.test 341 alice bob #a", ":irc.test 301 alice bob lunch"]


# KICK ----------------------------------------------------------------------


def test_kick(ab):
    """RFC 2812 3.2.8: "The KICK command can be used to request the forced removal of a user from a
    channel.\""""
    h = ab
    h.register("carol")
    in_channel(h, "#a", "alice", "bob", "carol")
    h.send("alice", "KICK #a bob :out you go")
    assert h.lines("alice") == [f":{A} KICK #a bob :out you go"]
    assert h.lines("bob") == [f":{A} KICK #a bob :out you go"]
    assert h.lines("carol") == [f":{A} KICK #a bob :out you go"]
    assert "#a" not in h.clients["bob"].channels
    # the default reason is the kicker's nick
    h.send("alice", "KICK #a carol")
    assert h.lines("carol") == [f":{A} KICK #a carol alice"]


def test_kick_several_and_errors(ab):
    """RFC 2812 3.2.8: "For the message to be syntactically correct, there MUST be either one channel
    parameter and multiple user parameter, or as many channel parameters as there are user parameters.\""""
    h = ab
    h.register("carol")
    in_channel(h, "#a", "alice", "bob", "carol")
    h.send("bob", "KICK #a carol")
    assert h.lines("bob") == [":irc.test 482 bob #a :You're not channel operator"]
    h.send("alice", "KICK #a bob,nobody,carol :bye")
    assert h.lines("alice") == [
        f":{A} KICK #a bob bye",
        ":irc.test 441 alice nobody #a :They aren't on that channel",
        f":{A} KICK #a carol bye",
    ]
    h.send("bob", "KICK #a alice")
    h.send("bob", "KICK #nope alice")
    h.send("bob", "KICK #a")
    assert h.lines("bob") == [
        f":{A} KICK #a bob bye",
        ":irc.test 442 bob #a :You're not on that channel",
        ":irc.test 403 bob #nope :No such channel",
        ":irc.test 461 bob KICK :Not enough parameters",
    ]


@pytest.mark.parametrize(("name", "valid"), [
    ("#a", True), ("#", False), ("a", False), ("#" + "x" * 63, True), ("#" + "x" * 64, False),
    ("#a b", False), ("#a,b", False), ("#a\x07b", False), ("#a\tb", True), ("#ünï", True), ("#ü b", False),
    ("#ü,b", False), ("#ü\x07", False), ("#ü\x00", False), ("#a\r", False), ("#ü\n", False),
])
def test_a_channel_name_is_refused_for_a_space_comma_bell_nul_or_line_break(h, name, valid):
    """RFC 2812 1.3: "Channels names are strings ... [that] SHALL NOT contain any spaces (' '), a
    control G (^G or ASCII 7), a comma (',')"; NUL, CR and LF cannot be in a line. The same answer
    whether the name is ASCII (checked printable first) or not."""
    from ircd.commands.channel import valid_channel_name

    assert valid_channel_name(h.server, name) is valid


def test_every_character_the_channel_name_rule_forbids_is_refused_in_an_ascii_name_too(h):
    """valid_channel_name checks a printable ASCII name for a space and a comma only: every other
    character of the rule's set must be one that is not printable, so the short path cannot miss it."""
    from ircd.commands.channel import _BAD_CHANNEL_CHARS, valid_channel_name

    for char in _BAD_CHANNEL_CHARS:
        assert valid_channel_name(h.server, f"#a{char}b") is False, repr(char)
