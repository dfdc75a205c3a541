"""IRCv3 draft/multiline: client batches delivered as one message, the fallback for clients without the
capability, labels and echo-message, limits and errors."""

from __future__ import annotations

import pytest

from ircd.events import ChannelMessage, DirectMessage
from tests.harness import Harness, config

A = "alice!alice@127.0.0.1"
T = "2027-01-15T08:00:00.000Z"
M = "161d646800000000"  # the first msgid at the harness time
ML = "ml" + M  # the batch reference the server uses for that message
FULL = ["message-tags", "batch", "echo-message", "server-time", "labeled-response", "draft/multiline"]


@pytest.fixture
def mh():
    harness = Harness(config(limits={"multiline_max_lines": 4, "multiline_max_bytes": 600}))
    harness.register("alice", caps=FULL)
    harness.register("bob", caps=["message-tags", "batch", "server-time", "draft/multiline"])
    harness.register("carol", caps=["message-tags", "batch", "server-time"])
    harness.register("dave")
    for name in ("alice", "bob", "carol", "dave"):
        harness.send(name, "JOIN #test")
    for name in ("alice", "bob", "carol", "dave"):
        harness.take(name)
    yield harness
    harness.close()


def send_all(h: Harness, name: str, *lines: str) -> None:
    for line in lines:
        h.send(name, line)


HOW_IS = ("@label=xyz BATCH +123 draft/multiline #test", "@batch=123 PRIVMSG #test hello",
          "@batch=123 PRIVMSG #test :#how is ", "@batch=123;draft/multiline-concat PRIVMSG #test :everyone?")


def test_cap_value(mh):
    """IRCv3 multiline: "The capability MUST be advertised by servers with a REQUIRED value" (max-bytes, and the
    RECOMMENDED max-lines)."""
    assert "draft/multiline=max-bytes=600,max-lines=4" in mh.server.caps.ls_tokens(mh.server, 302)
    assert "draft/multiline=max-bytes=4096,max-lines=100" in Harness().server.caps.ls_tokens(Harness().server, 302)


def test_batch_echo_relay_and_fallback(mh):
    """IRCv3 multiline: "implementations MUST collect each PRIVMSG message content and wait until the full batch
    has been received"; "When delivering multiline batches to clients that have not negotiated the multiline
    capability, servers MUST deliver the component messages without using a multiline BATCH"; "Servers MUST only
    include a message ID on the first message of a batch when sending a fallback"; "Servers MUST only include
    the label tag on the opening BATCH command when replying to a client using echo-message"."""
    send_all(mh, "alice", *HOW_IS)
    assert [mh.lines(n) for n in ("alice", "bob", "carol", "dave")] == [[], [], [], []]
    mh.send("alice", "BATCH -123")
    body = [
        f"@batch={ML} :{A} PRIVMSG #test hello",
        f"@batch={ML} :{A} PRIVMSG #test :#how is ",
        f"@batch={ML};draft/multiline-concat :{A} PRIVMSG #test everyone?",
        f":{A} BATCH -{ML}",
    ]
    assert mh.lines("alice") == [f"@label=xyz;msgid={M};time={T} :{A} BATCH +{ML} draft/multiline #test", *body]
    assert mh.lines("bob") == [f"@msgid={M};time={T} :{A} BATCH +{ML} draft/multiline #test", *body]
    assert mh.lines("carol") == [
        f"@msgid={M};time={T} :{A} PRIVMSG #test hello",
        f"@time={T} :{A} PRIVMSG #test :#how is ",
        f"@time={T} :{A} PRIVMSG #test everyone?",
    ]
    assert mh.lines("dave") == [f":{A} PRIVMSG #test hello", f":{A} PRIVMSG #test :#how is ",
                                f":{A} PRIVMSG #test everyone?"]


def test_blank_lines_and_client_tags(mh):
    """"Servers MUST NOT reject blank lines"; "Servers MUST NOT send blank lines to clients that have not
    negotiated the multiline capability"; client-only tags go on the opening BATCH (and on fallback lines)."""
    send_all(mh, "alice", "@+draft/reply=r1 BATCH +b draft/multiline #test", "@batch=b PRIVMSG #test :",
             "@batch=b PRIVMSG #test :two", "BATCH -b")
    mh.take("alice")
    assert mh.lines("bob") == [
        f"@+draft/reply=r1;msgid={M};time={T} :{A} BATCH +{ML} draft/multiline #test",
        f"@batch={ML} :{A} PRIVMSG #test :",
        f"@batch={ML} :{A} PRIVMSG #test two",
        f":{A} BATCH -{ML}",
    ]
    assert mh.lines("carol") == [f"@+draft/reply=r1;msgid={M};time={T} :{A} PRIVMSG #test two"]


def test_published_once_with_the_combined_text(mh):
    """The message is one event (and so one history entry): lines joined by line feeds, concat lines directly."""
    seen = []
    mh.server.events.subscribe(ChannelMessage, seen.append)
    send_all(mh, "alice", *HOW_IS, "BATCH -123")
    assert [(e.command, e.text, e.msgid, e.lines) for e in seen] == [
        ("PRIVMSG", "hello\n#how is everyone?", M, (("hello", False), ("#how is ", False), ("everyone?", True)))
    ]
    assert seen[0].relay.time == T


def test_direct_multiline_and_away(mh):
    dm = []
    mh.server.events.subscribe(DirectMessage, dm.append)
    mh.send("bob", "AWAY :lunch")
    mh.take("bob")
    send_all(mh, "alice", "BATCH +d draft/multiline bob", "@batch=d PRIVMSG bob :one", "@batch=d PRIVMSG bob :two",
             "BATCH -d")
    assert mh.lines("bob") == [
        f"@msgid={M};time={T} :{A} BATCH +{ML} draft/multiline bob",
        f"@batch={ML} :{A} PRIVMSG bob one",
        f"@batch={ML} :{A} PRIVMSG bob two",
        f":{A} BATCH -{ML}",
    ]
    assert mh.lines("alice")[-1] == f"@time={T} :irc.test 301 alice bob lunch"
    assert [e.text for e in dm] == ["one\ntwo"]


def test_label_without_echo_gets_ack(mh):
    mh.send("alice", "CAP REQ -echo-message")
    mh.take("alice")
    send_all(mh, "alice", *HOW_IS, "BATCH -123")
    assert mh.lines("alice") == [f"@label=xyz;time={T} :irc.test ACK"]


@pytest.mark.parametrize(
    "lines, error",
    [
        (["@batch=231 PRIVMSG #test :hi"], "MULTILINE_INVALID :Only PRIVMSG lines of the open batch may be sent inside it"),
        (["@batch=1 NOTICE #test :hi"], "MULTILINE_INVALID :Only PRIVMSG lines of the open batch may be sent inside it"),
        (["@batch=1 PRIVMSG #other :hi"], "MULTILINE_INVALID_TARGET #test #other :Invalid multiline target"),
        (["@batch=1 PRIVMSG #test :hi", "@batch=1;draft/multiline-concat PRIVMSG #test :"],
         "MULTILINE_INVALID :A blank line cannot carry draft/multiline-concat"),
        (["@batch=1 PRIVMSG #test :x"] * 5, "MULTILINE_MAX_LINES 4 :Multiline batch max-lines exceeded"),
        (["@batch=1 PRIVMSG #test :" + "x" * 300] * 2, "MULTILINE_MAX_BYTES 600 :Multiline batch max-bytes exceeded"),
        (["@batch=1 PRIVMSG #test :", "@batch=1 PRIVMSG #test :"], "MULTILINE_INVALID :A multiline message cannot be blank"),
    ],
)
def test_invalid_batches(mh, lines, error):
    """IRCv3 multiline errors: "MULTILINE_MAX_BYTES <limit>", "MULTILINE_MAX_LINES <limit>",
    "MULTILINE_INVALID_TARGET <batch-target> <provided-target>", "MULTILINE_INVALID: any other error". The
    answer carries the opening line's label; the rest of the batch is dropped and nothing is delivered."""
    send_all(mh, "alice", "@label=L BATCH +1 draft/multiline #test", *lines, "BATCH -1")
    assert mh.lines("alice") == [f"@label=L;time={T} :irc.test FAIL BATCH {error}"]
    assert mh.lines("bob") == [] and mh.lines("carol") == []
    assert mh.clients["alice"].ext_state("multiline") is None


def test_batch_command_errors(mh):
    mh.send("alice", "BATCH -nope")
    mh.send("alice", "BATCH +x chathistory #test")
    mh.send("alice", "BATCH +a draft/multiline #test")
    mh.send("alice", "BATCH +b draft/multiline #test")
    mh.send("carol", "BATCH +c draft/multiline #test")
    assert mh.lines("alice") == [
        f"@time={T} :irc.test FAIL BATCH MULTILINE_INVALID :No such multiline batch is open",
        f"@time={T} :irc.test FAIL BATCH MULTILINE_INVALID chathistory :Only draft/multiline batches with a target are supported",
        f"@time={T} :irc.test FAIL BATCH MULTILINE_INVALID :A multiline batch is already open",
    ]
    assert mh.lines("carol") == [
        f"@time={T} :irc.test FAIL BATCH NEED_CAPABILITY :This command needs a capability you have not enabled"
    ]


def test_target_refusals_at_the_close(mh):
    send_all(mh, "alice", "@label=n BATCH +1 draft/multiline #nowhere", "@batch=1 PRIVMSG #nowhere :hi", "BATCH -1")
    assert mh.lines("alice") == [f"@label=n;time={T} :irc.test 403 alice #nowhere :No such channel"]
    mh.send("dave", "JOIN #closed")
    mh.send("dave", "MODE #closed +m")
    mh.take("dave")
    send_all(mh, "alice", "BATCH +2 draft/multiline #closed", "@batch=2 PRIVMSG #closed :hi", "BATCH -2")
    assert mh.lines("alice") == [f"@time={T} :irc.test 404 alice #closed :Cannot send to channel (+n)"]
    send_all(mh, "alice", "BATCH +3 draft/multiline nobody", "@batch=3 PRIVMSG nobody :hi", "BATCH -3")
    assert mh.lines("alice") == [f"@time={T} :irc.test 401 alice nobody :No such nick/channel"]
    assert mh.lines("dave") == []


def test_batch_tag_without_an_open_batch_is_an_ordinary_message(mh):
    mh.send("alice", "@batch=zz PRIVMSG #test :plain")
    assert mh.lines("dave") == [f":{A} PRIVMSG #test plain"]


def test_batch_lines_pass_the_flood_budget():
    """A multiline batch is one message: its lines do not wait for flood tokens (max-lines bounds it)."""
    h = Harness(config(flood={"burst": 2, "per_second": 1.0}))
    h.register("alice", caps=FULL)
    h.register("bob")
    h.send("alice", "JOIN #f")
    h.send("bob", "JOIN #f")
    h.take("bob")
    start = h.clock.now
    send_all(h, "alice", "BATCH +1 draft/multiline #f", *["@batch=1 PRIVMSG #f :x"] * 20, "BATCH -1")
    assert h.clock.now - start <= 2.0  # the two BATCH lines may wait a second each; the 20 PRIVMSGs do not
    assert h.lines("bob") == [f":{A} PRIVMSG #f x"] * 20  # bob has no multiline: the fallback
    h.close()


def test_only_message_lines_of_a_valid_batch_skip_flood_control():
    """An open batch does not let other verbs (or the lines of a batch that already failed) past the
    flood budget: only the lines that make up a message do."""
    h = Harness(config(flood={"burst": 2, "per_second": 1.0}, limits={"multiline_max_lines": 2}))
    h.register("alice", caps=FULL)
    h.send("alice", "JOIN #f")
    h.send("alice", "BATCH +1 draft/multiline #f")
    start = h.clock.now
    for _ in range(3):
        h.send("alice", "@batch=1 PING x")
    assert h.clock.now - start >= 2.0  # PINGs wait for tokens, batch tag or not
    start = h.clock.now
    for _ in range(5):  # the third line fails the batch; the ones after it wait again
        h.send("alice", "@batch=1 PRIVMSG #f :x")
    assert h.clock.now - start >= 2.0
    h.close()
