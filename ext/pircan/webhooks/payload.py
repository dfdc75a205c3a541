"""What a webhook delivery carries: one JSON document per event, with the whole object the event
names, in the shapes MCP returns (``ext/pircan/service/schema.py``), inside an envelope.

The payload is built once, on the delivery's first try, inside the transaction that stores it
with the delivery (a snapshot): every retry, and a replay, sends the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.ids import hexid, ts
from ext.pircan.service.contact import agreement_state, request_state
from ext.pircan.service.schema import agreement_json, audit_json, message_json, request_json, task_json
from ext.pircan.webhooks import store
from ext.pircan.webhooks.store import Due, Endpoint

__all__ = ["build", "encode", "envelope", "register", "test_body"]

# event type -> (the envelope's key for the object, fn(conn, ref_id, now) -> the object's JSON or None)
Builder = Callable[[Conn, int, int], Any]
_BUILDERS: dict[str, tuple[str, Builder]] = {}


def register(kind: str, key: str, fn: Builder) -> None:
    """How the object of a new event type (task events, ...) is sent: under ``key``, as ``fn`` builds it."""
    _BUILDERS[kind] = (key, fn)


def _message(conn: Conn, ref: int, now: int) -> Any:
    msg = db.get_message(conn, ref)
    return None if msg is None else message_json(msg)


def _request(conn: Conn, ref: int, now: int) -> Any:
    req = db.get_request(conn, ref)
    return None if req is None else request_json(req, request_state(req, now), db.get_policy(conn, req.target))


def _agreement(conn: Conn, ref: int, now: int) -> Any:
    agr = db.get_agreement(conn, ref)
    if agr is None:
        return None
    data = agreement_json(agr, agreement_state(agr, now))
    return data


def _audit(conn: Conn, ref: int, now: int) -> Any:
    entry = store.get_audit(conn, ref)
    return None if entry is None else audit_json(entry)


def _task(conn: Conn, ref: int, now: int) -> Any:
    """The task with every entry so far (the event names the task, or one of its entries)."""
    task = tdb.get_task(conn, ref)
    if task is None:
        task_id = store.entry_task(conn, ref)
        task = None if task_id is None else tdb.get_task(conn, task_id)
    return None if task is None else task_json(task, tdb.entries(conn, task.id))


register("message", "message", _message)
register("request", "request", _request)
register("decision", "request", _request)
register("agreement", "agreement", _agreement)
register("task", "task", _task)
register("task-update", "task", _task)
register("webhook", "audit", _audit)


def envelope(delivery_id: int | str, event_id: int | None, kind: str, recipient: str, created_at: int) -> dict[str, Any]:
    return {
        "delivery_id": delivery_id if isinstance(delivery_id, str) else hexid(delivery_id),
        "event_id": None if event_id is None else hexid(event_id),
        "type": kind,
        "recipient": recipient,
        "created_at": ts(created_at),
    }


def encode(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def build(conn: Conn, due: Due, now: int) -> str:
    """The JSON document of one delivery (on the database thread, from the objects as they are now)."""
    data = envelope(due.id, due.event_id, due.kind, due.recipient, due.event_at)
    found = _BUILDERS.get(due.kind)
    if found is None:
        data["ref_id"] = hexid(due.ref_id)
    else:
        key, fn = found
        data[key] = fn(conn, due.ref_id, now)
    return encode(data)


def test_body(delivery_id: str, endpoint: Endpoint, now: int) -> bytes:
    """The body of a ``test`` event (WEBHOOK TEST): the envelope, and the URL it was sent to."""
    data = envelope(delivery_id, None, "test", endpoint.account, now)
    data["test"] = {"url": endpoint.url}
    return encode(data).encode()
