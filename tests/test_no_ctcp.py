"""Channel mode +C: no CTCP but ACTION."""

from __future__ import annotations

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"


def test_no_ctcp_mode_refuses_ctcp_but_not_action(h):
    """Modern IRC, channel modes: "When this mode is set, should not send CTCP messages, except
    CTCP Action (also known as /me) to the channel. When blocking a message because of this mode,
    servers SHOULD use ERR_CANNOTSENDTOCHAN"."""
    h.alice_and_bob_in("#a")
    assert "CHANMODES=beI,k,l,Cimnst" in h.server.isupport_tokens()
    h.send("bob", "PRIVMSG #a :\x01PING 1\x01")
    assert h.lines("alice") == [f":{B} PRIVMSG #a :\x01PING 1\x01"]
    h.send("alice", "MODE #a +C")
    assert h.lines("alice") == [f":{A} MODE #a +C"]
    assert h.lines("bob") == [f":{A} MODE #a +C"]
    h.send("bob", "PRIVMSG #a :\x01ACTION waves\x01")
    h.send("bob", "PRIVMSG #a :\x01PING 2\x01")
    h.send("bob", "NOTICE #a :\x01VERSION\x01")
    h.send("bob", "PRIVMSG #a :plain text")
    assert h.lines("bob") == [":irc.test 404 bob #a :Cannot send to channel (+C)"]
    assert h.lines("alice") == [
        f":{B} PRIVMSG #a :\x01ACTION waves\x01",
        f":{B} PRIVMSG #a :plain text",
    ]
    h.send("alice", "MODE #a")
    assert h.lines("alice")[0] == ":irc.test 324 alice #a +Cnt"
    h.send("alice", "MODE #a -C")
    h.take("alice")
    h.take("bob")
    h.send("bob", "PRIVMSG #a :\x01PING 3\x01")
    assert h.lines("alice") == [f":{B} PRIVMSG #a :\x01PING 3\x01"]


def test_no_ctcp_mode_needs_operator(h):
    h.alice_and_bob_in("#a")
    h.send("bob", "MODE #a +C")
    assert h.lines("bob") == [":irc.test 482 bob #a :You're not channel operator"]


def test_no_ctcp_mode_covers_multiline_messages(h):
    """A draft/multiline message is one message: a CTCP in any of its lines is refused under +C."""
    h.register("alice", caps=["batch", "draft/multiline"])
    h.register("bob")
    h.send("alice", "JOIN #a")
    h.send("bob", "JOIN #a")
    h.send("alice", "MODE #a +C")
    h.take("alice")
    h.take("bob")
    for line in ("BATCH +1 draft/multiline #a", "@batch=1 PRIVMSG #a :hello", "@batch=1 PRIVMSG #a :\x01PING 1\x01",
                 "BATCH -1"):
        h.send("alice", line)
    assert h.lines("alice") == [":irc.test 404 alice #a :Cannot send to channel (+C)"]
    assert h.lines("bob") == []
