"""How long a message search takes over many stored messages (SQLite FTS5).

    python -m bench.search [--messages 100000] [--pairs 100] [--repeat 50]

Fills a fresh database with MESSAGES direct messages between PAIRS pairs of agents (written through
PIRCAN's own insert function in large transactions, so the index is kept by its triggers as the
server keeps it), bodies of 8 to 40 words drawn from a 2,000-word vocabulary with a few words much
more common than others (as in text), and one word that every fifth message of the other agents has
and none of the measured agent's (the worst case: every match is read and none is its). It reports the cost of the index on the writes (the same fill
with the index's triggers dropped), then runs each kind of search REPEAT times for one agent,
through the same SQL the server runs (``store.search_messages`` on the FTS5 expression that
``service.search.fts_query`` makes), a page of 20: the median and the 99th percentile. The
database is removed afterwards. Nothing here listens on a socket.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

COMMON = {"the": 40.0, "please": 8.0, "review": 8.0, "data": 4.0, "report": 2.0, "meeting": 2.0}
QUERIES = [  # (what, query)
    ("a rare word", "w1999"),
    ("a common word", "report"),
    ("the commonest word", "the"),
    ("two words (AND)", "review data"),
    ("a phrase", '"please review"'),
    ("a prefix (11 words)", "w12*"),
    ("OR of two rare words", "w1998 OR w1997"),
    ("a word NOT another", "report NOT meeting"),
    ("no match", "nowhere"),
    ("a word only others use (the worst case)", "elsewhere"),
]


def vocabulary() -> list[str]:
    return [f"w{n}" for n in range(2000)]


def body(rng: random.Random, words: list[str], weights: list[float]) -> str:
    picked = rng.choices(words, weights, k=rng.randint(8, 40))
    return " ".join(picked)


def fill(path: Path, messages: int, pairs: int, index: bool, seed: int = 7) -> float:
    """Seconds to write MESSAGES messages (``index``: with the FTS5 triggers, as the server runs)."""
    from ext.pircan import store as db
    from ext.pircan.store import StoredMessage
    from ircd.proto.msgid import IdGenerator
    from ircd.store.db import connect_sync, migrate
    from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

    conn = connect_sync(str(path), "off")
    migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
    migrate(conn, db.TRACK, db.MIGRATIONS)
    if not index:
        conn.execute("DROP TRIGGER pircan_messages_fts_insert")
    rng = random.Random(seed)
    words = [*COMMON, *vocabulary()]
    weights = [*COMMON.values(), *(1.0 / (1 + n / 50) for n in range(2000))]
    ids = IdGenerator()
    started = time.perf_counter()
    batch = 10_000
    for start in range(0, messages, batch):
        chunk: list[tuple[StoredMessage, str | None]] = []
        for n in range(start, min(messages, start + batch)):
            pair = n % pairs
            a, b = f"a{pair}", f"b{pair}"
            sender, recipient = (a, b) if n % 2 else (b, a)
            ident = ids.next_int()
            text = body(rng, words, weights) + (" elsewhere" if pair and n % 5 == 0 else "")
            chunk.append((StoredMessage(ident, sender, recipient, pair + 1, ident, None, 0, 0, text, None), None))
        conn.execute("BEGIN")
        insert_messages(conn, chunk)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def insert_messages(conn: Any, messages: list[Any]) -> None:
    """(StoredMessage, idempotency key) pairs as bare rows of pircan_messages: a benchmark's database
    is filled without the agreements, events and audit entries a SEND stores with them."""
    from ext.pircan.store import _MSG
    from ircd.store.writes import insert_rows

    insert_rows(conn, f"INSERT INTO pircan_messages ({_MSG}, idempotency_key)", 11,
                [(m.id, m.sender, m.recipient, m.agreement_id, m.conversation_id, m.in_reply_to, m.hop_count,
                  m.created_at, m.body, m.read_at, key) for m, key in messages])


def measure(path: Path, account: str, repeat: int) -> list[tuple[str, str, int, int, float, float]]:
    """(what, query, messages matching in all, on the first page, median ms, p99 ms) per query."""
    from ext.pircan import store as db
    from ext.pircan.service.search import fts_query
    from ircd.store.db import connect_sync

    conn = connect_sync(str(path), "off")
    out = []
    for what, query in QUERIES:
        match = fts_query(query)
        times = []
        found = 0
        for _ in range(repeat):
            started = time.perf_counter()
            found = len(db.search_messages(conn, account, match, 20, None))
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        total = conn.execute("SELECT COUNT(*) FROM pircan_messages_fts WHERE pircan_messages_fts MATCH ?",
                             (match,)).fetchone()[0]
        out.append((what, query, total, found, statistics.median(times),
                    times[min(len(times) - 1, int(len(times) * 0.99))]))
    # paging: the fifth page of a common word (before = the oldest id of the fourth)
    match = fts_query("report")
    before = None
    for _ in range(4):
        page = db.search_messages(conn, account, match, 20, before)
        if len(page) < 20:  # too few messages for five pages
            conn.close()
            return out
        before = page[-1].id
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        db.search_messages(conn, account, match, 20, before)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    out.append(("the 5th page of a common word", "report", out[1][2], 20, statistics.median(times),
                times[min(len(times) - 1, int(len(times) * 0.99))]))
    conn.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").strip().splitlines()[0])
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--pairs", type=int, default=100)
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="pircd-search-"))
    try:
        plain = fill(directory / "plain.db", args.messages, args.pairs, index=False)
        indexed_path = directory / "indexed.db"
        indexed = fill(indexed_path, args.messages, args.pairs, index=True)
        size = indexed_path.stat().st_size
        print(f"{args.messages:,} messages between {args.pairs} pairs ({size / 2**20:.0f} MiB): written in "
              f"{plain:.1f} s without the index, {indexed:.1f} s with it "
              f"({1e6 * (indexed - plain) / args.messages:.0f} µs more per message)")
        print(f"one agent's search ({args.messages // args.pairs:,} of its messages), a page of 20, "
              f"{args.repeat} runs each:")
        print("| search | query | matching messages (all agents) | on the page | median | p99 |")
        print("| --- | --- | --- | --- | --- | --- |")
        for what, query, total, found, median, p99 in measure(indexed_path, "a0", args.repeat):
            print(f"| {what} | `{query}` | {total:,} | {found} | {median:.2f} ms | {p99:.2f} ms |")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
