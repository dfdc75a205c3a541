"""Account rows: all of the core's account SQL.

Functions take a connection (``Conn``: SQLite's or PostgreSQL's) and run inside the caller's
transaction (the server's group-commit writer, or the CLI's ``transaction``), so a half-written
account cannot exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from ircd.store.errors import IntegrityError, unique_violation
from ircd.store.writes import Conn

__all__ = [
    "Account",
    "ScramKeys",
    "AccountExists",
    "TooManyAgents",
    "insert_account",
    "get_account",
    "get_account_by_certfp",
    "list_accounts",
    "set_password",
    "set_suspended",
    "delete_account",
    "add_certfp",
    "remove_certfp",
    "certfps",
    "load_login_sources",
    "note_login_source",
]


class AccountExists(Exception):
    pass


class TooManyAgents(Exception):
    """The owner already has ``accounts.agents_per_owner`` agents (``limit``)."""

    def __init__(self, owner: str, limit: int) -> None:
        super().__init__(f"{owner} already owns {limit} agent{'s' if limit != 1 else ''}")
        self.owner = owner
        self.limit = limit


@dataclass(frozen=True, slots=True)
class ScramKeys:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    folded: str
    kind: str
    owner: str | None
    created_at: int
    password_hash: str | None
    scram: ScramKeys | None
    suspended: bool
    email: str | None

    @property
    def is_agent(self) -> bool:
        return self.kind == "agent"


_COLUMNS = (
    "name, folded, kind, owner, created_at, password_hash, scram_salt, scram_iterations, "
    "scram_stored_key, scram_server_key, suspended, email"
)


def _row(row: tuple | None) -> Account | None:
    if row is None:
        return None
    scram = ScramKeys(row[6], row[7], row[8], row[9]) if row[6] is not None else None
    return Account(row[0], row[1], row[2], row[3], row[4], row[5], scram, bool(row[10]), row[11])


def insert_account(
    conn: Conn,
    name: str,
    folded: str,
    kind: str,
    owner: str | None,
    created_at: int,
    password_hash: str | None,
    scram: ScramKeys | None,
    email: str | None = None,
    max_agents: int | None = None,
) -> Account:
    """Insert an account; an agent whose owner already owns ``max_agents`` agents is refused
    (``TooManyAgents``), counted in the same transaction, so concurrent creations cannot pass it."""
    if kind == "agent" and owner is not None and max_agents is not None:
        owned = conn.execute("SELECT COUNT(*) FROM accounts WHERE owner = ? AND kind = 'agent'", (owner,)).fetchone()[0]
        if owned >= max_agents:
            raise TooManyAgents(owner, max_agents)
    try:
        conn.execute(
            f"INSERT INTO accounts ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)",
            (
                name,
                folded,
                kind,
                owner,
                created_at,
                password_hash,
                scram.salt if scram else None,
                scram.iterations if scram else None,
                scram.stored_key if scram else None,
                scram.server_key if scram else None,
                email,
            ),
        )
    except IntegrityError as exc:
        if unique_violation(exc):
            raise AccountExists(name) from None
        raise
    account = get_account(conn, folded)
    assert account is not None
    return account


def get_account(conn: Conn, folded: str) -> Account | None:
    return _row(conn.execute(f"SELECT {_COLUMNS} FROM accounts WHERE folded = ?", (folded,)).fetchone())


def get_account_by_certfp(conn: Conn, fingerprint: str) -> Account | None:
    return _row(
        conn.execute(
            f"SELECT {', '.join('a.' + c.strip() for c in _COLUMNS.split(','))} FROM accounts a "
            "JOIN account_certfps f ON f.account = a.folded WHERE f.fingerprint = ?",
            (fingerprint.lower(),),
        ).fetchone()
    )


def list_accounts(conn: Conn, owner: str | None = None) -> list[Account]:
    if owner is None:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM accounts ORDER BY folded").fetchall()
    else:
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM accounts WHERE owner = ? ORDER BY folded", (owner,)
        ).fetchall()
    return [a for a in map(_row, rows) if a is not None]


def set_password(conn: Conn, folded: str, password_hash: str, scram: ScramKeys) -> bool:
    cur = conn.execute(
        "UPDATE accounts SET password_hash = ?, scram_salt = ?, scram_iterations = ?, "
        "scram_stored_key = ?, scram_server_key = ? WHERE folded = ?",
        (password_hash, scram.salt, scram.iterations, scram.stored_key, scram.server_key, folded),
    )
    return cur.rowcount == 1


def set_suspended(conn: Conn, folded: str, suspended: bool) -> bool:
    cur = conn.execute("UPDATE accounts SET suspended = ? WHERE folded = ?", (int(suspended), folded))
    return cur.rowcount == 1


def delete_account(conn: Conn, folded: str) -> bool:
    """Delete an account; its agents go with it (they cannot exist without an owner)."""
    for (agent,) in conn.execute("SELECT folded FROM accounts WHERE owner = ?", (folded,)).fetchall():
        conn.execute("DELETE FROM accounts WHERE folded = ?", (agent,))
    cur = conn.execute("DELETE FROM accounts WHERE folded = ?", (folded,))
    return cur.rowcount == 1


def add_certfp(conn: Conn, folded: str, fingerprint: str) -> None:
    conn.execute(
        "INSERT INTO account_certfps (fingerprint, account) VALUES (?, ?)", (fingerprint.lower(), folded)
    )


def remove_certfp(conn: Conn, folded: str, fingerprint: str) -> bool:
    cur = conn.execute(
        "DELETE FROM account_certfps WHERE fingerprint = ? AND account = ?", (fingerprint.lower(), folded)
    )
    return cur.rowcount == 1


def certfps(conn: Conn, folded: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT fingerprint FROM account_certfps WHERE account = ? ORDER BY fingerprint", (folded,)
        ).fetchall()
    ]


def load_login_sources(conn: Conn) -> list[tuple[str, str]]:
    """(account, source) of every remembered successful login, least recent first."""
    rows = conn.execute("SELECT account, source FROM login_sources ORDER BY last_at, account, source")
    return rows.fetchall()


def note_login_source(conn: Conn, account: str, source: str, at: int, keep: int) -> None:
    """Remember a successful login of ``account`` from ``source``; keep its ``keep`` latest sources."""
    conn.execute(
        "INSERT INTO login_sources (account, source, last_at) SELECT ?, ?, ? "
        "WHERE EXISTS (SELECT 1 FROM accounts WHERE folded = ?) "
        "ON CONFLICT (account, source) DO UPDATE SET last_at = excluded.last_at",
        (account, source, at, account),
    )
    conn.execute(
        "DELETE FROM login_sources WHERE account = ? AND source NOT IN "
        "(SELECT source FROM login_sources WHERE account = ? ORDER BY last_at DESC LIMIT ?)",
        (account, account, keep),
    )
