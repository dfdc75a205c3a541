"""``pircd backup FILE`` and ``pircd restore FILE``: copies of the server's database.

A backup is taken with SQLite's online backup API in one step, so it is the database as one
read transaction saw it: every write committed before the backup began (every acknowledged
SEND, account, decision) is in it, nothing half-written is, and the running server keeps
writing meanwhile (WAL: a reader does not block the writer). The copy is written beside its
final name with mode 0600 (it holds password hashes and private messages) and renamed into
place once complete, so a backup that fails leaves no file that looks like one.

A restore puts a backup in the place of the database of a stopped server, after checking it:
``PRAGMA integrity_check``, and no schema track newer than this pircd knows (an older one is
migrated when the server starts). A running server is detected by its open connection: the
restore takes the database's lock in exclusive mode, which it cannot while another process
has the file open. The database it replaces is kept as ``<db>.before-restore``.

Both work on SQLite files. A PostgreSQL database is backed up with PostgreSQL's own tools
(``pg_dump``, ``pg_restore``, its replication), and ``pircd migrate-store`` copies one to a
SQLite file and back: on a ``postgresql://`` database the two commands say so and stop.
"""

from __future__ import annotations

import os
import sqlite3
import click

from ircd.cli_accounts import _fail, open_context, with_db
from ircd.store.db import describe
from ircd.store.dialect import is_url

__all__ = ["backup", "restore", "known_tracks", "check_stopped"]


def known_tracks(extensions: list[str]) -> dict[str, int]:
    """The schema tracks this pircd knows, with their newest versions: the core's, and those of
    the enabled extensions that have tables (``ext.<name>.schema_tracks()``, reached by name)."""
    from ircd.api import extension_schema_tracks
    from ircd.store import tokens
    from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

    return {CORE_TRACK: len(CORE_MIGRATIONS), tokens.TRACK: len(tokens.MIGRATIONS),
            **extension_schema_tracks(extensions)}


def _not_postgresql(db: str, instead: str) -> None:
    if is_url(db):
        _fail(f"{describe(db)} is a PostgreSQL database: {instead}")


def _private_file(path: str) -> None:
    """Create ``path`` empty with mode 0600 (an existing file is an error)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@click.command(short_help="Copy the live database to FILE (mode 0600).")
@click.argument("file", type=click.Path(dir_okay=False))
@with_db
def backup(file: str, config_path: str | None, db: str | None) -> None:
    """Copy the server's database to FILE with SQLite's online backup API, also while the server
    runs: a consistent copy holding every write committed before it began. FILE must not exist;
    it is written with mode 0600."""
    ctx = open_context(config_path, db)
    _not_postgresql(ctx.db, "back it up with pg_dump (or copy a stopped server's database to a SQLite file with "
                            "pircd migrate-store)")
    source_path = os.path.abspath(ctx.db)
    if not os.path.isfile(source_path):
        _fail(f"no database at {source_path}: give the server's --config (or set PIRCD_CONFIG) or --db")
    if os.path.lexists(file):
        _fail(f"{file} exists: choose a new name (a backup never overwrites a file)")
    partial = file + ".partial"
    try:
        _private_file(partial)
    except FileExistsError:
        _fail(f"{partial} exists (a backup still running, or left from one that failed): remove it first")
    click.echo(f"using database {source_path}", err=True)
    done = False
    try:
        source = sqlite3.connect(source_path, timeout=10.0)  # reads only
        target = sqlite3.connect(partial)
        try:
            source.execute("PRAGMA busy_timeout=10000")
            source.backup(target)  # one step: one read transaction, a consistent copy
            target.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no -wal beside it
            pages = target.execute("PRAGMA page_count").fetchone()[0]
        finally:
            target.close()
            source.close()
        _fsync(partial)
        os.replace(partial, file)
        done = True
    except sqlite3.Error as exc:
        _fail(f"backup of {source_path} failed: {exc}")
    finally:
        if not done and os.path.exists(partial):
            os.unlink(partial)
    click.echo(f"backed up {source_path} to {file} ({pages} pages, {os.path.getsize(file)} bytes)")


def _check_backup(path: str, tracks: dict[str, int]) -> dict[str, int]:
    """The backup's schema versions, after its integrity check; a problem ends the command."""
    try:
        conn = sqlite3.connect(f"file:{os.path.abspath(path)}?mode=ro", uri=True)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
            if problems != ["ok"]:
                _fail(f"{path} fails the integrity check: {'; '.join(problems[:5])}")
            try:
                versions = dict(conn.execute("SELECT track, version FROM schema_versions"))
            except sqlite3.OperationalError:
                _fail(f"{path} is not a pircd database (no schema_versions table)")
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        _fail(f"{path} is not a usable database: {exc}")
    if "core" not in versions:
        _fail(f"{path} is not a pircd database (no core schema)")
    for track, version in sorted(versions.items()):
        known = tracks.get(track)
        if known is not None and version > known:
            _fail(f"{path}: schema {track} is at version {version}, newer than this pircd knows ({known}): "
                  f"restore it with the pircd that made it, or upgrade this one")
    return versions


def check_stopped(db_path: str) -> None:
    """The database is not open in another process (a running server keeps it open)."""
    if not os.path.exists(db_path):
        return
    conn = sqlite3.connect(db_path, timeout=0.2, isolation_level=None)
    try:
        conn.execute("PRAGMA locking_mode=EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            _fail(f"{db_path} is in use (a running server?): stop the server, then restore")
        raise
    finally:
        conn.close()  # the last connection: SQLite checkpoints and removes the -wal file


@click.command(short_help="Put a backup in place of a stopped server's database.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@with_db
@click.option("--yes", is_flag=True, help="Do not ask before replacing the database.")
def restore(file: str, config_path: str | None, db: str | None, yes: bool) -> None:
    """Check FILE (PRAGMA integrity_check; no schema newer than this pircd knows) and put it in
    place of the server's database, which is kept as <db>.before-restore. The server must be
    stopped; start it afterwards (older schemas are migrated then)."""
    ctx = open_context(config_path, db)
    _not_postgresql(ctx.db, "restore it with pg_restore (or copy a SQLite backup into an empty database with "
                            "pircd migrate-store FILE URL)")
    target = os.path.abspath(ctx.db)
    click.echo(f"using database {target}", err=True)
    if os.path.exists(target) and os.path.samefile(file, target):
        _fail(f"{file} is the database itself")
    versions = _check_backup(file, known_tracks(ctx.config.server.extensions))
    if not os.path.isdir(os.path.dirname(target)):
        _fail(f"cannot restore to {target}: no directory {os.path.dirname(target)}")
    check_stopped(target)
    kept = target + ".before-restore"
    if os.path.exists(target) and not yes:
        click.confirm(f"Replace {target} (kept as {kept})?", abort=True)
    staged = target + ".restoring"
    if os.path.lexists(staged):
        os.unlink(staged)
    _private_file(staged)
    with open(file, "rb") as src, open(staged, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    check_stopped(target)  # still nobody: the file moves now
    if os.path.exists(target):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(kept + suffix):
                os.unlink(kept + suffix)
        for suffix in ("-wal", "-shm"):  # left only if SQLite could not checkpoint: they go with it
            if os.path.exists(target + suffix):
                os.replace(target + suffix, kept + suffix)
        os.replace(target, kept)
    os.replace(staged, target)
    schema = ", ".join(f"{track} {version}" for track, version in sorted(versions.items()))
    click.echo(f"restored {file} to {target} (schema: {schema})")
    if os.path.exists(kept):
        click.echo(f"the database it replaced is kept as {kept}")
