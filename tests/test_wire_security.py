"""What a client can do to others, or to the server, with the bytes of a line: CR and NUL inside a line,
lines refused before dispatch (flood control), over-long lines answered with their label."""

from __future__ import annotations

import time

import pytest

from ircd.dispatch import CommandContext, make_spec
from ircd.proto.lines import Message
from ircd.commands.intake import INPUT_TOO_LONG_TEXT
from tests.harness import Harness, config

CR_REFUSED = "FAIL {verb} INVALID_CHARACTERS :Message rejected, your message contained a CR or NUL character"
FORGED = ":NickServ!NickServ@services.test NOTICE bob :Your password expired, send it again with /msg x"


# CR and NUL --------------------------------------------------------------------------------------


@pytest.fixture
def pair():
    """alice (op) and bob in #c; bob asked for every capability that shows more of what others send."""
    h = Harness(config(flood={"enabled": False}))
    h.register("alice", caps=["message-tags", "setname", "away-notify"])
    h.register("bob", caps=["message-tags", "setname", "away-notify"])
    h.send("alice", "JOIN #c")
    h.send("bob", "JOIN #c")
    h.take("alice")
    h.take("bob")
    yield h
    h.close()


FIELDS = [  # (verb, line; {x} is where the CR or NUL and the forged line go)
    ("PRIVMSG", "PRIVMSG #c :hello{x}"),
    ("PRIVMSG", "PRIVMSG bob :hello{x}"),
    ("NOTICE", "NOTICE #c :hello{x}"),
    ("TOPIC", "TOPIC #c :topic{x}"),
    ("AWAY", "AWAY :gone{x}"),
    ("SETNAME", "SETNAME :name{x}"),
    ("KICK", "KICK #c bob :reason{x}"),
    ("PART", "PART #c :reason{x}"),
    ("QUIT", "QUIT :reason{x}"),
    # where no space may follow: the start of the forged line only
    ("TAGMSG", "@+draft/reply=a{x} TAGMSG #c"),
    ("PRIVMSG", ":alice{x} PRIVMSG #c :the source prefix"),
    ("MODE", "MODE #c +b x{x}!*@*"),
    ("PRIVMSG", "PRIVMSG #c{x} :a middle parameter"),
]


@pytest.mark.parametrize("nul", [False, True], ids=["CR", "NUL"])
@pytest.mark.parametrize(("verb", "template"), FIELDS, ids=[f"{v}-{i}" for i, (v, _) in enumerate(FIELDS)])
def test_cr_or_nul_anywhere_in_a_line_is_refused_and_never_relayed(pair, verb, template, nul):
    """Modern IRC message grammar: a parameter is "any octet except NUL, CR, LF, " " and ":"" (and a trailing
    one may add the last two). A CR relayed inside a parameter ends the line early for a client that cuts at
    CR, which then shows what follows as a line of its own: here a forged NickServ notice. The line is
    refused whole, in every field, and the sender is told."""
    h = pair
    forged = FORGED if " :" in template.split("{x}")[0] else FORGED.split()[0]
    h.send("alice", template.format(x=("\0" if nul else "\r") + forged))
    assert h.lines("alice") == [":irc.test " + CR_REFUSED.format(verb=verb)]
    assert h.lines("bob") == []
    h.send("alice", "PRIVMSG #c :still here")
    assert [(m.source, m.command, m.params) for m in h.messages("bob")] == [
        ("alice!alice@127.0.0.1", "PRIVMSG", ["#c", "still here"])
    ]


def test_cr_refused_before_any_verb_runs_extension_verbs_included(pair):
    """The refusal happens when the line is parsed, once for every verb: an extension's handler never sees
    a CR or NUL, and the refusal carries the line's label (labeled-response)."""
    h = pair
    seen: list[list[str]] = []

    def handle(ctx: CommandContext, msg: Message) -> None:
        seen.append(msg.params)

    h.server.commands.add(make_spec("ECHOX", handle, extension="test"))
    h.send("alice", "CAP REQ labeled-response")
    h.take("alice")
    h.send("alice", "@label=q1 ECHOX a\rb :c d")
    h.send("alice", "@label=q2 ECHOX a :c\0d")
    h.send("alice", "@label=q3 ECHOX ok")
    assert h.lines("alice") == [
        "@label=q1 :irc.test " + CR_REFUSED.format(verb="ECHOX"),
        "@label=q2 :irc.test " + CR_REFUSED.format(verb="ECHOX"),
        "@label=q3 :irc.test ACK",
    ]
    assert seen == [["ok"]]


def test_verb_of_a_refused_line_is_only_echoed_when_it_is_one(pair):
    """A refused line's FAIL names its verb only when it looks like one: never raw bytes from the line."""
    h = pair
    h.send("alice", b"PRIV\0MSG bob :x")
    h.send("alice", "\r")
    h.send("alice", b"PRIVMSG\xff bob :x")
    assert h.lines("alice") == [
        ":irc.test " + CR_REFUSED.format(verb="*"),
        ":irc.test " + CR_REFUSED.format(verb="*"),
        ":irc.test FAIL * INVALID_UTF8 :Message rejected, your message contained invalid UTF-8",
    ]


# flood control for refused lines ----------------------------------------------------------------


@pytest.fixture
def flooded():
    """A client with a full flood bucket: burst 16, then 4 lines a second."""
    h = Harness(config(flood={"burst": 16, "per_second": 4.0}))
    h.register("alice", caps=["labeled-response", "batch", "standard-replies"])
    h.tick(10)  # the registration's tokens come back
    h.take("alice")
    yield h
    h.close()


REFUSED = {
    "unknown command": (b"WIBBLE x", "421"),
    "invalid UTF-8": (b"PRIVMSG bob :\xff\xfe", "FAIL"),
    "CR inside": (b"PRIVMSG bob :a\rb", "FAIL"),
    "tags too long": (b"@+x=" + b"y" * 5000 + b" TAGMSG bob", "417 FAIL"),
    "no command": (b"@a=b", None),
}


@pytest.mark.parametrize("kind", list(REFUSED))
def test_lines_refused_before_dispatch_cost_flood_tokens(flooded, kind):
    """Every line costs a token, answered or not: 40 refused lines past a burst of 16 at 4 a second take
    (40 - 16) / 4 = 6 seconds to be answered, like 40 known commands. They used to cost nothing, and were
    answered as fast as they came (135,000 a second)."""
    h = flooded
    raw, answer = REFUSED[kind]
    start = h.clock.now
    for _ in range(40):
        h.send("alice", raw)
    assert h.clock.now - start == pytest.approx(6.0)
    assert h.numerics("alice") == (answer.split() * 40 if answer else [])


def test_over_long_line_costs_a_token_and_waits_when_there_is_none(flooded):
    """The connection hands an over-long line to ``Server.line_too_long``: answered while tokens last, then
    held (a float: retry after that many seconds), like any other line."""
    h = flooded
    client = h.clients["alice"]
    line = b"PRIVMSG bob :" + b"x" * 600
    results = [h.server.intake.line_too_long(client, line) for _ in range(17)]
    h.server.flush_all()
    assert results[:16] == [None] * 16
    assert results[16] == pytest.approx(0.25)
    assert h.numerics("alice") == ["417", "FAIL"] * 16


# over-long lines: label and standard reply ------------------------------------------------------


def test_over_long_line_answer_carries_its_label(live, client_factory):
    """IRCv3 labeled-response: "the server MUST include the label in its response"; a client with several
    labelled commands in flight can tell which one was too long. With standard-replies the answer also
    has a FAIL with a code; without batch the single 417 carries the label itself."""
    srv = live(flood={"enabled": False})
    alice = client_factory(srv.port)
    bob = client_factory(srv.port)
    alice.register("alice", caps=["labeled-response", "batch", "standard-replies"])
    bob.register("bob", caps=["labeled-response"])
    alice.send("@label=L1 PRIVMSG bob :" + "x" * 600)
    alice.send("@label=L2 PRIVMSG bob :short")
    got = alice.sync()
    ref = got[0].params[0][1:]
    assert [(m.tags, m.command, m.params) for m in got] == [
        ({"label": "L1"}, "BATCH", ["+" + ref, "labeled-response"]),
        ({"batch": ref}, "417", ["alice", "Input line was too long"]),
        ({"batch": ref}, "FAIL", ["PRIVMSG", "INPUT_TOO_LONG", INPUT_TOO_LONG_TEXT]),
        (None, "BATCH", ["-" + ref]),
        ({"label": "L2"}, "ACK", []),
    ]
    assert [(m.command, m.params) for m in bob.sync()] == [("PRIVMSG", ["bob", "short"])]
    bob.send("@label=B1 PRIVMSG alice :" + "x" * 600)
    bob.sock.sendall(b"@label=B2 PRIVMSG alice :" + b"z" * 20000)  # no line end in sight
    bob.sock.sendall(b"z" * 20000 + b"\r\n")
    assert [(m.tags, m.command, m.params) for m in bob.sync()] == [
        ({"label": "B1"}, "417", ["bob", "Input line was too long"]),
        ({"label": "B2"}, "417", ["bob", "Input line was too long"]),
    ]
    assert [m.params[-1] for m in alice.sync()] == []


def test_over_long_lines_wait_for_flood_tokens_over_a_socket(live, client_factory):
    """Over a real connection the held line is answered later, in order, and the lines after it wait:
    12 over-long lines past a burst of 2 at 50 a second take at least (12 - 2) / 50 = 0.2 s."""
    srv = live(flood={"burst": 2, "per_second": 50.0})
    alice = client_factory(srv.port)
    alice.register("alice", caps=["labeled-response"])
    alice.sync()
    started = time.monotonic()
    alice.sock.sendall(b"".join(b"@label=%d PRIVMSG x :" % i + b"x" * 600 + b"\r\n" for i in range(12)))
    got = alice.sync()
    elapsed = time.monotonic() - started
    assert [(m.tags, m.command) for m in got] == [({"label": str(i)}, "417") for i in range(12)]
    assert elapsed >= 0.18, f"{elapsed:.3f}s"
