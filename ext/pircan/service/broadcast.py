"""Broadcast: one message to every live agent the sender holds an active ``message`` agreement with.

Each recipient gets its own direct message through ``messages.send_message``, so each is checked
against its own agreement (scope, budget, conversation rate) and gets its own receipt or refusal;
one refusal never stops the others. Only agents that are live now (``running`` or ``idle`` in the
roster) are sent to: a parked agent is skipped, so a broadcast never starts every hosted agent of
the network at once (a message by name still wakes one). Nobody live is an answer, not an error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ext.pircan.rules import Limits
from ext.pircan.service.messages import Sent, body_refusal, send_message
from ext.pircan.service.refusals import Refused
from ext.pircan.service.roster import status
from ext.pircan.service.schema import message_json
from ext.pircan.state import Pircan

__all__ = ["Broadcast", "Outcome", "broadcast", "broadcast_json", "LIVE"]

LIVE = ("running", "idle")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One recipient's result: ``sent`` (its receipt) or ``refused``."""

    recipient: str
    sent: Sent | None
    refused: Refused | None


@dataclass(frozen=True, slots=True)
class Broadcast:
    """The outcomes, by recipient name; ``skipped``: (agent, its status) of the agents with an
    agreement that are not live (parked or offline)."""

    outcomes: list[Outcome]
    skipped: list[tuple[str, str]]

    @property
    def sent(self) -> int:
        return sum(1 for o in self.outcomes if o.sent is not None)

    @property
    def refused(self) -> int:
        return len(self.outcomes) - self.sent


def _peers(state: Pircan, sender: str) -> list[str]:
    """The agents ``sender`` holds an active agreement with the message scope with, by name."""
    now = state.now_ms()
    peers = {a.other(sender) for a in state.agreements.values()
             if sender in (a.requester, a.target) and a.active(now) and "message" in a.scopes}
    return sorted(p for p in peers if state.api.account_kind(p) == "agent")


async def broadcast(state: Pircan, sender: str, body: str, *, key: str | None = None,
                    max_chars: int | None = None, via: str = "irc") -> Broadcast:
    """Send ``body`` to every live agent with a message agreement. EMPTY and TOO_LONG refuse the
    whole call (they would refuse every recipient alike); anything else is per recipient. With
    ``key`` each recipient's message has its own idempotency key, so a retried broadcast returns
    the first receipts instead of sending twice."""
    code = body_refusal(body, max_chars)
    if code == "TOO_LONG" and (max_chars is None or len(body) <= max_chars):
        raise Refused(code, "*", text=f"A message body is at most {Limits.body_bytes} bytes of UTF-8")
    if code is not None:
        raise Refused(code, "*")
    live: list[str] = []
    skipped: list[tuple[str, str]] = []
    for peer in _peers(state, sender):
        now = status(state, peer)
        if now in LIVE:
            live.append(peer)
        else:
            skipped.append((peer, now))

    async def one(peer: str) -> Outcome:
        try:
            own_key = None if key is None else f"{key}\n{peer}"  # a key of its own per recipient
            sent = await send_message(state, sender, peer, body, key=own_key, max_chars=max_chars, via=via)
        except Refused as exc:
            return Outcome(peer, None, exc)
        return Outcome(peer, sent, None)

    # sent together, the messages are written in one transaction (the send path's batched write)
    outcomes = list(await asyncio.gather(*(one(peer) for peer in live)))
    return Broadcast(outcomes, skipped)


def broadcast_json(done: Broadcast) -> dict[str, Any]:
    """The result as MCP's broadcast_message and A2A's pircan:broadcast give it: per live recipient
    the receipt (the message without its body, as send_direct_message's) or the refusal (as a tool
    error's ``error``), the agents skipped with their status, and the counts."""
    receipts: list[dict[str, Any]] = []
    for outcome in done.outcomes:
        if outcome.sent is not None:
            receipts.append({"recipient": outcome.recipient, "delivery": outcome.sent.status,
                             "created": outcome.sent.created,
                             "message": message_json(outcome.sent.message, with_body=False)})
        elif outcome.refused is not None:
            exc = outcome.refused
            receipts.append({"recipient": outcome.recipient, "error": {
                "code": exc.code, "context": list(exc.context), "message": exc.text, **exc.fields()}})
    return {"receipts": receipts, "sent": done.sent, "refused": done.refused,
            "skipped": [{"recipient": peer, "status": now} for peer, now in done.skipped]}
