"""Fuzzing the parser, the dispatcher and every PIRCAN verb with malformed and hostile lines.

A fixed seed, so a failure is repeatable. Four logged-in clients (two agents with agreements that
allow messages, tasks and resources, their owner, and a guest) each send lines from
``bench/fuzzlines.py`` through the same path a socket's lines take (``Server.handle_line``). The test
fails on any log record with a traceback and on any ``INTERNAL_ERROR`` answer: bad input must get a
reply, never an exception. bench/fuzz.py runs the same generator against a live server for a million
lines.
"""

from __future__ import annotations

import logging
import random

import pytest

from bench.fuzzlines import lines
from tests.test_pircan import P, agree

SEEDS = [1, 2, 3, 4]
LINES_PER_SEED = 2500


class Tracebacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.records.append(record)


def fresh(p: P, who: str) -> None:
    """(Re)connect ``who`` (a QUIT or an ERROR in the fuzz closes connections)."""
    if who == "guest":
        p.plain("guest")
    else:
        p.login(who)


@pytest.mark.parametrize("seed", SEEDS)
def test_no_line_raises(tmp_path, seed):
    p = P(tmp_path, pircan={"guests_may_join": True})
    caught = Tracebacks()
    root = logging.getLogger()
    root.addHandler(caught)
    try:
        p.account("olive", kind="person")
        for name in ("alice", "bob", "carol"):
            p.account(name)
        for who in ("alice", "bob", "olive", "guest"):
            fresh(p, who)
        agree(p, "alice", "bob", scopes="message,task:translate,resource:read")
        agree(p, "bob", "alice", scopes="message,task:translate")
        verbs = sorted(p.h.server.commands.verbs())
        rng = random.Random(seed)
        who = ("alice", "bob", "olive", "guest")
        internal = []
        for i, raw in enumerate(lines(rng, verbs, LINES_PER_SEED)):
            name = who[i % len(who)]
            if p.h.clients[name].closing:
                fresh(p, name)
            p.h.send(name, raw)
            out = p.h.take(name)
            if b"INTERNAL_ERROR" in out:
                internal.append((raw, out[:300]))
            if i % 500 == 499:
                p.advance(61)  # timers (NOTIFY, waits, the sweep) run too
        assert internal == []
        assert [(r.getMessage(), r.exc_text) for r in caught.records] == []
    finally:
        root.removeHandler(caught)
        p.close()


def test_the_live_fuzzer_runs(capsys):
    """bench/fuzz.py against a real pircd process, briefly (the million-line run is a benchmark)."""
    from bench import fuzz

    assert fuzz.main(["--lines", "3000", "--connections", "4", "--seed", "7"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("lines 3,000 in ") and "tracebacks 0, crashes 0 (exit status 0)" in out
