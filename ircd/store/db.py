"""The database: SQLite (one file, WAL) or PostgreSQL, migration tracks, group commit.

``server.db`` names a SQLite file or a ``postgresql://`` URL. Store modules write plain
synchronous functions that take a connection with ``sqlite3``'s surface (a ``sqlite3``
connection, or ``ircd.store.pg.Connection`` on PostgreSQL); this module runs them off the
event loop:

* ``read(fn, ...)`` runs ``fn`` on a reading connection (SQLite: aiosqlite's worker thread,
  WAL lets it read while the writer writes; PostgreSQL: a few reader threads, each with its
  own connection) and returns its result.
* ``write(fn, ...)`` queues ``fn`` for the writer thread, which runs the queued
  functions, up to ``GROUP_COMMIT_MOST`` of them, in ONE transaction (each inside its
  own SAVEPOINT, so one failing function does not undo the others) and commits once.
  The awaiting caller resumes only after that commit: a reply sent after
  ``await write(...)`` never promises something a crash could lose. Concurrent writers
  therefore share one commit (group commit): one fsync on SQLite, one WAL flush on PostgreSQL.

The same functions work from the CLI with a plain connection (``connect_sync``), also while
the server runs: SQLite's locking (PostgreSQL: an advisory lock every writer takes, see
``ircd.store.pg``) serialises the two processes.

When a PostgreSQL server goes away (a restart, a failover), the writes and reads of that
moment fail with ``StoreUnavailable``, and so do new ones, at once, until a reconnection
succeeds: the writer tries again with a growing pause (``RETRY_MIN_S`` to ``RETRY_MAX_S``),
the readers at their next read after the pause. One warning says the database went away
and one line says it is back; callers answer TEMPORARILY_UNAVAILABLE (IRC) or 503 (HTTP).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

import aiosqlite

from ircd.metrics import DB_BOUNDS, Timings
from ircd.store import sqlite as lite
from ircd.store.dialect import POSTGRESQL, SQLITE, Migration, dialect_of, is_url
from ircd.store.errors import StoreOpenError, StoreUnavailable
from ircd.store.migrate import migrate
from ircd.store.writes import Batched, Conn, insert_rows, transaction
from ircd.store.writes import run_batch as _run_batch

__all__ = ["Database", "Batched", "Conn", "Migration", "connect_sync", "insert_rows", "migrate", "transaction",
           "describe", "DURABILITY"]

log = logging.getLogger("pircd.store")
T = TypeVar("T")
DURABILITY = lite.DURABILITY
READERS = 4  # PostgreSQL reading connections (threads)
RETRY_MIN_S = 0.1
RETRY_MAX_S = 2.0
# Writes per group commit. Past a few dozen the commit's fixed cost is shared out, and taking
# everything queued would make the writers of a burst one wave: the event loop idles while the
# writer commits them all, then the writer while the loop turns their receipts into the next
# writes. Leaving the rest for the next commit lets the two overlap.
GROUP_COMMIT_MOST = 50


def describe(target: str) -> str:
    """``server.db`` as logs and messages show it: a SQLite file's absolute path, or the
    PostgreSQL URL without its password."""
    if is_url(target):
        from ircd.store.pg import redact

        return redact(target)
    import os

    return os.path.abspath(target)


def connect_sync(target: str, durability: str = "full") -> Any:
    """A plain connection for the CLI (autocommit; use ``with transaction(conn)``). On
    PostgreSQL it announces its commits, so a running server notices them (``data_version``)."""
    if is_url(target):
        from ircd.store import pg

        conn = pg.connect(target, durability, notify=True)
        try:
            _configure_pg(conn)
        except BaseException:
            conn.close()
            raise
        return conn
    return lite.connect(target, durability)


def _configure_pg(conn: Any) -> None:
    """The table of track versions, made once (under the writers' lock: two processes starting
    at once make it once)."""
    from ircd.store.dialect import table_exists

    if not table_exists(conn, "schema_versions"):
        with conn:
            conn.execute('CREATE TABLE IF NOT EXISTS schema_versions (track TEXT COLLATE "C" PRIMARY KEY, '
                         "version BIGINT NOT NULL)")


class Database:
    def __init__(self, path: str, durability: str = "full") -> None:
        if durability not in DURABILITY:
            raise ValueError(f"durability must be one of {sorted(DURABILITY)}")
        self.path = path  # the file, or the URL (with its password: never log it, see describe)
        self.dialect = POSTGRESQL if is_url(path) else SQLITE
        self.durability = durability
        self._conn: aiosqlite.Connection | None = None  # SQLite's reading connection
        self._readers: ThreadPoolExecutor | None = None  # PostgreSQL's reading threads
        self._local = threading.local()
        self._reader_conns: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        # queued writes and when they were queued; the writer thread takes up to group_commit_most
        # of them at once (one transaction)
        self._pending: list[tuple[Callable[..., Any] | Batched, tuple, asyncio.Future[Any], float]] = []
        # the lock of _pending; the writer sleeps on _wakeup (this lock's condition) while _sleeping
        self._lock = threading.Lock()
        self._wakeup = threading.Condition(self._lock)
        self._sleeping = False
        self._stop = False
        self._stopped: asyncio.Future[None] | None = None
        self._closing = False
        self._health = threading.Lock()
        self._down: str | None = None  # why the database cannot be reached, while it cannot
        self._retry_at = 0.0
        self._pause = RETRY_MIN_S
        self._generation = 0
        self.batches = 0  # committed write transactions (for tests and benchmarks)
        self.group_commit_most = GROUP_COMMIT_MOST
        # for /metrics: each group commit (BEGIN to COMMIT), and each write from queued to committed
        self.commit_timings = Timings(DB_BOUNDS)
        self.write_timings = Timings(DB_BOUNDS)
        # SQLite: copies the log into the database file off the writer's commits
        self.checkpointer = (lite.Checkpointer(path, durability)
                             if self.dialect == SQLITE and path not in ("", ":memory:") else None)

    @property
    def shown(self) -> str:
        return describe(self.path)

    async def open(self) -> None:
        """Open the reading side and start the writer; ``StoreOpenError`` (PostgreSQL) or
        ``sqlite3.Error`` when the database cannot be used."""
        loop = self._loop = asyncio.get_running_loop()
        try:
            if self.dialect == POSTGRESQL:
                self._readers = ThreadPoolExecutor(READERS, thread_name_prefix="pircd-db-reader")
                # fails here: a bad URL, refused credentials, no such database
                await loop.run_in_executor(self._readers, lambda: _configure_pg(self._reader_conn()))
            else:
                await self._open_sqlite_reader()
            ready: asyncio.Future[None] = loop.create_future()
            self._stopped = loop.create_future()
            threading.Thread(target=self._writer, args=(ready,), name="pircd-db-writer", daemon=True).start()
            await ready
            if self.checkpointer is not None:
                self.checkpointer.start()
        except BaseException:
            await self._close_readers()
            self._loop = None
            raise

    async def _open_sqlite_reader(self) -> None:
        lite.warn_if_exposed(self.path)
        lite.create_private(self.path)
        connecting = aiosqlite.connect(self.path, isolation_level=None)
        try:
            self._conn = await connecting
        except BaseException:
            # aiosqlite stops its worker thread without waiting for it, and the thread still
            # hands a result to this loop: wait for it, or closing the loop makes it raise
            await asyncio.to_thread(connecting._thread.join, 10.0)  # noqa: SLF001
            raise
        await self._call(lite.configure, self.durability)

    async def migrate(self, track: str, migrations: Sequence[Migration]) -> int:
        return await self._call(migrate, track, migrations)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(connection, *args)`` on a reading connection."""
        if self._readers is not None:
            assert self._loop is not None
            return await self._loop.run_in_executor(self._readers, self._read_pg, fn, args)
        conn = self._conn
        if conn is None:
            raise RuntimeError("database is not open")
        # aiosqlite has no public "run this callable on the connection thread";
        # _execute is that primitive.
        return await conn._execute(lambda: fn(conn._conn, *args))  # noqa: SLF001

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._call(fn, *args)

    # PostgreSQL's readers and its health --------------------------------------------------

    def _reader_conn(self) -> Any:
        """This reading thread's connection, made when it has none (or it broke, or it is
        older than the last outage: a connection that has not noticed yet)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and not conn.broken and not self._stale(conn):
            return conn
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._health:
                self._reader_conns.remove(conn)
        conn = self._connect()
        self._local.conn = conn
        with self._health:
            self._reader_conns.append(conn)
        self._came_back()
        return conn

    def _stale(self, conn: Any) -> bool:
        return getattr(conn, "generation", self._generation) != self._generation

    def _read_pg(self, fn: Callable[..., T], args: tuple) -> T:
        if self._down is not None and time.monotonic() < self._retry_at:
            raise StoreUnavailable(self._down)
        try:
            conn = self._reader_conn()
        except StoreOpenError as exc:
            self._went_down(str(exc))
            raise StoreUnavailable(str(exc)) from None
        try:
            return fn(conn, *args)
        except StoreUnavailable as exc:
            self._went_down(str(exc))
            raise

    def _connect(self) -> Any:
        """A new connection (PostgreSQL: ``StoreOpenError`` naming the problem)."""
        if self.dialect == POSTGRESQL:
            from ircd.store import pg

            conn = pg.connect(self.path, self.durability)
            conn.generation = self._generation
            return conn
        return lite.connect(self.path, self.durability)

    def _went_down(self, why: str) -> None:
        with self._health:
            if self._down is None:
                log.warning("database %s unavailable: %s; refusing what needs it until it is back",
                            self.shown, why)
                self._pause = RETRY_MIN_S
            self._down = why
            self._generation += 1  # every connection made before now is suspect
            self._retry_at = time.monotonic() + self._pause
            self._pause = min(self._pause * 2, RETRY_MAX_S)

    def _came_back(self) -> None:
        with self._health:
            if self._down is not None:
                log.warning("database %s is back", self.shown)
            self._down = None
            self._retry_at = 0.0
            self._pause = RETRY_MIN_S

    @property
    def available(self) -> bool:
        return self._down is None

    # writes ---------------------------------------------------------------------------------

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
        # the plain lock, and a notify only for a sleeping writer: a busy writer takes what is
        # pending when its commit is done (on a busy server, most writes), and Condition's
        # __enter__ and notify are Python functions, run for every write on the event loop
        with self._lock:
            if self._closing:
                return None
            self._pending.append((fn, args, future, time.perf_counter()))
            if self._sleeping:
                self._wakeup.notify()
        return future

    def write_batched(self, batched: Batched, item: Any) -> asyncio.Future[Any]:
        """Like ``write``, for a ``Batched`` function: ``item`` joins the other items queued
        for it, and the result is this item's entry of the function's result list."""
        future = self._queue(batched, (item,))  # type: ignore[arg-type]
        if future is None:
            raise RuntimeError("database is closing")
        return future

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
        """Changes when another process committed (SQLite's data_version on the writer's
        connection; on PostgreSQL the commits command-line connections announced)."""
        return await self.write(_data_version)

    def _writer(self, ready: asyncio.Future[None]) -> None:
        """The writer thread: its own connection; the writes queued meanwhile (at most
        ``group_commit_most``) in one transaction.

        It takes the next batch as soon as a commit is done, without a trip through
        the event loop (which may be busy for milliseconds with the lines of many
        clients); only the results go to the loop, one callback per batch."""
        loop = self._loop
        assert loop is not None
        try:
            conn: Any = self._connect_writer()
        except BaseException as exc:
            loop.call_soon_threadsafe(_settle, ready, exc)
            loop.call_soon_threadsafe(_settle, self._stopped, None)
            return
        loop.call_soon_threadsafe(_settle, ready, None)
        wakeup, batch, checkpointer, most = self._wakeup, [], self.checkpointer, self.group_commit_most
        try:
            while True:
                with wakeup:
                    while not self._pending and not self._stop and (conn is not None or self._wait_retry()):
                        self._sleeping = True
                        wakeup.wait(None if conn is not None else max(0.0, self._retry_at - time.monotonic()))
                        self._sleeping = False
                    if not self._pending and self._stop:
                        break  # closing, and everything is committed
                    if len(self._pending) <= most:
                        batch, self._pending = self._pending, []
                    else:
                        batch, self._pending = self._pending[:most], self._pending[most:]
                if conn is not None and self._stale(conn):  # a reader saw the database go away
                    conn.close()
                    conn = None
                if conn is None and not self._wait_retry():
                    conn = self._reconnect_writer()
                if conn is None:  # still unreachable: refuse what waits, at once
                    done, batch = batch, []
                    if done:
                        refused = StoreUnavailable(self._down or "the database cannot be reached")
                        loop.call_soon_threadsafe(_deliver, done, [(False, refused)] * len(done))
                    continue
                if not batch:
                    continue
                began = time.perf_counter()
                results = _run_batch(conn, [(fn, args) for fn, args, _, _ in batch])
                committed = time.perf_counter()
                if getattr(conn, "broken", False):  # PostgreSQL went away during the batch: nothing committed
                    why = next((str(v) for ok, v in results if isinstance(v, StoreUnavailable)), "connection lost")
                    self._went_down(why)
                    conn.close()
                    conn = None
                    results = [(False, StoreUnavailable(why))] * len(batch)
                else:
                    self.batches += 1
                    self._observe(batch, began, committed)
                    if checkpointer is not None:
                        checkpointer.committed()
                done, batch = batch, []
                loop.call_soon_threadsafe(_deliver, done, results)
        except BaseException as exc:  # not a failed write (those are results): the thread itself broke
            log.exception("database writer stopped")
            with wakeup:
                lost, self._pending = batch + self._pending, []
                self._closing = True
            loop.call_soon_threadsafe(_deliver, lost, [(False, exc)] * len(lost))
        finally:
            if conn is not None:
                conn.close()
            loop.call_soon_threadsafe(_settle, self._stopped, None)

    def _observe(self, batch: list[tuple[Any, tuple, Any, float]], began: float, committed: float) -> None:
        """For /metrics: the group commit's time (BEGIN to COMMIT) and each write's, from queued."""
        self.commit_timings.observe(committed - began)
        self.write_timings.observe_elapsed(committed, [item[3] for item in batch])

    def _wait_retry(self) -> bool:
        """While the database is down: keep waiting (True) until the time to try again."""
        return self._down is not None and time.monotonic() < self._retry_at

    def _connect_writer(self) -> Any:
        conn = self._connect()
        if self.checkpointer is not None:
            conn.execute(f"PRAGMA wal_autocheckpoint={lite.Checkpointer.BACKSTOP_PAGES}")
        if self.dialect == POSTGRESQL:
            try:
                conn.listen()  # commits of command-line tools: data_version
            except BaseException:
                conn.close()
                raise
        return conn

    def _reconnect_writer(self) -> Any:
        try:
            conn = self._connect_writer()
        except (StoreOpenError, StoreUnavailable) as exc:
            self._went_down(str(exc))
            return None
        self._came_back()
        return conn

    async def close(self) -> None:
        """Commit everything queued, then close."""
        if self._loop is None:
            return
        with self._wakeup:
            self._closing = self._stop = True
            self._wakeup.notify()
        if self._stopped is not None:
            await self._stopped
        if self.checkpointer is not None:
            await asyncio.to_thread(self.checkpointer.stop)
        await self._close_readers()
        self._loop = None

    async def _close_readers(self) -> None:
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
        if self._readers is not None:
            readers, self._readers = self._readers, None
            await asyncio.to_thread(readers.shutdown, True)
            for conn in self._reader_conns:
                conn.close()
            self._reader_conns.clear()


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


def _noop(conn: Conn) -> None:
    return None


def _data_version(conn: Any) -> int:
    if dialect_of(conn) == POSTGRESQL:
        return int(conn.changes_seen)
    return int(conn.execute("PRAGMA data_version").fetchone()[0])


def _log_failure(future: asyncio.Future[Any]) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if isinstance(exc, StoreUnavailable):
        return  # said once, when the database went away
    if exc is not None:
        log.error("background write failed: %r", exc)

