"""What a client can do to others, or to the server, with the bytes of a line: CR and NUL inside a line,
lines refused before dispatch (flood control)."""

from __future__ import annotations

import pytest

from ircd.dispatch import CommandContext, make_spec
from ircd.proto.lines import Message
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
    "tags too long": (b"@+x=" + b"y" * 5000 + b" TAGMSG bob", "417"),
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
