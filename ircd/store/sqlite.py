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

__all__ = ["DURABILITY", "configure", "connect", "create_private", "exposed_files", "warn_if_exposed"]

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
