"""Framing over a real socket: partial lines, LF-only endings, several lines per chunk, empty lines,
over-long lines and tags (417), invalid UTF-8, unknown commands."""

from __future__ import annotations

import pytest

A = "alice!alice@127.0.0.1"


@pytest.fixture
def pair(live, client_factory):
    """A server and two registered clients, alice and bob."""
    srv = live()
    alice = client_factory(srv.port)
    bob = client_factory(srv.port)
    alice.register("alice")
    bob.register("bob")
    return srv, alice, bob


def triples(msgs):
    return [(m.source, m.command, m.params) for m in msgs]


def test_line_split_across_chunks(pair):
    """RFC 1459 8.2: "The server must be prepared to receive messages ... the data received may be only
    part of a message\": a line is processed once its line ending arrives."""
    _, alice, bob = pair
    for part in (b"PRI", b"VMSG bob :hel", b"lo th", b"ere\r"):
        alice.sock.sendall(part)
        assert bob.sync() == []  # the server reads the part; nothing is delivered yet
    alice.sock.sendall(b"\n")
    assert alice.sync() == []
    assert triples(bob.sync()) == [(A, "PRIVMSG", ["bob", "hello there"])]


def test_lf_only_line_endings(pair):
    """Modern IRC: "servers SHOULD also accept messages terminated by a lone LF\"."""
    _, alice, bob = pair
    alice.sock.sendall(b"PRIVMSG bob :one\nPRIVMSG bob :two\n")
    alice.sync()
    assert triples(bob.sync()) == [(A, "PRIVMSG", ["bob", "one"]), (A, "PRIVMSG", ["bob", "two"])]


def test_several_lines_in_one_chunk_and_empty_lines(pair):
    """Several lines in one read are all handled, in order; empty lines are silently ignored."""
    _, alice, bob = pair
    alice.sock.sendall(b"\r\n\r\nPRIVMSG bob :a\r\n\n\r\nPRIVMSG bob :b\r\n   \r\nPRIVMSG bob :c\r\n")
    assert alice.sync() == []
    assert [m.params[-1] for m in bob.sync()] == ["a", "b", "c"]


def test_overlong_message_is_417_and_connection_stays_usable(pair):
    """Modern IRC ERR_INPUTTOOLONG (417): "Indicates a given line does not follow the specified size limits
    (512 bytes for the main section, 4094 or 8191 bytes for the tag section)."\""""
    _, alice, bob = pair
    alice.send("PRIVMSG bob :" + "x" * 600)
    got = alice.sync()
    assert triples(got) == [("irc.test", "417", ["alice", "Input line was too long"])]
    assert bob.sync() == []
    alice.send("PRIVMSG bob :short")
    alice.sync()
    assert triples(bob.sync()) == [(A, "PRIVMSG", ["bob", "short"])]


def test_message_of_exactly_512_bytes_is_accepted(pair):
    """The 512-byte limit includes the CR LF: 510 bytes of message are allowed. (Relayed with the
    sender's prefix the text no longer fits one line: a NOTICE arrives cut to 512 bytes.)"""
    _, alice, bob = pair
    prefix = "NOTICE bob :"
    line = prefix + "y" * (510 - len(prefix))
    alice.send(line)
    assert alice.sync() == []
    [notice] = bob.sync()
    assert notice.params[-1] == "y" * (510 - len(f":{A} NOTICE bob "))
    alice.send(line + "z")
    assert [m.command for m in alice.sync()] == ["417"]


def test_endless_line_without_newline(pair):
    """A line that never ends is answered once with 417 and skipped up to its newline."""
    _, alice, bob = pair
    alice.sock.sendall(b"PRIVMSG bob :" + b"z" * 30000)
    alice.sock.sendall(b"z" * 30000 + b"\r\nPRIVMSG bob :after\r\n")
    assert [m.command for m in alice.sync()] == ["417"]
    assert [m.params[-1] for m in bob.sync()] == ["after"]


def test_tags_over_8191_bytes_are_417(pair):
    """IRCv3 message-tags: "Servers MUST reply with the ERR_INPUTTOOLONG (417) error numeric if a client sends
    a message with more tag data than the allowed limit.\""""
    _, alice, bob = pair
    alice.send("@+big=" + "t" * 9000 + " PRIVMSG bob :tagged")
    assert [m.command for m in alice.sync()] == ["417"]
    assert bob.sync() == []
    alice.send("PRIVMSG bob :fine")
    alice.sync()
    assert [m.params[-1] for m in bob.sync()] == ["fine"]


def test_client_tag_data_over_4094_bytes_is_417(pair):
    """IRCv3 message-tags: "Clients MUST NOT send messages with tag data exceeding 4094 bytes\"; the rest of
    the 8191-byte tag section is the server's."""
    _, alice, bob = pair
    alice.send("@+big=" + "t" * 5000 + " PRIVMSG bob :tagged")
    assert [m.command for m in alice.sync()] == ["417"]
    assert bob.sync() == []


def test_invalid_utf8_is_fail_invalid_utf8(pair):
    """IRCv3 UTF8ONLY: "If a client sends invalid UTF-8 ... the server SHOULD send FAIL <command>
    INVALID_UTF8\" and must not relay it."""
    _, alice, bob = pair
    alice.sock.sendall(b"PRIVMSG bob :bad \xff\xfe bytes\r\n")
    assert triples(alice.sync()) == [
        ("irc.test", "FAIL", ["PRIVMSG", "INVALID_UTF8", "Message rejected, your message contained invalid UTF-8"])
    ]
    assert bob.sync() == []
    alice.send("PRIVMSG bob :caf\u00e9")
    alice.sync()
    assert [m.params[-1] for m in bob.sync()] == ["caf\u00e9"]


def test_unknown_command_is_421(pair):
    """RFC 2812 ERR_UNKNOWNCOMMAND (421)."""
    _, alice, _ = pair
    alice.send("WIBBLE foo bar")
    assert triples(alice.sync()) == [("irc.test", "421", ["alice", "WIBBLE", "Unknown command"])]


def test_nul_and_stray_cr_do_not_break_the_stream(pair):
    """Modern IRC grammar: no part of a message holds NUL, CR or LF. A line with a NUL or a CR before
    its line ending is refused whole (FAIL, nothing relayed); the connection keeps working."""
    _, alice, bob = pair
    alice.sock.sendall(b"PRIVMSG bob :before\x00after\r\nPRIVMSG bob :one\rtwo\r\n")
    refusal = ("irc.test", "FAIL", ["PRIVMSG", "INVALID_CHARACTERS",
                                    "Message rejected, your message contained a CR or NUL character"])
    assert triples(alice.sync()) == [refusal, refusal]
    alice.send("PRIVMSG bob :after")
    alice.sync()
    assert [m.params[-1] for m in bob.sync()] == ["after"]
