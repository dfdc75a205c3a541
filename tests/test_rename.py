"""RENAME: IRCv3 draft/channel-rename."""

from __future__ import annotations

import pytest

from tests.harness import Harness, config

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"
C = "carol!carol@127.0.0.1"


@pytest.fixture
def abc(h):
    """alice (op, with the capability), bob (with it) and carol (without) in #old."""
    h.register("alice", caps=["draft/channel-rename"])
    h.register("bob", caps=["draft/channel-rename"])
    h.register("carol")
    for name in ("alice", "bob", "carol"):
        h.send(name, "JOIN #old")
    h.send("alice", "TOPIC #old :the topic")
    h.send("alice", "MODE #old +v bob")
    for name in ("alice", "bob", "carol"):
        h.take(name)
    return h


def test_rename_keeps_the_channel(abc):
    """draft/channel-rename: "A channel rename preserves all channel state, such as membership,
    mode and topic." and "The server to client command MUST always include the third parameter";
    clients without the capability get "a PART message for the old channel name, with part message
    matching the rename reason if given" and "a JOIN message followed by the usual messages"."""
    h = abc
    assert "draft/channel-rename" in h.server.caps.ls_tokens(h.server, 302)
    h.send("alice", "RENAME #old #New tidier")
    assert h.lines("alice") == [f":{A} RENAME #old #New tidier"]
    assert h.lines("bob") == [f":{A} RENAME #old #New tidier"]
    assert h.lines("carol") == [
        f":{C} PART #old tidier",
        f":{C} JOIN #New",
        ":irc.test 332 carol #New :the topic",
        f":irc.test 333 carol #New {A} 1800000000",
        ":irc.test 353 carol = #New :@alice +bob carol",
        ":irc.test 366 carol #New :End of /NAMES list",
    ]
    server = h.server
    assert server.find_channel("#old") is None
    channel = server.find_channel("#new")
    assert channel is not None and channel.name == "#New" and channel.folded == "#new"
    assert all(m.channels.get("#new") is channel and "#old" not in m.channels for m in channel.members)
    h.send("carol", "PRIVMSG #new :hi")
    assert h.lines("bob") == [f":{C} PRIVMSG #New hi"]
    h.send("bob", "PART #NEW")
    assert h.lines("bob") == [f":{B} PART #New"]
    # the old name is free again
    h.send("bob", "JOIN #old")
    assert h.lines("bob")[0] == f":{B} JOIN #old"


def test_rename_without_reason_and_case_only(abc):
    """draft/channel-rename: "Implementations MUST allow channels to be renamed while only changing
    the casing of a channel name." and "This fallback SHOULD NOT be used if the rename only changes
    the case of the channel name"."""
    h = abc
    h.send("alice", "RENAME #old #OLD")
    assert h.lines("alice") == [f":{A} RENAME #old #OLD :"]
    assert h.lines("bob") == [f":{A} RENAME #old #OLD :"]
    assert h.lines("carol") == []
    assert h.server.find_channel("#old").name == "#OLD"


def test_rename_refusals(abc):
    """draft/channel-rename: "FAIL RENAME CHANNEL_NAME_IN_USE <old-channel> <new-channel>"; "If
    existing error numerics (such as ERR_CHANOPRIVSNEEDED, ERR_NOTONCHANNEL, ERR_NEEDMOREPARAMS)
    are more appropriate, they SHOULD be used instead."."""
    h = abc
    h.register("dave")
    h.send("dave", "JOIN #taken")
    h.take("dave")
    h.send("bob", "RENAME #old #new")
    assert h.lines("bob") == [":irc.test 482 bob #old :You're not channel operator"]
    h.send("dave", "RENAME #old #new")
    assert h.lines("dave") == [":irc.test 442 dave #old :You're not on that channel"]
    h.send("alice", "RENAME #nope #new")
    assert h.lines("alice") == [":irc.test 403 alice #nope :No such channel"]
    h.send("alice", "RENAME #old")
    assert h.lines("alice") == [":irc.test 461 alice RENAME :Not enough parameters"]
    h.send("alice", "RENAME #old #TAKEN")
    assert h.lines("alice") == [
        ":irc.test FAIL RENAME CHANNEL_NAME_IN_USE #old #TAKEN :The channel name is already taken"
    ]
    h.send("alice", "RENAME #old nohash")
    assert h.lines("alice") == [
        ":irc.test FAIL RENAME CANNOT_RENAME #old nohash :That is not a valid channel name"
    ]
    for name in ("bob", "carol", "dave"):
        assert h.lines(name) == []
    assert h.server.find_channel("#old") is not None


def test_rename_moves_stored_history_and_registration(tmp_path):
    """A rename keeps the channel's history (CHATHISTORY of the new name) and, for a registered
    channel, its stored registration (under the new name after a restart)."""
    db = str(tmp_path / "r.db")
    h = Harness(config(history={"flush_interval": 10.0}), db=db)
    try:
        h.register("alice", caps=["draft/channel-rename", "batch", "draft/chathistory", "server-time"])
        h.send("alice", "JOIN #old")
        h.send("alice", "PRIVMSG #old :before")
        h.server.find_channel("#old").owner_account = "alice"  # as if registered to alice
        h.take("alice")
        h.send("alice", "RENAME #old #new")
        h.take("alice")
        h.send("alice", "CHATHISTORY LATEST #new * 10")
        lines = h.lines("alice")
        assert [ln.split(" ", 3)[2:] for ln in lines if " PRIVMSG " in ln] == [["PRIVMSG", "#new before"]]
        h.send("alice", "CHATHISTORY LATEST #old * 10")
        assert not [ln for ln in h.lines("alice") if " PRIVMSG " in ln]
        h.settle()
        rows = h.run(h.server.store.load_channels())
        assert [(r.name, r.folded, r.owner) for r in rows] == [("#new", "#new", "alice")]
    finally:
        h.close()


def test_the_fallback_join_answers_as_a_join_does_with_markread(h):
    """draft/channel-rename's fallback is "a JOIN message followed by the usual messages that would
    be sent if the client had joined the new channel normally": for a read-marker client, MARKREAD
    comes with them, as after a JOIN."""
    h.register("alice", caps=["draft/channel-rename"])
    h.register("dave", caps=["draft/read-marker"])
    for name in ("alice", "dave"):
        h.send(name, "JOIN #old")
    h.take("dave")
    h.send("alice", "RENAME #old #new")
    assert h.lines("dave") == [
        ":dave!dave@127.0.0.1 PART #old",
        ":dave!dave@127.0.0.1 JOIN #new",
        ":irc.test MARKREAD #new *",
        ":irc.test 353 dave = #new :@alice dave",
        ":irc.test 366 dave #new :End of /NAMES list",
    ]
