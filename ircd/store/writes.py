"""The group commit's transaction (savepoints, ``Batched`` functions) and helpers for writers.

Everything here runs on a connection of either database: a ``sqlite3`` connection, or the
PostgreSQL adapter of ``ircd.store.pg``, which takes the same statements.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable, Protocol, Sequence

__all__ = ["SHAPES", "Batched", "Conn", "insert_rows", "padded_in", "padded_rows", "run_batch", "shape",
           "transaction"]


class Conn(Protocol):
    """What store functions use of a connection: ``sqlite3.Connection`` and ``ircd.store.pg.Connection``
    both are one. (A protocol, not ``sqlite3.Connection``: the compiled build checks argument types.)"""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, parameters: Any, /) -> Any: ...

    def close(self) -> None: ...


# The row counts a multi-row statement is made for. SQLite compiles each distinct statement
# text, and the sqlite3 module keeps the last 128 it used: with a statement per row count, the
# group commits of a busy server (1 to 100 rows each, a few tables each) compiled a new
# statement for most batches, about as much work again as running it. A chunk of rows is
# padded up to the next of these counts (at most a third more rows, whose NULL first column
# the statement filters out), so a table has at most this many statement texts.
SHAPES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def shape(count: int, most: int) -> int:
    """The padded size of ``count`` (1 to ``most``) items: the next of ``SHAPES``, or ``most``."""
    for size in SHAPES:
        if size >= count:
            return min(size, most)
    return most


def insert_rows(conn: Conn, head: str, width: int, rows: Sequence[tuple], per_statement: int = 100,
                tail: str = "") -> int:
    """``head`` with rows of ``width`` values (as ``VALUES (...),(...)``): one statement per
    ``per_statement`` rows (``tail``: ``ON CONFLICT DO NOTHING``, say). The first value of every row is never NULL
    (an id): padding rows are told apart by it (``SHAPES``).

    executemany steps SQLite once per row, and the sqlite3 module takes the
    interpreter lock back between steps: while the event loop is busy, every
    row is a wait for the lock. A multi-row statement steps once per chunk.

    On PostgreSQL the rows go as one array per column (``ircd.store.pg.Connection.insert_many``):
    one statement of a few parameters, whatever the number of rows.
    Returns the number of rows inserted.
    """
    if getattr(conn, "dialect", "sqlite") == "postgresql":
        pg: Any = conn  # ircd.store.pg.Connection
        return int(pg.insert_many(head, rows, tail))
    inserted = 0
    for start in range(0, len(rows), per_statement):
        marks, values = padded_rows(rows[start : start + per_statement], width, per_statement)
        inserted += conn.execute(_padded_insert(head, marks, tail), values).rowcount
    return inserted


@lru_cache(maxsize=256)
def _padded_insert(head: str, marks: str, tail: str) -> str:
    """One text per size, padded or not (the filter costs nothing measurable; the WHERE also
    keeps an upsert ``tail`` unambiguous after a SELECT)."""
    return f"{head} SELECT * FROM (VALUES {marks}) WHERE column1 IS NOT NULL{tail}"


def padded_rows(rows: Sequence[Sequence[Any]], width: int, most: int) -> tuple[str, list[Any]]:
    """``(?,?),(?,?)...`` and its values for a ``VALUES`` list of ``rows`` (1 to ``most``, each of
    ``width`` values whose first is never NULL), padded up to the next of ``SHAPES``: a few
    statement texts for any count. A padding row is NULL first (it matches no id, and
    ``insert_rows`` filters it out), zeros after (bound without the sqlite3 module's adapter
    lookup, which a NULL goes through)."""
    size = shape(len(rows), most)
    values = [v for row in rows for v in row]
    if size > len(rows):
        values += ([None] + [0] * (width - 1)) * (size - len(rows))
    return _values_marks(width, size), values


@lru_cache(maxsize=256)
def _values_marks(width: int, size: int) -> str:
    return ",".join(["(" + ",".join("?" * width) + ")"] * size)


def padded_in(values: Sequence[Any], most: int = 512) -> tuple[str, list[Any]]:
    """``(?,?,...)`` and its values for ``IN``, with the first value repeated up to the next of
    ``SHAPES`` (a repeated value matches the same rows): a few statement texts for any count
    (1 to ``most``)."""
    size = shape(len(values), most)
    padded = [*values, *[values[0]] * (size - len(values))]
    return "(" + ",".join("?" * size) + ")", padded


class transaction:
    """``with transaction(conn):`` BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error), for sync callers.

    On PostgreSQL the adapter makes BEGIN IMMEDIATE a BEGIN that takes the writers' lock."""

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def __enter__(self) -> Any:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None and getattr(self.conn, "broken", False):
            return  # the connection is gone, and its transaction with it
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


class Batched:
    """Marks a write function that takes a list of items and returns a list of results.

    Items queued together for the same function run as one call (one savepoint,
    and the function can use multi-row statements): on a busy server that turns
    hundreds of small statements into a few, and far fewer hand-offs of the GIL
    between the database thread and the event loop. If the call fails, each item
    is retried alone, so one bad item fails only itself: the function must give
    the same result when run again after a rollback (no effects outside the
    database). A batch of nothing but Batched writes runs without savepoints
    until one fails (``_unguarded``).

    A write of another function queued between two items starts a new run (its
    order against them is kept). ``first``: the items record
    something already done when they were queued (a NOTIFY sent): they run at the
    start of their transaction, as if queued before the other writes of the
    batch, and never break up another function's run.

    ``alone(conn, items)``: True when the call writes ``items`` with one statement on
    ``conn``. A batch of nothing else then runs without BEGIN and COMMIT: the statement is
    its own transaction, just as durable, and two statements fewer, each a wait for the
    interpreter lock while the event loop is busy. If it fails, nothing of it was kept, and
    the batch runs again in a transaction of its own, as any other.
    """

    __slots__ = ("fn", "first", "alone")

    def __init__(self, fn: Callable[[Any, list[Any]], list[Any]], first: bool = False,
                 alone: Callable[[Any, list[Any]], bool] | None = None) -> None:
        self.fn = fn
        self.first = first
        self.alone = alone


def _savepoint(conn: Conn, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    conn.execute("SAVEPOINT w")
    try:
        value = fn(conn, *args)
    except Exception as exc:
        conn.execute("ROLLBACK TO w")
        conn.execute("RELEASE w")
        return False, exc
    conn.execute("RELEASE w")
    return True, value


def _run_group(conn: Conn, fn: Callable[..., Any], items: list[Any]) -> list[tuple[bool, Any]]:
    ok, values = _savepoint(conn, fn, items)
    if ok:
        return [(True, v) for v in values]
    if len(items) == 1:
        return [(False, values)]
    out: list[tuple[bool, Any]] = []
    for item in items:  # isolate the failing item
        ok, value = _savepoint(conn, fn, [item])
        out.append((ok, value[0] if ok else value))
    return out


def run_batch(conn: Conn, batch: list[tuple[Callable[..., Any] | Batched, tuple]]) -> list[tuple[bool, Any]]:
    """Run queued writes in one transaction; each in a savepoint of its own
    (a run of items for the same Batched function shares one; ``Batched.first``
    items run before the others; none when all are Batched, until one fails).
    Results are in the order of ``batch``."""
    runs = _runs(batch)
    if len(runs) == 1:
        results = _alone(conn, batch, runs[0][0])
        if results is not None:
            return results
    try:
        conn.execute("BEGIN IMMEDIATE")  # may fail too (PostgreSQL gone): the batch's writes fail with it
        results = _unguarded(conn, batch, runs) if all(isinstance(fn, Batched) for fn, _ in runs) else None
        if results is None:
            results = _guarded(conn, batch, runs)
        conn.execute("COMMIT")
    except BaseException as exc:
        try:
            conn.execute("ROLLBACK")
        except Exception:  # the connection may be gone (PostgreSQL restarting): its transaction too
            pass
        return [(False, exc)] * len(batch)
    return results


Run = tuple["Callable[..., Any] | Batched", list[int]]


def _guarded(conn: Conn, batch: list[tuple[Callable[..., Any] | Batched, tuple]], runs: list[Run]
             ) -> list[tuple[bool, Any]]:
    results: list[tuple[bool, Any]] = [(False, None)] * len(batch)
    for fn, run in runs:
        if isinstance(fn, Batched):
            for at, result in zip(run, _run_group(conn, fn.fn, [batch[k][1][0] for k in run])):
                results[at] = result
        else:
            results[run[0]] = _savepoint(conn, fn, *batch[run[0]][1])
    return results


def _alone(conn: Conn, batch: list[tuple[Callable[..., Any] | Batched, tuple]], fn: Callable[..., Any] | Batched
           ) -> list[tuple[bool, Any]] | None:
    """The results of a batch of one Batched function that writes it with one statement
    (``Batched.alone``), run without a transaction around it; None when it cannot be, or failed."""
    if not isinstance(fn, Batched) or fn.alone is None:
        return None
    items = [args[0] for _, args in batch]
    if not fn.alone(conn, items):
        return None
    try:
        values = fn.fn(conn, items)
    except Exception:  # the statement's own transaction was rolled back: again in one of ours
        return None
    return [(True, value) for value in values]


def _unguarded(conn: Conn, batch: list[tuple[Callable[..., Any] | Batched, tuple]], runs: list[Run]
               ) -> list[tuple[bool, Any]] | None:
    """A batch of Batched writes only (a busy server's SENDs and NOTIFY marks): each run in one
    call without its savepoint, two statements fewer per run, each a wait for the interpreter
    lock while the event loop is busy. A Batched function may run again (its items are retried
    one by one when it fails), so when one raises, the transaction is rolled back and begun
    again, and None says: run the batch guarded."""
    results: list[tuple[bool, Any]] = [(False, None)] * len(batch)
    for fn, run in runs:
        assert isinstance(fn, Batched)
        try:
            values = fn.fn(conn, [batch[k][1][0] for k in run])
        except Exception:
            conn.execute("ROLLBACK")
            conn.execute("BEGIN IMMEDIATE")
            return None
        for at, value in zip(run, values):
            results[at] = (True, value)
    return results


def _runs(batch: list[tuple[Callable[..., Any] | Batched, tuple]]) -> list[Run]:
    """The writes of ``batch`` in the order to run them, as (function, indexes): the items of a
    Batched function queued one after the other are one run; ``Batched.first`` items, one run
    per function, come before the others."""
    first: dict[Batched, list[int]] = {}
    runs: list[Run] = []
    last: Any = None
    for i, (fn, _) in enumerate(batch):
        if fn is last:
            runs[-1][1].append(i)
        elif isinstance(fn, Batched) and fn.first:
            first.setdefault(fn, []).append(i)
        else:
            runs.append((fn, [i]))
            last = fn if isinstance(fn, Batched) else None
    if first:
        runs[:0] = list(first.items())
    return runs
