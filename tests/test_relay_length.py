"""A relayed message never passes 512 bytes once the sender's prefix is added."""

from __future__ import annotations

B = "bob!bob@127.0.0.1"


def test_privmsg_too_long_to_relay_gets_417(h):
    """RFC 1459 2.3: messages "shall not exceed 512 characters in length, counting all characters
    including the trailing CR-LF". A line the client may send (510 bytes) can be too long once the
    server puts ``:<nick>!<user>@<host>`` in front of it; the sender is told (417) rather than the
    recipients getting an over-long line."""
    h.alice_and_bob_in("#a")
    overhead = len(f":{B} PRIVMSG alice ") + 2  # no ":" before a last parameter without spaces
    fits = "x" * (512 - overhead)
    h.send("bob", "PRIVMSG alice :" + fits)
    [line] = h.take("alice").split(b"\r\n")[:-1]
    assert len(line) + 2 == 512
    h.send("bob", "PRIVMSG alice :" + fits + "y")
    assert h.lines("bob") == [":irc.test 417 bob :Input line was too long"]
    assert h.lines("alice") == []
    h.send("bob", "PRIVMSG #a :" + "z z" * 165)
    assert h.lines("bob") == [":irc.test 417 bob :Input line was too long"]
    assert h.lines("alice") == []


def test_notice_too_long_is_cut_at_a_character(h):
    """NOTICE is never answered (RFC 2812 3.3.2), so an over-long one is cut to fit, at a UTF-8
    character boundary."""
    h.alice_and_bob_in("#a")
    overhead = len(f":{B} NOTICE alice :") + 2
    h.send("bob", "NOTICE alice :a " + "x" * (512 - overhead - 3) + "\u00e9\u00e9")
    assert h.lines("bob") == []
    [line] = h.take("alice").split(b"\r\n")[:-1]
    assert len(line) + 2 == 511 and line.endswith(b"x")  # the first \u00e9 would make 513
