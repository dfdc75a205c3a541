"""All of the webhooks' SQL, on a migration track of its own (``pircan_webhooks``, migrated after
``pircan`` at start-up).

Invariant: a delivery is queued in the same transaction as its event, whatever code path queues
the event. A trigger on ``pircan_events`` inserts one delivery row per enabled endpoint of the
recipient, so no writer of events needs to know that webhooks exist. A delivery row stays until
its 2xx is recorded (then it is deleted) or it becomes a dead letter (then it moves, with its id
and payload, to ``pircan_webhook_dead``). Delivery ids come from AUTOINCREMENT and are never
reused, so a receiver can drop duplicates by ``PIRCAN-Delivery``.

In a cluster (docs/scaling.md) every node runs the worker on the one queue; a node sends an
endpoint's deliveries only while it holds the endpoint's claim (``claim_node``, ``claim_until``):
one node at a time per endpoint, so each delivery is sent by one node and an endpoint still gets
its deliveries in order, one request at a time. A claim lasts while the node's runner sends (renewed
by it); a node killed meanwhile loses it when ``claim_until`` passes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ircd.api import Conn, PerDialect, dialect_of, postgres_ddl, table_exists

__all__ = [
    "MIGRATIONS",
    "TRACK",
    "claim",
    "DeadLetter",
    "Due",
    "Endpoint",
    "dead_ids",
    "dead_letters",
    "delete_endpoint",
    "delivered",
    "disable",
    "drop_deleted",
    "due_batch",
    "enabled_endpoints",
    "endpoint_counts",
    "failed",
    "get_endpoint",
    "given_up",
    "next_due",
    "replay",
    "renew_claims",
    "rotate_secret",
    "save_endpoint",
    "set_payloads",
    "sync_a2a",
    "to_dead",
    "unclaim",
    "unclaim_all",
]

TRACK = "pircan_webhooks"

_TABLES = """
    CREATE TABLE pircan_webhook_endpoints (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        account         TEXT NOT NULL UNIQUE,
        url             TEXT NOT NULL,
        secret          TEXT NOT NULL,
        previous_secret TEXT,
        previous_until  INTEGER,
        enabled         INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
        created_at      INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL,
        disabled_at     INTEGER,
        disabled_reason TEXT,
        last_success_at INTEGER,
        last_failure_at INTEGER,
        last_error      TEXT
    );
    CREATE TABLE pircan_webhook_deliveries (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        endpoint_id INTEGER NOT NULL,
        event_id    INTEGER NOT NULL,
        queued_at   INTEGER NOT NULL,
        next_at     INTEGER NOT NULL,
        tries       INTEGER NOT NULL DEFAULT 0,
        payload     TEXT,
        last_at     INTEGER,
        last_status INTEGER,
        last_error  TEXT
    );
    CREATE UNIQUE INDEX pircan_webhook_deliveries_event ON pircan_webhook_deliveries(endpoint_id, event_id);
    CREATE INDEX pircan_webhook_deliveries_due ON pircan_webhook_deliveries(endpoint_id, next_at, id);
    CREATE TABLE pircan_webhook_dead (
        id          INTEGER PRIMARY KEY,
        account     TEXT NOT NULL,
        event_id    INTEGER NOT NULL,
        url         TEXT NOT NULL,
        queued_at   INTEGER NOT NULL,
        died_at     INTEGER NOT NULL,
        tries       INTEGER NOT NULL,
        reason      TEXT NOT NULL CHECK (reason IN ('tries', 'expired', 'gone', 'disabled')),
        payload     TEXT,
        last_status INTEGER,
        last_error  TEXT
    );
    CREATE INDEX pircan_webhook_dead_account ON pircan_webhook_dead(account, id);
"""

# the queue: one delivery per enabled endpoint of the event's recipient, in the event's transaction
_QUEUE_SQLITE = """
    CREATE TRIGGER pircan_webhook_queue AFTER INSERT ON pircan_events
    BEGIN
        INSERT OR IGNORE INTO pircan_webhook_deliveries (endpoint_id, event_id, queued_at, next_at)
        SELECT id, NEW.id, NEW.created_at, NEW.created_at FROM pircan_webhook_endpoints
        WHERE account = NEW.recipient AND enabled = 1;
    END;
"""
# (PostgreSQL: once per statement over the rows it inserted, a multi-row insert of events being one
# statement there; in the events' order, so delivery ids follow them as SQLite's per-row trigger does)
_QUEUE_POSTGRESQL = """
    CREATE FUNCTION pircan_webhook_queue() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO pircan_webhook_deliveries (endpoint_id, event_id, queued_at, next_at)
        SELECT p.id, e.id, e.created_at, e.created_at FROM new_events e
        JOIN pircan_webhook_endpoints p ON p.account = e.recipient AND p.enabled = 1
        ORDER BY e.id
        ON CONFLICT DO NOTHING;
        RETURN NULL;
    END $$;
    CREATE TRIGGER pircan_webhook_queue AFTER INSERT ON pircan_events
        REFERENCING NEW TABLE AS new_events FOR EACH STATEMENT EXECUTE FUNCTION pircan_webhook_queue();
"""

MIGRATIONS: list[str | PerDialect] = [
    PerDialect(sqlite=_TABLES + _QUEUE_SQLITE, postgresql=postgres_ddl(_TABLES) + _QUEUE_POSTGRESQL),
    # 2: an account's push endpoint is its webhook, or (without one) the A2A endpoint it published,
    # to which the same queue delivers its events as A2A messages (protocol 'a2a')
    """
    ALTER TABLE pircan_webhook_endpoints ADD COLUMN protocol TEXT NOT NULL DEFAULT 'webhook'
        CHECK (protocol IN ('webhook', 'a2a'));
    """,
    # 3: in a cluster, the node that sends the endpoint's deliveries now, and until when at most
    """
    ALTER TABLE pircan_webhook_endpoints ADD COLUMN claim_node TEXT;
    ALTER TABLE pircan_webhook_endpoints ADD COLUMN claim_until INTEGER;
    """,
]

WEBHOOK = "webhook"
A2A = "a2a"


@dataclass(frozen=True, slots=True)
class Endpoint:
    id: int
    account: str
    url: str
    secret: str
    previous_secret: str | None
    previous_until: int | None
    enabled: bool
    created_at: int
    updated_at: int
    disabled_at: int | None
    disabled_reason: str | None
    last_success_at: int | None
    last_failure_at: int | None
    last_error: str | None
    protocol: str = WEBHOOK  # or A2A: the agent's published A2A endpoint, sent A2A messages

    @property
    def is_webhook(self) -> bool:
        return self.protocol == WEBHOOK

    def secrets(self, now: int) -> list[str]:
        """The secrets that sign a delivery now: the current one, and the previous one for a day
        after a rotation."""
        if self.previous_secret is not None and self.previous_until is not None and now < self.previous_until:
            return [self.secret, self.previous_secret]
        return [self.secret]


@dataclass(frozen=True, slots=True)
class Due:
    """A pending delivery and its event."""

    id: int
    event_id: int
    kind: str
    recipient: str
    ref_id: int
    event_at: int
    queued_at: int
    tries: int
    payload: str | None
    last_status: int | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class DeadLetter:
    id: int
    account: str
    event_id: int
    kind: str
    event_at: int
    url: str
    queued_at: int
    died_at: int
    tries: int
    reason: str
    last_status: int | None
    last_error: str | None


_EP = ("id, account, url, secret, previous_secret, previous_until, enabled, created_at, updated_at, disabled_at, "
       "disabled_reason, last_success_at, last_failure_at, last_error, protocol")


def _endpoint(row: tuple | None) -> Endpoint | None:
    if row is None:
        return None
    return Endpoint(row[0], row[1], row[2], row[3], row[4], row[5], bool(row[6]), *row[7:])


def get_endpoint(conn: Conn, account: str, protocol: str | None = WEBHOOK) -> Endpoint | None:
    """The account's webhook (``protocol`` None: its push endpoint, whichever it is)."""
    endpoint = _endpoint(conn.execute(f"SELECT {_EP} FROM pircan_webhook_endpoints WHERE account = ?",
                                      (account,)).fetchone())
    if endpoint is None or (protocol is not None and endpoint.protocol != protocol):
        return None
    return endpoint


def endpoint_counts(conn: Conn, account: str) -> tuple[Endpoint | None, int, int]:
    """The account's endpoint, its pending deliveries and the account's dead letters."""
    endpoint = get_endpoint(conn, account)
    pending = 0
    if endpoint is not None:
        pending = conn.execute("SELECT COUNT(*) FROM pircan_webhook_deliveries WHERE endpoint_id = ?",
                               (endpoint.id,)).fetchone()[0]
    dead = conn.execute("SELECT COUNT(*) FROM pircan_webhook_dead WHERE account = ?", (account,)).fetchone()[0]
    return endpoint, pending, dead


def save_endpoint(conn: Conn, account: str, url: str, secret: str, now: int) -> tuple[Endpoint, bool]:
    """Set the account's webhook: a new one gets ``secret``; an existing one keeps its secret and is
    enabled again with the new URL. It takes the place of the account's A2A push endpoint, if any
    (with a new secret: that one was never shown), keeping its pending deliveries. (endpoint, created)."""
    cur = conn.execute(
        "UPDATE pircan_webhook_endpoints SET url = ?, enabled = 1, updated_at = ?, disabled_at = NULL, "
        "disabled_reason = NULL WHERE account = ? AND protocol = 'webhook'",
        (url, now, account),
    )
    created = cur.rowcount == 0
    if created and conn.execute(
            "UPDATE pircan_webhook_endpoints SET url = ?, secret = ?, previous_secret = NULL, previous_until = NULL, "
            "protocol = 'webhook', enabled = 1, updated_at = ?, disabled_at = NULL, disabled_reason = NULL "
            "WHERE account = ? AND protocol = 'a2a'", (url, secret, now, account)).rowcount == 1:
        pass
    elif created:
        conn.execute(
            "INSERT INTO pircan_webhook_endpoints (account, url, secret, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
            (account, url, secret, now, now),
        )
    endpoint = get_endpoint(conn, account)
    assert endpoint is not None
    return endpoint, created


def delete_endpoint(conn: Conn, account: str) -> tuple[Endpoint, int] | None:
    """Remove the account's endpoint and its pending deliveries (the events stay in the inbox and
    the dead letters stay); (the endpoint as it was, deliveries dropped), or None."""
    endpoint = get_endpoint(conn, account)
    if endpoint is None:
        return None
    dropped = conn.execute("DELETE FROM pircan_webhook_deliveries WHERE endpoint_id = ?", (endpoint.id,)).rowcount
    conn.execute("DELETE FROM pircan_webhook_endpoints WHERE id = ?", (endpoint.id,))
    return endpoint, dropped


def drop_deleted(conn: Conn, current: dict[str, int]) -> list[tuple[str, int, int]]:
    """Remove what webhooks keep of accounts that no longer exist, or exist again under a newer
    creation time (a new account of the same name): endpoints with their pending deliveries, and
    dead letters queued before the account was made. ``current``: creation time (ms) by account.
    (account, deliveries dropped, dead letters dropped) of each."""
    gone: dict[str, list[int]] = {}
    for ident, account, created in conn.execute(
            "SELECT id, account, created_at FROM pircan_webhook_endpoints").fetchall():
        made = current.get(account)
        if made is None or made > created:
            dropped = conn.execute("DELETE FROM pircan_webhook_deliveries WHERE endpoint_id = ?", (ident,)).rowcount
            conn.execute("DELETE FROM pircan_webhook_endpoints WHERE id = ?", (ident,))
            gone[account] = [dropped, 0]
    for account, oldest in conn.execute(
            "SELECT account, MIN(queued_at) FROM pircan_webhook_dead GROUP BY account").fetchall():
        made = current.get(account)
        if made is None or made > oldest:
            dead = conn.execute("DELETE FROM pircan_webhook_dead WHERE account = ? AND queued_at < ?",
                                (account, (1 << 63) - 1 if made is None else made)).rowcount
            gone.setdefault(account, [0, 0])[1] = dead
    return [(account, dropped, dead) for account, (dropped, dead) in sorted(gone.items())]


def rotate_secret(conn: Conn, account: str, secret: str, now: int, grace_ms: int) -> bool:
    cur = conn.execute(
        "UPDATE pircan_webhook_endpoints SET previous_secret = secret, previous_until = ?, secret = ?, "
        "updated_at = ? WHERE account = ? AND protocol = 'webhook'",
        (now + grace_ms, secret, now, account),
    )
    return cur.rowcount == 1


def sync_a2a(conn: Conn, now: int, secret: Callable[[], str],
             account: str | None = None) -> tuple[list[Endpoint], list[str]]:
    """Make the A2A push endpoints follow the A2A endpoints agents publish (of ``account``, or of
    all): one for each published endpoint of an account without a webhook; its URL changed, or
    enabled again when published again after a 410; removed, with its pending deliveries, once the
    endpoint is withdrawn (or the account is gone). (endpoints made or changed, accounts whose A2A
    push ended)."""
    only, args = ("", ()) if account is None else (" WHERE account = ?", (account,))
    if not table_exists(conn, "pircan_a2a_endpoints"):  # the A2A side's tables are not there (a database of the CLI)
        return [], []
    published = {a: (url, at) for a, url, at in conn.execute(
        "SELECT account, url, updated_at FROM pircan_a2a_endpoints" + only, args)}
    rows = conn.execute(f"SELECT {_EP} FROM pircan_webhook_endpoints" + (only or " WHERE protocol = 'a2a'"),
                        args).fetchall()
    existing = {e.account: e for e in map(_endpoint, rows) if e is not None}
    for name in published:
        if name not in existing:
            found = get_endpoint(conn, name, None)
            if found is not None:
                existing[name] = found
    changed: list[str] = []
    ended: list[str] = []
    for name, ep in existing.items():
        if ep.protocol == A2A and name not in published:
            conn.execute("DELETE FROM pircan_webhook_deliveries WHERE endpoint_id = ?", (ep.id,))
            conn.execute("DELETE FROM pircan_webhook_endpoints WHERE id = ?", (ep.id,))
            ended.append(name)
    for name, (url, at) in published.items():
        found = existing.get(name)
        if found is None:
            conn.execute(
                "INSERT INTO pircan_webhook_endpoints (account, url, secret, created_at, updated_at, protocol) "
                "VALUES (?, ?, ?, ?, ?, 'a2a')", (name, url, secret(), now, now))
            changed.append(name)
        elif found.protocol == A2A and (found.url != url or (not found.enabled and at > (found.disabled_at or 0))):
            conn.execute("UPDATE pircan_webhook_endpoints SET url = ?, enabled = 1, updated_at = ?, disabled_at = NULL, "
                         "disabled_reason = NULL WHERE id = ?", (url, now, found.id))
            changed.append(name)
    return [e for e in (get_endpoint(conn, n, A2A) for n in changed) if e is not None], ended


# the delivery worker -------------------------------------------------------------------------

_DUE = ("d.id, d.event_id, e.type, e.recipient, e.ref_id, e.created_at, d.queued_at, d.tries, d.payload, "
        "d.last_status, d.last_error")


def due_batch(conn: Conn, endpoint_id: int, now: int, limit: int) -> tuple[Endpoint | None, list[Due]]:
    """The endpoint (None: gone or disabled) and its deliveries that are due, oldest event first."""
    endpoint = _endpoint(conn.execute(f"SELECT {_EP} FROM pircan_webhook_endpoints WHERE id = ? AND enabled = 1",
                                      (endpoint_id,)).fetchone())
    if endpoint is None:
        return None, []
    # in the order the events were made, walking the (endpoint, event) index: the first due rows end
    # the scan (sorting every due row by id, through the due-time index, made each batch cost as much
    # as the whole backlog). SQLite is told so; PostgreSQL's planner, which has no such hint, finds it.
    hint = " INDEXED BY pircan_webhook_deliveries_event" if dialect_of(conn) == "sqlite" else ""
    rows = conn.execute(
        f"SELECT {_DUE} FROM pircan_webhook_deliveries d{hint} "
        "JOIN pircan_events e ON e.id = d.event_id "
        "WHERE d.endpoint_id = ? AND d.next_at <= ? ORDER BY d.event_id LIMIT ?",
        (endpoint_id, now, limit),
    ).fetchall()
    return endpoint, [Due(*r) for r in rows]


def claim(conn: Conn, endpoint_id: int, node: str, now: int, until: int) -> tuple[str | None, int] | None:
    """Claim the endpoint's deliveries for ``node`` until ``until`` (a cluster's node): when no node
    holds them, ``node`` does, or the holder's claim ended before ``now``. None when claimed; else
    (the holder, until when), or (None, 0) when the endpoint is gone or disabled.

    One UPDATE of the endpoint's row: on PostgreSQL two nodes claiming at once queue on the row and
    the second sees the first's claim (every writer of pircd also takes the advisory lock)."""
    if conn.execute(
            "UPDATE pircan_webhook_endpoints SET claim_node = ?, claim_until = ? WHERE id = ? AND enabled = 1 "
            "AND (claim_node IS NULL OR claim_node = ? OR claim_until <= ?)",
            (node, until, endpoint_id, node, now)).rowcount == 1:
        return None
    row = conn.execute("SELECT claim_node, claim_until FROM pircan_webhook_endpoints WHERE id = ? AND enabled = 1",
                       (endpoint_id,)).fetchone()
    return (None, 0) if row is None else (row[0], int(row[1] or 0))


def unclaim(conn: Conn, endpoint_id: int, node: str) -> None:
    conn.execute("UPDATE pircan_webhook_endpoints SET claim_node = NULL, claim_until = NULL "
                 "WHERE id = ? AND claim_node = ?", (endpoint_id, node))


def unclaim_all(conn: Conn, node: str) -> None:
    conn.execute("UPDATE pircan_webhook_endpoints SET claim_node = NULL, claim_until = NULL WHERE claim_node = ?",
                 (node,))


def renew_claims(conn: Conn, node: str, until: int) -> None:
    conn.execute("UPDATE pircan_webhook_endpoints SET claim_until = ? WHERE claim_node = ?", (until, node))


def next_due(conn: Conn, endpoint_id: int) -> int | None:
    """When the endpoint's next delivery is due (None: nothing pending)."""
    return conn.execute("SELECT MIN(next_at) FROM pircan_webhook_deliveries WHERE endpoint_id = ?",
                        (endpoint_id,)).fetchone()[0]


def enabled_endpoints(conn: Conn) -> list[tuple[int, str, int | None]]:
    """(id, account, next due) of every enabled endpoint."""
    return conn.execute(
        "SELECT e.id, e.account, (SELECT MIN(d.next_at) FROM pircan_webhook_deliveries d WHERE d.endpoint_id = e.id)"
        " FROM pircan_webhook_endpoints e WHERE e.enabled = 1 ORDER BY e.id").fetchall()


def set_payloads(conn: Conn, payloads: list[tuple[int, str]]) -> dict[int, str]:
    """Store the snapshot of each delivery that has none yet; the payload each delivery now has."""
    stored: dict[int, str] = {}
    for ident, payload in payloads:
        conn.execute("UPDATE pircan_webhook_deliveries SET payload = ? WHERE id = ? AND payload IS NULL",
                     (payload, ident))
        row = conn.execute("SELECT payload FROM pircan_webhook_deliveries WHERE id = ?", (ident,)).fetchone()
        if row is not None:
            stored[ident] = row[0]
    return stored


def delivered(conn: Conn, ident: int, endpoint_id: int, now: int) -> None:
    conn.execute("DELETE FROM pircan_webhook_deliveries WHERE id = ?", (ident,))
    conn.execute("UPDATE pircan_webhook_endpoints SET last_success_at = ? WHERE id = ?", (now, endpoint_id))


def failed(conn: Conn, ident: int, endpoint_id: int, tries: int, next_at: int, now: int,
           status: int | None, error: str) -> None:
    conn.execute(
        "UPDATE pircan_webhook_deliveries SET tries = ?, next_at = ?, last_at = ?, last_status = ?, last_error = ? "
        "WHERE id = ?",
        (tries, next_at, now, status, error, ident),
    )
    conn.execute("UPDATE pircan_webhook_endpoints SET last_failure_at = ?, last_error = ? WHERE id = ?",
                 (now, error, endpoint_id))


_TO_DEAD = (
    "INSERT INTO pircan_webhook_dead (id, account, event_id, url, queued_at, died_at, tries, reason, "
    "payload, last_status, last_error) "
    "SELECT d.id, p.account, d.event_id, p.url, d.queued_at, ?, ?, ?, d.payload, ?, ? "
    "FROM pircan_webhook_deliveries d JOIN pircan_webhook_endpoints p ON p.id = d.endpoint_id WHERE d.id = ? "
    "ON CONFLICT (id) DO UPDATE SET account = excluded.account, event_id = excluded.event_id, url = excluded.url, "
    "queued_at = excluded.queued_at, died_at = excluded.died_at, tries = excluded.tries, reason = excluded.reason, "
    "payload = excluded.payload, last_status = excluded.last_status, last_error = excluded.last_error"
)


def to_dead(conn: Conn, ident: int, now: int, tries: int, reason: str, status: int | None,
            error: str | None) -> bool:
    """Move a delivery to the dead letters (``reason``: tries, expired, gone, disabled)."""
    moved = conn.execute(_TO_DEAD, (now, tries, reason, status, error, ident)).rowcount == 1
    conn.execute("DELETE FROM pircan_webhook_deliveries WHERE id = ?", (ident,))
    return moved


def given_up(conn: Conn, ident: int, endpoint_id: int, now: int, tries: int, reason: str,
             status: int | None, error: str) -> bool:
    """A delivery's last try failed: a dead letter (reason ``tries``)."""
    conn.execute("UPDATE pircan_webhook_endpoints SET last_failure_at = ?, last_error = ? WHERE id = ?",
                 (now, error, endpoint_id))
    return to_dead(conn, ident, now, tries, reason, status, error)


def disable(conn: Conn, endpoint_id: int, gone_id: int, tries: int, now: int, reason: str) -> int:
    """Disable the endpoint (it answered ``reason``, e.g. HTTP 410, to delivery ``gone_id``): that
    delivery and every other pending one become dead letters; how many in all."""
    conn.execute(
        "UPDATE pircan_webhook_endpoints SET enabled = 0, disabled_at = ?, disabled_reason = ?, "
        "last_failure_at = ?, last_error = ? WHERE id = ?",
        (now, reason, now, reason, endpoint_id),
    )
    moved = int(to_dead(conn, gone_id, now, tries, "gone", 410, reason))
    others = conn.execute("SELECT id, tries, last_status, last_error FROM pircan_webhook_deliveries "
                          "WHERE endpoint_id = ? ORDER BY id", (endpoint_id,)).fetchall()
    for ident, other_tries, status, error in others:
        moved += int(to_dead(conn, ident, now, other_tries, "disabled", status, error))
    return moved


_DEAD = ("d.id, d.account, d.event_id, COALESCE(e.type, '?'), COALESCE(e.created_at, d.queued_at), d.url, "
         "d.queued_at, d.died_at, d.tries, d.reason, d.last_status, d.last_error")


def dead_letters(conn: Conn, account: str, limit: int) -> list[DeadLetter]:
    """The account's newest ``limit`` dead letters, oldest first."""
    rows = conn.execute(
        f"SELECT {_DEAD} FROM pircan_webhook_dead d LEFT JOIN pircan_events e ON e.id = d.event_id "
        "WHERE d.account = ? ORDER BY d.id DESC LIMIT ?",
        (account, limit),
    ).fetchall()
    rows.reverse()
    return [DeadLetter(*r) for r in rows]


def dead_ids(conn: Conn, account: str, ids: list[int]) -> set[int]:
    """Which of ``ids`` are dead letters of the account."""
    marks = ",".join("?" * len(ids))
    return {r[0] for r in conn.execute(
        f"SELECT id FROM pircan_webhook_dead WHERE account = ? AND id IN ({marks})", (account, *ids))}


def replay(conn: Conn, account: str, endpoint_id: int, ids: list[int] | None, now: int) -> int:
    """Queue the account's dead letters (``ids``, or all) again to its endpoint, with their delivery
    ids and payloads, due now, with 12 tries and 3 days of their own; how many were queued."""
    where = "account = ?"
    args: list[object] = [account]
    if ids is not None:
        where += f" AND id IN ({','.join('?' * len(ids))})"
        args.extend(ids)
    queued = conn.execute(
        "INSERT INTO pircan_webhook_deliveries (id, endpoint_id, event_id, queued_at, next_at, tries, payload) "
        f"SELECT id, ?, event_id, ?, ?, 0, payload FROM pircan_webhook_dead WHERE {where} ORDER BY id "
        "ON CONFLICT DO NOTHING",
        (endpoint_id, now, now, *args),
    ).rowcount
    conn.execute(f"DELETE FROM pircan_webhook_dead WHERE {where}", args)
    return queued
