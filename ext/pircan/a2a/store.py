"""The SQL of PIRCAN's A2A side, on its own migration track (``pircan_a2a``): the network's signing
keys for intro tokens, and the A2A endpoints agents publish.

Like ``ext/pircan/store.py``: every function takes a connection (``Conn``: SQLite's or PostgreSQL's)
and runs inside a transaction the caller opened (the server's group commit, or ``pircd a2a`` on the
command line).
"""

from __future__ import annotations

from dataclasses import dataclass

from ircd.api import Conn

__all__ = [
    "MIGRATIONS",
    "TRACK",
    "SigningKey",
    "all_keys",
    "endpoint_of",
    "insert_key",
    "note_signed",
    "published_keys",
    "retire_keys",
    "set_endpoint",
    "signing_key",
]

TRACK = "pircan_a2a"

MIGRATIONS: list[str] = [
    # 1: Ed25519 keys that sign intro tokens (the newest unretired one signs; a retired one is
    # published until the last token it signed has expired), and the endpoints agents publish
    """
    CREATE TABLE pircan_a2a_keys (
        kid          TEXT PRIMARY KEY,
        private_key  BLOB NOT NULL CHECK (length(private_key) = 32),
        created_at   INTEGER NOT NULL,
        retired_at   INTEGER,
        signed_until INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE pircan_a2a_endpoints (
        account    TEXT PRIMARY KEY,
        url        TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    );
    """,
]


@dataclass(frozen=True, slots=True)
class SigningKey:
    kid: str
    private_key: bytes  # Ed25519, raw 32 bytes
    created_at: int
    retired_at: int | None
    signed_until: int  # the latest expiry (ms) of a token it signed

    def published(self, now: int) -> bool:
        return self.retired_at is None or self.signed_until > now


_KEY = "kid, private_key, created_at, retired_at, signed_until"


def insert_key(conn: Conn, kid: str, private_key: bytes, at: int) -> None:
    """A new signing key; every other unretired key retires now (still published while tokens it
    signed are valid)."""
    conn.execute("UPDATE pircan_a2a_keys SET retired_at = ? WHERE retired_at IS NULL", (at,))
    conn.execute("INSERT INTO pircan_a2a_keys (kid, private_key, created_at) VALUES (?, ?, ?)",
                 (kid, private_key, at))


def signing_key(conn: Conn) -> SigningKey | None:
    row = conn.execute(
        f"SELECT {_KEY} FROM pircan_a2a_keys WHERE retired_at IS NULL ORDER BY created_at DESC LIMIT 1"
    ).fetchone()
    return None if row is None else SigningKey(*row)


def all_keys(conn: Conn) -> list[SigningKey]:
    rows = conn.execute(f"SELECT {_KEY} FROM pircan_a2a_keys ORDER BY created_at").fetchall()
    return [SigningKey(*row) for row in rows]


def published_keys(conn: Conn, now: int) -> list[SigningKey]:
    """The signing key and the retired keys whose tokens may still be valid, newest first."""
    rows = conn.execute(
        f"SELECT {_KEY} FROM pircan_a2a_keys WHERE retired_at IS NULL OR signed_until > ? ORDER BY created_at DESC",
        (now,),
    ).fetchall()
    return [SigningKey(*row) for row in rows]


def retire_keys(conn: Conn, at: int) -> int:
    """Stop publishing every retired key at once (the tokens they signed fail from now on)."""
    return conn.execute(
        "UPDATE pircan_a2a_keys SET signed_until = 0 WHERE retired_at IS NOT NULL AND signed_until > ?", (at,)
    ).rowcount


def note_signed(conn: Conn, kid: str, expires_at: int) -> None:
    conn.execute("UPDATE pircan_a2a_keys SET signed_until = ? WHERE kid = ? AND signed_until < ?",
                 (expires_at, kid, expires_at))


# endpoints -------------------------------------------------------------------------------


def set_endpoint(conn: Conn, account: str, url: str, at: int) -> bool:
    """Publish (a non-empty ``url``) or withdraw an endpoint; False when nothing changed."""
    if url:
        cur = conn.execute(
            "INSERT INTO pircan_a2a_endpoints (account, url, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(account) DO UPDATE SET url = excluded.url, updated_at = excluded.updated_at "
            "WHERE pircan_a2a_endpoints.url != excluded.url",
            (account, url, at),
        )
    else:
        cur = conn.execute("DELETE FROM pircan_a2a_endpoints WHERE account = ?", (account,))
    return cur.rowcount == 1


def endpoint_of(conn: Conn, account: str) -> str | None:
    row = conn.execute("SELECT url FROM pircan_a2a_endpoints WHERE account = ?", (account,)).fetchone()
    return None if row is None else row[0]
