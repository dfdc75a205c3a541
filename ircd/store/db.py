"""The SQLite database: one file, WAL, migration tracks, group commit.

Store modules write plain synchronous functions that take a
``sqlite3.Connection``; this module runs them off the event loop, on two
connections to the same file (WAL lets one write while the other reads):

* ``read(fn, ...)`` runs ``fn`` on aiosqlite's worker thread and returns its result.
* ``write(fn, ...)`` queues ``fn`` for the writer thread, which runs every queued
  function in ONE transaction (each inside its own SAVEPOINT, so one failing
  function does not undo the others) and commits once. The awaiting caller
  resumes only after that commit: a reply sent after ``await write(...)``
  never promises something a crash could lose. Concurrent writers therefore
  share one fsync (group commit).

The same functions work from the CLI with a plain ``sqlite3`` connection
(``connect_sync``), also while the server runs: SQLite's locking and the
busy timeout serialise the two processes.

The file holds password hashes, SCRAM keys and every stored message, so a
new one is created readable by its owner only (SQLite gives the ``-wal`` and
``-shm`` files the database's own mode), and the server warns at start-up
about an existing one that other users can open.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import stat
import threading
import time
from typing import Any, Callable, Sequence, TypeVar

import aiosqlite

from ircd.metrics import DB_BOUNDS, Timings

__all__ = ["Database", "Batched", "Migration", "connect_sync", "insert_rows", "DURABILITY"]

log = logging.getLogger("pircd.store")
T = TypeVar("T")

# durability -> PRAGMA synchronous. "full" survives power loss; "normal" survives
# a process crash (kill -9) but may lose the last commits on an OS crash.
DURABILITY = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}

Migration = Callable[[sqlite3.Connection], None] | str


def _null(value: None) -> None:
    return None


# The sqlite3 module binds int, float, str and bytes directly but sends every
# other value, None included, through its adapter lookup, which for None ends in
# an AttributeError (message formatted, then cleared) per bound NULL. A history
# row has three NULL columns, and that made up half of the CPU of inserting it.
# A registered adapter for None is a dictionary hit instead; the value bound is
# the same NULL.
sqlite3.register_adapter(type(None), _null)


def _configure(conn: sqlite3.Connection, durability: str) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={DURABILITY[durability]}")
    # Savepoints keep the pages they change in a statement journal, by default a
    # temporary file: one open, unlink and a few writes per group commit. In memory
    # a PIRCAN SEND costs half the write syscalls (docs/benchmarks.md).
    conn.execute("PRAGMA temp_store=MEMORY")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=10000")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_versions (track TEXT PRIMARY KEY, version INTEGER NOT NULL)"
    )


def _create_private(path: str) -> None:
    """Create the database file, if it does not exist yet, with mode 0600."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:  # it exists, or SQLite will report why it cannot be made
        return
    os.close(fd)  # SQLite takes an empty file as an empty database


def _exposed_files(path: str) -> list[tuple[str, int]]:
    """The database and its -wal and -shm files that users other than the owner can open,
    with their modes."""
    found = []
    for name in (path, path + "-wal", path + "-shm"):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
        except OSError:
            continue
        if mode & 0o077:
            found.append((name, mode))
    return found


def _warn_if_exposed(path: str) -> None:
    for name, mode in _exposed_files(path):
        log.warning(
            "%s is open to other users (mode %04o); it holds password hashes and private "
            "messages: chmod 600 it", name, mode,
        )


def connect_sync(path: str, durability: str = "full") -> sqlite3.Connection:
    """A plain connection for the CLI (autocommit; use ``with transaction(conn)``)."""
    _create_private(path)
    conn = sqlite3.connect(path, isolation_level=None, timeout=10.0)
    _configure(conn, durability)
    return conn


def _version(conn: sqlite3.Connection, track: str) -> int:
    row = conn.execute("SELECT version FROM schema_versions WHERE track = ?", (track,)).fetchone()
    return row[0] if row else 0


def migrate(conn: sqlite3.Connection, track: str, migrations: Sequence[Migration]) -> int:
    """Bring ``track`` up to ``len(migrations)``; each step commits with its version bump.

    The version is read again inside each step's write lock: the server and a CLI
    command may start on a new file at the same moment, and the one that waited for
    the lock must not repeat a step the other has committed."""
    if _version(conn, track) == len(migrations):
        return len(migrations)  # up to date: no write lock needed
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = _version(conn, track)
            if version > len(migrations):
                raise RuntimeError(
                    f"database schema {track} is at version {version}, "
                    f"newer than this pircd knows ({len(migrations)})"
                )
            if version == len(migrations):
                conn.execute("COMMIT")
                return version
            step = migrations[version]
            if isinstance(step, str):
                for statement in _split_sql(step):
                    conn.execute(statement)
            else:
                step(conn)
            conn.execute(
                "INSERT INTO schema_versions (track, version) VALUES (?, ?) "
                "ON CONFLICT(track) DO UPDATE SET version = excluded.version",
                (track, version + 1),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        log.info("migrated track=%s version=%d", track, version + 1)


def _split_sql(script: str) -> list[str]:
    statements, current = [], []
    for line in script.splitlines():
        current.append(line)
        joined = "\n".join(current)
        if sqlite3.complete_statement(joined):
            if joined.strip():
                statements.append(joined)
            current = []
    if "".join(current).strip():
        statements.append("\n".join(current))
    return statements


def insert_rows(conn: sqlite3.Connection, head: str, width: int, rows: Sequence[tuple], per_statement: int = 100) -> int:
    """``head VALUES (...),(...)``: one statement per ``per_statement`` rows of ``width`` values.

    executemany steps SQLite once per row, and the sqlite3 module takes the
    interpreter lock back between steps: while the event loop is busy, every
    row is a wait for the lock. A multi-row statement steps once per chunk.
    Returns the number of rows inserted.
    """
    inserted = 0
    for start in range(0, len(rows), per_statement):
        chunk = rows[start : start + per_statement]
        values = ",".join(["(" + ",".join("?" * width) + ")"] * len(chunk))
        inserted += conn.execute(f"{head} VALUES {values}", [v for row in chunk for v in row]).rowcount
    return inserted


class transaction:
    """``with transaction(conn):`` BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error), for sync callers."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.conn.execute("ROLLBACK" if exc_type else "COMMIT")


class Batched:
    """Marks a write function that takes a list of items and returns a list of results.

    Items queued together for the same function run as one call (one savepoint,
    and the function can use multi-row statements): on a busy server that turns
    hundreds of small statements into a few, and far fewer hand-offs of the GIL
    between the database thread and the event loop. If the call fails, each item
    is retried alone, so one bad item fails only itself.
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[sqlite3.Connection, list[Any]], list[Any]]) -> None:
        self.fn = fn


def _savepoint(conn: sqlite3.Connection, fn: Callable[..., Any], *args: Any) -> tuple[bool, Any]:
    conn.execute("SAVEPOINT w")
    try:
        value = fn(conn, *args)
    except Exception as exc:
        conn.execute("ROLLBACK TO w")
        conn.execute("RELEASE w")
        return False, exc
    conn.execute("RELEASE w")
    return True, value


def _run_group(conn: sqlite3.Connection, fn: Callable[..., Any], items: list[Any]) -> list[tuple[bool, Any]]:
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


def _run_batch(conn: sqlite3.Connection, batch: list[tuple[Callable[..., Any] | Batched, tuple]]) -> list[tuple[bool, Any]]:
    """Run queued writes in one transaction; each in a savepoint of its own
    (a run of items for the same Batched function shares one)."""
    results: list[tuple[bool, Any]] = []
    conn.execute("BEGIN IMMEDIATE")
    try:
        i = 0
        while i < len(batch):
            fn, args = batch[i]
            if isinstance(fn, Batched):
                j = i
                while j < len(batch) and batch[j][0] is fn:
                    j += 1
                results.extend(_run_group(conn, fn.fn, [a[0] for _, a in batch[i:j]]))
                i = j
                continue
            results.append(_savepoint(conn, fn, *args))
            i += 1
        conn.execute("COMMIT")
    except BaseException as exc:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        return [(False, exc)] * len(batch)
    return results


class Database:
    def __init__(self, path: str, durability: str = "full") -> None:
        if durability not in DURABILITY:
            raise ValueError(f"durability must be one of {sorted(DURABILITY)}")
        self.path = path
        self.durability = durability
        self._conn: aiosqlite.Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # queued writes and when they were queued; the writer thread takes them all at once (one transaction)
        self._pending: list[tuple[Callable[..., Any] | Batched, tuple, asyncio.Future[Any], float]] = []
        self._wakeup = threading.Condition(threading.Lock())
        self._stop = False
        self._stopped: asyncio.Future[None] | None = None
        self._closing = False
        self.batches = 0  # committed write transactions (for tests and benchmarks)
        # for /metrics: each group commit (BEGIN to COMMIT), and each write from queued to committed
        self.commit_timings = Timings(DB_BOUNDS)
        self.write_timings = Timings(DB_BOUNDS)

    async def open(self) -> None:
        _warn_if_exposed(self.path)
        _create_private(self.path)
        connecting = aiosqlite.connect(self.path, isolation_level=None)
        try:
            self._conn = await connecting
        except BaseException:
            # aiosqlite stops its worker thread without waiting for it, and the thread still
            # hands a result to this loop: wait for it, or closing the loop makes it raise
            await asyncio.to_thread(connecting._thread.join, 10.0)  # noqa: SLF001
            raise
        await self._call(_configure, self.durability)
        loop = self._loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._stopped = loop.create_future()
        threading.Thread(target=self._writer, args=(ready,), name="pircd-db-writer", daemon=True).start()
        await ready

    async def migrate(self, track: str, migrations: Sequence[Migration]) -> int:
        return await self._call(migrate, track, migrations)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(sqlite3_connection, *args)`` on the reading thread."""
        conn = self._conn
        if conn is None:
            raise RuntimeError("database is not open")
        # aiosqlite has no public "run this callable on the connection thread";
        # _execute is that primitive.
        return await conn._execute(lambda: fn(conn._conn, *args))  # noqa: SLF001

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._call(fn, *args)

    def write(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn`` in the next group-committed transaction; the future is done after COMMIT.

        A plain function returning the future (await it): on the SEND path every
        coroutine layer between a handler and its write costs a frame per resume."""
        future = self._queue(fn, args)
        if future is None:
            raise RuntimeError("database is closing")
        return future

    def _queue(self, fn: Callable[..., Any], args: tuple) -> asyncio.Future[Any] | None:
        """Hand ``fn`` to the writer thread; None once closing (checked under the lock the
        writer takes, so a write is either refused or committed, never left behind)."""
        if self._loop is None:
            return None
        future: asyncio.Future[Any] = self._loop.create_future()
        with self._wakeup:
            if self._closing:
                return None
            self._pending.append((fn, args, future, time.perf_counter()))
            self._wakeup.notify()
        return future

    def write_batched(self, batched: Batched, item: Any) -> asyncio.Future[Any]:
        """Like ``write``, for a ``Batched`` function: ``item`` joins the other items queued
        for it, and the result is this item's entry of the function's result list."""
        return self.write(batched, item)  # type: ignore[arg-type]

    def write_nowait(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any] | None:
        """Queue a write nobody waits for (it is still committed, in order, before close).

        Returns the write's future (done once committed) for a caller that wants
        to know when, or None when the database is already closing."""
        future = self._queue(fn, args)
        if future is not None:
            future.add_done_callback(_log_failure)
        return future

    async def flush(self) -> None:
        """Return once everything queued so far is committed."""
        await self.write(_noop)

    async def data_version(self) -> int:
        """SQLite's data_version on the writer's connection: it changes only when another
        connection commits, so a change means another process (the CLI) wrote."""
        return await self.write(_data_version)

    def _writer(self, ready: asyncio.Future[None]) -> None:
        """The writer thread: its own connection; every write queued meanwhile in one transaction.

        It takes the next batch as soon as a commit is done, without a trip through
        the event loop (which may be busy for milliseconds with the lines of many
        clients); only the results go to the loop, one callback per batch."""
        loop = self._loop
        assert loop is not None
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
            _configure(conn, self.durability)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            loop.call_soon_threadsafe(_settle, ready, exc)
            loop.call_soon_threadsafe(_settle, self._stopped, None)
            return
        loop.call_soon_threadsafe(_settle, ready, None)
        wakeup, batch = self._wakeup, []
        try:
            while True:
                with wakeup:
                    while not self._pending and not self._stop:
                        wakeup.wait()
                    if not self._pending:
                        break  # closing, and everything is committed
                    batch, self._pending = self._pending, []
                began = time.perf_counter()
                results = _run_batch(conn, [(fn, args) for fn, args, _, _ in batch])
                committed = time.perf_counter()
                self.batches += 1
                self.commit_timings.observe(committed - began)
                observe = self.write_timings.observe
                for item in batch:
                    observe(committed - item[3])
                done, batch = batch, []
                loop.call_soon_threadsafe(_deliver, done, results)
        except BaseException as exc:  # not a failed write (those are results): the thread itself broke
            log.exception("database writer stopped")
            with wakeup:
                lost, self._pending = batch + self._pending, []
                self._closing = True
            loop.call_soon_threadsafe(_deliver, lost, [(False, exc)] * len(lost))
        finally:
            conn.close()
            loop.call_soon_threadsafe(_settle, self._stopped, None)

    async def close(self) -> None:
        """Commit everything queued, then close."""
        if self._conn is None:
            return
        with self._wakeup:
            self._closing = self._stop = True
            self._wakeup.notify()
        if self._stopped is not None:
            await self._stopped
        await self._conn.close()
        self._conn = None


def _settle(future: asyncio.Future[Any] | None, exc: BaseException | None) -> None:
    if future is None or future.done():
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


def _deliver(batch: list[tuple[Any, tuple, asyncio.Future[Any], float]], results: list[tuple[bool, Any]]) -> None:
    """On the event loop: hand each write of a committed batch its result."""
    for (_, _, future, _), (ok, value) in zip(batch, results):
        if future.done():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


def _noop(conn: sqlite3.Connection) -> None:
    return None


def _data_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA data_version").fetchone()[0]


def _log_failure(future: asyncio.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.error("background write failed: %r", future.exception())
