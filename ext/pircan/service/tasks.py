"""Tasks between agents, with the states of the A2A protocol.

A requester holding ``task:<skill>`` in an active agreement creates a task for the target with an
input text. The target (or its owner) moves it on: ``submitted`` to ``working``, ``input-required``,
``completed``, ``failed`` or ``rejected``; ``working`` to ``input-required``, ``completed``, ``failed``
(or ``working`` again, with a progress note); ``input-required`` to ``working``, ``completed`` or
``failed``. The requester answers ``input-required`` with more input (back to ``working``) and may
cancel any task that is not finished. ``completed``, ``failed``, ``canceled`` and ``rejected`` are
final. Revoking (or the end of) the agreement cancels the requester's open tasks under it.

Every change is one transaction: the task's state, an entry with its text, a per-recipient event
for the other party (``task`` for a new task, ``task-update`` for changes) and an audit row. Each
change counts against its author's budget under the agreement (120 an hour), like a message.
"""

from __future__ import annotations

from dataclasses import dataclass

from ircd.api import Conn

from ext.pircan import rules
from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.ids import hexid, parse_id
from ext.pircan.rules import Limits
from ext.pircan.service.contact import managed_accounts, no_agreement, owns, peer_of
from ext.pircan.service.events import Events, audit_refusal, by_whom
from ext.pircan.service.messages import body_refusal
from ext.pircan.service.refusals import Refused
from ext.pircan.service.waits import wake_task_waiters
from ext.pircan.state import Pircan
from ext.pircan.store import Agreement
from ext.pircan.store_tasks import TERMINAL, Task, TaskEntry

__all__ = ["TaskView", "Snapshot", "task_snapshot", "create_task", "update_task", "provide_input", "cancel_task", "get_task", "list_tasks",
           "end_tasks_of", "TARGET_MOVES", "TASK_LIST_MAX"]

TASK_LIST_MAX = 200

# (from, to) moves the target side may make
TARGET_MOVES: dict[str, frozenset[str]] = {
    "submitted": frozenset({"working", "input-required", "completed", "failed", "rejected"}),
    "working": frozenset({"working", "input-required", "completed", "failed"}),
    "input-required": frozenset({"working", "completed", "failed"}),
}
_ENTRY_KIND = {"completed": "result", "failed": "error", "rejected": "error"}


@dataclass(frozen=True, slots=True)
class TaskView:
    task: Task
    entries: list[TaskEntry]


def _text_refusal(text: str, max_chars: int | None, context: str, required: bool) -> None:
    if not text.strip():
        if required:
            raise Refused("EMPTY", context, text="This needs a text")
        return
    code = body_refusal(text, max_chars)
    if code == "TOO_LONG":
        limit = f"{max_chars} characters" if max_chars is not None and len(text) > max_chars else "60000 bytes"
        raise Refused("TOO_LONG", context, text=f"A task text is at most {limit}")


def _budget(state: Pircan, actor: str, agreement_id: int, now: int, context: str, target: str) -> None:
    window = state.budget_window(actor, agreement_id)
    if window.count(now) >= Limits.sender_per_agreement_per_hour:
        audit_refusal(state, actor, target, "TASK", "AGREEMENT_BUDGET", hexid(agreement_id))
        raise Refused("AGREEMENT_BUDGET", hexid(agreement_id),
                      text="120 messages and task changes under this agreement in the last hour",
                      retry_after_s=window.retry_after_s(now))
    window.add(now)


# create ---------------------------------------------------------------------------------------


def _create_txn(conn: Conn, task: Task, entry: TaskEntry, events: Events, audit_id: int,
                via: str) -> list:
    if not db.agreements_live(conn, {task.agreement_id}, task.created_at):
        raise Refused("NO_AGREEMENT")
    tdb.insert_task(conn, task)
    tdb.insert_entry(conn, entry)
    db.audit(conn, audit_id, task.created_at, task.requester, task.target, "task.create",
             f"{hexid(task.id)} skill={task.skill} agreement={hexid(task.agreement_id)}"
             + by_whom(task.requester, task.requester, via))
    return events.write(conn, task.created_at)


async def create_task(state: Pircan, requester: str, target_name: str, skill: str, text: str,
                      *, max_chars: int | None = None, via: str = "irc") -> Task:
    """A new task for ``target_name``'s ``skill``. Refusals: EMPTY, TOO_LONG, NO_SUCH_ACCOUNT,
    SELF_CONTACT, INVALID_SCOPE (a malformed skill), NO_AGREEMENT / SCOPE_MISSING, AGREEMENT_BUDGET."""
    _text_refusal(text, max_chars, target_name, required=True)
    target = peer_of(state, requester, target_name)
    skill = skill.lower()
    if rules.parse_scopes(f"task:{skill}") is None:
        raise Refused("INVALID_SCOPE", skill, text="Skills are 1-64 of a-z 0-9 . _ - (starting with a letter or digit)")
    now = state.now_ms()
    agreement, why = state.find_agreement(requester, target, f"task:{skill}", now)
    if agreement is None:
        code = why or "NO_AGREEMENT"
        audit_refusal(state, requester, target, "TASK", code, skill)
        raise await no_agreement(state, requester, target, code, target_name,
                                 text=f"You need an active agreement with task:{skill} for this")
    _budget(state, requester, agreement.id, now, target_name, target)
    ident = state.new_id()
    task = Task(ident, requester, target, skill, agreement.id, "submitted", now, now, requester, 1, 1, 0)
    entry = TaskEntry(state.new_id(), ident, requester, "input", "submitted", now, text)
    events = Events(state)
    events.add(target, "task", ident)
    try:
        written = await state.database.write(_create_txn, task, entry, events, state.new_id(), via)
    except Refused as exc:
        state.budget_window(requester, agreement.id).remove(now)
        raise Refused(exc.code, target_name) from None
    except BaseException:  # not stored (the database unavailable, say): the reserved slot goes back
        state.budget_window(requester, agreement.id).remove(now)
        raise
    events.committed(written, now)
    wake_task_waiters(state, task, target, "task")
    state.task_committed(task, entry)
    return task


# changes ------------------------------------------------------------------------------------


async def _task_for(state: Pircan, actor: str, task_id: str) -> tuple[Task, str]:
    """The task and which side ``actor`` acts for (requester or target; an owner acts for its agent)."""
    ident = parse_id(task_id)
    task = await state.database.read(tdb.get_task, ident) if ident is not None else None
    if task is None:
        raise Refused("NO_SUCH_TASK", task_id)
    if actor == task.requester:
        return task, "requester"
    if actor == task.target:
        return task, "target"
    if await owns(state, actor, task.target):
        return task, "target"
    if await owns(state, actor, task.requester):
        return task, "requester"
    raise Refused("NO_SUCH_TASK", task_id)


def _change_txn(conn: Conn, task: Task, new_state: str, entry: TaskEntry, events: Events,
                audit_id: int, actor: str, detail: str, side: str) -> list:
    if not tdb.set_task_state(conn, task.id, task.state, new_state, entry.at, entry.author, side):
        raise Refused("INVALID_TRANSITION")
    tdb.insert_entry(conn, entry)
    subject = task.requester if side == "requester" else task.target
    db.audit(conn, audit_id, entry.at, actor, subject, "task.update", detail, peer=task.other(subject))
    return events.write(conn, entry.at)


async def _change(state: Pircan, actor: str, task: Task, side: str, new_state: str, kind: str, text: str,
                  task_id: str, via: str) -> Task:
    now = state.now_ms()
    subject = task.requester if side == "requester" else task.target
    other = task.other(subject)
    _budget(state, subject, task.agreement_id, now, task_id, other)
    entry = TaskEntry(state.new_id(), task.id, subject, kind, new_state, now, text)
    events = Events(state)
    events.add(other, "task-update", entry.id)  # the change (events are unique per object): every one counts
    if actor != subject:
        events.add(subject, "task-update", entry.id)
    detail = f"{hexid(task.id)} {task.state}->{new_state}" + by_whom(actor, subject, via)
    try:
        written = await state.database.write(_change_txn, task, new_state, entry, events, state.new_id(), actor,
                                             detail, side)
    except Refused as exc:
        state.budget_window(subject, task.agreement_id).remove(now)
        raise Refused(exc.code, task_id, text="The task changed meanwhile; get it again") from None
    except BaseException:  # not stored: the reserved slot goes back
        state.budget_window(subject, task.agreement_id).remove(now)
        raise
    events.committed(written, now)
    version = task.version + 1
    moved = Task(task.id, task.requester, task.target, task.skill, task.agreement_id, new_state, task.created_at,
                 now, subject, version, version if side == "requester" else task.requester_seen,
                 version if side == "target" else task.target_seen)
    wake_task_waiters(state, moved, other)
    state.task_committed(moved, entry)
    return moved


async def update_task(state: Pircan, actor: str, task_id: str, new_state: str, text: str = "",
                      *, max_chars: int | None = None, via: str = "irc") -> Task:
    """The target (or its owner) moves a task on, with a status note, a result or an error."""
    task, side = await _task_for(state, actor, task_id)
    new_state = new_state.lower()
    if side != "target":
        raise Refused("NOT_ALLOWED", task_id, text="Only the task's target moves it on; you may INPUT or CANCEL")
    if new_state not in TARGET_MOVES.get(task.state, frozenset()):
        raise Refused("INVALID_TRANSITION", task_id, new_state,
                      text=f"A {task.state} task cannot become {new_state}")
    _text_refusal(text, max_chars, task_id, required=new_state in ("input-required", "failed"))
    return await _change(state, actor, task, side, new_state, _ENTRY_KIND.get(new_state, "status"), text,
                         task_id, via)


async def provide_input(state: Pircan, actor: str, task_id: str, text: str,
                        *, max_chars: int | None = None, via: str = "irc") -> Task:
    """The requester answers a task that is input-required; it goes back to working."""
    task, side = await _task_for(state, actor, task_id)
    if side != "requester":
        raise Refused("NOT_ALLOWED", task_id, text="Only the task's requester gives it more input")
    if task.state != "input-required":
        raise Refused("INVALID_TRANSITION", task_id, "working", text=f"The task is {task.state}, not input-required")
    _text_refusal(text, max_chars, task_id, required=True)
    return await _change(state, actor, task, side, "working", "input", text, task_id, via)


async def cancel_task(state: Pircan, actor: str, task_id: str, text: str = "", *, via: str = "irc") -> Task:
    task, side = await _task_for(state, actor, task_id)
    if side != "requester":
        raise Refused("NOT_ALLOWED", task_id, text="Only the task's requester cancels it; the target may fail or "
                                                   "reject it")
    if task.state in TERMINAL:
        raise Refused("INVALID_TRANSITION", task_id, "canceled", text=f"The task is already {task.state}")
    _text_refusal(text, None, task_id, required=False)
    return await _change(state, actor, task, side, "canceled", "status", text, task_id, via)


# reading ---------------------------------------------------------------------------------------


def _read_txn(conn: Conn, ident: int, account: str | None) -> tuple[Task | None, list[TaskEntry]]:
    if account is not None:
        tdb.mark_seen(conn, ident, account)
    return tdb.get_task(conn, ident), tdb.entries(conn, ident)


async def get_task(state: Pircan, actor: str, task_id: str) -> TaskView:
    """A task and all its entries (oldest first); a party reading its own task has seen it."""
    task, _ = await _task_for(state, actor, task_id)
    party = actor if actor in (task.requester, task.target) else None
    found, items = await state.database.write(_read_txn, task.id, party)
    return TaskView(found or task, items)


async def list_tasks(state: Pircan, actor: str, role: str | None = None, task_state: str | None = None,
                     peer: str | None = None, limit: int = 50) -> list[Task]:
    """Tasks of ``actor`` and of the agents it owns, newest first. ``role``: requester or target."""
    if role not in (None, "requester", "target"):
        raise Refused("INVALID_PARAMS", role or "", text="role is requester or target")
    if task_state is not None and task_state not in tdb.TASK_STATES:
        raise Refused("INVALID_PARAMS", task_state, text="state is one of " + ", ".join(tdb.TASK_STATES))
    accounts = await managed_accounts(state, actor)
    folded_peer = None if peer in (None, "", "*") else state.api.casefold(peer)  # type: ignore[arg-type]
    return await state.database.read(tdb.tasks_of, accounts, role, task_state, folded_peer,
                                     max(1, min(limit, TASK_LIST_MAX)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Tasks in two sections, as the agent hub's ``jobs`` shows them: the finished ones (most recently
    finished first) and those still running (submitted, working, input-required; oldest first)."""

    completed: list[Task]
    running: list[Task]


async def task_snapshot(state: Pircan, actor: str, task_ids: list[str] | None = None,
                        limit: int = 20) -> Snapshot:
    """The snapshot of the given tasks (NO_SUCH_TASK for one ``actor`` may not see), or of every task
    of ``actor`` and of the agents it owns: each one still running, and the ``limit`` that finished last."""
    if task_ids:
        found = [(await _task_for(state, actor, text))[0] for text in task_ids]
        return Snapshot([t for t in found if t.state in TERMINAL],
                        sorted((t for t in found if t.state not in TERMINAL), key=lambda t: t.id))
    accounts = await managed_accounts(state, actor)
    limit = max(1, min(limit, TASK_LIST_MAX))
    return Snapshot(await state.database.read(tdb.tasks_by_state, accounts, True, limit),
                    await state.database.read(tdb.tasks_by_state, accounts, False, TASK_LIST_MAX))


# the end of an agreement -----------------------------------------------------------------------


def _end_txn(conn: Conn, agreement_id: int, now: int, made: list[tuple[int, int, int, int]]
             ) -> list[tuple[Task, TaskEntry, list[tuple[int, str, str, int]]]]:
    ended = []
    for task, (entry_id, audit_id, ev1, ev2) in zip(tdb.open_tasks_under(conn, agreement_id), made):
        if not tdb.set_task_state(conn, task.id, task.state, "canceled", now, "server", None):
            continue
        entry = TaskEntry(entry_id, task.id, "server", "error", "canceled", now, "The agreement ended")
        tdb.insert_entry(conn, entry)
        db.audit(conn, audit_id, now, "server", task.requester, "task.end",
                 f"{hexid(task.id)} agreement={hexid(agreement_id)}", peer=task.target)
        written = []
        for event_id, recipient in ((ev1, task.requester), (ev2, task.target)):
            if db.queue_event(conn, event_id, recipient, "task-update", entry_id, now):
                written.append((event_id, recipient, "task-update", entry_id))
        ended.append((task, entry, written))
    return ended


async def end_tasks_of(state: Pircan, agreement: Agreement, now: int) -> None:
    """The agreement was revoked or ended: cancel the open tasks under it."""
    open_now = await state.database.read(tdb.open_tasks_under, agreement.id)
    if not open_now:
        return
    made = [(state.new_id(), state.new_id(), state.new_id(), state.new_id()) for _ in open_now]
    ended = await state.database.write(_end_txn, agreement.id, now, made)
    for task, entry, written in ended:
        for event_id, recipient, kind, _ in written:
            state.event_committed(recipient, kind, event_id, now)
        moved = Task(task.id, task.requester, task.target, task.skill, task.agreement_id, "canceled",
                     task.created_at, now, "server", task.version + 1, task.requester_seen, task.target_seen)
        wake_task_waiters(state, moved, task.requester)
        wake_task_waiters(state, moved, task.target)
        state.task_committed(moved, entry)
