"""The object an event names, as JSON: what a webhook delivery carries and what a wait answers for
an event it does not consume (a request, a decision, an agreement change, a webhook notice).

One builder per event type, in the shapes of ``service/schema.py``; they run on the database
thread inside a read or write (``fn(conn, ref_id, now)``), so the object is the one committed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.service.contact import agreement_state, request_state
from ext.pircan.service.schema import agreement_json, audit_json, message_json, request_json, task_json

__all__ = ["register", "object_of", "key_of", "peer_of_object", "event_row"]

# event type -> (the document's key for the object, fn(conn, ref_id, now) -> the object's JSON or None)
Builder = Callable[[Conn, int, int], Any]
_BUILDERS: dict[str, tuple[str, Builder]] = {}


def register(kind: str, key: str, fn: Builder) -> None:
    """How the object of a new event type is shown: under ``key``, as ``fn`` builds it."""
    _BUILDERS[kind] = (key, fn)


def key_of(kind: str) -> str | None:
    found = _BUILDERS.get(kind)
    return None if found is None else found[0]


def object_of(conn: Conn, kind: str, ref: int, now: int) -> tuple[str, Any] | None:
    """(key, the object's JSON) of an event of ``kind`` naming ``ref``; None for a type without a
    builder (the document then names ``ref_id`` only)."""
    found = _BUILDERS.get(kind)
    if found is None:
        return None
    key, fn = found
    return key, fn(conn, ref, now)


def event_row(conn: Conn, event_id: int) -> tuple[str, str, int, int] | None:
    """(recipient, type, ref_id, created_at) of an event row."""
    return conn.execute("SELECT recipient, type, ref_id, created_at FROM pircan_events WHERE id = ?",
                        (event_id,)).fetchone()


def peer_of_object(kind: str, recipient: str, data: dict[str, Any] | None) -> str | None:
    """The account an event comes from, for a wait's sender filter: a request's requester, a
    decision's target, the other party of an agreement or a task; None for a webhook notice."""
    if data is None:
        return None
    if kind == "request":
        return str(data["requester"])
    if kind == "decision":
        return str(data["target"])
    if kind in ("agreement", "task", "task-update"):
        return str(data["target"] if data["requester"] == recipient else data["requester"])
    if kind == "message":
        return str(data["sender"])
    return None


def _message(conn: Conn, ref: int, now: int) -> Any:
    msg = db.get_message(conn, ref)
    return None if msg is None else message_json(msg)


def _request(conn: Conn, ref: int, now: int) -> Any:
    req = db.get_request(conn, ref)
    return None if req is None else request_json(req, request_state(req, now), policy=db.get_policy(conn, req.target))


def _agreement(conn: Conn, ref: int, now: int) -> Any:
    agr = db.get_agreement(conn, ref)
    return None if agr is None else agreement_json(agr, agreement_state(agr, now))


def _audit(conn: Conn, ref: int, now: int) -> Any:
    entry = db.get_audit(conn, ref)
    return None if entry is None else audit_json(entry)


def _task(conn: Conn, ref: int, now: int) -> Any:
    """The task with every entry so far (the event names the task, or one of its entries)."""
    task = tdb.get_task(conn, ref)
    if task is None:
        task_id = tdb.entry_task(conn, ref)
        task = None if task_id is None else tdb.get_task(conn, task_id)
    return None if task is None else task_json(task, tdb.entries(conn, task.id))


register("message", "message", _message)
register("request", "request", _request)
register("decision", "request", _request)
register("agreement", "agreement", _agreement)
register("task", "task", _task)
register("task-update", "task", _task)
register("webhook", "audit", _audit)
