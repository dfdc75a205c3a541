"""PIRCAN's migration track (``pircan``): its tables, on SQLite and on PostgreSQL.

Steps are SQLite DDL, which ``postgres_ddl`` turns into PostgreSQL's (``ircd.store.dialect``),
except where the two databases differ beyond its rules: the triggers that keep the audit log
append-only and bound a message body (PL/pgSQL functions on PostgreSQL, raising the same
messages as integrity errors; the body's once per statement, over the rows it inserted, since
the store inserts many rows in one statement there), and the full-text index of message bodies (FTS5 on SQLite; on
PostgreSQL a GIN index over ``to_tsvector('pircd_search', body)``, a text search
configuration that lowercases and removes accents like FTS5's ``remove_diacritics``). Append
new steps; never edit a released one.
"""

from __future__ import annotations

from typing import Any, Callable

from ircd.api import PerDialect, dialect_of, postgres_ddl

__all__ = ["TRACK", "MIGRATIONS", "SEARCH_CONFIG"]

TRACK = "pircan"
SEARCH_CONFIG = "pircd_search"  # PostgreSQL's text search configuration of the message index

_STEP1 = """
    CREATE TABLE pircan_requests (
        id           INTEGER PRIMARY KEY,
        requester    TEXT NOT NULL,
        target       TEXT NOT NULL,
        scopes       TEXT NOT NULL,
        days         INTEGER NOT NULL CHECK (days BETWEEN 1 AND 365),
        purpose      TEXT NOT NULL,
        state        TEXT NOT NULL CHECK (state IN ('pending', 'accepted', 'declined', 'denied', 'expired')),
        created_at   INTEGER NOT NULL,
        decided_at   INTEGER,
        decided_by   TEXT,
        agreement_id INTEGER
    );
    CREATE INDEX pircan_requests_requester ON pircan_requests(requester, created_at);
    CREATE INDEX pircan_requests_target ON pircan_requests(target, state);
    CREATE TABLE pircan_agreements (
        id          INTEGER PRIMARY KEY,
        request_id  INTEGER NOT NULL REFERENCES pircan_requests(id),
        requester   TEXT NOT NULL,
        target      TEXT NOT NULL,
        scopes      TEXT NOT NULL,
        created_at  INTEGER NOT NULL,
        expires_at  INTEGER NOT NULL,
        revoked_at  INTEGER,
        revoked_by  TEXT
    );
    CREATE INDEX pircan_agreements_requester ON pircan_agreements(requester);
    CREATE INDEX pircan_agreements_target ON pircan_agreements(target);
    CREATE TABLE pircan_policies (
        account TEXT PRIMARY KEY,
        policy  TEXT NOT NULL CHECK (policy IN ('agent-decides', 'owner-decides', 'auto-accept', 'deny'))
    );
    CREATE TABLE pircan_messages (
        id              INTEGER PRIMARY KEY,
        sender          TEXT NOT NULL,
        recipient       TEXT NOT NULL,
        agreement_id    INTEGER NOT NULL,
        conversation_id INTEGER NOT NULL,
        in_reply_to     INTEGER,
        hop_count       INTEGER NOT NULL CHECK (hop_count >= 0),
        created_at      INTEGER NOT NULL,
        body            TEXT NOT NULL,
        read_at         INTEGER,
        idempotency_key TEXT
    );
    CREATE INDEX pircan_messages_unread ON pircan_messages(recipient, read_at, id);
    CREATE INDEX pircan_messages_sender ON pircan_messages(sender, id);
    CREATE UNIQUE INDEX pircan_messages_idempotency ON pircan_messages(sender, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE TABLE pircan_events (
        id           INTEGER PRIMARY KEY,
        recipient    TEXT NOT NULL,
        type         TEXT NOT NULL,
        ref_id       INTEGER NOT NULL,
        created_at   INTEGER NOT NULL,
        notified_at  INTEGER,
        UNIQUE (recipient, type, ref_id)
    );
    CREATE TABLE pircan_audit (
        id      INTEGER PRIMARY KEY,
        at      INTEGER NOT NULL,
        actor   TEXT NOT NULL,
        subject TEXT NOT NULL,
        action  TEXT NOT NULL,
        detail  TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX pircan_audit_subject ON pircan_audit(subject, id);
    CREATE INDEX pircan_audit_actor ON pircan_audit(actor, id);
"""
_STEP1_SQLITE = """
    CREATE TRIGGER pircan_audit_no_update BEFORE UPDATE ON pircan_audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
    CREATE TRIGGER pircan_audit_no_delete BEFORE DELETE ON pircan_audit
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""
_STEP1_POSTGRESQL = """
    CREATE FUNCTION pircan_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'the audit log is append-only' USING ERRCODE = 'integrity_constraint_violation';
    END $$;
    CREATE TRIGGER pircan_audit_no_update BEFORE UPDATE ON pircan_audit
        FOR EACH ROW EXECUTE FUNCTION pircan_audit_append_only();
    CREATE TRIGGER pircan_audit_no_delete BEFORE DELETE ON pircan_audit
        FOR EACH ROW EXECUTE FUNCTION pircan_audit_append_only();
"""
_STEP4_SQLITE = """
    CREATE TRIGGER pircan_messages_body_limit BEFORE INSERT ON pircan_messages
        WHEN length(CAST(NEW.body AS BLOB)) > 60000
        BEGIN SELECT RAISE(ABORT, 'a message body is at most 60000 bytes'); END;
    CREATE INDEX pircan_messages_conversation ON pircan_messages(conversation_id, id);
    DROP TRIGGER pircan_audit_no_delete;
    CREATE TRIGGER pircan_audit_no_delete BEFORE DELETE ON pircan_audit
        WHEN OLD.action NOT IN ('refused', 'refused.summary')
        BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"""
_STEP4_POSTGRESQL = """
    CREATE FUNCTION pircan_messages_body_limit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM new_messages WHERE octet_length(body) > 60000) THEN
            RAISE EXCEPTION 'a message body is at most 60000 bytes' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER pircan_messages_body_limit AFTER INSERT ON pircan_messages
        REFERENCING NEW TABLE AS new_messages FOR EACH STATEMENT EXECUTE FUNCTION pircan_messages_body_limit();
    CREATE INDEX pircan_messages_conversation ON pircan_messages(conversation_id, id);
    DROP TRIGGER pircan_audit_no_delete ON pircan_audit;
    CREATE TRIGGER pircan_audit_no_delete BEFORE DELETE ON pircan_audit
        FOR EACH ROW WHEN (OLD.action NOT IN ('refused', 'refused.summary'))
        EXECUTE FUNCTION pircan_audit_append_only();
"""
_STEP8_SQLITE = """
    CREATE VIRTUAL TABLE pircan_messages_fts USING fts5(
        body, content='pircan_messages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
    );
    INSERT INTO pircan_messages_fts(pircan_messages_fts) VALUES ('rebuild');
    CREATE TRIGGER pircan_messages_fts_insert AFTER INSERT ON pircan_messages
        BEGIN INSERT INTO pircan_messages_fts(rowid, body) VALUES (NEW.id, NEW.body); END;
    CREATE TRIGGER pircan_messages_fts_delete AFTER DELETE ON pircan_messages
        BEGIN INSERT INTO pircan_messages_fts(pircan_messages_fts, rowid, body) VALUES ('delete', OLD.id, OLD.body);
        END;
"""
_STEP8_POSTGRESQL = """
    CREATE EXTENSION IF NOT EXISTS unaccent;
    CREATE TEXT SEARCH CONFIGURATION pircd_search (COPY = simple);
    ALTER TEXT SEARCH CONFIGURATION pircd_search
        ALTER MAPPING FOR word, hword, hword_part, numword, hword_numpart WITH unaccent, simple;
    CREATE INDEX pircan_messages_fts ON pircan_messages USING GIN (to_tsvector('pircd_search', body));
"""

# 9 (SQLite): a SEND's three rows (the message, its event, its audit entry) in one statement, with
# the agreement checked inside it (store.insert_sends). The group commit's writer thread gives up
# the interpreter lock for every statement and waits to take it back from the busy event loop;
# one statement instead of four (the check and three INSERTs) is three waits fewer per commit.
# The check and the columns match service/messages.py: agreement 0 is an agent and its owner, who
# need none; an agreement counts until revoked or past its end at the message's time.
_STEP9_VIEW = """
    CREATE VIEW pircan_send_rows (id, sender, recipient, agreement_id, conversation_id, in_reply_to, hop_count,
        created_at, body, idempotency_key, event_id, audit_id, audit_detail) AS
        SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0
"""
_STEP9_TRIGGER = """
    CREATE TRIGGER pircan_send_rows_insert INSTEAD OF INSERT ON pircan_send_rows BEGIN
        SELECT RAISE(ABORT, 'NO_AGREEMENT') WHERE NEW.agreement_id <> 0 AND NOT EXISTS (
            SELECT 1 FROM pircan_agreements WHERE id = NEW.agreement_id AND revoked_at IS NULL
            AND expires_at > NEW.created_at);
        INSERT INTO pircan_messages (id, sender, recipient, agreement_id, conversation_id, in_reply_to, hop_count,
            created_at, body, idempotency_key)
            VALUES (NEW.id, NEW.sender, NEW.recipient, NEW.agreement_id, NEW.conversation_id, NEW.in_reply_to,
            NEW.hop_count, NEW.created_at, NEW.body, NEW.idempotency_key);
        INSERT INTO pircan_events (id, recipient, type, ref_id, created_at)
            VALUES (NEW.event_id, NEW.recipient, 'message', NEW.id, NEW.created_at) ON CONFLICT DO NOTHING;
        INSERT INTO pircan_audit (id, at, actor, subject, action, detail)
            VALUES (NEW.audit_id, NEW.created_at, NEW.sender, NEW.recipient, 'message.send', NEW.audit_detail);
    END
"""


def _step9(conn: Any) -> None:
    """SQLite only: PostgreSQL takes each table's rows as arrays, one statement per table."""
    if dialect_of(conn) == "sqlite":
        conn.execute(_STEP9_VIEW)
        conn.execute(_STEP9_TRIGGER)


MIGRATIONS: list[str | PerDialect | Callable[[Any], None]] = [
    PerDialect(sqlite=_STEP1 + _STEP1_SQLITE, postgresql=postgres_ddl(_STEP1) + _STEP1_POSTGRESQL),
    # 2: private channels in an owner's namespace (#<account>/<name>): standing
    # invitations and members, by account (the channel itself is a registered channel)
    """
    CREATE TABLE pircan_channel_invites (
        channel    TEXT NOT NULL,
        account    TEXT NOT NULL,
        invited_by TEXT NOT NULL,
        at         INTEGER NOT NULL,
        PRIMARY KEY (channel, account)
    );
    CREATE TABLE pircan_channel_members (
        channel TEXT NOT NULL,
        account TEXT NOT NULL,
        since   INTEGER NOT NULL,
        PRIMARY KEY (channel, account)
    );
    """,
    # 3: the other party of a two-party entry (the requester of a decided or expired
    # request, the other side of a revoked or expired agreement), so it is in their trail too
    """
    ALTER TABLE pircan_audit ADD COLUMN peer TEXT;
    CREATE INDEX pircan_audit_peer ON pircan_audit(peer, id) WHERE peer IS NOT NULL;
    """,
    # 4: the body limit of every transport, held by the database itself; conversations read
    # whole; and the operator may prune audit rows of refusals (never decisions or messages)
    PerDialect(sqlite=_STEP4_SQLITE, postgresql=_STEP4_POSTGRESQL),
    # 5: when the end of an agreement (not revoked) was recorded, audited and notified, so that
    # one that ends while the server is down is recorded after the next start, once
    """
    ALTER TABLE pircan_agreements ADD COLUMN expired_at INTEGER;
    """,
    # 6: tasks between agents (A2A states), their exchanged texts; profiles (display name),
    # skills an agent accepts tasks for; agreement-gated resources (SQL in store_tasks.py)
    """
    CREATE TABLE pircan_tasks (
        id             INTEGER PRIMARY KEY,
        requester      TEXT NOT NULL,
        target         TEXT NOT NULL,
        skill          TEXT NOT NULL,
        agreement_id   INTEGER NOT NULL,
        state          TEXT NOT NULL CHECK (state IN ('submitted', 'working', 'input-required', 'completed',
                                                      'failed', 'canceled', 'rejected')),
        created_at     INTEGER NOT NULL,
        updated_at     INTEGER NOT NULL,
        updated_by     TEXT NOT NULL,
        version        INTEGER NOT NULL,  -- one more per change
        requester_seen INTEGER NOT NULL,  -- the version each side has seen
        target_seen    INTEGER NOT NULL
    );
    CREATE INDEX pircan_tasks_requester ON pircan_tasks(requester, id);
    CREATE INDEX pircan_tasks_target ON pircan_tasks(target, id);
    CREATE INDEX pircan_tasks_agreement ON pircan_tasks(agreement_id);
    CREATE TABLE pircan_task_entries (
        id      INTEGER PRIMARY KEY,
        task_id INTEGER NOT NULL REFERENCES pircan_tasks(id),
        author  TEXT NOT NULL,
        kind    TEXT NOT NULL CHECK (kind IN ('input', 'status', 'result', 'error')),
        state   TEXT NOT NULL,
        at      INTEGER NOT NULL,
        text    TEXT NOT NULL CHECK (length(CAST(text AS BLOB)) <= 60000)
    );
    CREATE INDEX pircan_task_entries_task ON pircan_task_entries(task_id, id);
    CREATE TABLE pircan_profiles (
        account      TEXT PRIMARY KEY,
        display_name TEXT NOT NULL,
        updated_at   INTEGER NOT NULL
    );
    CREATE TABLE pircan_skills (
        account     TEXT NOT NULL,
        skill       TEXT NOT NULL,
        description TEXT NOT NULL,
        updated_at  INTEGER NOT NULL,
        PRIMARY KEY (account, skill)
    );
    CREATE TABLE pircan_resources (
        account      TEXT NOT NULL,
        name         TEXT NOT NULL,
        content_type TEXT NOT NULL CHECK (content_type IN ('text', 'json')),
        body         TEXT NOT NULL CHECK (length(CAST(body AS BLOB)) <= 60000),
        updated_at   INTEGER NOT NULL,
        PRIMARY KEY (account, name)
    );
    """,
    # 7: the accounts PIRCAN last saw (name and creation time): one that is gone, or was made
    # again under the same name, is a deleted account whose state ends (service/lifecycle.py)
    """
    CREATE TABLE pircan_known_accounts (
        account    TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL
    );
    """,
    # 8: a full-text index of message bodies, filled from the messages stored so far; searched by
    # service/search.py. SQLite: FTS5 with external content (the index holds only the words, the
    # bodies stay in pircan_messages), kept by triggers. PostgreSQL: a GIN index of an expression.
    PerDialect(sqlite=_STEP8_SQLITE, postgresql=_STEP8_POSTGRESQL),
    _step9,
]
