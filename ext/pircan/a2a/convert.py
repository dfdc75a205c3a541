"""PIRCAN objects as A2A's protocol objects (the SDK's protobuf types), and what the network reads
from an A2A message.

* A PIRCAN task is an A2A ``Task`` with the same id (16 hex digits, also its ``context_id``), the
  same state, its entries as ``history`` (the requester's as ``user`` messages, the target's and the
  server's as ``agent`` messages), the entry that made the current state as ``status.message``, and
  each result as an ``Artifact`` named ``result``.
* A direct message is an A2A ``Message`` from the ``agent`` role whose ``message_id`` is the PIRCAN
  message id and whose ``context_id`` is its conversation id.
* An A2A message carries text parts only (joined with line breaks); its metadata (and the request's)
  names what it is for: ``skill`` (a task), ``state`` (with ``task_id``: the target moves its task on),
  ``in_reply_to``, ``to`` and ``intro`` (on the network's endpoint).
"""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from ext.pircan.ids import hexid, ts
from ext.pircan.service.messages import Sent
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import Task, TaskEntry

__all__ = [
    "FINAL",
    "PIRCAN_STATES",
    "SETTLED",
    "STATES",
    "artifact_event",
    "data_message",
    "message_proto",
    "metadata_of",
    "receipt_proto",
    "status_event",
    "task_proto",
    "text_of",
]

STATES: dict[str, Any] = {  # the protobuf enum's values
    "submitted": pb.TASK_STATE_SUBMITTED,
    "working": pb.TASK_STATE_WORKING,
    "input-required": pb.TASK_STATE_INPUT_REQUIRED,
    "completed": pb.TASK_STATE_COMPLETED,
    "failed": pb.TASK_STATE_FAILED,
    "canceled": pb.TASK_STATE_CANCELED,
    "rejected": pb.TASK_STATE_REJECTED,
}
PIRCAN_STATES = {v: k for k, v in STATES.items()}
FINAL = frozenset({"completed", "failed", "canceled", "rejected"})
SETTLED = FINAL | {"input-required"}  # where a request waiting for a task (or a stream) stops


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def _struct(data: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(data)
    return struct


def _entry_message(task: Task, entry: TaskEntry) -> pb.Message:
    role = pb.ROLE_USER if entry.author == task.requester else pb.ROLE_AGENT
    return pb.Message(
        message_id=hexid(entry.id), context_id=hexid(task.id), task_id=hexid(task.id), role=role,
        parts=[pb.Part(text=entry.text, media_type="text/plain")],
        metadata=_struct({"author": entry.author, "kind": entry.kind, "state": entry.state, "at": ts(entry.at)}),
    )


def _artifact(entry: TaskEntry) -> pb.Artifact:
    return pb.Artifact(artifact_id=hexid(entry.id), name="result",
                       parts=[pb.Part(text=entry.text, media_type="text/plain")])


def task_proto(task: Task, entries: list[TaskEntry] | None = None) -> pb.Task:
    """The A2A task of a PIRCAN task; without ``entries``, no history, status message or artifacts."""
    status = pb.TaskStatus(state=STATES[task.state], timestamp=_timestamp(task.updated_at))
    found = pb.Task(id=hexid(task.id), context_id=hexid(task.id), status=status, metadata=_struct({
        "requester": task.requester, "target": task.target, "skill": task.skill,
        "agreement_id": hexid(task.agreement_id), "created_at": ts(task.created_at),
        "updated_at": ts(task.updated_at), "updated_by": task.updated_by,
    }))
    if entries:
        found.status.message.CopyFrom(_entry_message(task, entries[-1]))
        found.history.extend(_entry_message(task, e) for e in entries)
        found.artifacts.extend(_artifact(e) for e in entries if e.kind == "result" and e.text)
    return found


def status_event(task: Task, entry: TaskEntry) -> pb.TaskStatusUpdateEvent:
    status = pb.TaskStatus(state=STATES[entry.state], timestamp=_timestamp(entry.at),
                           message=_entry_message(task, entry))
    return pb.TaskStatusUpdateEvent(task_id=hexid(task.id), context_id=hexid(task.id), status=status)


def artifact_event(task: Task, entry: TaskEntry) -> pb.TaskArtifactUpdateEvent:
    return pb.TaskArtifactUpdateEvent(task_id=hexid(task.id), context_id=hexid(task.id), artifact=_artifact(entry),
                                      last_chunk=True)


def message_proto(msg: StoredMessage) -> pb.Message:
    """A stored direct message, as its recipient receives it."""
    return pb.Message(
        message_id=hexid(msg.id), context_id=hexid(msg.conversation_id), role=pb.ROLE_AGENT,
        parts=[pb.Part(text=msg.body, media_type="text/plain")],
        metadata=_struct({"sender": msg.sender, "recipient": msg.recipient, "agreement_id": hexid(msg.agreement_id),
                          "in_reply_to": None if msg.in_reply_to is None else hexid(msg.in_reply_to),
                          "hop_count": msg.hop_count, "created_at": ts(msg.created_at)}),
    )


def receipt_proto(sent: Sent, receipt_id: int, waited_ms: int, ended: str | None = None,
                  detail: str = "") -> pb.Message:
    """The gateway's answer when no reply came: the receipt of the stored message, and why no reply
    (``ended``: timeout, gone, nothing or cancelled, as a wait ends; metadata ``no_reply``)."""
    msg = sent.message
    why = {"timeout": f"; no reply within {waited_ms} ms", "gone": f"; no reply: {detail} left the network"}
    text = (f"Stored as {hexid(msg.id)} for {msg.recipient} ({sent.status})"
            + (why.get(ended, f"; no reply: {detail}") if ended else ""))
    return pb.Message(
        message_id=hexid(receipt_id), context_id=hexid(msg.conversation_id), role=pb.ROLE_AGENT,
        parts=[pb.Part(text=text, media_type="text/plain")],
        metadata=_struct({"receipt": True, "message_id": hexid(msg.id), "recipient": msg.recipient,
                          "delivery": sent.status, "conversation_id": hexid(msg.conversation_id),
                          "hop_count": msg.hop_count, "created": sent.created, "created_at": ts(msg.created_at),
                          **({"no_reply": ended} if ended else {})}),
    )


def data_message(message_id: int, text: str, data: dict[str, Any]) -> pb.Message:
    part = pb.Part(media_type="application/json")
    part.data.struct_value.update(data)
    return pb.Message(message_id=hexid(message_id), role=pb.ROLE_AGENT,
                      parts=[pb.Part(text=text, media_type="text/plain"), part])


def text_of(message: pb.Message) -> str | None:
    """The text an A2A message carries (its text parts, joined with line breaks); None when it has
    a part of another kind (file, URL, data)."""
    texts = []
    for part in message.parts:
        if part.WhichOneof("content") != "text":
            return None
        texts.append(part.text)
    return "\n".join(texts)


def metadata_of(request: pb.SendMessageRequest) -> dict[str, Any]:
    """The request's metadata, then the message's (which wins)."""
    found: dict[str, Any] = MessageToDict(request.metadata) if request.HasField("metadata") else {}
    if request.message.HasField("metadata"):
        found.update(MessageToDict(request.message.metadata))
    return found
