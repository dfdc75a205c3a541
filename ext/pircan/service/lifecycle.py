"""The end of an account: what happens to its PIRCAN state when it is deleted.

PIRCAN keeps state by account name, and a deleted name may be taken again. So PIRCAN remembers
every account it has seen with its creation time; an account that is gone, or is there again with
another creation time, was deleted, and its state ends at once, in one transaction:

* its live agreements are revoked by the server (``agreement.end``), the other party told
  (``agreement`` event), and their open tasks canceled;
* pending requests from or to it expire (``contact.end``), a requester on the other side told
  (``decision`` event);
* every row that names it (requests, agreements, messages, events, tasks) is renamed to
  ``<name>~<creation time>``, a name no account can have: the other side still sees its
  conversations with the deleted account, and nothing of it is reachable by a new account of the
  same name;
* its policy, profile, skills, resources, A2A endpoint and private-channel invitations and memberships
  are deleted.

The audit log is append-only and keeps its rows as they were; an account's own trail (AUDIT) starts at
its creation, so a new account of the same name does not see the old one's. Operators still see
everything with ``pircd audit``.

This runs at start-up, whenever the server re-reads its accounts (another process deleted one), and
right after an in-process deletion.
"""

from __future__ import annotations

from typing import Any

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.ids import hexid
from ext.pircan.state import Pircan
from ext.pircan.store import Agreement

__all__ = ["reconcile", "tombstone"]

_RENAMES = (
    ("pircan_requests", ("requester", "target", "decided_by")),
    ("pircan_agreements", ("requester", "target", "revoked_by")),
    ("pircan_messages", ("sender", "recipient")),
    ("pircan_events", ("recipient",)),
    ("pircan_tasks", ("requester", "target", "updated_by")),
    ("pircan_task_entries", ("author",)),
)
_DELETES = (
    ("pircan_policies", "account"),
    ("pircan_profiles", "account"),
    ("pircan_skills", "account"),
    ("pircan_resources", "account"),
    ("pircan_channel_invites", "account"),
    ("pircan_channel_members", "account"),
    ("pircan_a2a_endpoints", "account"),  # on the pircan_a2a track, migrated before PIRCAN starts
)


def tombstone(account: str, created_at: int) -> str:
    """The name a deleted account's rows carry: no account name contains '~'."""
    return f"{account}~{created_at}"


def _known(conn: Conn) -> tuple[dict[str, int], set[str]]:
    """The accounts PIRCAN saw (with their creation times), and every name its rows carry."""
    known = dict(conn.execute("SELECT account, created_at FROM pircan_known_accounts").fetchall())
    named: set[str] = set()
    for table, columns in _RENAMES[:5]:
        for column in columns[:2]:
            named.update(r[0] for r in conn.execute(f"SELECT DISTINCT {column} FROM {table}"))
    return known, {n for n in named if n and "~" not in n and n != "server"}


def _counts(conn: Conn, account: str) -> int:
    """How many changes ending ``account`` makes at most (each needs an audit id and an event id)."""
    return sum(conn.execute(sql, (account, account)).fetchone()[0] for sql in (
        "SELECT COUNT(*) FROM pircan_agreements WHERE revoked_at IS NULL AND expired_at IS NULL "
        "AND (requester = ? OR target = ?)",
        "SELECT COUNT(*) FROM pircan_requests WHERE state = 'pending' AND (requester = ? OR target = ?)",
        "SELECT COUNT(*) FROM pircan_tasks WHERE state NOT IN ('completed', 'failed', 'canceled', 'rejected') "
        "AND (requester = ? OR target = ?)",
    ))


def _end_txn(conn: Conn, account: str, created_at: int, now: int, ids: list[int],
             current: int | None) -> tuple[list[Agreement], list[tuple[int, str, str, int]]]:
    """End a deleted account's state; (the agreements it revoked, the events it queued)."""
    take = iter(ids).__next__
    tomb = tombstone(account, created_at)
    events: list[tuple[int, str, str, int]] = []
    ended: list[Agreement] = []

    def event(recipient: str, kind: str, ref: int) -> None:
        event_id = take()
        if recipient != account and db.queue_event(conn, event_id, recipient, kind, ref, now):
            events.append((event_id, recipient, kind, ref))

    for agr in db.agreements_for(conn, [account]):
        if agr.revoked_at is not None or agr.expires_at <= now:
            continue
        if db.revoke_agreement(conn, agr.id, now, "server"):
            other = agr.other(account)
            db.audit(conn, take(), now, "server", other, "agreement.end",
                     f"{hexid(agr.id)} with {account}: the account was deleted", peer=tomb)
            event(other, "agreement", agr.id)
            ended.append(agr)
    for req in db.requests_for(conn, [account]):
        if req.state == "pending" and db.expire_request(conn, req.id):
            other = req.requester if req.target == account else req.target
            db.audit(conn, take(), now, "server", other, "contact.end",
                     f"{hexid(req.id)} {req.requester} to {req.target}: {account} was deleted", peer=tomb)
            event(req.requester, "decision", req.id)
    for task in tdb.tasks_of(conn, [account], None, None, None, 1_000_000):
        if task.state in tdb.TERMINAL or not tdb.set_task_state(conn, task.id, task.state, "canceled", now,
                                                                "server", None):
            continue
        entry = tdb.TaskEntry(take(), task.id, "server", "error", "canceled", now, f"{account} was deleted")
        tdb.insert_entry(conn, entry)
        event(task.other(account), "task-update", entry.id)  # names the change, as every task-update does
    for table, columns in _RENAMES:
        for column in columns:
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (tomb, account))
    for table, column in _DELETES:
        conn.execute(f"DELETE FROM {table} WHERE {column} = ?", (account,))
    if current is None:
        conn.execute("DELETE FROM pircan_known_accounts WHERE account = ?", (account,))
    else:
        conn.execute("UPDATE pircan_known_accounts SET created_at = ? WHERE account = ?", (current, account))
    return ended, events


def _forget_namespace(conn: Conn, account: str) -> None:
    """Invitations and memberships of channels in a deleted account's namespace (#<account>/...)."""
    pattern = "#" + account.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "/%"
    for table in ("pircan_channel_invites", "pircan_channel_members"):
        conn.execute(f"DELETE FROM {table} WHERE channel LIKE ? ESCAPE '\\'", (pattern,))


def _remember(conn: Conn, accounts: list[tuple[str, int]]) -> None:
    conn.executemany("INSERT INTO pircan_known_accounts (account, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING",
                     accounts)


async def reconcile(state: Pircan, channels: Any = None) -> int:
    """End the state of every account deleted since PIRCAN last looked; how many. ``channels``: the
    private channels (ext.pircan.channels.PrivateChannels), whose access lists drop the accounts and
    whose channels in a deleted account's namespace lose what is stored of them."""
    rows: list[Any] = await state.api.list_accounts()
    current = {a.folded: a.created_at for a in rows}
    known, named = await state.database.read(_known)
    gone = [(name, made) for name, made in known.items() if current.get(name) != made]
    # names in PIRCAN's rows of accounts it never recorded (made and deleted between two looks)
    gone += [(name, 0) for name in sorted(named) if name not in current and name not in known]
    for name, made in gone:
        now = state.now_ms()
        needed = await state.database.read(_counts, name)
        ids = [state.new_id() for _ in range(2 * needed + 8)]
        for agr in [a for a in state.agreements.values() if name in (a.requester, a.target)]:
            state.forget_agreement(agr.id)  # at once: nothing passes under them from here on
        state.policies.pop(name, None)
        state.display_names.pop(name, None)
        ended, events = await state.database.write(_end_txn, name, made, now, ids, current.get(name))
        for event_id, recipient, kind, _ in events:
            state.event_committed(recipient, kind, event_id, now)
        for agr in ended:
            state.agreement_ended(agr, now)
        state.pending.pop(name, None)
        if channels is not None:
            for folded in channels.forget_accounts({name}):
                await state.api.forget_channel(folded)
            await state.database.write(_forget_namespace, name)
        state.api.log.info("pircan ended the state of deleted account %s (created %d)", name, made)
    new = [(name, made) for name, made in current.items() if name not in known or known[name] != made]
    if new:
        await state.database.write(_remember, new)
    return len(gone)
