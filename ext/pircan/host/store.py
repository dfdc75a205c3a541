"""The host's SQL, on a migration track of its own (``pircan_host``).

``pircan_host`` holds one row per hosted agent as the server last saw it (state, process id,
restarts): the operator's ``pircd host ps`` reads it without the server, and a server that was
killed -9 finds there the process groups it left behind. ``pircan_host_requests`` carries the
operator's ``pircd host start|stop|restart`` to the running server, which answers in the row.
"""

from __future__ import annotations

from dataclasses import dataclass

from ircd.api import Conn

__all__ = ["MIGRATIONS", "TRACK", "Row", "all_rows", "save", "pending_requests", "answer_request",
           "add_request", "get_request"]

TRACK = "pircan_host"

MIGRATIONS: list[str] = [
    """
    CREATE TABLE pircan_host (
        account     TEXT PRIMARY KEY,
        state       TEXT NOT NULL,
        pid         INTEGER,
        command     TEXT NOT NULL,
        started_at  INTEGER,
        restarts    INTEGER NOT NULL DEFAULT 0,
        last_exit   TEXT,
        updated_at  INTEGER NOT NULL
    );
    CREATE TABLE pircan_host_requests (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        account     TEXT NOT NULL,
        action      TEXT NOT NULL,
        created_at  INTEGER NOT NULL,
        done_at     INTEGER,
        result      TEXT
    );
    """,
]


@dataclass(frozen=True, slots=True)
class Row:
    account: str
    state: str
    pid: int | None
    command: str
    started_at: int | None
    restarts: int
    last_exit: str | None
    updated_at: int


def all_rows(conn: Conn) -> list[Row]:
    return [Row(*r) for r in conn.execute(
        "SELECT account, state, pid, command, started_at, restarts, last_exit, updated_at FROM pircan_host "
        "ORDER BY account")]


def save(conn: Conn, row: Row) -> None:
    conn.execute(
        "INSERT INTO pircan_host (account, state, pid, command, started_at, restarts, last_exit, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account) DO UPDATE SET state = excluded.state, "
        "pid = excluded.pid, command = excluded.command, started_at = excluded.started_at, "
        "restarts = excluded.restarts, last_exit = excluded.last_exit, updated_at = excluded.updated_at",
        (row.account, row.state, row.pid, row.command, row.started_at, row.restarts, row.last_exit,
         row.updated_at),
    )


def forget_others(conn: Conn, accounts: list[str]) -> None:
    """Rows of agents no longer in the config go (their processes were reaped first)."""
    marks = ",".join("?" * len(accounts))
    conn.execute(f"DELETE FROM pircan_host WHERE account NOT IN ({marks})", accounts)


def pending_requests(conn: Conn) -> list[tuple[int, str, str]]:
    return conn.execute(
        "SELECT id, account, action FROM pircan_host_requests WHERE done_at IS NULL ORDER BY id").fetchall()


def answer_request(conn: Conn, ident: int, at: int, result: str) -> None:
    conn.execute("UPDATE pircan_host_requests SET done_at = ?, result = ? WHERE id = ?", (at, result, ident))


def add_request(conn: Conn, account: str, action: str, at: int) -> int:
    row = conn.execute("INSERT INTO pircan_host_requests (account, action, created_at) VALUES (?, ?, ?) RETURNING id",
                       (account, action, at)).fetchone()
    return int(row[0])


def get_request(conn: Conn, ident: int) -> tuple[int | None, str | None]:
    row = conn.execute("SELECT done_at, result FROM pircan_host_requests WHERE id = ?", (ident,)).fetchone()
    return (row[0], row[1]) if row else (None, None)
