"""ircd.store.db.Database: group commit on the writer thread, its failure isolation, close and data_version.

Each test runs its own event loop (asyncio.run) on a fresh database (a SQLite file, or on
PostgreSQL runs a database of its own: tests/dbs.py) and checks the stored rows with a
separate connection.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from typing import Any

import pytest

from ircd.store import db as dbm
from ircd.store.db import Batched, Database
from ircd.store.errors import IntegrityError, PgOperationalError
from ircd.store.writes import insert_rows, run_batch
from tests import dbs


def _table(conn: Any) -> None:
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)")


def _put(conn: Any, ident: int, value: str) -> int:
    conn.execute("INSERT INTO t (id, v) VALUES (?, ?)", (ident, value))
    return ident


def _rows(path) -> list[tuple[int, str]]:
    return dbs.rows(path, "SELECT id, v FROM t ORDER BY id")


class _Hold:
    """A write that keeps the writer busy until released: what is queued meanwhile is one batch."""

    def __init__(self) -> None:
        self.holding, self.released = threading.Event(), threading.Event()

    def __call__(self, conn: Any) -> None:
        self.holding.set()
        self.released.wait(30)


async def _opened(path) -> Database:
    database = Database(dbs.database(path), durability="off")
    await database.open()
    await database.write(_table)
    return database


def test_writes_queued_together_commit_together_and_a_failure_stays_alone(tmp_path):
    path = tmp_path / "d.db"

    async def main():
        database = await _opened(path)
        before = database.batches
        futures = [database.write(_put, 1, "a"), database.write(_put, 1, "duplicate"), database.write(_put, 2, "b")]
        results = await asyncio.gather(*futures, return_exceptions=True)
        batches = database.batches - before
        await database.close()
        return results, batches

    results, batches = asyncio.run(main())
    assert results[0] == 1 and results[2] == 2
    assert isinstance(results[1], IntegrityError)
    assert batches == 1  # one transaction for the three
    assert _rows(path) == [(1, "a"), (2, "b")]


def _put_many(calls: list[int]) -> Batched:
    """A Batched insert into t that notes how many items each of its calls got."""
    def put_many(conn: Any, items: list[tuple[int, str]]) -> list[int]:
        calls.append(len(items))
        conn.executemany("INSERT INTO t (id, v) VALUES (?, ?)", items)
        return [ident for ident, _ in items]

    return Batched(put_many)


def test_batched_items_share_one_call(tmp_path):
    path = tmp_path / "d.db"
    calls: list[int] = []
    many = _put_many(calls)

    async def main():
        database = await _opened(path)
        results = await asyncio.gather(*(database.write_batched(many, (i, f"v{i}")) for i in range(5)))
        await database.close()
        return results

    assert asyncio.run(main()) == [0, 1, 2, 3, 4]
    assert calls == [5]
    assert _rows(path) == [(i, f"v{i}") for i in range(5)]


def test_a_group_commit_takes_at_most_group_commit_most_writes_in_order(tmp_path):
    """More writes queued than one group commit takes: the first ``group_commit_most`` commit
    together, the rest in the next commits, in the order they were queued."""
    path = tmp_path / "d.db"
    hold = _Hold()
    sizes: list[int] = []
    many = _put_many(sizes)

    async def main():
        database = Database(dbs.database(path), durability="off")
        assert database.group_commit_most == dbm.GROUP_COMMIT_MOST == 50
        database.group_commit_most = 4  # read by the writer when it starts
        await database.open()
        await database.write(_table)
        blocked = database.write(hold)
        assert hold.holding.wait(30)
        futures = [database.write_batched(many, (ident, f"v{ident}")) for ident in range(1, 11)]
        before = database.batches
        hold.released.set()
        results = await asyncio.gather(*futures)
        await blocked
        batches = database.batches - before
        await database.close()
        return results, batches

    results, batches = asyncio.run(main())
    assert results == list(range(1, 11))
    assert sizes == [4, 4, 2]
    assert batches == 4  # the blocker's, then three for the ten writes
    assert _rows(path) == [(ident, f"v{ident}") for ident in range(1, 11)]


def test_first_items_run_before_the_writes_queued_with_them_and_keep_their_results(tmp_path):
    """Batched(first=True) items run at the start of their transaction, all in one call,
    even when other writes were queued before and between them; every write still gets
    its own result, and the others keep their order."""
    path = tmp_path / "d.db"
    ran: list[str] = []
    hold = _Hold()

    def plain(conn: Any, name: str) -> str:
        ran.append(name)
        return name.upper()

    def marks(conn: Any, items: list[str]) -> list[str]:
        ran.append("+".join(items))
        return [f"marked {item}" for item in items]

    early = Batched(marks, first=True)

    async def main():
        database = await _opened(path)
        blocked = database.write(hold)
        assert hold.holding.wait(30)
        # queued while the writer is busy: all of these share the next transaction
        futures = [database.write(plain, "a"), database.write_batched(early, "x"), database.write(plain, "b"),
                   database.write_batched(early, "y")]
        hold.released.set()
        results = await asyncio.gather(*futures)
        await blocked
        await database.close()
        return results

    assert asyncio.run(main()) == ["A", "marked x", "B", "marked y"]
    assert ran == ["x+y", "a", "b"]


def test_a_batch_of_batched_writes_runs_without_savepoints_until_one_fails(tmp_path):
    """Only Batched writes queued: each run is one call, without its savepoint. When one
    raises, everything the transaction did is rolled back and the batch runs again guarded
    (savepoints, the failing run item by item): one bad item fails only itself, and the rows
    of the run that had succeeded are stored once."""
    path = tmp_path / "d.db"
    calls: list[list[int]] = []
    hold = _Hold()

    def put_many(conn: Any, items: list[tuple[int, str]]) -> list[int]:
        calls.append([ident for ident, _ in items])
        for ident, value in items:
            _put(conn, ident, value)
        return [ident for ident, _ in items]

    early, many = Batched(put_many, first=True), Batched(put_many)

    async def main():
        database = await _opened(path)
        good = await asyncio.gather(database.write_batched(many, (1, "a")), database.write_batched(early, (2, "b")))
        calls.clear()
        blocked = database.write(hold)
        assert hold.holding.wait(30)
        futures = [database.write_batched(many, (3, "c")), database.write_batched(many, (3, "again")),
                   database.write_batched(early, (4, "d")), database.write_batched(many, (5, "e"))]
        hold.released.set()
        results = await asyncio.gather(*futures, return_exceptions=True)
        await blocked
        await database.close()
        return good, results

    good, results = asyncio.run(main())
    assert good == [1, 2]
    assert results[0] == 3 and results[2] == 4 and results[3] == 5
    assert isinstance(results[1], IntegrityError)
    # first unguarded (the NOTIFY-like run first), then guarded, then item by item
    assert calls == [[4], [3, 3, 5], [4], [3, 3, 5], [3], [3], [5]]
    assert _rows(path) == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]


def test_a_batch_one_statement_writes_runs_without_begin_and_commit(tmp_path):
    """Batched(alone=...): a batch of nothing but that function, written by one statement, is
    that statement alone, its own transaction. When it fails, nothing of it is kept and the
    batch runs again in a transaction: the good items are stored once, the bad one fails alone.
    Items the function would not write with one statement, or other writes with them: as before."""
    conn = sqlite3.connect(tmp_path / "d.db", isolation_level=None)
    _table(conn)
    said: list[str] = []
    conn.set_trace_callback(said.append)

    def put_rows(conn: Any, items: list[tuple[int, str]]) -> list[int]:
        insert_rows(conn, "INSERT INTO t (id, v)", 2, items)
        return [ident for ident, _ in items]

    many = Batched(put_rows, alone=lambda conn, items: len(items) <= 3)
    results = run_batch(conn, [(many, ((1, "a"),)), (many, ((2, "b"),))])
    assert results == [(True, 1), (True, 2)]
    assert said == ["INSERT INTO t (id, v) SELECT * FROM (VALUES (1,'a'),(2,'b')) WHERE column1 IS NOT NULL"]

    said.clear()
    results = run_batch(conn, [(many, ((3, "c"),)), (many, ((1, "again"),)), (many, ((4, "d"),))])
    assert [ok for ok, _ in results] == [True, False, True]
    assert isinstance(results[1][1], sqlite3.IntegrityError)
    tried = "INSERT INTO t (id, v) SELECT * FROM (VALUES (3,'c'),(1,'again'),(4,'d')) WHERE column1 IS NOT NULL"
    assert said[:3] == [tried, "BEGIN IMMEDIATE", tried] and said[-1] == "COMMIT"

    said.clear()  # four items: more than one statement says it writes
    assert run_batch(conn, [(many, ((i, "e"),)) for i in (5, 6, 7, 8)]) == [(True, i) for i in (5, 6, 7, 8)]
    assert said[0] == "BEGIN IMMEDIATE" and said[-1] == "COMMIT"
    said.clear()  # another write queued with them
    assert run_batch(conn, [(many, ((9, "f"),)), (_put, (10, "g"))]) == [(True, 9), (True, 10)]
    assert said[0] == "BEGIN IMMEDIATE" and said[-1] == "COMMIT"
    conn.set_trace_callback(None)
    assert conn.execute("SELECT id, v FROM t ORDER BY id").fetchall() == [
        (1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e"), (6, "e"), (7, "e"), (8, "e"), (9, "f"), (10, "g")]
    conn.close()


def test_a_batched_write_that_swallows_a_failed_statement(tmp_path):
    """SQLite undoes only the failed statement, and the rest commits. PostgreSQL fails the whole
    transaction, and its COMMIT would roll back without an error: the batch is reported failed,
    never committed when it was not (there is no savepoint in such a batch to tell it)."""
    path = tmp_path / "d.db"

    def swallowing(conn: Any, items: list[int]) -> list[int]:
        _put(conn, 1, "first")
        try:
            _put(conn, 1, "again")
        except IntegrityError:
            pass
        return items

    async def main():
        database = await _opened(path)
        result = await asyncio.gather(database.write_batched(Batched(swallowing), 7), return_exceptions=True)
        await database.close()
        return result[0]

    result = asyncio.run(main())
    if dbs.database(path).startswith("postgresql://"):
        assert isinstance(result, PgOperationalError)
        assert "not committed" in str(result)
        assert _rows(path) == []
    else:
        assert result == 7
        assert _rows(path) == [(1, "first")]


def test_the_writer_takes_the_next_batch_while_the_event_loop_is_busy(tmp_path):
    """A commit is followed by the next batch at once, without waiting for the event
    loop: here the loop is blocked in this very function while both batches commit."""
    path = tmp_path / "d.db"
    first_running, release, second_done = threading.Event(), threading.Event(), threading.Event()

    def first(conn: Any) -> None:
        first_running.set()
        release.wait(30)
        _put(conn, 1, "first")

    def second(conn: Any) -> None:
        _put(conn, 2, "second")
        second_done.set()

    async def main():
        database = await _opened(path)
        one = database.write(first)
        assert first_running.wait(30)
        two = database.write(second)  # queued while the first batch runs
        release.set()
        ran = second_done.wait(30)  # blocks the event loop: no callback of it runs meanwhile
        await asyncio.gather(one, two)
        await database.close()
        return ran

    assert asyncio.run(main()) is True
    assert _rows(path) == [(1, "first"), (2, "second")]


def test_close_commits_what_is_queued_and_refuses_later_writes(tmp_path):
    path = tmp_path / "d.db"

    async def main():
        database = await _opened(path)
        for i in range(3):
            database.write_nowait(_put, i, "queued")
        await database.close()
        with pytest.raises(RuntimeError, match="database is closing"):
            database.write(_put, 9, "late")
        return database.write_nowait(_put, 9, "late")

    assert asyncio.run(main()) is None
    assert _rows(path) == [(0, "queued"), (1, "queued"), (2, "queued")]


def test_data_version_moves_only_for_another_connections_commit(tmp_path):
    path = tmp_path / "d.db"

    async def main():
        database = await _opened(path)
        start = await database.data_version()
        await database.write(_put, 1, "own")
        after_own = await database.data_version()
        other = dbs.connect(path)  # as the command line does (on PostgreSQL: it announces its commit)
        other.execute("INSERT INTO t (id, v) VALUES (2, 'cli')")
        other.close()
        after_other = await database.data_version()
        await database.close()
        return start, after_own, after_other

    start, after_own, after_other = asyncio.run(main())
    assert after_own == start
    assert after_other != start


def test_a_broken_writer_fails_the_waiting_writes_and_closes(tmp_path, monkeypatch):
    path = tmp_path / "d.db"

    def broken(conn, batch):
        raise MemoryError("writer broke")

    async def main():
        database = await _opened(path)
        monkeypatch.setattr(dbm, "_run_batch", broken)
        with pytest.raises(MemoryError, match="writer broke"):
            await database.write(_put, 1, "lost")
        with pytest.raises(RuntimeError, match="database is closing"):
            database.write(_put, 2, "refused")
        await database.close()  # returns: the thread is gone

    asyncio.run(main())
    assert _rows(path) == []


def test_insert_rows_pads_to_a_few_statement_sizes_and_inserts_exactly_the_rows(tmp_path):
    """Multi-row INSERTs come in the sizes of writes.SHAPES (the statement cache keeps each
    compiled); padding rows are never stored, and an upsert
    tail still counts only the rows it inserted."""
    from ircd.store.writes import SHAPES, insert_rows

    path = tmp_path / "d.db"

    async def go() -> list[int]:
        database = await _opened(path)
        seen: list[int] = []

        def fill(conn: Any, count: int) -> int:
            conn.execute("DELETE FROM t")
            texts: list[str] = []
            trace = getattr(conn, "set_trace_callback", None)
            if trace is not None:
                trace(texts.append)
            inserted = insert_rows(conn, "INSERT INTO t (id, v)", 2, [(i + 1, f"v{i}") for i in range(count)])
            if trace is not None:
                trace(None)
                seen.extend(text.count("),(") + 1 for text in texts if text.startswith("INSERT"))
            return inserted

        counts = [1, 5, 7, 33, 100, 101, 250]
        for count in counts:
            assert await database.write(fill, count) == count
            assert _rows(path) == [(i + 1, f"v{i}") for i in range(count)]
        upsert = await database.write(lambda conn: insert_rows(
            conn, "INSERT INTO t (id, v)", 2, [(1, "again"), (10**6, "new")], tail=" ON CONFLICT DO NOTHING"))
        assert upsert == 1
        assert _rows(path)[0] == (1, "v0") and _rows(path)[-1] == (10**6, "new")
        await database.close()
        return seen

    seen = asyncio.run(go())
    if not dbs.POSTGRESQL:  # PostgreSQL takes the rows as arrays, one statement whatever the count
        # each statement's VALUES rows, padded: 1, 5 -> 6, 7 -> 8, 33 -> 48, 100, 101 -> 100 + 1, 250 -> 100 + 100 + 64
        assert seen == [1, 6, 8, 48, 100, 100, 1, 100, 100, 64], seen
        assert all(size in SHAPES or size == 100 for size in seen)


def test_sqlite_checkpoints_run_on_their_own_thread_after_commits_and_stop_with_close(tmp_path):
    """The writer's connection leaves checkpoints to the checkpointer (its own log limit is the
    backstop), which copies the log into the database file after commits, and stops on close."""
    path = tmp_path / "d.db"

    async def main():
        database = Database(str(path), durability="full")
        await database.open()
        checkpointer = database.checkpointer
        assert checkpointer is not None and checkpointer.checkpoints == 0
        limit = await database.write(lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        await database.write(_table)
        await asyncio.gather(*(database.write(_put, i, "x" * 2000) for i in range(50)))
        ran = await asyncio.to_thread(checkpointer.wait, 1, 30.0)
        last = checkpointer.last
        await database.close()
        alive = [t.name for t in threading.enumerate() if t.name == "pircd-db-checkpoint"]
        return limit, ran, last, alive

    limit, ran, last, alive = asyncio.run(main())
    assert limit == dbm.lite.Checkpointer.BACKSTOP_PAGES
    assert ran
    busy, pages, copied = last
    assert busy == 0 and pages > 0 and copied == pages
    assert alive == []
    assert len(_rows(path)) == 50
