"""The core's migration track. Append new steps; never edit a released one.

Steps are SQLite DDL, which ``ircd.store.dialect.postgres_ddl`` turns into PostgreSQL's; where
SQLite gives something implicitly (a rowid), the PostgreSQL text says it (``PerDialect``).
"""

from __future__ import annotations

from ircd.store.dialect import PerDialect, postgres_ddl

CORE_TRACK = "core"

_STEP1 = """
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
"""
# a channel's lists keep the order they were set in: SQLite's rowid, a column of that name here
_STEP1_POSTGRESQL = postgres_ddl(_STEP1) + """
    ALTER TABLE channel_lists ADD COLUMN rowid BIGSERIAL;
"""

_STEP2 = """
    CREATE TABLE history (
        id      INTEGER PRIMARY KEY,  -- the msgid as an integer; time-ordered, so every query is an id range
        target  TEXT NOT NULL,        -- folded channel name, or a direct-message conversation key
        time    TEXT NOT NULL,        -- the server-time tag the line was relayed with
        command TEXT NOT NULL,        -- PRIVMSG, NOTICE, TAGMSG or TOPIC
        source  TEXT NOT NULL,        -- nick!user@host of the sender
        account TEXT,                 -- the sender's account name, when logged in
        param   TEXT NOT NULL,        -- the target parameter as relayed (channel or nick)
        text    TEXT NOT NULL,        -- the text (a multiline message: its lines joined)
        tags    TEXT,                 -- client-only tags as a JSON object
        lines   TEXT                  -- a multiline message's lines as JSON [[text, concat], ...]
    );
    -- (history_target: see below)
    CREATE TABLE history_conversations (
        account TEXT NOT NULL,     -- folded account of one party
        target  TEXT NOT NULL,     -- the conversation key (history.target)
        peer    TEXT NOT NULL,     -- the other party's nick, as TARGETS shows it
        last_id INTEGER NOT NULL,  -- the latest PRIVMSG/NOTICE of the conversation
        PRIMARY KEY (account, target)
    ) WITHOUT ROWID;
    CREATE INDEX history_conversations_last ON history_conversations(account, last_id);
    CREATE TABLE read_markers (
        account TEXT NOT NULL,  -- folded account
        target  TEXT NOT NULL,  -- folded channel or nick
        time    TEXT NOT NULL,  -- server-time format, so text order is time order
        PRIMARY KEY (account, target)
    ) WITHOUT ROWID;
"""
# SQLite: an index entry ends with the rowid (= id): one range scan per target, in id order;
# PostgreSQL needs the id in the index for the same scan
_STEP2_SQLITE = _STEP2 + """
    CREATE INDEX history_target ON history(target);
"""
_STEP2_POSTGRESQL = postgres_ddl(_STEP2) + """
    CREATE INDEX history_target ON history(target, id);
"""

CORE_MIGRATIONS: list[str | PerDialect] = [
    # 1: accounts and their certificate fingerprints, registered channels
    PerDialect(sqlite=_STEP1, postgresql=_STEP1_POSTGRESQL),
    # 2: message history (channels and direct messages), direct-message conversations
    # per account (for CHATHISTORY TARGETS), read markers (MARKREAD)
    PerDialect(sqlite=_STEP2_SQLITE, postgresql=_STEP2_POSTGRESQL),
    # 3: the sources (IPv4 address or IPv6 /64) each account logged in from successfully,
    # the most recent few per account: failed logins from other sources cannot lock them out
    """
    CREATE TABLE login_sources (
        account TEXT NOT NULL REFERENCES accounts(folded) ON DELETE CASCADE,
        source  TEXT NOT NULL,
        last_at INTEGER NOT NULL,  -- ms since the epoch of the latest successful login
        PRIMARY KEY (account, source)
    ) WITHOUT ROWID;
    """,
]
