"""PRIVMSG, NOTICE and TAGMSG: targets, TARGMAX, channel restrictions, AWAY replies, STATUSMSG."""

from __future__ import annotations

import re

import pytest

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"
MSGID = re.compile(r"^@msgid=[0-9a-f]{16} ")


@pytest.fixture
def room(h):
    """alice (op), bob and carol in #a; carol has message-tags. Outboxes empty."""
    h.register("alice")
    h.register("bob")
    h.register("carol", caps=["message-tags"])
    for name in ("alice", "bob", "carol"):
        h.send(name, "JOIN #a")
    for name in ("alice", "bob", "carol"):
        h.take(name)
    return h


def untagged(lines: list[str]) -> list[str]:
    """Lines with a leading msgid tag removed (after checking its format)."""
    out = []
    for line in lines:
        if line.startswith("@msgid="):
            assert MSGID.match(line), line
            line = line.split(" ", 1)[1]
        out.append(line)
    return out


def test_privmsg_to_user(room):
    """RFC 2812 3.3.1: "PRIVMSG is used to send private messages between users, as well as to send
    messages to channels.\""""
    h = room
    h.send("alice", "PRIVMSG bob :hello bob")
    assert h.lines("alice") == []
    assert h.lines("bob") == [f":{A} PRIVMSG bob :hello bob"]
    h.send("alice", "PRIVMSG BOB :case")
    assert h.lines("bob") == [f":{A} PRIVMSG bob case"]


def test_privmsg_to_channel_reaches_everyone_but_sender(room):
    """RFC 2812 3.3.1: a message to a channel goes to its members (the sender gets no copy)."""
    h = room
    h.send("alice", "PRIVMSG #a :hello all")
    assert h.lines("alice") == []
    assert h.lines("bob") == [f":{A} PRIVMSG #a :hello all"]
    assert untagged(h.lines("carol")) == [f":{A} PRIVMSG #a :hello all"]


def test_multiple_targets(room):
    """RFC 2812 3.3.1: "<msgtarget>" may be a comma-separated list; each target gets the message once."""
    h = room
    h.register("dave")
    h.send("dave", "PRIVMSG bob,alice,BOB :hey")
    assert h.lines("dave") == []
    assert h.lines("bob") == [":dave!dave@127.0.0.1 PRIVMSG bob hey"]
    assert h.lines("alice") == [":dave!dave@127.0.0.1 PRIVMSG alice hey"]


def test_too_many_targets_407(room):
    """Modern IRC ERR_TOOMANYTARGETS (407) and ISUPPORT TARGMAX: "the maximum number of targets allowed
    for commands which accept multiple targets.\""""
    h = room
    h.send("alice", "PRIVMSG bob,carol,#a,x,y :hi")
    assert h.lines("alice") == [":irc.test 407 alice bob,carol,#a,x,y :Too many targets (at most 4)"]
    assert h.lines("bob") == []
    h.send("alice", "PRIVMSG bob,carol,#a,x :hi")
    assert h.lines("alice") == [":irc.test 401 alice x :No such nick/channel"]
    assert h.lines("bob") == [f":{A} PRIVMSG bob hi", f":{A} PRIVMSG #a hi"]


def test_privmsg_errors(room):
    """RFC 2812 3.3.1 numeric replies: ERR_NORECIPIENT, ERR_NOTEXTTOSEND, ERR_NOSUCHNICK, ERR_CANNOTSENDTOCHAN."""
    h = room
    h.send("alice", "PRIVMSG")
    h.send("alice", "PRIVMSG bob")
    h.send("alice", "PRIVMSG bob :")
    h.send("alice", "PRIVMSG nobody :hi")
    h.send("alice", "PRIVMSG #nope :hi")
    assert h.lines("alice") == [
        ":irc.test 411 alice :No recipient given (PRIVMSG)",
        ":irc.test 412 alice :No text to send",
        ":irc.test 412 alice :No text to send",
        ":irc.test 401 alice nobody :No such nick/channel",
        ":irc.test 403 alice #nope :No such channel",
    ]


def test_notice_never_answered(room):
    """RFC 2812 3.3.2: "automatic replies MUST NEVER be sent in response to a NOTICE message.\""""
    h = room
    h.register("dave")
    h.send("alice", "MODE #a +m")
    h.send("dave", "NOTICE")
    h.send("dave", "NOTICE bob")
    h.send("dave", "NOTICE nobody :x")
    h.send("dave", "NOTICE #nope :x")
    h.send("dave", "NOTICE #a :x")
    h.send("dave", "NOTICE a,b,c,d,e :x")
    assert h.lines("dave") == []
    h.send("dave", "NOTICE bob :psst")
    assert h.lines("bob") == [f":{A} MODE #a +m", ":dave!dave@127.0.0.1 NOTICE bob psst"]


def test_no_external_and_moderated_and_ban(room):
    """RFC 2811 4.2.3/4.2.5 and 4.3.1: +n keeps outsiders out, +m silences unvoiced members, a ban
    silences a member."""
    h = room
    h.register("dave")
    h.send("dave", "PRIVMSG #a :outside")
    assert h.lines("dave") == [":irc.test 404 dave #a :Cannot send to channel (+n)"]
    h.send("alice", "MODE #a +b bob")
    h.send("bob", "PRIVMSG #a :can I speak")
    assert h.lines("bob") == [f":{A} MODE #a +b bob!*@*", ":irc.test 404 bob #a :Cannot send to channel (+b)"]
    h.send("alice", "MODE #a -b+m bob")
    h.send("bob", "PRIVMSG #a :and now")
    assert h.lines("bob") == [f":{A} MODE #a -b+m bob!*@*", ":irc.test 404 bob #a :Cannot send to channel (+m)"]
    h.send("alice", "MODE #a +v bob")
    h.take("bob")
    h.send("bob", "PRIVMSG #a :voiced")
    assert h.lines("bob") == []
    assert h.lines("alice")[-1] == f":{B} PRIVMSG #a voiced"


def test_away_reply_301(room):
    """RFC 2812 3.3.1: "RPL_AWAY" is a PRIVMSG reply; RFC 2812 4.1: "the server ... will reply with
    RPL_AWAY" when a message is sent to an away user (never for NOTICE)."""
    h = room
    h.send("bob", "AWAY :out to lunch")
    h.take("bob")
    h.send("alice", "PRIVMSG bob :are you there")
    h.send("alice", "NOTICE bob :are you there")
    assert h.lines("alice") == [":irc.test 301 alice bob :out to lunch"]
    assert h.lines("bob") == [f":{A} PRIVMSG bob :are you there", f":{A} NOTICE bob :are you there"]


def test_statusmsg(room):
    """Modern IRC STATUSMSG: "clients can send messages to channel members who have at least the given
    prefix"."""
    h = room
    h.send("alice", "MODE #a +v carol")
    for name in ("alice", "bob", "carol"):
        h.take(name)
    h.send("bob", "PRIVMSG +#a :to voiced and up")
    assert h.lines("bob") == []
    assert h.lines("alice") == [f":{B} PRIVMSG +#a :to voiced and up"]
    assert untagged(h.lines("carol")) == [f":{B} PRIVMSG +#a :to voiced and up"]
    h.send("bob", "PRIVMSG @#a :ops only")
    assert h.lines("alice") == [f":{B} PRIVMSG @#a :ops only"]
    assert h.lines("carol") == []


def test_tagmsg_only_reaches_message_tags_clients(room):
    """IRCv3 message-tags: "Clients that have not enabled the message-tags capability MUST NOT be sent
    TAGMSG messages.\""""
    h = room
    h.send("alice", "@+draft/react=\U0001F44D;+example.com/x=1 TAGMSG #a")
    assert h.lines("bob") == []
    assert h.lines("alice") == []
    lines = h.lines("carol")
    assert len(lines) == 1
    assert re.fullmatch(
        r"@\+draft/react=\U0001F44D;\+example\.com/x=1;msgid=[0-9a-f]{16} " + re.escape(f":{A} TAGMSG #a"),
        lines[0],
    )
    h.send("alice", "@+typing=active TAGMSG bob")
    assert h.lines("bob") == []
    h.send("alice", "@+typing=active TAGMSG carol")
    assert len(h.lines("carol")) == 1


def test_tagmsg_needs_a_target(room):
    """TAGMSG without a target is ERR_NORECIPIENT like PRIVMSG."""
    h = room
    h.send("carol", "TAGMSG")
    assert h.lines("carol") == [":irc.test 411 carol :No recipient given (TAGMSG)"]


def test_message_to_self(room):
    """A user may message itself."""
    h = room
    h.send("alice", "PRIVMSG alice :note to self")
    assert h.lines("alice") == [f":{A} PRIVMSG alice :note to self"]
