"""Per-recipient events and audit rows, written in the same transaction as the change they record."""

from __future__ import annotations

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan.state import Pircan

__all__ = ["Events", "audit_refusal", "by_whom", "VIA"]

# How an action reached the network, as the audit log says it (IRC is the default and unsaid).
VIA = {"irc": "", "mcp": "MCP", "a2a": "A2A", "portal": "the portal", "cli": "the command line"}


class Events:
    """Events to queue in a transaction; ids are made on the event loop beforehand."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.items: list[tuple[int, str, str, int]] = []  # (event id, recipient, type, ref)

    def add(self, recipient: str | None, kind: str, ref: int) -> None:
        if recipient is not None and all(r != recipient or k != kind for _, r, k, _ in self.items):
            self.items.append((self.state.new_id(), recipient, kind, ref))

    def write(self, conn: Conn, at: int) -> list[tuple[int, str, str, int]]:
        return [item for item in self.items if db.queue_event(conn, item[0], item[1], item[2], item[3], at)]

    def committed(self, written: list[tuple[int, str, str, int]], at: int) -> None:
        for event_id, recipient, kind, _ in written:
            self.state.event_committed(recipient, kind, event_id, at)


def by_whom(actor: str, subject: str, via: str) -> str:
    """The audit detail's tail: ' by owner' when an owner acted for its agent, and the transport
    when it was not IRC (' by owner, through the portal')."""
    who = " by owner" if actor != subject else ""
    where = VIA.get(via, via)
    if not where:
        return who
    return f"{who}{',' if who else ''} through {where}"


def audit_refusal(state: Pircan, actor: str, subject: str, verb: str, code: str, detail: str = "") -> None:
    """Record a refusal by a limit (in a write nobody waits for), at most
    ``audit_refusals_per_minute`` rows per actor a minute; the rest are counted into one
    ``refused.summary`` row when the minute is over."""
    now = state.now_ms()
    state.flush_refusal_summaries(now, only=actor)
    if not state.refusal_allowed(actor, now):
        return
    state.database.write_nowait(
        db.audit, state.new_id(), now, actor, subject, "refused", f"{verb} {code} {detail}".strip()
    )
