"""PIRCAN's SQL for tasks, profiles, skills and resources (tables of migration 6 in ``store.py``).

Like ``store.py``: every function takes a connection (``Conn``: SQLite's or PostgreSQL's) and runs
inside a transaction the caller opened, so a task's change, its entry, its per-recipient event and
its audit row commit together.
"""

from __future__ import annotations

from dataclasses import dataclass

from ircd.api import Conn

__all__ = [
    "Task", "TaskEntry", "Resource", "TERMINAL", "TASK_STATES",
    "insert_task", "get_task", "set_task_state", "insert_entry", "entries", "entry_task", "tasks_of", "tasks_by_state", "open_tasks_under",
    "mark_seen", "unseen_tasks", "take_task_update", "take_oldest_task_update", "unsee", "set_display_name", "display_names", "set_skill", "delete_skill", "skills_of",
    "put_resource", "delete_resource", "resources_of", "get_resource",
]

TASK_STATES = ("submitted", "working", "input-required", "completed", "failed", "canceled", "rejected")
TERMINAL = frozenset({"completed", "failed", "canceled", "rejected"})


@dataclass(frozen=True, slots=True)
class Task:
    id: int
    requester: str
    target: str
    skill: str
    agreement_id: int
    state: str
    created_at: int
    updated_at: int
    updated_by: str
    version: int  # one more per change
    requester_seen: int  # the version each side has seen
    target_seen: int

    def other(self, account: str) -> str:
        return self.target if account == self.requester else self.requester

    def seen_by(self, account: str) -> int:
        return self.requester_seen if account == self.requester else self.target_seen


@dataclass(frozen=True, slots=True)
class TaskEntry:
    id: int
    task_id: int
    author: str
    kind: str  # input, status, result, error
    state: str  # the task's state after this entry
    at: int
    text: str


@dataclass(frozen=True, slots=True)
class Resource:
    account: str
    name: str
    content_type: str  # text or json
    body: str
    updated_at: int


_TASK = ("id, requester, target, skill, agreement_id, state, created_at, updated_at, updated_by, version, "
         "requester_seen, target_seen")


def _task(row: tuple | None) -> Task | None:
    return None if row is None else Task(*row)


# tasks ---------------------------------------------------------------------------------


def insert_task(conn: Conn, task: Task) -> None:
    conn.execute(
        f"INSERT INTO pircan_tasks ({_TASK}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (task.id, task.requester, task.target, task.skill, task.agreement_id, task.state, task.created_at,
         task.updated_at, task.updated_by, task.version, task.requester_seen, task.target_seen),
    )


def get_task(conn: Conn, ident: int) -> Task | None:
    return _task(conn.execute(f"SELECT {_TASK} FROM pircan_tasks WHERE id = ?", (ident,)).fetchone())


def set_task_state(conn: Conn, ident: int, expected: str, state: str, at: int, by: str,
                   side: str | None) -> bool:
    """Move a task from ``expected`` to ``state`` (False when it is no longer in ``expected``); the
    author's ``side`` (requester or target; None for the server) has seen its own change."""
    seen = {"requester": ", requester_seen = version + 1", "target": ", target_seen = version + 1"}.get(side or "", "")
    cur = conn.execute(
        f"UPDATE pircan_tasks SET state = ?, updated_at = ?, updated_by = ?, version = version + 1{seen} "
        "WHERE id = ? AND state = ?",
        (state, at, by, ident, expected),
    )
    return cur.rowcount == 1


def insert_entry(conn: Conn, entry: TaskEntry) -> None:
    conn.execute(
        "INSERT INTO pircan_task_entries (id, task_id, author, kind, state, at, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (entry.id, entry.task_id, entry.author, entry.kind, entry.state, entry.at, entry.text),
    )


def entry_task(conn: Conn, entry_id: int) -> int | None:
    """The task a task entry belongs to."""
    row = conn.execute("SELECT task_id FROM pircan_task_entries WHERE id = ?", (entry_id,)).fetchone()
    return None if row is None else row[0]


def entries(conn: Conn, task_id: int) -> list[TaskEntry]:
    rows = conn.execute(
        "SELECT id, task_id, author, kind, state, at, text FROM pircan_task_entries WHERE task_id = ? ORDER BY id",
        (task_id,),
    ).fetchall()
    return [TaskEntry(*r) for r in rows]


def tasks_of(conn: Conn, accounts: list[str], role: str | None, state: str | None,
             peer: str | None, limit: int) -> list[Task]:
    """Tasks where one of ``accounts`` is requester (role 'requester'), target ('target') or either,
    newest first."""
    marks = ",".join("?" * len(accounts))
    where: list[str] = []
    args: list[object] = []
    if role == "requester":
        where.append(f"requester IN ({marks})")
        args += accounts
    elif role == "target":
        where.append(f"target IN ({marks})")
        args += accounts
    else:
        where.append(f"(requester IN ({marks}) OR target IN ({marks}))")
        args += accounts + accounts
    if state is not None:
        where.append("state = ?")
        args.append(state)
    if peer is not None:
        where.append("(requester = ? OR target = ?)")
        args += [peer, peer]
    rows = conn.execute(
        f"SELECT {_TASK} FROM pircan_tasks WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT ?", (*args, limit)
    ).fetchall()
    return [t for t in map(_task, rows) if t is not None]


def tasks_by_state(conn: Conn, accounts: list[str], final: bool, limit: int) -> list[Task]:
    """Tasks where one of ``accounts`` is a party: the final ones (``final``: completed, failed,
    canceled, rejected), most recently finished first; or the others, oldest first."""
    marks = ",".join("?" * len(accounts))
    order = "updated_at DESC, id DESC" if final else "id"
    rows = conn.execute(
        f"SELECT {_TASK} FROM pircan_tasks WHERE (requester IN ({marks}) OR target IN ({marks})) "
        f"AND state {'' if final else 'NOT '}IN ('completed', 'failed', 'canceled', 'rejected') "
        f"ORDER BY {order} LIMIT ?",
        (*accounts, *accounts, limit),
    ).fetchall()
    return [t for t in map(_task, rows) if t is not None]


def open_tasks_under(conn: Conn, agreement_id: int) -> list[Task]:
    rows = conn.execute(
        f"SELECT {_TASK} FROM pircan_tasks WHERE agreement_id = ? AND state NOT IN "
        "('completed', 'failed', 'canceled', 'rejected') ORDER BY id",
        (agreement_id,),
    ).fetchall()
    return [t for t in map(_task, rows) if t is not None]


def mark_seen(conn: Conn, ident: int, account: str) -> bool:
    """``account`` has seen the task as it is now; True when there was something it had not seen."""
    changed = conn.execute(
        "UPDATE pircan_tasks SET requester_seen = version WHERE id = ? AND requester = ? "
        "AND requester_seen < version", (ident, account)).rowcount
    changed += conn.execute(
        "UPDATE pircan_tasks SET target_seen = version WHERE id = ? AND target = ? "
        "AND target_seen < version", (ident, account)).rowcount
    return changed > 0


def take_task_update(conn: Conn, ident: int, account: str) -> Task | None:
    """The task, marked seen by ``account``, if it had a change by the other party it had not seen."""
    task = get_task(conn, ident)
    if task is None or task.updated_by == account or task.seen_by(account) >= task.version:
        return None
    mark_seen(conn, ident, account)
    return task


def unsee(conn: Conn, ident: int, account: str, seen: int) -> None:
    """Put back what ``account`` had seen of a task (a wait took a change and then ended unanswered)."""
    conn.execute("UPDATE pircan_tasks SET requester_seen = ? WHERE id = ? AND requester = ?", (seen, ident, account))
    conn.execute("UPDATE pircan_tasks SET target_seen = ? WHERE id = ? AND target = ?", (seen, ident, account))


def take_oldest_task_update(conn: Conn, account: str, peers: frozenset[str] | None) -> Task | None:
    for task in unseen_tasks(conn, account, peers):
        taken = take_task_update(conn, task.id, account)
        if taken is not None:
            return taken
    return None


def unseen_tasks(conn: Conn, account: str, peers: frozenset[str] | None) -> list[Task]:
    """Tasks of ``account`` that the other party changed since ``account`` last looked, oldest change first."""
    rows = conn.execute(
        f"SELECT {_TASK} FROM pircan_tasks WHERE "
        "(requester = ? AND version > requester_seen AND updated_by != ?) OR "
        "(target = ? AND version > target_seen AND updated_by != ?) ORDER BY updated_at, id",
        (account, account, account, account),
    ).fetchall()
    found = [t for t in map(_task, rows) if t is not None]
    return [t for t in found if peers is None or t.other(account) in peers]


# profiles and skills ---------------------------------------------------------------------


def set_display_name(conn: Conn, account: str, name: str, at: int) -> None:
    if name:
        conn.execute(
            "INSERT INTO pircan_profiles (account, display_name, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT(account) DO UPDATE SET display_name = excluded.display_name, updated_at = excluded.updated_at",
            (account, name, at),
        )
    else:
        conn.execute("DELETE FROM pircan_profiles WHERE account = ?", (account,))


def display_names(conn: Conn) -> dict[str, str]:
    return dict(conn.execute("SELECT account, display_name FROM pircan_profiles").fetchall())


def set_skill(conn: Conn, account: str, skill: str, description: str, at: int) -> None:
    conn.execute(
        "INSERT INTO pircan_skills (account, skill, description, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT(account, skill) DO UPDATE SET description = excluded.description, "
        "updated_at = excluded.updated_at",
        (account, skill, description, at),
    )


def delete_skill(conn: Conn, account: str, skill: str) -> bool:
    return conn.execute("DELETE FROM pircan_skills WHERE account = ? AND skill = ?", (account, skill)).rowcount == 1


def skills_of(conn: Conn, accounts: list[str] | None = None) -> dict[str, list[tuple[str, str]]]:
    """account -> [(skill, description)], by skill name; every account's for None."""
    if accounts is None:
        rows = conn.execute("SELECT account, skill, description FROM pircan_skills ORDER BY account, skill")
    else:
        marks = ",".join("?" * len(accounts))
        rows = conn.execute(
            f"SELECT account, skill, description FROM pircan_skills WHERE account IN ({marks}) ORDER BY account, skill",
            accounts,
        )
    found: dict[str, list[tuple[str, str]]] = {}
    for account, skill, description in rows:
        found.setdefault(account, []).append((skill, description))
    return found


# resources ---------------------------------------------------------------------------------


def put_resource(conn: Conn, res: Resource) -> None:
    conn.execute(
        "INSERT INTO pircan_resources (account, name, content_type, body, updated_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT(account, name) DO UPDATE SET content_type = excluded.content_type, body = excluded.body, "
        "updated_at = excluded.updated_at",
        (res.account, res.name, res.content_type, res.body, res.updated_at),
    )


def delete_resource(conn: Conn, account: str, name: str) -> bool:
    return conn.execute("DELETE FROM pircan_resources WHERE account = ? AND name = ?", (account, name)).rowcount == 1


def resources_of(conn: Conn, account: str) -> list[Resource]:
    rows = conn.execute(
        "SELECT account, name, content_type, body, updated_at FROM pircan_resources WHERE account = ? ORDER BY name",
        (account,),
    ).fetchall()
    return [Resource(*r) for r in rows]


def get_resource(conn: Conn, account: str, name: str) -> Resource | None:
    row = conn.execute(
        "SELECT account, name, content_type, body, updated_at FROM pircan_resources WHERE account = ? AND name = ?",
        (account, name),
    ).fetchone()
    return None if row is None else Resource(*row)
