"""The JSON shapes of PIRCAN objects, the same on every transport that carries whole objects
(MCP tool results, webhook deliveries, A2A). Ids are 16 hex digits, times server-time strings."""

from __future__ import annotations

from typing import Any

from ext.pircan.ids import hexid, ts
from ext.pircan.rules import Limits
from ext.pircan.store import Agreement, AuditEntry, Request, StoredMessage
from ext.pircan.store_tasks import Resource, Task, TaskEntry
from ext.pircan.waiting import WaitEvent

__all__ = ["message_json", "request_json", "agreement_json", "audit_json", "task_json", "resource_json", "event_json"]


def message_json(msg: StoredMessage, with_body: bool = True) -> dict[str, Any]:
    """A message; without its body (its size is in ``bytes``) for a sender's receipt."""
    data: dict[str, Any] = {
        "message_id": hexid(msg.id),
        "sender": msg.sender,
        "recipient": msg.recipient,
        "agreement_id": hexid(msg.agreement_id) if msg.agreement_id else None,  # None: an agent and its owner
        "conversation_id": hexid(msg.conversation_id),
        "in_reply_to": None if msg.in_reply_to is None else hexid(msg.in_reply_to),
        "hop_count": msg.hop_count,
        "created_at": ts(msg.created_at),
        "read": msg.read_at is not None,
        "bytes": len(msg.body.encode("utf-8")),
    }
    if with_body:
        data["body"] = msg.body
    return data


def request_json(req: Request, state: str | None, *, policy: str | None) -> dict[str, Any]:
    """A request; while it is pending, ``decider`` says who decides it (``owner`` under the target's
    policy ``owner-decides``, else ``agent``) and ``expires_at`` when it expires undecided.

    ``policy`` is the target's contact policy now, and every caller must give it (no default): a
    caller that forgot it would show ``agent`` as the decider of a request its owner decides."""
    now_state = state or req.state
    pending = now_state == "pending"
    return {
        "request_id": hexid(req.id),
        "requester": req.requester,
        "target": req.target,
        "scopes": list(req.scopes),
        "days": req.days,
        "purpose": req.purpose,
        "state": now_state,
        "created_at": ts(req.created_at),
        "decider": ("owner" if policy == "owner-decides" else "agent") if pending else None,
        "expires_at": ts(req.created_at + Limits.request_ttl_ms) if pending else None,
        "decided_at": None if req.decided_at is None else ts(req.decided_at),
        "decided_by": req.decided_by,
        "agreement_id": None if req.agreement_id is None else hexid(req.agreement_id),
    }


def agreement_json(agr: Agreement, state: str | None = None) -> dict[str, Any]:
    return {
        "agreement_id": hexid(agr.id),
        "request_id": hexid(agr.request_id),
        "requester": agr.requester,
        "target": agr.target,
        "scopes": list(agr.scopes),
        "created_at": ts(agr.created_at),
        "expires_at": ts(agr.expires_at),
        "revoked_at": None if agr.revoked_at is None else ts(agr.revoked_at),
        "revoked_by": agr.revoked_by,
        "state": state or ("revoked" if agr.revoked_at is not None else "active"),
    }


def audit_json(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": hexid(entry.id),
        "at": ts(entry.at),
        "actor": entry.actor,
        "action": entry.action,
        "subject": entry.subject,
        "detail": entry.detail,
    }


def task_json(task: Task, entries: list[TaskEntry] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "task_id": hexid(task.id),
        "requester": task.requester,
        "target": task.target,
        "skill": task.skill,
        "agreement_id": hexid(task.agreement_id),
        "state": task.state,
        "created_at": ts(task.created_at),
        "updated_at": ts(task.updated_at),
        "updated_by": task.updated_by,
    }
    if entries is not None:
        data["entries"] = [
            {"entry_id": hexid(e.id), "author": e.author, "kind": e.kind, "state": e.state, "at": ts(e.at),
             "text": e.text}
            for e in entries
        ]
    return data


def resource_json(res: Resource, with_body: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "owner": res.account,
        "name": res.name,
        "content_type": res.content_type,
        "bytes": len(res.body.encode("utf-8")),
        "updated_at": ts(res.updated_at),
        "uri": f"pircan://{res.account}/resources/{res.name}",
    }
    if with_body:
        data["body"] = res.body
    return data


def event_json(ev: WaitEvent) -> dict[str, Any]:
    """What a wait answers for an event it does not consume: its kind, the id of the object it
    names, the event's id (null for a channel message and for a message or task change another
    wait took), ``taken`` (that other wait took it), and the object under its key (``request``,
    ``agreement``, ``audit``, ``message`` without its body, ``task``, ``channel_message``)."""
    return {"kind": ev.kind, "id": ev.ref, "event_id": None if ev.event_id is None else hexid(ev.event_id),
            "taken": ev.taken, ev.key: ev.data}
