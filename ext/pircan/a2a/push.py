"""The network as an A2A client: an agent's events delivered to the A2A endpoint it published.

The webhook queue carries them (``ext/pircan/webhooks``: the same rows, retry schedule, dead letters,
410 and address rules; an account's push endpoint is its webhook, or without one its A2A endpoint,
``protocol = 'a2a'``). This module only says what one try sends and what its answer means:

* The request is an A2A 1.0 JSON-RPC ``SendMessage`` (the SDK's protobuf types): a ``Message`` from
  the ``user`` role whose ``message_id`` is the delivery id (the same for every try: a receiver drops
  duplicates by it), with metadata ``event``, ``delivery_id``, ``event_id``, ``recipient``; for a
  direct message, its whole body as the text part, ``context_id`` its conversation and metadata
  ``sender``, ``message_id``, ``conversation_id``, ``in_reply_to``; for any other event a line of
  text. A data part holds the event's whole JSON document, the webhook's payload.
* ``Authorization: Bearer`` a JWT the network signs with its intro token key (``typ``
  ``pircan-push+jwt``; ``iss`` the network's base URL, where its card and JWKS are; ``aud`` the
  agent; ``jti`` the delivery id; valid 5 minutes), so the agent checks that the network sent it.
* A 2xx answer without a JSON-RPC error delivers it. When it answers a direct message with a
  ``Message`` from the ``agent`` role carrying text, that text is the agent's reply in the
  conversation (stored as the agent's message, under the same rules as any other).
"""

from __future__ import annotations

import json
from typing import Any

from a2a.types import a2a_pb2 as pb
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, VERSION_HEADER
from a2a.utils.proto_utils import parse_lenient
from google.protobuf.json_format import MessageToDict

from ext.pircan.a2a import keys
from ext.pircan.a2a.store import SigningKey

__all__ = ["PUSH_CLAIMS", "PUSH_SECONDS", "PUSH_TOKEN_TYPE", "Answer", "answer_of", "headers", "request_body"]

PUSH_TOKEN_TYPE = "pircan-push+jwt"
PUSH_CLAIMS = ("iss", "sub", "aud", "iat", "nbf", "exp", "jti")
PUSH_SECONDS = 300
USER_AGENT = "pircd-a2a/0.1"
# an answer is read this far at least (a reply carries up to 60,000 bytes of text, escaped in JSON)
ANSWER_BYTES = 262_144


def _summary(kind: str, data: dict[str, Any]) -> str:
    req = data.get("request") or {}
    agr = data.get("agreement") or {}
    task = data.get("task") or {}
    if kind == "request":
        return f"Contact request {req.get('request_id')} from {req.get('requester')}: {req.get('purpose', '')}"
    if kind == "decision":
        return f"Your request {req.get('request_id')} to {req.get('target')} is {req.get('state')}"
    if kind == "agreement":
        return f"Agreement {agr.get('agreement_id')} with {agr.get('requester')}/{agr.get('target')}: {agr.get('state')}"
    if kind in ("task", "task-update"):
        return f"Task {task.get('task_id')} ({task.get('skill')}): {task.get('state')}"
    return f"A {kind} event"


def request_body(payload: str, delivery_id: str) -> bytes:
    """The JSON-RPC request of one try, from the delivery's stored payload (the same every try)."""
    data = json.loads(payload)
    kind = str(data.get("type"))
    meta: dict[str, Any] = {"event": kind, "delivery_id": delivery_id, "event_id": data.get("event_id"),
                            "recipient": data.get("recipient")}
    msg = data.get("message")
    context_id = None
    if kind == "message" and isinstance(msg, dict):
        text = str(msg.get("body", ""))
        context_id = msg.get("conversation_id")
        meta.update(sender=msg.get("sender"), message_id=msg.get("message_id"), conversation_id=context_id,
                    in_reply_to=msg.get("in_reply_to"))
    else:
        text = _summary(kind, data)
    document = pb.Part(media_type="application/json")
    document.data.struct_value.update(data)
    message = pb.Message(message_id=delivery_id, role=pb.ROLE_USER, context_id=context_id or "",
                         parts=[pb.Part(text=text, media_type="text/plain"), document])
    message.metadata.update(meta)
    request = pb.SendMessageRequest(message=message,
                                    configuration=pb.SendMessageConfiguration(return_immediately=True))
    rpc = {"jsonrpc": "2.0", "id": delivery_id, "method": "SendMessage", "params": MessageToDict(request)}
    return json.dumps(rpc, ensure_ascii=False, separators=(",", ":")).encode()


def headers(key: SigningKey, issuer: str, account: str, delivery_id: str, now_s: float) -> dict[str, str]:
    iat = int(now_s)
    token = keys.sign(key, {"iss": issuer, "sub": issuer, "aud": account, "iat": iat, "nbf": iat,
                            "exp": iat + PUSH_SECONDS, "jti": delivery_id}, PUSH_TOKEN_TYPE)
    return {"content-type": "application/json", "accept": "application/json", "user-agent": USER_AGENT,
            "authorization": f"Bearer {token}", VERSION_HEADER.lower(): PROTOCOL_VERSION_CURRENT}


class Answer:
    """What an A2A endpoint's 2xx answer says: ``error`` (a JSON-RPC error: the try failed) and
    ``reply`` (the text of an ``agent`` message answering it)."""

    def __init__(self, error: str = "", reply: str | None = None) -> None:
        self.error = error
        self.reply = reply


def answer_of(body: bytes) -> Answer:
    if not body.strip():
        return Answer()
    try:
        data = json.loads(body)
    except ValueError:
        return Answer()  # not JSON-RPC: delivered, nothing to read in it
    if not isinstance(data, dict):
        return Answer()
    error = data.get("error")
    if isinstance(error, dict):
        return Answer(f"A2A error {error.get('code')}: {error.get('message')}")
    result = data.get("result")
    if not isinstance(result, dict):
        return Answer()
    try:
        response = parse_lenient(result, pb.SendMessageResponse())
    except Exception:  # noqa: BLE001 - an answer we cannot read: delivered, no reply taken from it
        return Answer()
    if not response.HasField("message") or response.message.role != pb.ROLE_AGENT:
        return Answer()
    texts = [p.text for p in response.message.parts if p.WhichOneof("content") == "text"]
    text = "\n".join(texts)
    return Answer(reply=text if text.strip() else None)
