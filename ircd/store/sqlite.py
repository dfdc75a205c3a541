"""SQLite's side of the store: one file in WAL mode, created readable by its owner only.

The file holds password hashes, SCRAM keys and every stored message, so a new one is
created with mode 0600 (SQLite gives the ``-wal`` and ``-shm`` files the database's own
mode), and the server warns at start-up about an existing one that other users can open.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading

__all__ = ["DURABILITY", "Checkpointer", "configure", "connect", "create_private", "exposed_files",
           "warn_if_exposed"]

log = logging.getLogger("pircd.store")

# durability -> PRAGMA synchronous. "full" survives power loss; "normal" survives
# a process crash (kill -9) but may lose the last commits on an OS crash.
DURABILITY = {"full": "FULL", "normal": "NORMAL", "off": "OFF"}
CACHED_STATEMENTS = 256


def _null(value: None) -> None:
    return None


# The sqlite3 module binds int, float, str and bytes directly but sends every
# other value, None included, through its adapter lookup, which for None ends in
# an AttributeError (message formatted, then cleared) per bound NULL. A history
# row has three NULL columns, and that made up half of the CPU of inserting it.
# A registered adapter for None is a dictionary hit instead; the value bound is
# the same NULL.
sqlite3.register_adapter(type(None), _null)


def configure(conn: sqlite3.Connection, durability: str) -> None:
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


def connect(path: str, durability: str = "full", timeout: float = 10.0) -> sqlite3.Connection:
    """A configured autocommit connection (``isolation_level=None``: BEGIN is ours to say)."""
    create_private(path)
    # a larger cache of compiled statements than the default 128: the group commit's multi-row
    # statements come in a few sizes per table (ircd.store.writes.SHAPES), and none should be
    # compiled again because other statements pushed it out
    conn = sqlite3.connect(path, isolation_level=None, timeout=timeout, cached_statements=CACHED_STATEMENTS)
    try:
        configure(conn, durability)
    except BaseException:
        conn.close()
        raise
    return conn


def create_private(path: str) -> None:
    """Create the database file, if it does not exist yet, with mode 0600."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:  # it exists, or SQLite will report why it cannot be made
        return
    os.close(fd)  # SQLite takes an empty file as an empty database


def exposed_files(path: str) -> list[tuple[str, int]]:
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


def warn_if_exposed(path: str) -> None:
    for name, mode in exposed_files(path):
        log.warning(
            "%s is open to other users (mode %04o); it holds password hashes and private "
            "messages: chmod 600 it", name, mode,
        )


class Checkpointer:
    """Copies the write-ahead log into the database file from a thread and connection of its own.

    SQLite checkpoints by default inside the COMMIT that takes the log past 1,000 pages, in the
    committing connection: for the server's writer that is a group commit whose writers all wait
    the extra milliseconds (with PIRCAN SENDs, every third commit or so), among the slowest
    receipts. This thread runs a PASSIVE checkpoint, which never blocks the writer, whenever
    something was committed since the last one, at most every ``PAUSE_S``; with nothing written it
    sleeps. The writer's connection checkpoints itself only past ``BACKSTOP_PAGES``: SQLite starts
    the log again only at a commit that finds all of it copied, which commits without pause seldom
    find, so under sustained writes the writer copies the rest and restarts the log there (and it
    bounds the log should this thread fall behind). The last connection to close checkpoints
    everything, as before."""

    BACKSTOP_PAGES = 10_000  # 40 MiB of log with 4 KiB pages
    PAUSE_S = 0.05

    def __init__(self, path: str, durability: str) -> None:
        self.path = path
        self.durability = durability
        self.checkpoints = 0  # completed (for tests and benchmarks)
        self.last: tuple[int, int, int] | None = None  # what the last one returned (run_once)
        self._done = threading.Condition()
        self._due = threading.Event()  # set by the writer after a commit
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed = False

    def start(self) -> None:
        self._stopping.clear()
        self._due.clear()
        self._thread = threading.Thread(target=self._run, name="pircd-db-checkpoint", daemon=True)
        self._thread.start()

    def committed(self) -> None:
        """The writer committed: a checkpoint is due (an attribute read when it already is)."""
        if not self._due.is_set():
            self._due.set()

    def stop(self) -> None:
        """Stop the thread (after the writer has stopped); blocks until it has."""
        self._stopping.set()
        self._due.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def run_once(self, conn: sqlite3.Connection) -> tuple[int, int, int]:
        """One PASSIVE checkpoint: (busy, pages in the log, pages copied to the database file)."""
        busy, pages, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        with self._done:
            self.last = (busy, pages, copied)
            self.checkpoints += 1
            self._done.notify_all()
        return busy, pages, copied

    def wait(self, count: int, timeout: float) -> bool:
        """Block until ``count`` checkpoints have completed (tests); False after ``timeout``."""
        with self._done:
            return self._done.wait_for(lambda: self.checkpoints >= count, timeout)

    def _connect(self) -> sqlite3.Connection:
        # the checkpoint syncs the log and the database file as the writer's commits do
        conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute(f"PRAGMA synchronous={DURABILITY[self.durability]}")
        return conn

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while True:
                self._due.wait()
                if self._stopping.is_set():
                    return
                self._due.clear()
                try:
                    if conn is None:
                        conn = self._connect()
                    self.run_once(conn)
                    self._failed = False
                except sqlite3.Error as exc:  # the file went away, the disk is full: the writer's
                    if not self._failed:  # commits report that; the backstop still checkpoints
                        log.warning("checkpoint of %s failed: %s", self.path, exc)
                        self._failed = True
                    if conn is not None:
                        conn.close()
                        conn = None
                if self._stopping.wait(self.PAUSE_S):
                    return
        finally:
            if conn is not None:
                conn.close()
