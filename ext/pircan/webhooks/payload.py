"""What a webhook delivery carries: one JSON document per event, with the whole object the event
names (``ext/pircan/service/eventdoc.py``, the shapes MCP returns), inside an envelope.

The payload is built once, on the delivery's first try, inside the transaction that stores it
with the delivery (a snapshot): every retry, and a replay, sends the same bytes.
"""

from __future__ import annotations

import json
from typing import Any

from ircd.api import Conn

from ext.pircan.ids import hexid, ts
from ext.pircan.service import eventdoc
from ext.pircan.webhooks.store import Due, Endpoint

__all__ = ["build", "encode", "envelope", "test_body"]


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
    found = eventdoc.object_of(conn, due.kind, due.ref_id, now)
    if found is None:
        data["ref_id"] = hexid(due.ref_id)
    else:
        data[found[0]] = found[1]
    return encode(data)


def test_body(delivery_id: str, endpoint: Endpoint, now: int) -> bytes:
    """The body of a ``test`` event (WEBHOOK TEST): the envelope, and the URL it was sent to."""
    data = envelope(delivery_id, None, "test", endpoint.account, now)
    data["test"] = {"url": endpoint.url}
    return encode(data).encode()
