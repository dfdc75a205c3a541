"""Channel and direct-message history: storage that never blocks the sender, IRCv3 CHATHISTORY
(every subcommand and error), persistence across a restart, retention and `pircd history prune`.

The harness clock starts at 2027-01-15T08:00:00.000Z; each test message is sent one millisecond
after the previous one, so message ``i`` has time ``...00.00i`` and a msgid made of that millisecond.
"""

from __future__ import annotations

import base64

import pytest

from ircd.proto.lines import parse_line
from ircd.proto.msgid import EPOCH_MS, IdGenerator, format_id, parse_id
from tests import dbs
from tests.harness import Harness, config
from tests.proc import cli

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"
T0_MS = 1_800_000_000_000  # the harness clock
CAPS = ["batch", "server-time", "message-tags", "draft/chathistory"]


def mid(ms: int) -> str:
    """The msgid of the first message made ``ms`` milliseconds after the harness start."""
    return "%016x" % ((T0_MS + ms - EPOCH_MS) << 22)


def test_msgid_text_form():
    ids = IdGenerator(clock=lambda: (EPOCH_MS + 1_000) / 1000)
    assert [ids.next() for _ in range(3)] == ["00000000fa000000", "00000000fa000001", "00000000fa000002"]
    assert format_id(0) == "0000000000000000"
    assert format_id(2**64 - 1) == "ffffffffffffffff"
    assert parse_id("00000000fa000001") == 0xFA000001
    assert parse_id("00000000FA000001") == 0xFA000001
    # int() would take these; an id is exactly 16 ASCII hex digits
    for text in ["-00000000fa00001", "+00000000fa00001", "0000_0000_fa0001", " 00000000fa00001",
                 "\u0661" * 16, "00000000fa00000g", "00000000fa00001"]:
        assert parse_id(text) is None, text


def ts(ms: int) -> str:
    return "2027-01-15T08:00:00.%03dZ" % ms


def at(h: Harness, ms: int) -> None:
    """Set the clock inside millisecond ``ms`` (the middle of it: float sums never land a tick early)."""
    h.clock.now = (T0_MS + ms + 0.5) / 1000


@pytest.fixture
def hh(tmp_path):
    """A harness with a store (history on)."""
    harness = Harness(config(storage={"durability": "off"}, flood={"enabled": False}), db=str(tmp_path / "h.db"))
    yield harness
    harness.close()


def login(h: Harness, name: str, caps=(), account: str | None = None, password: str = "sesame123") -> None:
    """Connect ``name`` (also its nick) logged in to ``account`` (default: ``name``; created if needed)."""
    account = account or name
    if h.server.casefold(account) not in h.server.accounts.names:
        h.run(h.server.accounts.create(account, password))
    h.connect(name)
    h.send(name, "CAP LS 302")
    h.send(name, "CAP REQ :" + " ".join(["sasl", *caps]))
    h.send(name, f"NICK {name}")
    h.send(name, f"USER {name} 0 * :R")
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + base64.b64encode(f"\0{account}\0{password}".encode()).decode())
    h.send(name, "CAP END")
    assert h.clients[name].registered and h.clients[name].account == account, h.lines(name)
    h.take(name)


def talk(h: Harness, sender: str, target: str, count: int, command: str = "PRIVMSG") -> None:
    """``count`` messages m1..mN, one millisecond apart (message i at millisecond i)."""
    for i in range(1, count + 1):
        at(h, i)
        h.send(sender, f"{command} {target} :m{i}")
    for name in h.clients:
        h.take(name)


def batch(h: Harness, name: str, line: str) -> tuple[str, list[str]]:
    """Send a CHATHISTORY line; return the batch reference and the lines with it replaced by REF."""
    h.send(name, line)
    lines = h.lines(name)
    ref = parse_line(lines[0].encode()).params[0][1:]
    return ref, [ln.replace(f"batch={ref}", "batch=REF").replace(f"BATCH +{ref}", "BATCH +REF")
                 .replace(f"BATCH -{ref}", "BATCH -REF") for ln in lines]


def channel_history(hh: Harness, count: int = 5) -> None:
    hh.register("alice", caps=CAPS)
    hh.register("bob")
    hh.send("alice", "JOIN #h")
    hh.send("bob", "JOIN #h")
    talk(hh, "bob", "#h", count)


def expect(ms_list, target="#h", now=None, source=B):
    """The chathistory batch of messages m<i> sent at millisecond i."""
    stamp = ts(now if now is not None else 5)
    return (
        [f"@time={stamp} :irc.test BATCH +REF chathistory {target}"]
        + [f"@msgid={mid(i)};time={ts(i)};batch=REF :{source} PRIVMSG {target} m{i}" for i in ms_list]
        + [f"@time={stamp} :irc.test BATCH -REF"]
    )


# storage never blocks the sender ----------------------------------------------------------


def test_channel_privmsg_never_awaits_the_store(hh, tmp_path):
    """ARCHITECTURE: "Writes that need not block the sender (channel history lines) are buffered and flushed
    in batches by a background task". The PRIVMSG handler stays synchronous (handle_line returns None, no
    awaitable), the line is relayed at once, and the row reaches the database only when the buffer is
    handed to the group commit."""
    channel_history(hh, 0)
    db = dbs.connect(str(tmp_path / "h.db"))
    assert hh.server.handle_line(hh.clients["bob"], b"PRIVMSG #h :not blocked") is None
    hh.server.flush_all()
    assert hh.lines("alice") == [f"@msgid={mid(0)};time={ts(0)} :{B} PRIVMSG #h :not blocked"]
    assert db.execute("SELECT COUNT(*) FROM history").fetchone() == (0,)
    hh.settle()
    assert db.execute("SELECT id, target, time, command, source, account, param, text, tags FROM history").fetchall() == [
        (int(mid(0), 16), "#h", ts(0), "PRIVMSG", B, None, "#h", "not blocked", None)
    ]


def test_buffer_goes_to_the_store_after_the_flush_interval(hh, tmp_path):
    """Buffered rows are handed over ``history.flush_interval`` (50 ms) after the first one."""
    channel_history(hh, 0)
    hh.send("bob", "PRIVMSG #h :one")
    db = dbs.connect(str(tmp_path / "h.db"))
    hh.advance(0.05)  # the timer hands the rows to the group commit
    hh.run(hh.server.store.db.flush())  # the writer commits (no history flush involved)
    assert db.execute("SELECT text FROM history").fetchall() == [("one",)]


def test_buffer_goes_to_the_store_at_flush_lines(tmp_path):
    h = Harness(config(storage={"durability": "off"}, history={"flush_lines": 3}), db=str(tmp_path / "h.db"))
    try:
        channel_history(h, 3)
        h.run(h.server.store.db.flush())
        assert dbs.connect(str(tmp_path / "h.db")).execute("SELECT COUNT(*) FROM history").fetchone() == (3,)
    finally:
        h.close()


def test_chathistory_sees_lines_not_yet_committed(hh):
    """A query made while rows wait in memory sees them (it runs after the queued inserts)."""
    channel_history(hh, 2)
    _, lines = batch(hh, "alice", "CHATHISTORY LATEST #h * 10")
    assert lines == expect([1, 2], now=2)


def test_isupport_and_caps(hh):
    """IRCv3 chathistory: "CHATHISTORY MUST be sent to the client to state the maximum number of messages a
    client can request in a single command"; "MSGREFTYPES SHOULD be sent"."""
    tokens = hh.server.isupport_tokens()
    assert "CHATHISTORY=100" in tokens and "MSGREFTYPES=msgid,timestamp" in tokens
    names = [tok.split("=")[0] for tok in hh.server.caps.ls_tokens(hh.server, 302)]
    assert {"draft/chathistory", "draft/event-playback"} <= set(names)


def test_no_history_without_a_store(h):
    names = [tok.split("=")[0] for tok in h.server.caps.ls_tokens(h.server, 302)]
    assert "draft/chathistory" not in names
    assert not any(tok.startswith("CHATHISTORY") for tok in h.server.isupport_tokens())


# CHATHISTORY subcommands ------------------------------------------------------------------


def test_latest(hh):
    """IRCv3 chathistory LATEST: "Request up to limit number of the most recent messages that have been sent.
    If a timestamp or msgid is given, the returned messages are restricted to those sent after and excluding
    that timestamp or msgid; if a * is given, no such restriction applies." """
    channel_history(hh)
    _, lines = batch(hh, "alice", "CHATHISTORY LATEST #h * 10")
    assert lines == expect([1, 2, 3, 4, 5])
    assert batch(hh, "alice", "CHATHISTORY LATEST #H * 2")[1] == expect([4, 5])
    assert batch(hh, "alice", f"CHATHISTORY LATEST #h msgid={mid(2)} 10")[1] == expect([3, 4, 5])
    assert batch(hh, "alice", f"CHATHISTORY LATEST #h timestamp={ts(2)} 2")[1] == expect([4, 5])


def test_before(hh):
    """BEFORE: "Request up to limit number of messages before and excluding the given timestamp or msgid." """
    channel_history(hh)
    assert batch(hh, "alice", f"CHATHISTORY BEFORE #h msgid={mid(4)} 10")[1] == expect([1, 2, 3])
    assert batch(hh, "alice", f"CHATHISTORY BEFORE #h timestamp={ts(4)} 2")[1] == expect([2, 3])


def test_after(hh):
    """AFTER: "Request up to limit number of messages after and excluding the given timestamp or msgid." """
    channel_history(hh)
    assert batch(hh, "alice", f"CHATHISTORY AFTER #h msgid={mid(2)} 2")[1] == expect([3, 4])
    assert batch(hh, "alice", f"CHATHISTORY AFTER #h timestamp={ts(2)} 10")[1] == expect([3, 4, 5])


def test_around(hh):
    """AROUND: "Request a number of messages before and after the timestamp or msgid with the total number of
    returned messages not exceeding limit." The message itself is included."""
    channel_history(hh)
    assert batch(hh, "alice", f"CHATHISTORY AROUND #h msgid={mid(3)} 3")[1] == expect([2, 3, 4])
    assert batch(hh, "alice", f"CHATHISTORY AROUND #h msgid={mid(3)} 1")[1] == expect([3])
    assert batch(hh, "alice", f"CHATHISTORY AROUND #h timestamp={ts(3)} 4")[1] == expect([1, 2, 3, 4])


def test_between(hh):
    """BETWEEN: "The returned messages MUST be counted starting from and excluding the first message selector,
    while finishing on and excluding the second. This may be forwards or backwards in time." """
    channel_history(hh)
    assert batch(hh, "alice", f"CHATHISTORY BETWEEN #h msgid={mid(1)} msgid={mid(5)} 10")[1] == expect([2, 3, 4])
    assert batch(hh, "alice", f"CHATHISTORY BETWEEN #h msgid={mid(1)} msgid={mid(5)} 2")[1] == expect([2, 3])
    assert batch(hh, "alice", f"CHATHISTORY BETWEEN #h msgid={mid(5)} msgid={mid(1)} 2")[1] == expect([3, 4])
    assert batch(hh, "alice", f"CHATHISTORY BETWEEN #h timestamp={ts(5)} timestamp={ts(1)} 10")[1] == expect(
        [2, 3, 4])
    assert batch(hh, "alice", f"CHATHISTORY BETWEEN #h timestamp={ts(1)} msgid={mid(4)} 10")[1] == expect([2, 3])


def test_limit_is_capped_and_empty_history_is_an_empty_batch(tmp_path):
    h = Harness(config(storage={"durability": "off"}, history={"max_query": 2}), db=str(tmp_path / "h.db"))
    try:
        channel_history(h)
        assert "CHATHISTORY=2" in h.server.isupport_tokens()
        assert batch(h, "alice", "CHATHISTORY LATEST #h * 50")[1] == expect([4, 5])
        assert batch(h, "alice", "CHATHISTORY LATEST #h * 0")[1] == expect([4, 5])
        h.send("alice", "JOIN #empty")
        h.take("alice")
        assert batch(h, "alice", "CHATHISTORY LATEST #empty * 10")[1] == [
            f"@time={ts(5)} :irc.test BATCH +REF chathistory #empty",
            f"@time={ts(5)} :irc.test BATCH -REF",
        ]
    finally:
        h.close()


def test_without_batch_and_server_time(hh):
    """"Servers SHOULD NOT enforce that clients support all related capabilities"; without batch the lines come
    bare, without message-tags and server-time untagged."""
    hh.register("carol", caps=["draft/chathistory"])
    hh.register("bob")
    hh.send("carol", "JOIN #h")
    hh.send("bob", "JOIN #h")
    talk(hh, "bob", "#h", 2)
    hh.send("carol", "CHATHISTORY LATEST #h * 10")
    assert hh.lines("carol") == [f":{B} PRIVMSG #h m1", f":{B} PRIVMSG #h m2"]


def test_labeled_chathistory(hh):
    channel_history(hh, 1)
    hh.send("alice", "CAP REQ labeled-response")
    hh.take("alice")
    hh.send("alice", "@label=q1 CHATHISTORY LATEST #h * 10")
    lines = hh.lines("alice")
    outer = parse_line(lines[0].encode()).params[0][1:]
    inner = parse_line(lines[1].encode()).params[0][1:]
    assert lines == [
        f"@label=q1;time={ts(1)} :irc.test BATCH +{outer} labeled-response",
        f"@time={ts(1)};batch={outer} :irc.test BATCH +{inner} chathistory #h",
        f"@msgid={mid(1)};time={ts(1)};batch={inner} :{B} PRIVMSG #h m1",
        f"@time={ts(1)};batch={outer} :irc.test BATCH -{inner}",
        f"@time={ts(1)} :irc.test BATCH -{outer}",
    ]


def test_notice_and_client_tags_are_replayed(hh):
    channel_history(hh, 0)
    hh.send("bob", "CAP REQ message-tags")
    hh.take("bob")
    hh.send("bob", "@+draft/reply=abc NOTICE #h :heads up")
    hh.take("alice")
    assert batch(hh, "alice", "CHATHISTORY LATEST #h * 10")[1] == [
        f"@time={ts(0)} :irc.test BATCH +REF chathistory #h",
        f"@+draft/reply=abc;msgid={mid(0)};time={ts(0)};batch=REF :{B} NOTICE #h :heads up",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]


def test_account_tag_on_replayed_lines(hh):
    login(hh, "alice", CAPS + ["account-tag"])
    login(hh, "bob")
    hh.send("alice", "JOIN #h")
    hh.send("bob", "JOIN #h")
    hh.take("alice")
    hh.send("bob", "PRIVMSG #h :hi")
    hh.take("alice")
    assert batch(hh, "alice", "CHATHISTORY LATEST #h * 1")[1] == [
        f"@time={ts(0)} :irc.test BATCH +REF chathistory #h",
        f"@msgid={mid(0)};time={ts(0)};account=bob;batch=REF :{B} PRIVMSG #h hi",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]


# errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        ("CHATHISTORY FOO #h * 10", "FAIL CHATHISTORY INVALID_PARAMS FOO :Unknown command"),
        ("CHATHISTORY LATEST #h *", "FAIL CHATHISTORY INVALID_PARAMS LATEST :Insufficient parameters"),
        ("CHATHISTORY LATEST #h * 10 x", "FAIL CHATHISTORY INVALID_PARAMS LATEST :Too many parameters"),
        ("CHATHISTORY BETWEEN #h * 10", "FAIL CHATHISTORY INVALID_PARAMS BETWEEN :Insufficient parameters"),
        ("CHATHISTORY BEFORE #h timestamp=yesterday 10",
         "FAIL CHATHISTORY INVALID_PARAMS BEFORE timestamp=yesterday :Invalid timestamp"),
        ("CHATHISTORY BEFORE #h timestamp=2027-02-30T00:00:00.000Z 10",
         "FAIL CHATHISTORY INVALID_PARAMS BEFORE timestamp=2027-02-30T00:00:00.000Z :Invalid timestamp"),
        ("CHATHISTORY AFTER #h msgid=zz 10", "FAIL CHATHISTORY INVALID_PARAMS AFTER msgid=zz :Invalid msgid"),
        ("CHATHISTORY BEFORE #h * 10", "FAIL CHATHISTORY INVALID_PARAMS BEFORE * :Invalid message reference"),
        ("CHATHISTORY AROUND #h 123 10", "FAIL CHATHISTORY INVALID_PARAMS AROUND 123 :Invalid message reference"),
        ("CHATHISTORY LATEST #h * -1", "FAIL CHATHISTORY INVALID_PARAMS LATEST -1 :Invalid limit"),
        ("CHATHISTORY LATEST #h * ten", "FAIL CHATHISTORY INVALID_PARAMS LATEST ten :Invalid limit"),
        (f"CHATHISTORY TARGETS msgid={mid(1)} timestamp={ts(1)} 10",
         f"FAIL CHATHISTORY INVALID_PARAMS TARGETS msgid={mid(1)} :Invalid message reference"),
        ("CHATHISTORY LATEST * * 10", "FAIL CHATHISTORY INVALID_TARGET LATEST * :Messages could not be retrieved"),
    ],
)
def test_invalid_params(hh, line, expected):
    """IRCv3 chathistory: "If the server receives a syntactically invalid CHATHISTORY command, e.g., an unknown
    subcommand, missing parameters, excess parameters, or parameters that cannot be parsed, the INVALID_PARAMS
    error code SHOULD be returned"."""
    channel_history(hh, 1)
    hh.send("alice", line)
    assert hh.lines("alice") == [f"@time={ts(1)} :irc.test {expected}"]


def test_gate_errors(hh):
    """No parameters: 461 (the spec allows ERR_NEEDMOREPARAMS); without draft/chathistory negotiated ("The
    draft/chathistory capability MUST be negotiated"): FAIL ... NEED_CAPABILITY."""
    hh.register("alice", caps=["draft/chathistory"])
    hh.register("bob")
    hh.send("alice", "CHATHISTORY")
    assert hh.lines("alice") == [":irc.test 461 alice CHATHISTORY :Not enough parameters"]
    hh.send("bob", "CHATHISTORY LATEST #h * 10")
    assert hh.lines("bob") == [
        ":irc.test FAIL CHATHISTORY NEED_CAPABILITY :This command needs a capability you have not enabled"
    ]


def test_non_member_gets_the_reply_for_a_channel_that_does_not_exist(hh):
    """IRCv3 chathistory: "If the target does not exist or the client does not have permissions to query it,
    the INVALID_TARGET error code SHOULD be returned"; members only, and the same bytes either way."""
    channel_history(hh, 2)
    hh.register("eve", caps=["draft/chathistory"])
    hh.send("eve", "CHATHISTORY LATEST #h * 10")
    hh.send("eve", "CHATHISTORY LATEST #x * 10")
    assert hh.lines("eve") == [
        ":irc.test FAIL CHATHISTORY INVALID_TARGET LATEST #h :Messages could not be retrieved",
        ":irc.test FAIL CHATHISTORY INVALID_TARGET LATEST #x :Messages could not be retrieved",
    ]
    hh.send("bob", "PART #h")  # a former member reads nothing either
    hh.send("bob", "CAP REQ draft/chathistory")
    hh.take("bob")
    hh.send("bob", "CHATHISTORY BEFORE #h timestamp=2030-01-01T00:00:00.000Z 10")
    assert hh.lines("bob") == [":irc.test FAIL CHATHISTORY INVALID_TARGET BEFORE #h :Messages could not be retrieved"]


def test_hidden_channel_is_answered_like_a_missing_one(hh):
    """A channel hidden by a visibility filter (PIRCAN private channels) does not exist for a non-member: its
    CHATHISTORY and TARGETS replies are the ones for a name nobody uses."""
    hh.server.visibility.add_filter(lambda viewer, channel: channel.folded != "#secret" or viewer in channel.members)
    hh.register("alice", caps=CAPS)
    hh.register("eve", caps=CAPS)
    hh.send("alice", "JOIN #secret")
    hh.send("alice", "PRIVMSG #secret :hush")
    hh.take("alice")
    lines = {}
    for name in ("#secret", "#nosuch"):
        for sub in (f"LATEST {name} * 10", f"BEFORE {name} timestamp={ts(9)} 10", f"AROUND {name} msgid={mid(0)} 1"):
            hh.send("eve", "CHATHISTORY " + sub)
        lines[name] = [ln.replace(name, "NAME") for ln in hh.lines("eve")]
    assert lines["#secret"] == lines["#nosuch"]
    assert lines["#secret"][0] == f"@time={ts(0)} :irc.test FAIL CHATHISTORY INVALID_TARGET LATEST NAME :Messages could not be retrieved"
    targets = "CHATHISTORY TARGETS timestamp=2020-01-01T00:00:00.000Z timestamp=2030-01-01T00:00:00.000Z 10"
    assert batch(hh, "eve", targets)[1] == [
        f"@time={ts(0)} :irc.test BATCH +REF draft/chathistory-targets",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]
    assert batch(hh, "alice", targets)[1] == [
        f"@time={ts(0)} :irc.test BATCH +REF draft/chathistory-targets",
        f"@time={ts(0)};batch=REF :irc.test CHATHISTORY TARGETS #secret {ts(0)}",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]


# event playback ---------------------------------------------------------------------------


def test_topic_and_tagmsg_only_with_event_playback(hh):
    """IRCv3 chathistory: "If the client has not negotiated the draft/event-playback capability, the server MUST
    NOT send any lines other than PRIVMSG and NOTICE in the reply batch"; with it: "TAGMSG, ..., TOPIC"."""
    hh.register("alice", caps=CAPS + ["draft/event-playback"])
    hh.register("bob", caps=["message-tags"])
    hh.send("alice", "JOIN #h")
    hh.send("bob", "JOIN #h")
    at(hh, 1)
    hh.send("alice", "TOPIC #h :the topic")
    at(hh, 2)
    hh.send("bob", "@+draft/react=yes TAGMSG #h")
    at(hh, 3)
    hh.send("bob", "@+typing=active TAGMSG #h")  # typing notifications are not history
    at(hh, 4)
    hh.send("bob", "PRIVMSG #h :m4")
    hh.take("alice")
    assert batch(hh, "alice", "CHATHISTORY LATEST #h * 10")[1] == [
        f"@time={ts(4)} :irc.test BATCH +REF chathistory #h",
        f"@msgid={mid(1)};time={ts(1)};batch=REF :{A} TOPIC #h :the topic",
        f"@+draft/react=yes;msgid={mid(2)};time={ts(2)};batch=REF :{B} TAGMSG #h",
        f"@msgid={mid(4)};time={ts(4)};batch=REF :{B} PRIVMSG #h m4",
        f"@time={ts(4)} :irc.test BATCH -REF",
    ]
    hh.send("alice", "CAP REQ -draft/event-playback")
    hh.take("alice")
    assert batch(hh, "alice", "CHATHISTORY LATEST #h * 10")[1] == expect([4], source=B, now=4)


# direct messages --------------------------------------------------------------------------


def test_direct_message_history_between_accounts(hh):
    """IRCv3 chathistory: "If a nickname is given as the target then the server SHOULD include history sent
    between the current user and the target nickname, including outgoing messages"."""
    login(hh, "alice", CAPS)
    login(hh, "bob", CAPS)
    at(hh, 1)
    hh.send("alice", "PRIVMSG bob :m1")
    at(hh, 2)
    hh.send("bob", "PRIVMSG alice :m2")
    at(hh, 3)
    hh.send("alice", "PRIVMSG alice :m3")  # a note to self is its own conversation
    hh.take("alice")
    hh.take("bob")
    assert batch(hh, "alice", "CHATHISTORY LATEST BOB * 10")[1] == [
        f"@time={ts(3)} :irc.test BATCH +REF chathistory BOB",
        f"@msgid={mid(1)};time={ts(1)};batch=REF :{A} PRIVMSG bob m1",
        f"@msgid={mid(2)};time={ts(2)};batch=REF :{B} PRIVMSG alice m2",
        f"@time={ts(3)} :irc.test BATCH -REF",
    ]
    assert batch(hh, "bob", f"CHATHISTORY AFTER alice msgid={mid(1)} 10")[1] == [
        f"@time={ts(3)} :irc.test BATCH +REF chathistory alice",
        f"@msgid={mid(2)};time={ts(2)};batch=REF :{B} PRIVMSG alice m2",
        f"@time={ts(3)} :irc.test BATCH -REF",
    ]
    assert batch(hh, "alice", "CHATHISTORY LATEST alice * 10")[1] == [
        f"@time={ts(3)} :irc.test BATCH +REF chathistory alice",
        f"@msgid={mid(3)};time={ts(3)};batch=REF :{A} PRIVMSG alice m3",
        f"@time={ts(3)} :irc.test BATCH -REF",
    ]
    hh.disconnect("bob")  # an account that is offline is still found by name
    assert len(batch(hh, "alice", "CHATHISTORY LATEST bob * 10")[1]) == 4


def test_direct_messages_need_an_account_to_read(hh):
    """Without an account there is no history to read (and a conversation with a nick that was not logged in
    stays with that nick, not with an account of the same name registered later)."""
    login(hh, "alice", CAPS)
    hh.register("carl", caps=CAPS)
    hh.send("carl", "PRIVMSG alice :m0")
    hh.take("alice")
    assert len(batch(hh, "alice", "CHATHISTORY LATEST carl * 10")[1]) == 3
    assert batch(hh, "carl", "CHATHISTORY LATEST alice * 10")[1] == [
        f"@time={ts(0)} :irc.test BATCH +REF chathistory alice",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]
    hh.disconnect("carl")
    login(hh, "carl", CAPS)
    assert len(batch(hh, "carl", "CHATHISTORY LATEST alice * 10")[1]) == 2
    assert len(batch(hh, "alice", "CHATHISTORY LATEST carl * 10")[1]) == 2


def test_direct_messages_between_guests_are_not_stored(hh, tmp_path):
    hh.register("x", caps=CAPS)
    hh.register("y", caps=CAPS)
    hh.send("x", "PRIVMSG y :nobody could read this back")
    hh.settle()
    assert dbs.connect(str(tmp_path / "h.db")).execute("SELECT COUNT(*) FROM history").fetchone() == (0,)


def test_a_direct_message_nobody_sees_tagged_or_stores_takes_no_msgid(hh, tmp_path):
    """A direct message's msgid is made only when something needs it (Relay): a line between guests
    without tags uses no id, so the next message that needs one gets the millisecond's first; a
    tagged recipient, the echo and the stored row all see the same id, in the order sent."""
    login(hh, "alice", CAPS + ["echo-message"])
    login(hh, "bob", CAPS)
    hh.register("x")
    hh.register("y")
    at(hh, 5)
    hh.send("x", "PRIVMSG y :untagged, unstored")
    assert hh.lines("y") == [":x!x@127.0.0.1 PRIVMSG y :untagged, unstored"]
    hh.send("alice", "PRIVMSG bob :first")
    hh.send("alice", "PRIVMSG bob :second")
    hh.send("x", "PRIVMSG y :again nothing")
    hh.send("alice", "PRIVMSG bob :third")
    ids = [mid(5), "%016x" % (int(mid(5), 16) + 1), "%016x" % (int(mid(5), 16) + 2)]
    got = hh.messages("bob")
    echoed = [m.tags["msgid"] for m in hh.messages("alice")]
    assert [m.tags["msgid"] for m in got] == echoed == ids
    assert [m.tags["time"] for m in got] == [ts(5)] * 3
    hh.settle()
    rows = dbs.connect(str(tmp_path / "h.db")).execute(
        "SELECT printf('%016x', id), text FROM history ORDER BY id").fetchall()
    assert rows == list(zip(ids, ["first", "second", "third"]))


def test_targets(hh):
    """IRCv3 chathistory TARGETS: "lists channels the user has visible history in, together with users with
    which the user has exchanged direct messages, ordered by the time of the latest message"; "a target is
    not returned if its latest message is outside of the selection parameters"."""
    login(hh, "alice", CAPS)
    login(hh, "bob", CAPS)
    hh.send("alice", "JOIN #one")
    hh.send("alice", "JOIN #two")
    hh.send("alice", "JOIN #quiet")
    for ms, line in ((1, "PRIVMSG #one :a"), (2, "PRIVMSG bob :b"), (3, "PRIVMSG #two :c"), (4, "PRIVMSG #one :d")):
        at(hh, ms)
        hh.send("alice", line)
    hh.take("alice")
    start, end = "timestamp=2020-01-01T00:00:00.000Z", "timestamp=2030-01-01T00:00:00.000Z"

    def targets(*params):
        return [ln for ln in batch(hh, "alice", "CHATHISTORY TARGETS " + " ".join(params))[1] if "TARGETS" in ln]

    row = f"@time={ts(4)};batch=REF :irc.test CHATHISTORY TARGETS"
    assert targets(start, end, "10") == [f"{row} bob {ts(2)}", f"{row} #two {ts(3)}", f"{row} #one {ts(4)}"]
    assert targets(start, end, "2") == [f"{row} bob {ts(2)}", f"{row} #two {ts(3)}"]
    assert targets(end, start, "2") == [f"{row} #two {ts(3)}", f"{row} #one {ts(4)}"]
    assert targets(f"timestamp={ts(2)}", end, "10") == [f"{row} #two {ts(3)}", f"{row} #one {ts(4)}"]
    assert targets(start, f"timestamp={ts(4)}", "10") == [f"{row} bob {ts(2)}", f"{row} #two {ts(3)}"]


# multiline messages in history -------------------------------------------------------------


def test_multiline_message_is_one_history_entry(hh):
    hh.register("alice", caps=CAPS + ["draft/multiline"])
    hh.register("bob", caps=["draft/multiline", "batch"])
    hh.register("old", caps=CAPS)
    for name in ("alice", "bob", "old"):
        hh.send(name, "JOIN #h")
    for line in ("BATCH +b draft/multiline #h", "@batch=b PRIVMSG #h :first", "@batch=b PRIVMSG #h :",
                 "@batch=b;draft/multiline-concat PRIVMSG #h :+joined", "BATCH -b"):
        hh.send("bob", line)
    for name in ("alice", "old"):
        hh.take(name)
    _, lines = batch(hh, "alice", "CHATHISTORY LATEST #h * 10")
    inner = parse_line(lines[1].encode()).params[0][1:]
    assert lines == [
        f"@time={ts(0)} :irc.test BATCH +REF chathistory #h",
        f"@msgid={mid(0)};time={ts(0)};batch=REF :{B} BATCH +{inner} draft/multiline #h",
        f"@time={ts(0)};batch={inner} :{B} PRIVMSG #h first",
        f"@time={ts(0)};batch={inner} :{B} PRIVMSG #h :",
        f"@draft/multiline-concat;time={ts(0)};batch={inner} :{B} PRIVMSG #h +joined",
        f"@time={ts(0)};batch=REF :{B} BATCH -{inner}",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]
    assert batch(hh, "old", "CHATHISTORY LATEST #h * 10")[1] == [  # the fallback: no blank line, one msgid
        f"@time={ts(0)} :irc.test BATCH +REF chathistory #h",
        f"@msgid={mid(0)};time={ts(0)};batch=REF :{B} PRIVMSG #h first",
        f"@time={ts(0)};batch=REF :{B} PRIVMSG #h +joined",
        f"@time={ts(0)} :irc.test BATCH -REF",
    ]
    row = hh.run(hh.server.store.read(lambda c: c.execute("SELECT text, lines FROM history").fetchall()))
    assert row == [("first\n+joined", '[["first",false],["",false],["+joined",true]]')]


# persistence, retention -----------------------------------------------------------------------


def test_history_survives_a_restart(tmp_path):
    """Lines buffered at shutdown are written (flushed before the store closes); after a restart they are
    served, and new msgids sort after the stored ones even though the clock starts over."""
    db = str(tmp_path / "r.db")
    cfg = config(storage={"durability": "off"})
    h = Harness(cfg, db=db)
    channel_history(h, 3)
    h.close()  # no settle: the shutdown flushes the buffer
    h = Harness(cfg, db=db)
    try:
        h.register("alice", caps=CAPS)
        h.register("bob")
        h.send("alice", "JOIN #h")
        h.send("bob", "JOIN #h")
        h.take("alice")
        h.send("bob", "PRIVMSG #h :after the restart")  # the clock is back at 00.000
        h.take("alice")
        assert batch(h, "alice", "CHATHISTORY LATEST #h * 10")[1] == expect([1, 2, 3], now=0)[:-1] + [
            f"@msgid={mid(3)[:-1]}1;time={ts(3)};batch=REF :{B} PRIVMSG #h :after the restart",
            f"@time={ts(0)} :irc.test BATCH -REF",
        ]
    finally:
        h.close()


def test_retention_prunes_old_history(tmp_path):
    """history.retention_days: the server deletes older lines (at start-up, then every hour)."""
    h = Harness(config(storage={"durability": "off"}, history={"retention_days": 1}), db=str(tmp_path / "p.db"))
    try:
        channel_history(h, 2)
        h.advance(86400 + 3600)  # a day and an hour later the hourly prune runs
        h.send("bob", "PRIVMSG #h :fresh")
        h.take("alice")
        lines = batch(h, "alice", "CHATHISTORY LATEST #h * 10")[1]
        assert [ln.split(" :", 1)[-1] for ln in lines[1:-1]] == [f"{B} PRIVMSG #h fresh"]
    finally:
        h.close()


def test_cli_prune_while_the_server_runs(tmp_path):
    """`pircd history prune --older-than DAYS [--channel NAME]` works on the file the server has open."""
    db = str(tmp_path / "c.db")
    h = Harness(config(storage={"durability": "off"}), db=db)
    try:
        h.clock.now = 1_600_000_000.0  # 2020: old enough to prune
        h.register("alice", caps=CAPS)
        h.register("bob")
        h.send("alice", "JOIN #h")
        h.send("bob", "JOIN #h")
        for i in range(3):
            h.send("bob", f"PRIVMSG #h :old {i}")
        h.send("bob", "JOIN #keep")
        h.send("bob", "PRIVMSG #keep :kept")
        h.settle()
        assert cli("history", "count", "--db", db).stdout == "4\n"
        out = cli("history", "prune", "--older-than", "30", "--channel", "#H", "--db", db)
        assert (out.returncode, out.stdout) == (0, "deleted 3 history lines of #H older than 30 days\n")
        assert cli("history", "count", "--channel", "#keep", "--db", db).stdout == "1\n"
        out = cli("history", "prune", "--db", db)
        assert (out.returncode, out.stderr) == (
            1, "error: give --older-than DAYS (history.retention_days is 0: keep everything)\n")
        assert cli("history", "prune", "--older-than", "30", "--db", db).stdout == (
            "deleted 1 history lines older than 30 days\n")
        h.take("alice")
        h.send("alice", "CHATHISTORY LATEST #h * 10")  # the running server still answers
        assert [parse_line(ln.encode()).command for ln in h.lines("alice")] == ["BATCH", "BATCH"]
    finally:
        h.close()
