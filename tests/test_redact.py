"""REDACT: IRCv3 draft/message-redaction, and the redacted message's stored history."""

from __future__ import annotations

import pytest

from ircd.store import history as rows
from tests.harness import Harness, config
from tests.test_history import login

CAPS = ["message-tags", "echo-message", "batch", "draft/message-redaction"]
A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"


@pytest.fixture
def hh(tmp_path):
    harness = Harness(config(storage={"durability": "off"}, flood={"enabled": False}), db=str(tmp_path / "r.db"))
    yield harness
    harness.close()


def sent(h: Harness, name: str, line: str) -> str:
    """Send a message and return its msgid (from the echo)."""
    h.send(name, line)
    echo = h.messages(name)[-1]
    assert echo.tags and "msgid" in echo.tags, echo
    return echo.tags["msgid"]


def stored(h: Harness, target: str) -> list[str]:
    h.server.history.flush()
    h.settle()
    found = h.run(h.server.store.read(
        lambda conn: rows.select(conn, target, 0, 2**63 - 1, 100, newest_first=False, commands=None)
    ))
    return [r.text for r in found]


def room(h: Harness, carol_caps=("message-tags",)) -> None:
    h.register("alice", caps=CAPS)
    h.register("bob", caps=CAPS)
    h.register("carol", caps=carol_caps)
    for name in ("alice", "bob", "carol"):
        h.send(name, "JOIN #a")
    for name in ("alice", "bob", "carol"):
        h.take(name)


def test_redact_own_channel_message(hh):
    """message-redaction: the server "SHOULD forward this REDACT, with an appropriate prefix, to the
    target recipients that have negotiated the draft/message-redaction capability" and "MUST not
    forward this REDACT to target recipients that have not negotiated this capability"; after it,
    chathistory responses "SHOULD either: exclude it entirely" or add a REDACT."""
    h = hh
    room(h)
    keep = sent(h, "bob", "PRIVMSG #a :keep")
    gone = sent(h, "bob", "PRIVMSG #a :oops")
    for name in ("alice", "carol"):
        h.take(name)
    assert stored(h, "#a") == ["keep", "oops"]
    h.send("bob", f"REDACT #a {gone} :typo")
    assert h.lines("bob") == [f":{B} REDACT #a {gone} typo"]
    assert h.lines("alice") == [f":{B} REDACT #a {gone} typo"]
    assert h.lines("carol") == []
    assert stored(h, "#a") == ["keep"]
    h.send("bob", f"REDACT #a {gone}")
    assert h.lines("bob") == [
        f":irc.test FAIL REDACT UNKNOWN_MSGID #a {gone} :This message does not exist or is too old"
    ]
    assert keep


def test_redact_by_channel_operator_and_refusal(hh):
    """message-redaction: "FAIL REDACT REDACT_FORBIDDEN <target> <target-msgid>"; channel operators
    may delete others' messages ("Allowing channel moderators or server admins to delete unwelcome
    messages from others")."""
    h = hh
    room(h)
    by_alice = sent(h, "alice", "PRIVMSG #a :from the op")
    by_bob = sent(h, "bob", "PRIVMSG #a :spam")
    h.take("alice")
    h.take("bob")
    h.take("carol")
    h.send("bob", f"REDACT #a {by_alice}")
    assert h.lines("bob") == [
        f":irc.test FAIL REDACT REDACT_FORBIDDEN #a {by_alice} :You are not authorised to delete this message"
    ]
    assert h.lines("alice") == []
    h.send("alice", f"REDACT #a {by_bob} :spam")
    assert h.lines("alice") == [f":{A} REDACT #a {by_bob} spam"]
    assert h.lines("bob") == [f":{A} REDACT #a {by_bob} spam"]
    assert stored(h, "#a") == ["from the op"]


def test_redact_tagmsg_and_bad_targets(hh):
    """message-redaction: "Where <msgid> is the id of the message to be redacted, which MUST be a
    PRIVMSG, NOTICE, or TAGMSG"; "FAIL REDACT INVALID_TARGET <target>"; "FAIL REDACT UNKNOWN_MSGID
    <target> <target-msgid>"."""
    h = hh
    room(h)
    react = sent(h, "bob", "@+draft/react=x TAGMSG #a")
    h.take("alice")
    h.take("carol")
    h.send("bob", f"REDACT #a {react}")
    assert h.lines("bob") == [f":{B} REDACT #a {react}"]
    assert h.lines("alice") == [f":{B} REDACT #a {react}"]
    h.send("bob", "REDACT #nowhere 0000000000000001")
    assert h.lines("bob") == [
        ":irc.test FAIL REDACT INVALID_TARGET #nowhere :You cannot delete messages from #nowhere"
    ]
    h.send("bob", "REDACT #a not-an-id")
    assert h.lines("bob") == [
        ":irc.test FAIL REDACT UNKNOWN_MSGID #a not-an-id :This message does not exist or is too old"
    ]
    # a message of another channel is not found through this one
    h.register("dave", caps=CAPS)
    h.send("dave", "JOIN #b")
    other = sent(h, "dave", "PRIVMSG #b :elsewhere")
    h.send("bob", f"REDACT #a {other}")
    assert h.lines("bob") == [
        f":irc.test FAIL REDACT UNKNOWN_MSGID #a {other} :This message does not exist or is too old"
    ]
    # without the capability the verb is refused
    h.send("carol", f"REDACT #a {react}")
    assert h.lines("carol")[0].startswith(":irc.test FAIL REDACT NEED_CAPABILITY")


def test_redact_direct_message(hh):
    """message-redaction: a client redacts a message it sent "to a target nickname"; the REDACT
    reaches that recipient (with the capability) and the sender, and the conversation's stored
    history loses it."""
    h = hh
    login(h, "alice", caps=CAPS)
    login(h, "bob", caps=CAPS)
    first = sent(h, "alice", "PRIVMSG bob :hello")
    second = sent(h, "alice", "PRIVMSG bob :private")
    h.take("bob")
    h.send("bob", f"REDACT alice {second}")
    assert h.lines("bob")[0].startswith(f":irc.test FAIL REDACT REDACT_FORBIDDEN alice {second}")
    h.send("alice", f"REDACT bob {second}")
    assert h.lines("alice") == [f":{A} REDACT bob {second}"]
    assert h.lines("bob") == [f":{A} REDACT bob {second}"]
    assert stored(h, "a:alice a:bob") == ["hello"]
    conversations = h.run(h.server.store.read(rows.conversations, "alice", 0, 2**63 - 1))
    assert [c.last_id for c in conversations] == [int(first, 16)]


def test_redact_without_history_is_unknown(make_harness):
    """Without stored history the server cannot tell who sent a message: UNKNOWN_MSGID."""
    h = make_harness()
    h.register("alice", caps=CAPS)
    h.send("alice", "JOIN #a")
    msgid = sent(h, "alice", "PRIVMSG #a :hi")
    h.send("alice", f"REDACT #a {msgid}")
    assert h.lines("alice") == [
        f":irc.test FAIL REDACT UNKNOWN_MSGID #a {msgid} :This message does not exist or is too old"
    ]
