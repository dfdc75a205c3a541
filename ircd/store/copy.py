"""Copying a stopped server's database into an empty one: SQLite to PostgreSQL, and back
(``pircd migrate-store``).

The target gets the source's tables by the same migration steps, up to the same version of
each track (a server of this pircd migrates the rest when it starts), then every row, table
by table, in one transaction on the target: a copy that fails leaves the target as empty as
it was. Tables are filled parents first (foreign keys), a table's rows in the order they were
made (SQLite's rowid, the ``rowid`` column PostgreSQL's tables have where the order matters),
with the target's own triggers off meanwhile (the webhook queue would otherwise queue every
copied event a second time), then on again; identity sequences continue after the copied ids,
and SQLite's full-text index is rebuilt. Before the commit the row count of every table is
compared, source against target: any difference undoes the copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from ircd.store.dialect import POSTGRESQL, Migration, dialect_of, table_exists, tables
from ircd.store.errors import DatabaseError
from ircd.store.migrate import migrate

__all__ = ["CopyError", "Counted", "copy_database", "in_use", "versions"]

CHUNK = 1000


class CopyError(Exception):
    """A copy that cannot be made (the message says why, in one line)."""


@dataclass(frozen=True, slots=True)
class Counted:
    table: str
    source: int
    target: int


def versions(conn: Any) -> dict[str, int]:
    """The database's tracks and their versions ({} for a database without pircd's tables)."""
    if not table_exists(conn, "schema_versions"):
        return {}
    return dict(conn.execute("SELECT track, version FROM schema_versions").fetchall())


def in_use(conn: Any) -> int:
    """PostgreSQL: how many other pircd connections the database has (a running server has some)."""
    return int(conn.execute(
        "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pircd' "
        "AND pid <> pg_backend_pid()").fetchone()[0])


def copy_database(source: Any, target: Any, steps: Mapping[str, Sequence[Migration]]) -> list[Counted]:
    """Copy ``source`` into the empty ``target`` (both connections in autocommit mode); the row
    counts per table, which all match (else ``CopyError``, and the target is left unchanged)."""
    found = versions(source)
    if not found:
        raise CopyError("it has no pircd tables (no schema_versions)")
    unknown = sorted(set(found) - set(steps))
    if unknown:
        raise CopyError(f"it has schema tracks this pircd does not know: {', '.join(unknown)}")
    newer = [f"{t} {v} (this pircd: {len(steps[t])})" for t, v in sorted(found.items()) if v > len(steps[t])]
    if newer:
        raise CopyError(f"its schema is newer than this pircd knows: {', '.join(newer)}")
    if versions(target) or [t for t in tables(target) if t != "schema_versions"]:
        raise CopyError("the target is not empty: migrate-store copies into a new database")
    for track, version in sorted(found.items()):
        migrate(target, track, list(steps[track])[:version])
    names = [t for t in tables(source) if t != "schema_versions"]
    missing = sorted(set(names) - set(tables(target)))
    if missing:
        raise CopyError(f"it has tables no migration of this pircd makes: {', '.join(missing)}")
    return _copy_rows(source, target, _parents_first(target, names))


def _copy_rows(source: Any, target: Any, names: list[str]) -> list[Counted]:
    source.execute("BEGIN")  # one snapshot of the source
    if dialect_of(source) == POSTGRESQL:
        source.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    target_pg = dialect_of(target) == POSTGRESQL
    if not target_pg:
        target.execute("PRAGMA foreign_keys=OFF")  # checked as a whole before the commit instead
    target.execute("BEGIN IMMEDIATE")
    try:
        restore = _triggers_off(target, names)
        for table in names:
            try:
                _copy_table(source, target, table)
            except DatabaseError as exc:  # a row the target refuses (PostgreSQL: a text with a NUL, say)
                raise CopyError(f"table {table}: {exc}") from None
        restore()
        counted = [Counted(t, _count(source, t), _count(target, t)) for t in names]
        wrong = [c for c in counted if c.source != c.target]
        if wrong:
            raise CopyError("row counts differ: " + ", ".join(f"{c.table} {c.source} != {c.target}" for c in wrong))
        if not target_pg:
            broken = target.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise CopyError(f"{len(broken)} rows refer to rows that are not there (first: table {broken[0][0]})")
        target.execute("COMMIT")
    except BaseException:
        target.execute("ROLLBACK")
        raise
    finally:
        source.execute("ROLLBACK")
        if not target_pg:
            target.execute("PRAGMA foreign_keys=ON")
    return counted


def _copy_table(source: Any, target: Any, table: str) -> int:
    wanted = _columns(target, table)
    cols = [c for c in _columns(source, table) if c in wanted and not (c == "rowid" and dialect_of(target) == POSTGRESQL)]
    order = [f"{c} IS NOT NULL" for c in _self_references(target, table)]  # owners before what they own
    if _has_rowid(source, table):
        order.append("rowid")
    select = f"SELECT {', '.join(cols)} FROM {table}" + (f" ORDER BY {', '.join(order)}" if order else "")
    insert = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    copied = 0
    for rows in _chunks(source, select):
        target.executemany(insert, rows)
        copied += len(rows)
    if dialect_of(target) == POSTGRESQL:
        _continue_sequences(target, table)
    return copied


def _chunks(conn: Any, select: str) -> Iterator[list[tuple]]:
    """The rows of ``select`` a chunk at a time (PostgreSQL: a server-side cursor, not all at once)."""
    cursor = conn.raw.cursor(name="pircd_copy") if dialect_of(conn) == POSTGRESQL else conn.cursor()
    try:
        cursor.execute(select)
        while rows := cursor.fetchmany(CHUNK):
            yield [tuple(r) for r in rows]
    finally:
        cursor.close()


def _count(conn: Any, table: str) -> int:
    return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _columns(conn: Any, table: str) -> list[str]:
    if dialect_of(conn) == POSTGRESQL:
        return [r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? ORDER BY ordinal_position", (table,))]
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _has_rowid(conn: Any, table: str) -> bool:
    if dialect_of(conn) == POSTGRESQL:
        return "rowid" in _columns(conn, table)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()[0]
    return "WITHOUT ROWID" not in sql.upper()


def _references(conn: Any, table: str) -> list[tuple[str, str]]:
    """(column, referenced table) of the table's foreign keys."""
    if dialect_of(conn) == POSTGRESQL:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT a.attname, c.confrelid::regclass::text FROM pg_constraint c "
            "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = ANY(c.conkey) "
            "WHERE c.contype = 'f' AND c.conrelid = ?::regclass", (table,))]
    return [(r[3], r[2]) for r in conn.execute(f"PRAGMA foreign_key_list({table})")]


def _self_references(conn: Any, table: str) -> list[str]:
    return [column for column, parent in _references(conn, table) if parent == table]


def _parents_first(conn: Any, names: list[str]) -> list[str]:
    """The tables in an order where every table comes after the tables its foreign keys name."""
    parents = {t: {p for _, p in _references(conn, t) if p != t and p in names} for t in names}
    ordered: list[str] = []
    while parents:
        ready = sorted(t for t, ps in parents.items() if not ps - set(ordered))
        if not ready:
            raise CopyError(f"foreign keys form a cycle among {', '.join(sorted(parents))}")
        ordered += ready
        for t in ready:
            del parents[t]
    return ordered


def _triggers_off(conn: Any, names: list[str]) -> Callable[[], None]:
    """Turn the target's triggers off for the copy; the function that turns them on again (and,
    on SQLite, rebuilds the full-text indexes, which triggers keep)."""
    if dialect_of(conn) == POSTGRESQL:
        for table in names:
            conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")

        def enable() -> None:
            for table in names:
                conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")

        return enable
    saved = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for name, _ in saved:
        conn.execute(f"DROP TRIGGER {name}")

    def recreate() -> None:
        for _, sql in saved:
            conn.execute(sql)
        for (fts,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                   "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'").fetchall():
            conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")

    return recreate


def _continue_sequences(conn: Any, table: str) -> None:
    """Identity and serial columns go on after the largest id copied (ids given are not drawn)."""
    for (column,) in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = ? AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')", (table,)).fetchall():
        conn.execute(f"SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT MAX({column}) FROM {table}), 0) + 1, "
                     "false)", (table, column))
