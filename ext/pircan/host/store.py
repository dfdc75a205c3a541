"""The host's SQL, on a migration track of its own (``pircan_host``).

``pircan_host`` holds one row per hosted agent as the server last saw it (state, process id,
restarts): the operator's ``pircd host ps`` reads it without the server, and a server that was
killed -9 finds there the process groups it left behind. ``pircan_host_requests`` carries the
operator's ``pircd host start|stop|restart`` to the running server, which answers in the row.

In a cluster (docs/scaling.md) the row is also the agent's lease: ``node`` is the node that last
ran it, and ``lease_until`` (ms), set while the agent should run, says until when that node holds
it. The holder renews it every third of ``host.lease_seconds``; a lease that ends unrenewed (its
node killed -9, cut off from the database) is taken by another node, which starts the agent. Only
the holder writes the row (or any node while no node has ever run the agent); a node alone never
sets either column.
"""

from __future__ import annotations

from dataclasses import dataclass

from ircd.api import Conn

__all__ = ["MIGRATIONS", "TRACK", "Row", "all_rows", "save", "pending_requests", "answer_request",
           "add_request", "get_request", "claim", "get_row", "leases", "renew", "save_held", "set_lease",
           "take_request"]

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
    # 2: the lease of a hosted agent in a cluster (the node that runs it, until when)
    """
    ALTER TABLE pircan_host ADD COLUMN node TEXT;
    ALTER TABLE pircan_host ADD COLUMN lease_until INTEGER;
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
    node: str | None = None  # in a cluster: the node that runs it, or ran it last
    lease_until: int | None = None  # in a cluster, while it should run: until when ``node`` holds it

    def held_by_other(self, node: str) -> bool:
        """Another node runs it (holds its lease, or held it and has not been replaced yet)."""
        return self.lease_until is not None and self.node is not None and self.node != node


_COLUMNS = "account, state, pid, command, started_at, restarts, last_exit, updated_at, node, lease_until"


def all_rows(conn: Conn) -> list[Row]:
    return [Row(*r) for r in conn.execute(f"SELECT {_COLUMNS} FROM pircan_host ORDER BY account")]


def get_row(conn: Conn, account: str) -> Row | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM pircan_host WHERE account = ?", (account,)).fetchone()
    return None if row is None else Row(*row)


def save(conn: Conn, row: Row) -> None:
    conn.execute(
        "INSERT INTO pircan_host (account, state, pid, command, started_at, restarts, last_exit, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account) DO UPDATE SET state = excluded.state, "
        "pid = excluded.pid, command = excluded.command, started_at = excluded.started_at, "
        "restarts = excluded.restarts, last_exit = excluded.last_exit, updated_at = excluded.updated_at",
        (row.account, row.state, row.pid, row.command, row.started_at, row.restarts, row.last_exit,
         row.updated_at),
    )


def save_held(conn: Conn, row: Row, node: str, lease_until: int | None | bool = True) -> None:
    """In a cluster: the row as ``node`` sees it, written only when ``node`` ran the agent last (or
    nobody did). ``lease_until``: True keeps the lease as it is; None ends it (parked); a time sets
    its end (a node that stops hands its agents over with the time of its stop)."""
    conn.execute(
        "INSERT INTO pircan_host (account, state, pid, command, started_at, restarts, last_exit, updated_at, node) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (account) DO UPDATE SET state = excluded.state, "
        "pid = excluded.pid, command = excluded.command, started_at = excluded.started_at, "
        "restarts = excluded.restarts, last_exit = excluded.last_exit, updated_at = excluded.updated_at, "
        "node = excluded.node WHERE pircan_host.node IS NULL OR pircan_host.node = excluded.node",
        (row.account, row.state, row.pid, row.command, row.started_at, row.restarts, row.last_exit,
         row.updated_at, node),
    )
    if lease_until is not True:
        set_lease(conn, row.account, node, lease_until)


def set_lease(conn: Conn, account: str, node: str, lease_until: int | None | bool) -> None:
    """End (None) or move the end of ``node``'s lease of the agent; nothing when another node holds it."""
    conn.execute("UPDATE pircan_host SET lease_until = ? WHERE account = ? AND node = ?",
                 (lease_until, account, node))


def claim(conn: Conn, account: str, command: str, node: str, now: int, until: int, revival: bool) -> Row | None:
    """Take the agent's lease for ``node`` until ``until``: when nobody holds it, ``node`` does
    already, or its holder's lease ended before ``now``; ``revival`` (a start not asked for by
    hand): not when the agent failed. None when taken; else the row as it is.

    One statement: on PostgreSQL two nodes claiming at once queue on the row, and the second sees
    the first's lease (every writer of pircd also takes the database's advisory lock)."""
    taken = conn.execute(
        "INSERT INTO pircan_host (account, state, command, updated_at, node, lease_until) "
        "VALUES (?, 'starting', ?, ?, ?, ?) ON CONFLICT (account) DO UPDATE SET node = excluded.node, "
        "lease_until = excluded.lease_until WHERE (pircan_host.lease_until IS NULL "
        "OR pircan_host.node = excluded.node OR pircan_host.node IS NULL OR pircan_host.lease_until <= ?) "
        "AND (? = 0 OR pircan_host.state <> 'failed') RETURNING account",
        (account, command, now, node, until, now, int(revival)),
    ).fetchone()
    return None if taken is not None else get_row(conn, account)


def renew(conn: Conn, node: str, until: int) -> set[str]:
    """Move the end of every lease ``node`` holds to ``until``; the agents it holds."""
    return {r[0] for r in conn.execute(
        "UPDATE pircan_host SET lease_until = ? WHERE node = ? AND lease_until IS NOT NULL RETURNING account",
        (until, node))}


def leases(conn: Conn) -> list[Row]:
    """The rows of the agents that should run (a lease is set)."""
    return [Row(*r) for r in conn.execute(
        f"SELECT {_COLUMNS} FROM pircan_host WHERE lease_until IS NOT NULL ORDER BY account")]


def take_request(conn: Conn, ident: int, node: str) -> bool:
    """An operator's request taken by ``node`` (in a cluster, one node answers each)."""
    return conn.execute("UPDATE pircan_host_requests SET result = ? WHERE id = ? AND done_at IS NULL "
                        "AND result IS NULL", (f"taken by {node}", ident)).rowcount == 1


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
