"""PostgreSQL behind the ``sqlite3`` surface that the store functions use (psycopg 3, sync API).

Store functions are written once, against ``sqlite3.Connection``: ``execute(sql, params)``
with ``?`` placeholders returning a cursor (``fetchone``, ``fetchall``, iteration,
``rowcount``), ``executemany``, ``with conn:``, ``close``. ``Connection`` here offers the
same over a psycopg connection, so those functions run unchanged on PostgreSQL wherever
their SQL is portable (``ON CONFLICT``, ``RETURNING``, ``COALESCE``... work on both; SQL
that is not is written per dialect in ``ircd.store.dialect``). What it translates:

* ``?`` placeholders become psycopg's ``%s`` (and a literal ``%`` becomes ``%%``), and an empty
  ``IN ()`` (a list of placeholders made from an empty list) an empty array, once per distinct
  statement (cached);
* ``BEGIN IMMEDIATE`` (SQLite's "take the write lock now") becomes ``BEGIN`` plus a
  transaction-scoped advisory lock that every pircd writer takes, so writers are
  serialised exactly as SQLite serialises them: functions that read, then write what they
  read (an agent count before an insert), stay correct with several processes writing;
* psycopg's errors become those of ``ircd.store.errors``; a connection that broke (the
  server restarting, the network) becomes ``StoreUnavailable``;
* a Python ``bool`` is bound as 0 or 1 (SQLite has no boolean type; the schema uses integers);
* ``insert_rows`` (many rows at once) becomes one ``INSERT ... SELECT * FROM unnest(...)`` with an
  array per column (``insert_many``): psycopg re-parses a statement of many parameters each time.

A connection runs in autocommit mode (as ``sqlite3`` with ``isolation_level=None``):
statements outside ``BEGIN`` commit on their own. A command-line connection
(``notify=True``) announces each commit on the ``pircd_changes`` channel, which the server's
writer listens to: that is its ``data_version`` (another process changed the database).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import pq
from psycopg.types.numeric import Int8Dumper

from ircd.store.dialect import is_url
from ircd.store.errors import PgDatabaseError, PgIntegrityError, PgOperationalError, StoreOpenError, StoreUnavailable

__all__ = ["Connection", "connect", "is_url", "redact", "WRITE_LOCK", "CHANGES_CHANNEL"]

# the key of the advisory lock every writer holds for its transaction (SQLite's write lock)
WRITE_LOCK = 0x70697263645F7772  # "pircd_wr"
CHANGES_CHANNEL = "pircd_changes"
BEGIN_WRITE = f"BEGIN; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
CONNECT_TIMEOUT_S = 5

_QUOTED = re.compile(r"('(?:[^']|'')*')")
_NOT_PORTABLE = (
    (re.compile(r"^\s*INSERT\s+OR\s+IGNORE\b", re.I), "INSERT ... ON CONFLICT DO NOTHING"),
    (re.compile(r"^\s*(INSERT\s+OR\s+REPLACE|REPLACE)\b", re.I), "INSERT ... ON CONFLICT (...) DO UPDATE"),
    (re.compile(r"^\s*PRAGMA\b", re.I), "a function of ircd.store.dialect"),
)


def redact(url: str) -> str:
    """The URL without its password (for logs and messages): ``postgresql://user@host/db``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://(a URL that cannot be parsed)"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}@{hostport}" if user else hostport
    query = re.sub(r"(?i)(^|&)password=[^&]*", r"\1password=***", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class _BoolAsInt(Int8Dumper):
    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


# SQLite takes "x IN ()" (false) and "x NOT IN ()" (true), which a list of placeholders built
# from an empty list becomes; PostgreSQL's grammar has no empty list, its arrays do
_EMPTY_IN = re.compile(r"\b(NOT\s+)?IN\s*\(\s*\)", re.I)


def _empty_in(found: re.Match[str]) -> str:
    return "<> ALL('{}')" if found.group(1) else "= ANY('{}')"


_HEAD = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\s*\(([^)]*)\)\s*$", re.I)
_translated: dict[str, str] = {}


def translate(sql: str) -> str:
    """The psycopg form of a statement written with ``?`` placeholders (cached)."""
    found = _translated.get(sql)
    if found is not None:
        return found
    for pattern, instead in _NOT_PORTABLE:
        if pattern.match(sql):
            raise PgOperationalError(f"SQLite-only SQL (on both databases: {instead}): {sql[:80]}")
    parts = _QUOTED.split(sql.replace("%", "%%"))
    # even parts are outside string literals: only there is ? a placeholder
    out = "".join(part if i % 2 else _EMPTY_IN.sub(_empty_in, part.replace("?", "%s")) for i, part in enumerate(parts))
    if len(_translated) < 4096:
        _translated[sql] = out
    return out


def _writes(sql: str) -> bool:
    """Whether a statement run on its own (autocommit) may have changed something."""
    head = sql.lstrip()[:8].upper()
    return not head.startswith(("SELECT", "BEGIN", "COMMIT", "ROLLBACK", "NOTIFY", "LISTEN", "SET ", "SHOW"))


def _map_error(exc: psycopg.Error, conn: psycopg.Connection[Any]) -> Exception:
    """The store's error for a psycopg error (``StoreUnavailable`` when the connection is gone)."""
    sqlstate = getattr(exc, "sqlstate", None)
    if conn.broken or conn.closed or (sqlstate or "").startswith(("08", "57P")):
        return StoreUnavailable(f"the database server cannot be reached: {_first_line(exc)}")
    message = _first_line(exc)
    if isinstance(exc, psycopg.IntegrityError) or (sqlstate or "").startswith("23"):
        return PgIntegrityError(message, sqlstate)
    if isinstance(exc, (psycopg.ProgrammingError, psycopg.OperationalError, psycopg.NotSupportedError)):
        return PgOperationalError(message, sqlstate)
    return PgDatabaseError(message, sqlstate)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class Connection:
    """A psycopg connection with the ``sqlite3.Connection`` surface the store functions use."""

    dialect = "postgresql"

    def __init__(self, raw: psycopg.Connection[Any], notify: bool = False) -> None:
        self.raw = raw
        self.notify = notify  # announce commits on CHANGES_CHANNEL (command-line connections)
        self.changes_seen = 0  # commits other connections announced (the server's data_version)
        self.generation = 0  # the Database's count of outages when this connection was made
        self._column_types: dict[str, dict[str, str]] = {}  # insert_many's, by table

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> psycopg.Cursor[Any]:
        raw = self.raw
        if params is None:
            if sql == "BEGIN IMMEDIATE":
                sql = BEGIN_WRITE
            elif sql == "COMMIT" and raw.info.transaction_status == pq.TransactionStatus.INERROR:
                # PostgreSQL answers COMMIT of a failed transaction with a rollback, not an
                # error: a writer that went on after a failed statement must not be told "committed"
                raw.execute("ROLLBACK")
                raise PgOperationalError("the transaction failed and was rolled back, not committed", "25P02")
            elif sql == "COMMIT" and self.notify:
                sql = f"NOTIFY {CHANGES_CHANNEL}; COMMIT"
            query: str = sql
        else:
            query = translate(sql)
        try:
            cur = raw.execute(query, params)  # type: ignore[arg-type]
            if self.notify and raw.info.transaction_status == pq.TransactionStatus.IDLE and _writes(sql):
                raw.execute(f"NOTIFY {CHANGES_CHANNEL}")  # a statement that committed on its own
            return cur
        except psycopg.Error as exc:
            raise _map_error(exc, raw) from None

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> psycopg.Cursor[Any]:
        cur = self.raw.cursor()
        rows = list(seq)
        if not rows:
            return cur
        try:
            cur.executemany(translate(sql), rows)
        except psycopg.Error as exc:
            raise _map_error(exc, self.raw) from None
        return cur

    def insert_many(self, head: str, rows: Sequence[Sequence[Any]], tail: str = "") -> int:
        """``INSERT INTO t (cols)`` of many rows as one statement: ``SELECT * FROM unnest(?::type[],
        ...)``, one array per column. psycopg parses a statement of more than 50 parameters again
        at every execution (a regular expression over all of it: it was most of the CPU of a SEND
        with multi-row VALUES), and one execution per row (executemany) costs PostgreSQL an
        executor start and the row triggers' statements per row; this is one parse, one execution."""
        if not rows:
            return 0
        found = _HEAD.match(head)
        if found is None:
            raise PgOperationalError(f"not an INSERT INTO table (columns): {head[:80]}")
        table, columns = found.group(1), [c.strip() for c in found.group(2).split(",")]
        types = self._types(table)
        arrays = ", ".join(f"?::{types[c]}[]" for c in columns)
        sql = f"{head} SELECT * FROM unnest({arrays}){tail}"
        return int(self.execute(sql, [list(column) for column in zip(*rows)]).rowcount)

    def _types(self, table: str) -> dict[str, str]:
        found = self._column_types.get(table)
        if found is None:
            found = self._column_types[table] = dict(self.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = ?::regclass AND attnum > 0 AND NOT attisdropped", (table,)).fetchall())
        return found

    def script(self, sql: str) -> None:
        """Run several statements (a migration step) as one simple query."""
        try:
            self.raw.execute(sql.encode())
        except psycopg.Error as exc:
            raise _map_error(exc, self.raw) from None

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    @property
    def broken(self) -> bool:
        return self.raw.broken or self.raw.closed

    def __enter__(self) -> "Connection":
        self.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.broken:
            return
        self.execute("ROLLBACK" if exc_type else "COMMIT")

    def commit(self) -> None:
        """As ``sqlite3``'s: commit the transaction open, if any."""
        if self.in_transaction and not self.broken:
            self.execute("COMMIT")

    def rollback(self) -> None:
        if self.in_transaction and not self.broken:
            self.execute("ROLLBACK")

    def listen(self) -> None:
        """Count the commits other processes announce (see the module's text)."""

        def seen(_: Any) -> None:
            self.changes_seen += 1

        self.raw.add_notify_handler(seen)
        self.execute(f"LISTEN {CHANGES_CHANNEL}")

    def close(self) -> None:
        self.raw.close()


def connect(url: str, durability: str = "full", *, notify: bool = False,
            on_notice: Callable[[str], None] | None = None) -> Connection:
    """A connection to the database at ``url``; a failure is ``StoreOpenError`` with one line
    naming the problem (the host that cannot be reached, the credentials refused, the
    database that does not exist), never the password."""
    try:
        raw = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, application_name="pircd")
    except psycopg.Error as exc:
        raise StoreOpenError(f"cannot connect to {redact(url)}: {_connect_reason(exc, url)}") from None
    except (ValueError, TypeError) as exc:  # a URL libpq cannot parse
        raise StoreOpenError(f"cannot connect to {redact(url)}: not a PostgreSQL URL ({_scrub(str(exc), url)})") from None
    raw.adapters.register_dumper(bool, _BoolAsInt)
    raw.prepared_max = 512  # the store's statements, prepared once each on the server
    # "full": the commit waits for the WAL flush on the database server; "normal" and "off"
    # survive a crash of pircd (the server has the commit) but not one of the database server
    if durability != "full":
        raw.execute("SET synchronous_commit = off")
    raw.add_notice_handler(lambda diag: on_notice and on_notice(diag.message_primary or ""))
    return Connection(raw, notify)


def _scrub(text: str, url: str) -> str:
    found = re.match(r"^[a-z]+://[^:@/?#]*:([^@/?#]+)@", url)
    return text.replace(found.group(1), "***") if found else text


_FAILED = re.compile(r"^(?:connection failed: )?connection to server (?:at|on) .*? failed: (.*)$")


def _connect_reason(exc: psycopg.Error, url: str) -> str:
    """libpq's reason, on one line: its first line without the address (the message names the
    URL already) and a hint on the next line in parentheses."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    first = lines[0].removeprefix("connection is bad: ")
    found = _FAILED.match(first)
    reason = (found.group(1) if found else first).removeprefix("FATAL:").strip()
    if len(lines) > 1 and not _FAILED.match(lines[1]):
        reason += f" ({lines[1][:1].lower()}{lines[1][1:]})"
    return _scrub(reason, url)
