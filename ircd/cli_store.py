"""``pircd migrate-store FROM TO``: copy a stopped server's database into a new one, SQLite to
PostgreSQL or back (``ircd.store.copy``), and say per table how many rows it copied.

FROM and TO are each a SQLite file or a ``postgresql://`` URL, as ``server.db`` takes them.
Both must be out of use: FROM is a stopped server's database (a running server would go on
writing rows the copy does not have), and TO is new: a file that does not exist yet, or an
empty PostgreSQL database its operator made (``createdb``). Nothing is written to FROM.
"""

from __future__ import annotations

import os
from typing import Any

import click

from ircd.cli_accounts import _fail
from ircd.store.db import connect_sync, describe
from ircd.store.dialect import is_url
from ircd.store.errors import CANNOT_OPEN, StoreOpenError

__all__ = ["migrate_store"]


def _open(target: str, role: str, new: bool) -> object:
    """A connection to FROM (``new`` False: it must exist) or TO (``new``: a file must not exist yet)."""
    where = describe(target)
    if not is_url(target):
        if new and os.path.lexists(target):
            _fail(f"{where} exists: {role} must be a new file (or an empty PostgreSQL database)")
        if not new and not os.path.isfile(target):
            _fail(f"no database at {where}")
        if not new:
            from ircd.cli_backup import check_stopped

            check_stopped(target)
    try:
        conn = connect_sync(target, "full")
    except StoreOpenError as exc:
        _fail(str(exc))
    except CANNOT_OPEN as exc:
        _fail(f"cannot open {role} {where}: {exc}")
    if is_url(target):
        from ircd.store.copy import in_use

        users = in_use(conn)
        if users:
            conn.close()  # type: ignore[attr-defined]
            _fail(f"{where} is in use by {users} pircd connection{'s' if users != 1 else ''}: stop the server first")
    return conn


@click.command("migrate-store", short_help="Copy a stopped server's database (SQLite <-> PostgreSQL).")
@click.argument("source", metavar="FROM")
@click.argument("target", metavar="TO")
def migrate_store(source: str, target: str) -> None:
    """Copy the database FROM into the new database TO, each a SQLite file or a postgresql:// URL:
    the same tables (by the same migrations), every row, in one transaction on TO, then the row
    count of every table compared. The server must be stopped; afterwards set server.db to TO.
    TO is a file that does not exist yet, or an empty PostgreSQL database (createdb)."""
    from ircd.api import extension_schema_migrations
    from ircd.store import tokens
    from ircd.store.copy import CopyError, copy_database
    from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

    if describe(source) == describe(target):
        _fail("FROM and TO are the same database")
    made_file = not is_url(target)
    src = _open(source, "FROM", new=False)
    dst = _open(target, "TO", new=True)
    steps: dict[str, list[Any]] = {CORE_TRACK: list(CORE_MIGRATIONS), tokens.TRACK: list(tokens.MIGRATIONS),
                                   **extension_schema_migrations()}
    click.echo(f"copying {describe(source)} to {describe(target)}", err=True)
    counted = None
    try:
        counted = copy_database(src, dst, steps)
    except CopyError as exc:
        _fail(f"cannot copy {describe(source)}: {exc}")
    finally:
        src.close()  # type: ignore[attr-defined]
        dst.close()  # type: ignore[attr-defined]
        if made_file and counted is None:  # a file TO that got no copy goes again
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(target + suffix):
                    os.unlink(target + suffix)
    width = max(len(c.table) for c in counted)
    for c in counted:
        click.echo(f"{c.table:<{width}}  {c.source:>9}  {c.target:>9}")
    total = sum(c.target for c in counted)
    click.echo(f"copied {len(counted)} tables, {total} rows: every table has as many rows as in {describe(source)}")
