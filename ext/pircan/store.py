"""All of PIRCAN's SQL: the functions that run inside transactions (its migration track is in
``store_schema.py``).

Every function takes a connection (``ircd.api.Conn``: SQLite's or PostgreSQL's, the same SQL
on both; ``search_messages`` is written per dialect) and runs inside a transaction opened by
the caller (the server's group-commit writer), so a state change, its per-recipient events and
its audit rows are committed together or not at all. Ids are the server's time-ordered 64-bit ids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from ircd.api import Batched, Conn, IntegrityError, dialect_of, insert_rows, padded_in, padded_rows
from ircd.proto.msgid import EPOCH_MS

from ext.pircan.store_schema import MIGRATIONS, SEARCH_CONFIG, TRACK  # noqa: F401 (store.TRACK, store.MIGRATIONS)

MAX_ID = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Request:
    id: int
    requester: str
    target: str
    scopes: tuple[str, ...]
    days: int
    purpose: str
    state: str
    created_at: int
    decided_at: int | None
    decided_by: str | None
    agreement_id: int | None


@dataclass(frozen=True, slots=True)
class Agreement:
    id: int
    request_id: int
    requester: str
    target: str
    scopes: tuple[str, ...]
    created_at: int
    expires_at: int
    revoked_at: int | None
    revoked_by: str | None

    def active(self, now_ms: int) -> bool:
        return self.revoked_at is None and now_ms < self.expires_at

    def other(self, account: str) -> str:
        return self.target if account == self.requester else self.requester


# Not frozen, though nothing changes one (hashable all the same: unsafe_hash): a frozen
# dataclass's __init__ sets each field through object.__setattr__, which made building one
# per SEND cost three times as many bytecodes as plain assignments.
@dataclass(slots=True, unsafe_hash=True)
class StoredMessage:
    id: int
    sender: str
    recipient: str
    agreement_id: int
    conversation_id: int
    in_reply_to: int | None
    hop_count: int
    created_at: int
    body: str
    read_at: int | None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    id: int
    at: int
    actor: str
    subject: str
    action: str
    detail: str


def _scopes(text: str) -> tuple[str, ...]:
    return tuple(s for s in text.split(",") if s)


_REQ = "id, requester, target, scopes, days, purpose, state, created_at, decided_at, decided_by, agreement_id"
_AGR = "id, request_id, requester, target, scopes, created_at, expires_at, revoked_at, revoked_by"
_MSG = "id, sender, recipient, agreement_id, conversation_id, in_reply_to, hop_count, created_at, body, read_at"


def _request(row: tuple | None) -> Request | None:
    if row is None:
        return None
    return Request(row[0], row[1], row[2], _scopes(row[3]), *row[4:])


def _agreement(row: tuple | None) -> Agreement | None:
    if row is None:
        return None
    return Agreement(row[0], row[1], row[2], row[3], _scopes(row[4]), *row[5:])


def _message(row: tuple | None) -> StoredMessage | None:
    return None if row is None else StoredMessage(*row)


# audit and events ---------------------------------------------------------------


def audit(conn: Conn, ident: int, at: int, actor: str, subject: str, action: str, detail: str = "",
          peer: str | None = None) -> None:
    """One audit row; ``peer``: the other party of the change, when it is neither actor nor subject."""
    conn.execute(
        "INSERT INTO pircan_audit (id, at, actor, subject, action, detail, peer) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (ident, at, actor, subject, action, detail, peer),
    )


def get_audit(conn: Conn, ident: int) -> AuditEntry | None:
    row = conn.execute("SELECT id, at, actor, subject, action, detail FROM pircan_audit WHERE id = ?",
                       (ident,)).fetchone()
    return None if row is None else AuditEntry(*row)


def max_id(conn: Conn) -> int:
    """The greatest id in PIRCAN's tables (0 when empty): ids made after a restart must be greater."""
    tables = ("pircan_requests", "pircan_agreements", "pircan_messages", "pircan_events", "pircan_audit",
              "pircan_tasks", "pircan_task_entries")
    return max(conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0] for t in tables)


def queue_event(conn: Conn, ident: int, recipient: str, kind: str, ref_id: int, at: int) -> bool:
    """Queue an event for a recipient; a second event for the same (recipient, type, ref) is ignored."""
    cur = conn.execute(
        "INSERT INTO pircan_events (id, recipient, type, ref_id, created_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (ident, recipient, kind, ref_id, at),
    )
    return cur.rowcount == 1


def first_id_after(ms: int) -> int:
    """The smallest id made after Unix time ``ms``: ids are time-ordered, so a time range is
    an id range and the primary key serves it (no index on created_at needed)."""
    return max(0, (ms - EPOCH_MS + 1) << 22)


def pending_events(conn: Conn, since: int) -> list[tuple[int, str, str, int]]:
    """(id, recipient, type, created_at) of events not yet notified and newer than ``since``."""
    return conn.execute(
        "SELECT id, recipient, type, created_at FROM pircan_events "
        "WHERE id >= ? AND notified_at IS NULL ORDER BY id",
        (first_id_after(since),),
    ).fetchall()


def mark_notified(conn: Conn, pairs: list[tuple[int, int]]) -> None:
    """(event id, when announced) pairs, each time its own: one UPDATE per 500 pairs (a join with
    the pairs as a table: SQLite's VALUES, padded to a few sizes; PostgreSQL's arrays)."""
    if dialect_of(conn) == "postgresql":
        conn.execute(
            "UPDATE pircan_events SET notified_at = v.at FROM unnest(?::bigint[], ?::bigint[]) AS v(id, at) "
            "WHERE pircan_events.id = v.id AND pircan_events.notified_at IS NULL",
            ([ident for ident, _ in pairs], [at for _, at in pairs]),
        )
        return
    for start in range(0, len(pairs), 500):
        marks, values = padded_rows(pairs[start : start + 500], 2, 500)
        conn.execute(_marks_update(marks), values)


@lru_cache(maxsize=32)
def _marks_update(marks: str) -> str:
    return (f"UPDATE pircan_events SET notified_at = v.column2 FROM (VALUES {marks}) AS v "
            "WHERE pircan_events.id = v.column1 AND pircan_events.notified_at IS NULL")


def _mark_notified_batch(conn: Conn, items: list[list[tuple[int, int]]]) -> list[None]:
    """The (event id, when announced) pairs queued for one group commit, in one statement (an
    event announced twice keeps its first time). The NOTIFY was sent before the write was
    queued, and the events were committed before that: the UPDATE can run first in its
    transaction (``first``), and so does not split the run of SENDs queued around it."""
    first: dict[int, int] = {}
    for pairs in items:
        for ident, at in pairs:
            first.setdefault(ident, at)
    mark_notified(conn, list(first.items()))
    return [None] * len(items)


MARK_NOTIFIED = Batched(_mark_notified_batch, first=True)  # write_nowait(MARK_NOTIFIED, [(id, at), ...])


def unread_announced(conn: Conn, account: str) -> int:
    """Unread messages to ``account`` whose event was announced (NOTIFY, or a wait told of it)."""
    return conn.execute(
        "SELECT COUNT(*) FROM pircan_messages m JOIN pircan_events e "
        "ON e.recipient = m.recipient AND e.type = 'message' AND e.ref_id = m.id "
        "WHERE m.recipient = ? AND m.read_at IS NULL AND e.notified_at IS NOT NULL",
        (account,),
    ).fetchone()[0]


def unannounced_events(conn: Conn, account: str, kinds: list[str], after: int,
                       limit: int) -> list[tuple[int, str, int, int]]:
    """(id, type, ref_id, created_at) of events of ``kinds`` for ``account`` that nothing announced
    yet (no NOTIFY, no wait), with an id above ``after``, oldest first."""
    marks = ",".join("?" * len(kinds))
    return conn.execute(
        "SELECT id, type, ref_id, created_at FROM pircan_events WHERE recipient = ? AND notified_at IS NULL "
        f"AND id > ? AND type IN ({marks}) ORDER BY id LIMIT ?",
        (account, after, *kinds, limit),
    ).fetchall()


def stale_requests(conn: Conn, before: int) -> list[Request]:
    rows = conn.execute(
        f"SELECT {_REQ} FROM pircan_requests WHERE state = 'pending' AND created_at <= ?", (before,)
    ).fetchall()
    return [r for r in map(_request, rows) if r is not None]


def expire_request(conn: Conn, ident: int) -> bool:
    cur = conn.execute("UPDATE pircan_requests SET state = 'expired' WHERE id = ? AND state = 'pending'", (ident,))
    return cur.rowcount == 1


def audit_trail(conn: Conn, accounts: list[str], limit: int, before: int | None,
                since: int = 0) -> list[AuditEntry]:
    """Entries naming the accounts, newest first; ``since``: none older (an account's own trail starts
    when it was made: rows of an earlier account of the same name are not its)."""
    marks = ",".join("?" * len(accounts))
    rows = conn.execute(
        f"SELECT id, at, actor, subject, action, detail FROM pircan_audit "
        f"WHERE (subject IN ({marks}) OR actor IN ({marks}) OR peer IN ({marks})) AND id < ? AND at >= ? "
        "ORDER BY id DESC LIMIT ?",
        (*accounts, *accounts, *accounts, before if before is not None else (1 << 63) - 1, since, limit),
    ).fetchall()
    return [AuditEntry(*r) for r in rows]


def audit_search(conn: Conn, accounts: list[tuple[str, int]], action: str | None, since: int,
                 until: int, limit: int, before: int | None) -> list[AuditEntry]:
    """Entries naming any of ``accounts`` ((name, creation time): each account's rows from its
    creation on, as in ``audit_trail``), newest first; ``action``: that action or its family
    (``contact`` is every ``contact.*``); ``at`` in [``since``, ``until``)."""
    if not accounts:
        return []
    where = " OR ".join(["((subject = ? OR actor = ? OR peer = ?) AND at >= ?)"] * len(accounts))
    args: list[object] = []
    for name, created in accounts:
        args += [name, name, name, created]
    sql = f"SELECT id, at, actor, subject, action, detail FROM pircan_audit WHERE ({where}) AND at >= ? AND at < ?"
    args += [since, until]
    if action is not None:
        family = action.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ".%"
        sql += " AND (action = ? OR action LIKE ? ESCAPE '\\')"
        args += [action, family]
    sql += " AND id < ? ORDER BY id DESC LIMIT ?"
    args += [before if before is not None else MAX_ID, limit]
    return [AuditEntry(*r) for r in conn.execute(sql, args).fetchall()]


def all_audit(conn: Conn, account: str | None, limit: int) -> list[AuditEntry]:
    if account is None:
        rows = conn.execute(
            "SELECT id, at, actor, subject, action, detail FROM pircan_audit ORDER BY id DESC LIMIT ?", (limit,)
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT id, at, actor, subject, action, detail FROM pircan_audit "
            "WHERE subject = ? OR actor = ? OR peer = ? ORDER BY id DESC LIMIT ?",
            (account, account, account, limit),
        ).fetchall()
    rows.reverse()  # oldest first
    return [AuditEntry(*r) for r in rows]


# requests, agreements, policies ------------------------------------------------------


def insert_request(conn: Conn, req: Request) -> None:
    conn.execute(
        f"INSERT INTO pircan_requests ({_REQ}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (req.id, req.requester, req.target, ",".join(req.scopes), req.days, req.purpose, req.state,
         req.created_at, req.decided_at, req.decided_by, req.agreement_id),
    )


def get_request(conn: Conn, ident: int) -> Request | None:
    return _request(conn.execute(f"SELECT {_REQ} FROM pircan_requests WHERE id = ?", (ident,)).fetchone())


def requests_by(conn: Conn, requester: str, since: int) -> list[Request]:
    rows = conn.execute(
        f"SELECT {_REQ} FROM pircan_requests WHERE requester = ? AND created_at > ? ORDER BY id",
        (requester, since),
    ).fetchall()
    return [r for r in map(_request, rows) if r is not None]


def requests_for(conn: Conn, accounts: list[str]) -> list[Request]:
    marks = ",".join("?" * len(accounts))
    rows = conn.execute(
        f"SELECT {_REQ} FROM pircan_requests WHERE requester IN ({marks}) OR target IN ({marks}) ORDER BY id",
        (*accounts, *accounts),
    ).fetchall()
    return [r for r in map(_request, rows) if r is not None]


def last_decline(conn: Conn, requester: str, target: str) -> int | None:
    row = conn.execute(
        "SELECT MAX(decided_at) FROM pircan_requests WHERE requester = ? AND target = ? AND state = 'declined'",
        (requester, target),
    ).fetchone()
    return row[0] if row else None


def decide_request(conn: Conn, ident: int, state: str, at: int, by: str, agreement_id: int | None) -> bool:
    cur = conn.execute(
        "UPDATE pircan_requests SET state = ?, decided_at = ?, decided_by = ?, agreement_id = ? "
        "WHERE id = ? AND state = 'pending'",
        (state, at, by, agreement_id, ident),
    )
    return cur.rowcount == 1


def insert_agreement(conn: Conn, agr: Agreement) -> None:
    conn.execute(
        f"INSERT INTO pircan_agreements ({_AGR}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (agr.id, agr.request_id, agr.requester, agr.target, ",".join(agr.scopes), agr.created_at,
         agr.expires_at, agr.revoked_at, agr.revoked_by),
    )


def get_agreement(conn: Conn, ident: int) -> Agreement | None:
    return _agreement(conn.execute(f"SELECT {_AGR} FROM pircan_agreements WHERE id = ?", (ident,)).fetchone())


def live_agreements(conn: Conn, now: int) -> list[Agreement]:
    """Agreements not revoked whose end has not been recorded: the live ones, and those that ended
    while the server was down (the next sweep records them)."""
    rows = conn.execute(
        f"SELECT {_AGR} FROM pircan_agreements WHERE revoked_at IS NULL AND expired_at IS NULL"
    ).fetchall()
    return [a for a in map(_agreement, rows) if a is not None]


def note_expired(conn: Conn, ident: int, at: int) -> bool:
    """Record that an agreement's end was handled; False when it already was."""
    cur = conn.execute(
        "UPDATE pircan_agreements SET expired_at = ? WHERE id = ? AND expired_at IS NULL AND revoked_at IS NULL",
        (at, ident),
    )
    return cur.rowcount == 1


def agreements_for(conn: Conn, accounts: list[str]) -> list[Agreement]:
    marks = ",".join("?" * len(accounts))
    rows = conn.execute(
        f"SELECT {_AGR} FROM pircan_agreements WHERE requester IN ({marks}) OR target IN ({marks}) ORDER BY id",
        (*accounts, *accounts),
    ).fetchall()
    return [a for a in map(_agreement, rows) if a is not None]


def revoke_agreement(conn: Conn, ident: int, at: int, by: str) -> bool:
    cur = conn.execute(
        "UPDATE pircan_agreements SET revoked_at = ?, revoked_by = ? WHERE id = ? AND revoked_at IS NULL",
        (at, by, ident),
    )
    return cur.rowcount == 1


def get_policy(conn: Conn, account: str) -> str | None:
    row = conn.execute("SELECT policy FROM pircan_policies WHERE account = ?", (account,)).fetchone()
    return row[0] if row else None


def all_policies(conn: Conn) -> dict[str, str]:
    return dict(conn.execute("SELECT account, policy FROM pircan_policies").fetchall())


def set_policy(conn: Conn, account: str, policy: str) -> None:
    conn.execute(
        "INSERT INTO pircan_policies (account, policy) VALUES (?, ?) "
        "ON CONFLICT(account) DO UPDATE SET policy = excluded.policy",
        (account, policy),
    )


# messages ------------------------------------------------------------------------


def insert_message(conn: Conn, msg: StoredMessage, idempotency_key: str | None) -> None:
    conn.execute(
        f"INSERT INTO pircan_messages ({_MSG}, idempotency_key) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (msg.id, msg.sender, msg.recipient, msg.agreement_id, msg.conversation_id, msg.in_reply_to,
         msg.hop_count, msg.created_at, msg.body, msg.read_at, idempotency_key),
    )


def get_message(conn: Conn, ident: int) -> StoredMessage | None:
    return _message(conn.execute(f"SELECT {_MSG} FROM pircan_messages WHERE id = ?", (ident,)).fetchone())


def message_by_key(conn: Conn, sender: str, key: str) -> StoredMessage | None:
    return _message(
        conn.execute(
            f"SELECT {_MSG} FROM pircan_messages WHERE sender = ? AND idempotency_key = ?", (sender, key)
        ).fetchone()
    )


# A SEND's row for ``insert_sends``: the message's columns (its read_at is NULL), its
# idempotency key, the ids of its event and audit entry, and the audit entry's detail.
SendRow = tuple[int, str, str, int, int, "int | None", int, int, str, "str | None", int, int, str]
_SEND_ROWS = ("INSERT INTO pircan_send_rows (id, sender, recipient, agreement_id, conversation_id, in_reply_to, "
              "hop_count, created_at, body, idempotency_key, event_id, audit_id, audit_detail)")
_NO_AGREEMENT = "NO_AGREEMENT"  # what the view's trigger raises (store_schema step 9)
SEND_ROWS_PER_STATEMENT: Final = 100


def send_row(m: StoredMessage, key: str | None, event_id: int, audit_id: int, detail: str) -> SendRow:
    """The row ``insert_sends`` stores for a new message (made by the caller before it queues the
    write, so that the writer thread has only the statement to run)."""
    return (m.id, m.sender, m.recipient, m.agreement_id, m.conversation_id, m.in_reply_to, m.hop_count,
            m.created_at, m.body, key, event_id, audit_id, detail)


def sends_in_one_statement(conn: Conn, count: int) -> bool:
    """``insert_sends`` writes ``count`` rows with one statement (SQLite, up to a statement's rows)."""
    return count <= SEND_ROWS_PER_STATEMENT and dialect_of(conn) == "sqlite"


def insert_sends(conn: Conn, rows: list[SendRow]) -> bool:
    """Store new messages with their events ('message') and audit entries ('message.send'), or
    nothing and False when the agreement of any of them is revoked or over at its time (one that
    another process ended counts: the check runs inside the write's transaction).

    SQLite: one statement through the ``pircan_send_rows`` view, whose trigger checks and writes
    the three rows. PostgreSQL: one COUNT for the agreements, then one statement per table."""
    if dialect_of(conn) == "sqlite":
        try:
            insert_rows(conn, _SEND_ROWS, 13, rows, SEND_ROWS_PER_STATEMENT)
        except IntegrityError as exc:
            if str(exc) == _NO_AGREEMENT:
                return False
            raise
        return True
    wanted = {r[3] for r in rows} - {0}  # 0: an agent and its owner (service.messages.OWNER_AGREEMENT)
    if wanted and not agreements_live(conn, wanted, min(r[7] for r in rows)):
        return False
    insert_rows(conn, f"INSERT INTO pircan_messages ({_MSG}, idempotency_key)", 11,
                [(*r[:9], None, r[9]) for r in rows])
    insert_rows(conn, "INSERT INTO pircan_events (id, recipient, type, ref_id, created_at)", 5,
                [(r[10], r[2], "message", r[0], r[7]) for r in rows], tail=" ON CONFLICT DO NOTHING")
    insert_rows(conn, "INSERT INTO pircan_audit (id, at, actor, subject, action, detail)", 6,
                [(r[11], r[7], r[1], r[2], "message.send", r[12]) for r in rows])
    return True


def agreements_live(conn: Conn, ids: set[int], now: int) -> bool:
    """Every one of ``ids`` names an agreement neither revoked nor expired at ``now``.

    One COUNT, one result row: a SEND batch checks its agreements inside the
    group commit's transaction, and a row per agreement would be a step of the
    sqlite3 module per row, each giving up the interpreter lock and waiting to
    take it back from the busy event loop."""
    marks, values = padded_in(list(ids))  # a few statement texts, whatever the count
    live = conn.execute(
        f"SELECT COUNT(*) FROM pircan_agreements WHERE id IN {marks} AND revoked_at IS NULL AND expires_at > ?",
        (*values, now),
    ).fetchone()[0]
    return int(live) == len(ids)


def release_key(conn: Conn, ident: int) -> None:
    """Forget a message's idempotency key (it is about to name a newer message)."""
    conn.execute("UPDATE pircan_messages SET idempotency_key = NULL WHERE id = ?", (ident,))


def unread(conn: Conn, recipient: str, sender: str | None, limit: int) -> list[StoredMessage]:
    if sender is None:
        rows = conn.execute(
            f"SELECT {_MSG} FROM pircan_messages WHERE recipient = ? AND read_at IS NULL ORDER BY id LIMIT ?",
            (recipient, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {_MSG} FROM pircan_messages WHERE recipient = ? AND sender = ? AND read_at IS NULL "
            "ORDER BY id LIMIT ?",
            (recipient, sender, limit),
        ).fetchall()
    return [m for m in map(_message, rows) if m is not None]


def unread_filtered(conn: Conn, recipient: str, sender: str | None, conversation_id: int | None,
                    limit: int) -> tuple[list[StoredMessage], int]:
    """The oldest unread messages to ``recipient`` from ``sender`` and/or in a conversation, and their count."""
    where = "recipient = ? AND read_at IS NULL"
    args: list[object] = [recipient]
    if sender is not None:
        where += " AND sender = ?"
        args.append(sender)
    if conversation_id is not None:
        where += " AND conversation_id = ?"
        args.append(conversation_id)
    rows = conn.execute(f"SELECT {_MSG} FROM pircan_messages WHERE {where} ORDER BY id LIMIT ?", (*args, limit))
    total = conn.execute(f"SELECT COUNT(*) FROM pircan_messages WHERE {where}", args).fetchone()[0]
    return [m for m in map(_message, rows.fetchall()) if m is not None], total


def messages_between(conn: Conn, account: str, peer: str, limit: int,
                     before: int | None) -> list[StoredMessage]:
    """Both directions between two accounts, read or not: the newest ``limit`` before ``before``, oldest first."""
    rows = conn.execute(
        f"SELECT {_MSG} FROM pircan_messages WHERE id < ? AND "
        "((sender = ? AND recipient = ?) OR (sender = ? AND recipient = ?)) ORDER BY id DESC LIMIT ?",
        (before if before is not None else MAX_ID, account, peer, peer, account, limit),
    ).fetchall()
    rows.reverse()
    return [m for m in map(_message, rows) if m is not None]


def conversation_messages(conn: Conn, account: str, conversation_id: int, limit: int,
                          before: int | None) -> list[StoredMessage]:
    """One conversation that ``account`` is a party of, newest ``limit`` before ``before``, oldest first."""
    rows = conn.execute(
        f"SELECT {_MSG} FROM pircan_messages WHERE conversation_id = ? AND id < ? AND (sender = ? OR recipient = ?) "
        "ORDER BY id DESC LIMIT ?",
        (conversation_id, before if before is not None else MAX_ID, account, account, limit),
    ).fetchall()
    rows.reverse()
    return [m for m in map(_message, rows) if m is not None]


def messages_of(conn: Conn, account: str, limit: int, before: int | None) -> list[StoredMessage]:
    """The newest ``limit`` messages ``account`` sent or received, older than ``before``, newest first."""
    rows = conn.execute(
        f"SELECT {_MSG} FROM pircan_messages WHERE id < ? AND (sender = ? OR recipient = ?) ORDER BY id DESC LIMIT ?",
        (before if before is not None else MAX_ID, account, account, limit),
    ).fetchall()
    return [m for m in map(_message, rows) if m is not None]


def search_messages(conn: Conn, account: str, match: str, limit: int,
                    before: int | None) -> list[StoredMessage]:
    """Messages ``account`` sent or received whose body matches the FTS5 expression ``match``
    (``service.search.fts_query``), newest first: at most ``limit``, older than ``before``. The
    index is walked newest first, so a page stops at its ``limit``-th match of the account's.
    On PostgreSQL the expression becomes a tsquery over the GIN index (``store_schema.py``)."""
    args = (before if before is not None else MAX_ID, account, account, limit)
    if dialect_of(conn) == "postgresql":
        query, params = _tsquery(match)
        rows = conn.execute(
            f"SELECT {_MSG} FROM pircan_messages WHERE to_tsvector('{SEARCH_CONFIG}', body) @@ ({query}) "
            "AND id < ? AND (sender = ? OR recipient = ?) ORDER BY id DESC LIMIT ?",
            (*params, *args),
        ).fetchall()
    else:
        rows = conn.execute(
            f"SELECT {', '.join('m.' + c for c in _MSG.split(', '))} FROM pircan_messages_fts f "
            "JOIN pircan_messages m ON m.id = f.rowid "
            "WHERE pircan_messages_fts MATCH ? AND f.rowid < ? AND (m.sender = ? OR m.recipient = ?) "
            "ORDER BY f.rowid DESC LIMIT ?",
            (match, *args),
        ).fetchall()
    return [m for m in map(_message, rows) if m is not None]


_FTS_TOKEN = re.compile(r'"((?:[^"]|"")*)"(\*?)|AND|OR|NOT|\(|\)')


def _tsquery(match: str) -> tuple[str, list[str]]:
    """PostgreSQL's tsquery SQL (and its parameters) for an FTS5 expression of ``fts_query``: a
    quoted term is a phrase of the index's configuration, ``*`` a prefix; FTS5's precedence
    (NOT, then AND, then OR) is spelled out in parentheses, as SQL's tsquery operators have none."""
    tokens = [(m.group(0), m.group(1), m.group(2)) for m in _FTS_TOKEN.finditer(match)]
    params: list[str] = []
    pos = 0

    def primary() -> str:
        nonlocal pos
        token, text, star = tokens[pos]
        pos += 1
        if token == "(":
            inner = either()
            pos += 1  # ")"
            return f"({inner})"
        params.append(text.replace('""', '"'))
        if star:
            return f"to_tsquery('{SEARCH_CONFIG}', quote_literal(?) || ':*')"
        return f"phraseto_tsquery('{SEARCH_CONFIG}', ?)"

    def binary(operand: Any, word: str, render: str) -> str:
        nonlocal pos
        out = operand()
        while pos < len(tokens) and tokens[pos][0] == word:
            pos += 1
            out = f"({out} {render} {operand()})"
        return out

    def both() -> str:
        return binary(lambda: binary(primary, "NOT", "&& !!"), "AND", "&&")

    def either() -> str:
        return binary(both, "OR", "||")

    return either(), params


def unread_counts(conn: Conn, recipient: str) -> dict[str, int]:
    """Unread messages per sender."""
    return dict(
        conn.execute(
            "SELECT sender, COUNT(*) FROM pircan_messages WHERE recipient = ? AND read_at IS NULL GROUP BY sender",
            (recipient,),
        ).fetchall()
    )


def mark_read(conn: Conn, recipient: str, ids: list[int] | None, at: int) -> int:
    if ids is None:
        cur = conn.execute(
            "UPDATE pircan_messages SET read_at = ? WHERE recipient = ? AND read_at IS NULL", (at, recipient)
        )
    else:
        marks = ",".join("?" * len(ids))
        cur = conn.execute(
            f"UPDATE pircan_messages SET read_at = ? WHERE recipient = ? AND read_at IS NULL AND id IN ({marks})",
            (at, recipient, *ids),
        )
    return cur.rowcount


def take_oldest(conn: Conn, recipient: str, sender: str | None, at: int) -> StoredMessage | None:
    """Read and acknowledge the oldest unread (matching) message in one step."""
    found = unread(conn, recipient, sender, 1)
    if not found:
        return None
    msg = found[0]
    conn.execute("UPDATE pircan_messages SET read_at = ? WHERE id = ?", (at, msg.id))
    return msg


def take_oldest_of(conn: Conn, recipient: str, senders: frozenset[str] | None,
                   at: int, conversation: int | None = None, after: int = 0) -> StoredMessage | None:
    """``take_oldest`` for a set of senders (None: anyone), of one conversation (when given), with
    an id above ``after``."""
    if conversation is None and after == 0 and (senders is None or len(senders) == 1):
        return take_oldest(conn, recipient, None if senders is None else next(iter(senders)), at)
    where, args = ["recipient = ?", "read_at IS NULL", "id > ?"], [recipient, after]
    if senders is not None:
        where.append(f"sender IN ({','.join('?' * len(senders))})")
        args.extend(sorted(senders))
    if conversation is not None:
        where.append("conversation_id = ?")
        args.append(conversation)
    row = conn.execute(f"SELECT {_MSG} FROM pircan_messages WHERE {' AND '.join(where)} ORDER BY id LIMIT 1",
                       args).fetchone()
    msg = _message(row)
    if msg is not None:
        conn.execute("UPDATE pircan_messages SET read_at = ? WHERE id = ?", (at, msg.id))
    return msg


def unread_again(conn: Conn, ident: int) -> None:
    """Put a taken message back (a wait ended between taking it and answering)."""
    conn.execute("UPDATE pircan_messages SET read_at = NULL WHERE id = ?", (ident,))


def take_exact(conn: Conn, recipient: str, ident: int, at: int) -> StoredMessage | None:
    cur = conn.execute(
        "UPDATE pircan_messages SET read_at = ? WHERE id = ? AND recipient = ? AND read_at IS NULL",
        (at, ident, recipient),
    )
    return get_message(conn, ident) if cur.rowcount == 1 else None


def recent_message_times(conn: Conn, since: int) -> list[tuple[str, int, int, int]]:
    """(sender, agreement_id, conversation_id, created_at) of messages newer than ``since`` (budgets)."""
    return conn.execute(
        "SELECT sender, agreement_id, conversation_id, created_at FROM pircan_messages WHERE id >= ? "
        "ORDER BY id",
        (first_id_after(since),),
    ).fetchall()


def last_activity(conn: Conn, account: str) -> int | None:
    row = conn.execute(
        "SELECT created_at FROM pircan_messages WHERE sender = ? ORDER BY id DESC LIMIT 1", (account,)
    ).fetchone()
    return row[0] if row else None


# private channels ----------------------------------------------------------------------


def channel_access(conn: Conn) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """All (channel, account) invitations and memberships."""
    invites = conn.execute("SELECT channel, account FROM pircan_channel_invites").fetchall()
    members = conn.execute("SELECT channel, account FROM pircan_channel_members").fetchall()
    return invites, members


def add_invite(conn: Conn, channel: str, account: str, by: str, at: int, audit_id: int) -> None:
    conn.execute(
        "INSERT INTO pircan_channel_invites (channel, account, invited_by, at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(channel, account) DO UPDATE SET invited_by = excluded.invited_by, at = excluded.at",
        (channel, account, by, at),
    )
    audit(conn, audit_id, at, by, account, "channel.invite", channel)


def withdraw_invite(conn: Conn, channel: str, account: str, by: str, at: int, audit_id: int) -> bool:
    found = conn.execute(
        "DELETE FROM pircan_channel_invites WHERE channel = ? AND account = ?", (channel, account)
    ).rowcount == 1
    if found:
        audit(conn, audit_id, at, by, account, "channel.uninvite", channel)
    return found


def join_member(conn: Conn, channel: str, account: str, at: int) -> None:
    """An invitation is used: the account becomes a standing member."""
    conn.execute("DELETE FROM pircan_channel_invites WHERE channel = ? AND account = ?", (channel, account))
    conn.execute(
        "INSERT INTO pircan_channel_members (channel, account, since) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
        (channel, account, at),
    )


def remove_member(conn: Conn, channel: str, account: str, by: str, at: int, audit_id: int,
                  kicked: bool) -> None:
    conn.execute("DELETE FROM pircan_channel_members WHERE channel = ? AND account = ?", (channel, account))
    if kicked:
        conn.execute("DELETE FROM pircan_channel_invites WHERE channel = ? AND account = ?", (channel, account))
        audit(conn, audit_id, at, by, account, "channel.remove", channel)
