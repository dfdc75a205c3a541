"""The README's raw-IRC session is a real one: replay its ``C:`` lines and compare every PIRCAN reply.

The README shows the agent ``helper`` (owned by ``alice``) asking ``scout`` (owned by ``bob``) for
contact, ``scout`` accepting, and a message and its reply. Ids, times and the password differ from
run to run, so they are compared as placeholders; everything else (verbs, keywords, order, the
``delivered``/``queued`` receipts) must be exactly what the README says.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

from tests.test_pircan import P

README = Path(__file__).resolve().parent.parent / "README.md"
_ID = re.compile(r"\b[0-9a-f]{16}\b")
_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\b")


def transcript() -> list[tuple[str, str]]:
    """The (C or S, line) pairs of the README's session, in order."""
    text = README.read_text(encoding="utf-8")
    start = text.index("## An agent's session in raw IRC")
    end = text.index("\n## ", start + 1)
    pairs = []
    for line in text[start:end].splitlines():
        if line.startswith(("C: ", "S: ")):
            pairs.append((line[0], line[3:]))
    return pairs


def normalise(line: str) -> str:
    line = line.replace(":irc.test ", ":irc.pircd.local ")
    return _TIME.sub("<time>", _ID.sub("<id>", line))


def is_pircan(line: str) -> bool:
    parts = line.split(" ")
    return len(parts) > 1 and (parts[1] in ("CONTACT", "SEND", "INBOX") or "NOTIFY" in line)


def test_the_readme_session_replays_exactly(tmp_path):
    p = P(tmp_path)
    try:
        p.account("alice", kind="person")
        p.account("bob", kind="person")
        p.account("helper", owner="alice")
        p.account("scout", owner="bob")
        p.login("scout")  # scout is online throughout, as in the README
        conn = "helper"
        p.h.connect(conn)
        pairs = transcript()
        assert pairs, "the README has no session"
        expected: dict[str, list[str]] = {"helper": [], "scout": []}
        seen: dict[str, list[str]] = {"helper": [], "scout": []}
        readme_ids: list[str] = []  # ids in the order the README's server lines show them
        real_ids: list[str] = []  # the same for this run's lines
        for i, (kind, line) in enumerate(pairs):
            if kind == "S":
                readme_ids += [x for x in _ID.findall(line) if x not in readme_ids]
            if kind == "C":
                line = _ID.sub(lambda m: real_ids[readme_ids.index(m.group(0))], line)
                if line.startswith("AUTHENTICATE ") and line != "AUTHENTICATE PLAIN":
                    line = "AUTHENTICATE " + base64.b64encode(b"\0helper\0" + p.passwords["helper"].encode()).decode()
                # who sends it: the connection the next server line is addressed to
                answer = next((x for k, x in pairs[i + 1:] if k == "S" and x != "..."), "")
                nick = answer.split(" ")[2] if answer.count(" ") >= 2 else ""
                conn = nick if nick in expected else conn
                p.h.send(conn, line)
                p.notifies()
                for who in seen:
                    for x in p.h.lines(who):
                        real_ids.extend(i for i in _ID.findall(x) if i not in real_ids)
                        if is_pircan(x):
                            seen[who].append(normalise(x))
            elif is_pircan(line):
                nick = line.split(" ")[2]
                expected[nick].append(normalise(line))
        assert seen["scout"] == expected["scout"]
        assert seen["helper"] == expected["helper"]
    finally:
        p.close()
