"""Malformed and hostile IRC lines, for the fuzz test (tests/test_fuzz.py) and the live fuzzer
(bench/fuzz.py): every verb of the server with parameters a careless or hostile client sends.

A generator, not a protocol: ``lines(rng, verbs, n)`` yields raw lines (bytes, without CR LF) built from
pieces known to have broken IRC servers (ids past 2**63, other scripts' digits, empty and huge
parameters, CR and NUL inside a line, bad UTF-8, tags without values, masks full of wildcards) and from
the ordinary values of each PIRCAN verb, so deep paths (a SEND under an agreement, a TASK UPDATE) are
reached as well as the parsers.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

__all__ = ["NAMES", "PIRCAN_SHAPES", "lines"]

NAMES = ["alice", "bob", "carol", "olive", "nobody", "ALICE", "*", "", "a" * 70, "ChanServ", "9lives",
         "abcdef0123456789"]
IDS = ["0000000000000000", "161d646800000000", "7fffffffffffffff", "8000000000000000", "ffffffffffffffff",
       "²²²²²²²²²²²²²²²²", "１２３４５６７８９０１２３４５６", "0x23456789abcdef", "-123456789abcdef", "zz", "", "*"]
WORDS = ["", " ", ":", "::", "*", "0", "-1", "1e309", "nan", "²", "999999999999999999999999", "#", "#lobby",
         "#alice/room", "#bob/x", "&local", "message", "task:translate", "resource:read", "task:", "message,,",
         "agent-decides", "owner-decides", "auto-accept", "deny", "ALL", "role=target", "state=working",
         "limit=0", "peer=bob", "working", "completed", "input-required", "json", "text", "{", "[]",
         "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "?" * 40, "%", "+o", "-P", "+b", "$a:alice", "m:*!*@*",
         "\u202e", "\U0001f600" * 60, "é" * 300, "x" * 600]
RAW = [b"\r", b"\x00", b"\xff\xfe", b"\xc3", b"\x01ACTION\x01", b"\x03", b"\t"]
TAGS = ["", "@", "@label=x ", "@+pircan.dev/key=k ", "@a=b;c;d= ", "@" + "t" * 5000 + "=x ",
        "@label=" + "l" * 100 + " ", "@draft/reply=161d646800000000 ", "@batch=nope "]

# The subcommands of the PIRCAN verbs, with the kinds of parameter each takes.
PIRCAN_SHAPES: list[tuple[str, ...]] = [
    ("CONTACT", "REQUEST", "name", "word", "word", "text"),
    ("CONTACT", "ACCEPT", "id", "word", "word"),
    ("CONTACT", "DECLINE", "id"),
    ("CONTACT", "REVOKE", "id"),
    ("CONTACT", "LIST", "word"),
    ("CONTACT", "POLICY", "name", "word"),
    ("SEND", "name", "id", "text"),
    ("SEND", "name", "text"),
    ("INBOX",),
    ("INBOX", "READ", "id"),
    ("INBOX", "ACK", "id"),
    ("INBOX", "TAKE", "name"),
    ("INBOX", "WAIT", "name", "word"),
    ("INBOX", "HISTORY", "name", "word", "id"),
    ("AGENTS", "word"),
    ("AGENTS", "CREATE", "name"),
    ("AUDIT", "name", "word"),
    ("TASK", "CREATE", "name", "word", "text"),
    ("TASK", "UPDATE", "id", "word", "text"),
    ("TASK", "INPUT", "id", "text"),
    ("TASK", "CANCEL", "id", "text"),
    ("TASK", "GET", "id"),
    ("TASK", "LIST", "word", "word"),
    ("PROFILE", "name"),
    ("PROFILE", "NAME", "name", "text"),
    ("PROFILE", "SKILL", "name", "word", "text"),
    ("PROFILE", "UNSKILL", "name", "word"),
    ("RESOURCE", "LIST", "name"),
    ("RESOURCE", "GET", "name", "word"),
    ("RESOURCE", "PUT", "name", "word", "word", "text"),
    ("RESOURCE", "DEL", "name", "word"),
    ("UNINVITE", "name", "word"),
    ("TOKEN", "ADD", "name", "word"),
    ("TOKEN", "LIST", "name"),
    ("TOKEN", "REVOKE", "name", "word"),
]


def _piece(rng: random.Random, kind: str) -> bytes:
    if kind == "name":
        text = rng.choice(NAMES)
    elif kind == "id":
        text = rng.choice(IDS)
    elif kind == "text":
        text = ":" + rng.choice(WORDS + ["hello world", "a b c", "x" * rng.randint(0, 700)])
    else:
        text = rng.choice(WORDS)
    data = text.encode("utf-8", "surrogatepass")
    if rng.random() < 0.08:
        cut = rng.randint(0, len(data))
        data = data[:cut] + rng.choice(RAW) + data[cut:]
    return data


def _line(rng: random.Random, verbs: Sequence[str]) -> bytes:
    roll = rng.random()
    if roll < 0.45:
        shape = rng.choice(PIRCAN_SHAPES)
        parts = [word.encode() if word.isupper() else _piece(rng, word) for word in shape]
        if rng.random() < 0.1:
            parts = parts[: rng.randint(0, len(parts))]
    elif roll < 0.9:
        verb = rng.choice(verbs).encode()
        if rng.random() < 0.1:
            verb = verb.lower()
        parts = [verb] + [_piece(rng, rng.choice(("name", "id", "word", "word", "text")))
                          for _ in range(rng.randint(0, 6))]
    else:  # not a verb at all, or nothing
        parts = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 30)))]
    # a trailing parameter only last; everything else is the raw material as it comes
    tags = rng.choice(TAGS).encode() if rng.random() < 0.3 else b""
    prefix = b":x!y@z " if rng.random() < 0.05 else b""
    return tags + prefix + b" ".join(parts)


def lines(rng: random.Random, verbs: Sequence[str], count: int) -> Iterator[bytes]:
    """``count`` raw lines (no line end; they may contain a bare CR or NUL, and be over any limit)."""
    for _ in range(count):
        yield _line(rng, verbs).replace(b"\n", b" ")
