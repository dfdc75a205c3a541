"""Bearer tokens of accounts (for the HTTP transports): their SQL, on a migration track of their own.

A token is ``pircd_<id>_<secret>``: the id (16 hex digits) finds the row, and
only the SHA-256 of the secret is stored, compared in constant time. The
secret has 256 random bits, so a fast hash is enough (nothing to guess from
a stolen hash). A token belongs to the account it was made for, and to that
account only while it exists: a token older than its account (the name was
deleted and made again) names nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from dataclasses import dataclass

from ircd.store.writes import Conn

__all__ = ["TRACK", "MIGRATIONS", "TokenRow", "make_token", "split_token", "insert", "find", "lookup", "list_for",
           "revoke", "touch", "valid_ids", "secret_hash", "LABEL_MAX"]

TRACK = "tokens"
LABEL_MAX = 64
PREFIX = "pircd_"

MIGRATIONS: list[str] = [
    """
    CREATE TABLE account_tokens (
        id           INTEGER PRIMARY KEY,
        account      TEXT NOT NULL,
        name         TEXT NOT NULL,
        secret_hash  BLOB NOT NULL,
        created_at   INTEGER NOT NULL,
        created_by   TEXT NOT NULL,
        last_used_at INTEGER,
        UNIQUE (account, name)
    );
    """,
]


@dataclass(frozen=True, slots=True)
class TokenRow:
    id: int
    account: str
    name: str
    created_at: int
    created_by: str
    last_used_at: int | None


def secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("ascii", "replace")).digest()


def make_token() -> tuple[int, str, str]:
    """(id, secret, the token text to give out once)."""
    ident = secrets.randbits(62) | (1 << 62)  # 16 hex digits, below 2**63
    secret = secrets.token_urlsafe(32)
    return ident, secret, f"{PREFIX}{ident:016x}_{secret}"


def split_token(text: str) -> tuple[int, str] | None:
    """(id, secret) of a well-formed token; None otherwise."""
    if not text.startswith(PREFIX) or len(text) > 128:
        return None
    ident_text, sep, secret = text[len(PREFIX):].partition("_")
    if not sep or len(ident_text) != 16 or not secret or not ident_text.isascii():
        return None
    try:
        ident = int(ident_text, 16)
    except ValueError:
        return None
    return (ident, secret) if ident < 1 << 63 else None


def insert(conn: Conn, ident: int, account: str, name: str, secret: str, at: int, by: str) -> TokenRow:
    """Raises ``ircd.store.errors.IntegrityError`` when the account has a token of that name."""
    conn.execute(
        "INSERT INTO account_tokens (id, account, name, secret_hash, created_at, created_by) VALUES (?, ?, ?, ?, ?, ?)",
        (ident, account, name, secret_hash(secret), at, by),
    )
    return TokenRow(ident, account, name, at, by, None)


_DUMMY = secret_hash("x" * 43)


def find(conn: Conn, ident: int, secret: str) -> tuple[TokenRow | None, bool]:
    """(the token's row when the secret matches and its account exists, is not suspended and is
    not younger than the token, else None; whether a token with this id exists at all). The same
    work (one hash, one comparison) whatever the outcome."""
    row = conn.execute(
        "SELECT t.id, t.account, t.name, t.created_at, t.created_by, t.last_used_at, t.secret_hash, "
        "a.suspended = 0 AND t.created_at >= a.created_at "
        "FROM account_tokens t LEFT JOIN accounts a ON a.folded = t.account WHERE t.id = ?",
        (ident,),
    ).fetchone()
    expected = row[6] if row is not None else _DUMMY
    matches = hmac.compare_digest(secret_hash(secret), expected)
    if row is not None and matches and row[7]:
        return TokenRow(*row[:6]), True
    return None, row is not None


def lookup(conn: Conn, ident: int, secret: str) -> TokenRow | None:
    """The token's row (``find``) or None."""
    return find(conn, ident, secret)[0]


def list_for(conn: Conn, account: str) -> list[TokenRow]:
    rows = conn.execute(
        "SELECT id, account, name, created_at, created_by, last_used_at FROM account_tokens "
        "WHERE account = ? ORDER BY created_at, name",
        (account,),
    ).fetchall()
    return [TokenRow(*r) for r in rows]


def revoke(conn: Conn, account: str, name: str | None) -> list[int]:
    """Delete the account's token of that name (every one for None); the ids deleted."""
    if name is None:
        ids = [r[0] for r in conn.execute("SELECT id FROM account_tokens WHERE account = ?", (account,))]
        conn.execute("DELETE FROM account_tokens WHERE account = ?", (account,))
    else:
        ids = [r[0] for r in conn.execute(
            "SELECT id FROM account_tokens WHERE account = ? AND name = ?", (account, name))]
        conn.execute("DELETE FROM account_tokens WHERE account = ? AND name = ?", (account, name))
    return ids


def touch(conn: Conn, ids: list[int], at: int) -> None:
    conn.executemany("UPDATE account_tokens SET last_used_at = ? WHERE id = ?", [(at, i) for i in ids])


def valid_ids(conn: Conn, ids: list[int]) -> set[int]:
    """Which of these token ids still name a usable token (for sessions opened with them)."""
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    return {
        r[0]
        for r in conn.execute(
            f"SELECT t.id FROM account_tokens t JOIN accounts a ON a.folded = t.account "
            f"WHERE t.id IN ({marks}) AND a.suspended = 0 AND t.created_at >= a.created_at",
            ids,
        )
    }
