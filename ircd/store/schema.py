"""The core's migration track. Append new steps; never edit a released one."""

from __future__ import annotations

CORE_TRACK = "core"

CORE_MIGRATIONS: list[str] = [
    # 1: accounts and their certificate fingerprints, registered channels
    """
    CREATE TABLE accounts (
        folded           TEXT PRIMARY KEY,
        name             TEXT NOT NULL,
        kind             TEXT NOT NULL CHECK (kind IN ('person', 'agent')),
        owner            TEXT REFERENCES accounts(folded),
        created_at       INTEGER NOT NULL,
        password_hash    TEXT,
        scram_salt       BLOB,
        scram_iterations INTEGER,
        scram_stored_key BLOB,
        scram_server_key BLOB,
        suspended        INTEGER NOT NULL DEFAULT 0,
        email            TEXT,
        CHECK (kind = 'person' OR owner IS NOT NULL)
    );
    CREATE INDEX accounts_owner ON accounts(owner);
    CREATE TABLE account_certfps (
        fingerprint TEXT PRIMARY KEY,
        account     TEXT NOT NULL REFERENCES accounts(folded) ON DELETE CASCADE
    );
    CREATE TABLE channels (
        folded       TEXT PRIMARY KEY,
        name         TEXT NOT NULL,
        owner        TEXT NOT NULL,
        created_at   INTEGER NOT NULL,
        topic        TEXT NOT NULL DEFAULT '',
        topic_setter TEXT NOT NULL DEFAULT '',
        topic_time   INTEGER NOT NULL DEFAULT 0,
        modes        TEXT NOT NULL DEFAULT '',
        chan_key     TEXT,
        chan_limit   INTEGER
    );
    CREATE TABLE channel_lists (
        channel TEXT NOT NULL REFERENCES channels(folded) ON DELETE CASCADE,
        which   TEXT NOT NULL CHECK (which IN ('b', 'e', 'I')),
        mask    TEXT NOT NULL,
        set_by  TEXT NOT NULL,
        set_at  INTEGER NOT NULL,
        PRIMARY KEY (channel, which, mask)
    );
    """,
]
