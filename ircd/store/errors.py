"""Errors of the store, the same whichever database is behind it.

Store functions run on a ``sqlite3`` connection (SQLite) or on the adapter of
``ircd.store.pg`` (PostgreSQL), which raises the classes below. Code that
catches a database error catches the tuples here, never ``sqlite3``'s or
psycopg's classes, so that it works on both:

* ``IntegrityError``: a constraint refused a row (a duplicate key, a check, a
  trigger of the schema that refuses a change);
* ``OperationalError``: a statement that cannot run (a table that does not exist
  yet, a search expression the full-text index cannot parse);
* ``DatabaseError``: any error the database reported;
* ``StoreUnavailable``: the database server cannot be reached now (PostgreSQL
  restarting); the server answers TEMPORARILY_UNAVAILABLE or 503 and reconnects
  by itself. It is none of the above, so code that catches a missing table
  never swallows an outage.
"""

from __future__ import annotations

import sqlite3

__all__ = [
    "CANNOT_OPEN",
    "DatabaseError",
    "NewerSchema",
    "IntegrityError",
    "OperationalError",
    "PgDatabaseError",
    "PgIntegrityError",
    "PgOperationalError",
    "StoreOpenError",
    "StoreUnavailable",
    "UNAVAILABLE_TEXT",
    "missing_table",
    "unique_violation",
]


class PgDatabaseError(Exception):
    """An error PostgreSQL reported (``sqlstate``: its code)."""

    def __init__(self, message: str, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class PgIntegrityError(PgDatabaseError):
    pass


class PgOperationalError(PgDatabaseError):
    pass


class StoreUnavailable(Exception):
    """The database cannot be reached now; try again shortly."""


# what a client is told (FAIL <verb> TEMPORARILY_UNAVAILABLE, an MCP or A2A error of that code)
UNAVAILABLE_TEXT = "The database is unavailable; try again in a moment"


class StoreOpenError(Exception):
    """The database cannot be opened: one line naming the problem (never a password)."""


class NewerSchema(RuntimeError):
    """The database has a track at a version this pircd does not know (made by a newer one)."""


IntegrityError: tuple[type[Exception], ...] = (sqlite3.IntegrityError, PgIntegrityError)
OperationalError: tuple[type[Exception], ...] = (sqlite3.OperationalError, PgOperationalError)
DatabaseError: tuple[type[Exception], ...] = (sqlite3.Error, PgDatabaseError)
# what opening a database (and bringing its tracks up to date) may end in; each says why in one line
CANNOT_OPEN: tuple[type[Exception], ...] = (sqlite3.Error, PgDatabaseError, StoreOpenError, StoreUnavailable,
                                            NewerSchema)


def missing_table(exc: BaseException) -> bool:
    """Whether ``exc`` says a table does not exist (a track not migrated yet)."""
    if isinstance(exc, PgDatabaseError):
        return exc.sqlstate == "42P01"
    return isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc)


def unique_violation(exc: BaseException) -> bool:
    """Whether ``exc`` is a duplicate key (rather than another constraint)."""
    if isinstance(exc, PgDatabaseError):
        return exc.sqlstate == "23505"
    text = str(exc)
    return isinstance(exc, sqlite3.IntegrityError) and ("UNIQUE" in text or "PRIMARY KEY" in text)
