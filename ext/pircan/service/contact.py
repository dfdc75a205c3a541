"""The contact handshake and agreements: request, accept, decline, revoke, list, policy, expiry.

Each decision is one transaction: the rule checks that need stored state
run inside it, next to the change, its per-recipient events and its audit
rows, so two racing requests cannot both pass a limit and nothing is ever
half-written. A refusal by a limit is audited too (in a write of its own).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable

from ircd.api import Conn

from ext.pircan import rules
from ext.pircan import store as db
from ext.pircan.ids import hexid, parse_id, ts
from ext.pircan.rules import DAY_MS, Limits
from ext.pircan.service.events import Events, audit_refusal, by_whom
from ext.pircan.service.refusals import Refused
from ext.pircan.service.schema import request_json
from ext.pircan.state import MINUTE_MS, Pircan
from ext.pircan.store import Agreement, Request

__all__ = [
    "RequestOutcome",
    "request_contact",
    "accept",
    "decline",
    "revoke",
    "contacts",
    "policy",
    "managed_accounts",
    "peer_of",
    "acts_for",
    "owns",
    "request_state",
    "agreement_state",
    "decider",
    "request_expires_at",
    "request_view",
    "no_agreement",
    "sweep",
    "PURPOSE_CHARS",
    "PENDING_NEXT_STEP",
]

PURPOSE_CHARS = 300
# the way out of NO_AGREEMENT while a request is pending: asking again would be PENDING_EXISTS
PENDING_NEXT_STEP = "Wait for the decision (INBOX WAIT; MCP: wait_for_messages, list_requests)"


@dataclass(frozen=True, slots=True)
class RequestOutcome:
    """What a contact request became: ``pending``, or ``accepted`` at once (auto-accept)."""

    outcome: str
    request: Request
    agreement: Agreement | None


async def owns(state: Pircan, owner: str, agent: str) -> bool:
    """Whether ``owner`` is the owner of the agent account ``agent``."""
    account: Any = await state.api.get_account(agent)
    return account is not None and account.owner == owner


async def acts_for(state: Pircan, actor: str, account: str) -> bool:
    """``actor`` may act for ``account``: itself, or its owner."""
    return actor == account or await owns(state, actor, account)


async def managed_account(state: Pircan, actor: str, name: str | None, not_allowed: str) -> str:
    """The folded account ``name`` that ``actor`` manages: itself (``name`` None, empty or ``*``),
    or an agent it owns. NO_SUCH_ACCOUNT, or NOT_ALLOWED with ``not_allowed`` as its text."""
    if name is None or name in ("", "*"):
        return actor
    account = state.api.casefold(name)
    if account == actor:
        return actor
    if state.api.account_kind(account) is None:
        raise Refused("NO_SUCH_ACCOUNT", name)
    if not await acts_for(state, actor, account):
        raise Refused("NOT_ALLOWED", name, text=not_allowed)
    return account


def peer_of(state: Pircan, actor: str, name: str) -> str:
    """The folded account ``name`` that ``actor`` addresses: NO_SUCH_ACCOUNT, or SELF_CONTACT for itself."""
    folded = state.api.casefold(name)
    if state.api.account_kind(folded) is None:
        raise Refused("NO_SUCH_ACCOUNT", name)
    if folded == actor:
        raise Refused("SELF_CONTACT", name)
    return folded


async def managed_accounts(state: Pircan, account: str) -> list[str]:
    """The account itself and, for an owner, its agents."""
    agents = await state.api.list_accounts(owner=account)
    return [account, *(a.folded for a in agents)]


def _scopes(value: str | Iterable[str]) -> tuple[str, ...] | None:
    text = value if isinstance(value, str) else ",".join(value)
    return rules.parse_scopes(text)


def _days(value: int | str) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if Limits.min_days <= value <= Limits.max_days else None
    return rules.parse_days(value)


def _scope_text(value: str | Iterable[str]) -> str:
    return value if isinstance(value, str) else ",".join(value)


# REQUEST ---------------------------------------------------------------------------


def _request_txn(conn: Conn, req: Request, policy: str,
                 agreement_id: int, events: Events, audit_id: int) -> tuple[str, Agreement | None, list]:
    """Runs on the database thread: ``events`` were made (with their ids) on the event loop."""
    now = req.created_at
    mine = db.requests_by(conn, req.requester, now - Limits.request_ttl_ms)
    pending_targets = [
        r.target for r in mine if r.state == "pending" and not rules.request_expired(r.created_at, now)
    ]
    code = rules.request_refusal(
        req.requester, req.target, now, pending_targets, [r.created_at for r in mine],
        db.last_decline(conn, req.requester, req.target),
    )
    if code is not None:
        raise Refused(code)
    detail = f"{hexid(req.id)} to {req.target} scopes={','.join(req.scopes)} days={req.days}"
    if policy == "deny":
        db.insert_request(conn, replace(req, state="denied", decided_at=now, decided_by=req.target))
        db.audit(conn, audit_id, now, req.requester, req.target, "contact.denied", detail)
        return "denied", None, []
    granted = rules.auto_accept_scopes(req.scopes) if policy == "auto-accept" else ()
    if granted:
        agreement = Agreement(agreement_id, req.id, req.requester, req.target, granted, now,
                              now + req.days * DAY_MS, None, None)
        db.insert_request(conn, replace(req, state="accepted", decided_at=now, decided_by=req.target,
                                        agreement_id=agreement_id))
        db.insert_agreement(conn, agreement)
        db.audit(conn, audit_id, now, req.requester, req.target, "contact.auto-accepted",
                 f"{detail} agreement={hexid(agreement_id)}")
        return "accepted", agreement, events.write(conn, now)
    db.insert_request(conn, req)
    db.audit(conn, audit_id, now, req.requester, req.target, "contact.request", detail)
    return "pending", None, events.write(conn, now)


async def request_contact(state: Pircan, actor: str, target_name: str, scopes: str | Iterable[str],
                          days: int | str, purpose: str) -> RequestOutcome:
    """Ask the agent ``target_name`` for contact. Refusals (in this order): NO_SUCH_ACCOUNT,
    SELF_CONTACT, NOT_ALLOWED (not an agent), INVALID_SCOPE, INVALID_DURATION, EMPTY (no purpose),
    then the limits PENDING_EXISTS, PENDING_LIMIT, RATE_LIMITED, COOLDOWN, and DENIED."""
    api = state.api
    target = api.casefold(target_name)
    kind = api.account_kind(target)
    if kind is None:
        raise Refused("NO_SUCH_ACCOUNT", target_name)
    if target == actor:
        audit_refusal(state, actor, target, "REQUEST", "SELF_CONTACT")
        raise Refused("SELF_CONTACT", target_name)
    if kind != "agent":
        raise Refused("NOT_ALLOWED", target_name, text="Contact requests go to agent accounts")
    granted = _scopes(scopes)
    if granted is None:
        raise Refused("INVALID_SCOPE", _scope_text(scopes))
    wanted_days = _days(days)
    if wanted_days is None:
        raise Refused("INVALID_DURATION", str(days))
    purpose = purpose.strip()[:PURPOSE_CHARS]
    if not purpose:
        raise Refused("EMPTY", target_name, text="A contact request needs a purpose")
    target_row: Any = await api.get_account(target)
    now = state.now_ms()
    req = Request(state.new_id(), actor, target, granted, wanted_days, purpose, "pending", now, None, None, None)
    policy_now = state.policies.get(target, "agent-decides")
    agreement_id = state.new_id()
    # the events each outcome queues, made here: ids come from the event loop's generator only
    events = Events(state)
    if policy_now == "auto-accept" and rules.auto_accept_scopes(granted):
        events.add(actor, "decision", req.id)
        events.add(target, "agreement", agreement_id)
    elif policy_now != "deny":
        events.add(target, "request", req.id)
        events.add(target_row.owner if target_row else None, "request", req.id)
    try:
        outcome, agreement, written = await state.database.write(
            _request_txn, req, policy_now, agreement_id, events, state.new_id(),
        )
    except Refused as exc:
        audit_refusal(state, actor, target, "REQUEST", exc.code, target_name)
        raise Refused(exc.code, target_name) from None
    events.committed(written, now)
    if outcome == "denied":
        raise Refused("DENIED", target_name)
    if agreement is not None:
        state.remember_agreement(agreement)
    return RequestOutcome(outcome, req, agreement)


# ACCEPT / DECLINE --------------------------------------------------------------------------


async def _decidable(state: Pircan, actor: str, request_id: str) -> Request:
    """The pending request ``actor`` may decide (as its target or the target's owner)."""
    ident = parse_id(request_id)
    req = await state.database.read(db.get_request, ident) if ident is not None else None
    if req is None:
        raise Refused("NO_SUCH_REQUEST", request_id)
    is_owner = req.target != actor and await owns(state, actor, req.target)
    if req.target != actor and not is_owner:
        if req.requester == actor or await owns(state, actor, req.requester):
            # the requester's side sees the request in CONTACT LIST, so it exists for them
            raise Refused("NOT_ALLOWED", request_id, text="Only the requested account (or its owner) decides")
        raise Refused("NO_SUCH_REQUEST", request_id)
    if not is_owner and state.policies.get(req.target) == "owner-decides":
        raise Refused("NOT_ALLOWED", request_id, text="Your policy is owner-decides: your owner decides")
    if req.state != "pending" or rules.request_expired(req.created_at, state.now_ms()):
        raise Refused("NOT_PENDING", request_id)
    return req


def _accept_txn(conn: Conn, req: Request, agreement: Agreement, actor: str, events: Events,
                audit_id: int, by: str) -> list:
    now = agreement.created_at
    if not db.decide_request(conn, req.id, "accepted", now, actor, agreement.id):
        raise Refused("NOT_PENDING")
    db.insert_agreement(conn, agreement)
    db.audit(conn, audit_id, now, actor, req.target, "contact.accept",
             f"{hexid(req.id)} from {req.requester} agreement={hexid(agreement.id)} "
             f"scopes={','.join(agreement.scopes)}" + by,
             peer=req.requester)
    return events.write(conn, now)


async def accept(state: Pircan, actor: str, request_id: str, scopes: str | Iterable[str] | None = None,
                 days: int | str | None = None, *, via: str = "irc") -> tuple[Request, Agreement]:
    """Accept a pending request, granting the requested scopes and days or fewer (never more);
    (the request as decided, the agreement)."""
    req = await _decidable(state, actor, request_id)
    granted = req.scopes
    if scopes is not None:
        if not _scope_text(scopes).strip():
            raise Refused("INVALID_SCOPE", text="Grant at least one scope, or decline the request")
        narrowed = _scopes(scopes)
        if narrowed is None or not rules.is_narrowing(req.scopes, narrowed):
            raise Refused("INVALID_SCOPE", _scope_text(scopes))
        granted = narrowed
    wanted = req.days
    if days is not None:
        shorter = _days(days)
        if shorter is None or shorter > req.days:
            raise Refused("INVALID_DURATION", str(days))
        wanted = shorter
    now = state.now_ms()
    agreement = Agreement(state.new_id(), req.id, req.requester, req.target, granted, now,
                          now + wanted * DAY_MS, None, None)
    events = Events(state)
    events.add(req.requester, "decision", req.id)
    if actor != req.target:
        events.add(req.target, "agreement", agreement.id)
    try:
        written = await state.database.write(_accept_txn, req, agreement, actor, events, state.new_id(),
                                             by_whom(actor, req.target, via))
    except Refused as exc:
        raise Refused(exc.code, request_id) from None
    state.remember_agreement(agreement)
    events.committed(written, now)
    return replace(req, state="accepted", decided_at=now, decided_by=actor, agreement_id=agreement.id), agreement


def _decline_txn(conn: Conn, req: Request, actor: str, now: int, events: Events, audit_id: int,
                 by: str) -> list:
    if not db.decide_request(conn, req.id, "declined", now, actor, None):
        raise Refused("NOT_PENDING")
    db.audit(conn, audit_id, now, actor, req.target, "contact.decline",
             f"{hexid(req.id)} from {req.requester}" + by, peer=req.requester)
    return events.write(conn, now)


async def decline(state: Pircan, actor: str, request_id: str, *, via: str = "irc") -> Request:
    req = await _decidable(state, actor, request_id)
    now = state.now_ms()
    events = Events(state)
    events.add(req.requester, "decision", req.id)
    try:
        written = await state.database.write(_decline_txn, req, actor, now, events, state.new_id(),
                                             by_whom(actor, req.target, via))
    except Refused as exc:
        raise Refused(exc.code, request_id) from None
    events.committed(written, now)
    return replace(req, state="declined", decided_at=now, decided_by=actor)


# REVOKE --------------------------------------------------------------------------------


def _revoke_txn(conn: Conn, agreement_id: int, actor: str, now: int, events: Events,
                audit_id: int, subject: str, detail: str, peer: str) -> list:
    if not db.revoke_agreement(conn, agreement_id, now, actor):
        raise Refused("NO_SUCH_AGREEMENT")
    db.audit(conn, audit_id, now, actor, subject, "agreement.revoke", detail, peer=peer)
    return events.write(conn, now)


async def revoke(state: Pircan, actor: str, agreement_id: str, *, via: str = "irc") -> tuple[Agreement, str]:
    """End an active agreement at once, for every transport; (agreement, the other party)."""
    ident = parse_id(agreement_id)
    agreement = state.agreements.get(ident) if ident is not None else None
    now = state.now_ms()
    if agreement is None or not agreement.active(now):
        raise Refused("NO_SUCH_AGREEMENT", agreement_id)
    parties = (agreement.requester, agreement.target)
    if actor in parties:
        subject = actor
    else:
        subject = ""
        for party in parties:  # an owner acting for its agent
            if await owns(state, actor, party):
                subject = party
                break
        if not subject:
            raise Refused("NO_SUCH_AGREEMENT", agreement_id)
    other = agreement.other(subject)
    events = Events(state)
    events.add(other, "agreement", agreement.id)
    if actor != subject:
        events.add(subject, "agreement", agreement.id)
    detail = f"{hexid(agreement.id)} with {other}" + by_whom(actor, subject, via)
    # effective at once: no SEND or agreement-checked PRIVMSG passes from here on
    state.forget_agreement(agreement.id)
    try:
        written = await state.database.write(_revoke_txn, agreement.id, actor, now, events, state.new_id(),
                                             subject, detail, other)
    except Refused as exc:
        raise Refused(exc.code, agreement_id) from None
    except Exception:
        state.remember_agreement(agreement)  # not revoked after all
        raise
    events.committed(written, now)
    state.agreement_ended(agreement, now)
    return agreement, other


# LIST ------------------------------------------------------------------------------------


def decider(state: Pircan, target: str) -> str:
    """Who decides a pending request to ``target`` now: ``owner`` (policy owner-decides) or ``agent``."""
    return "owner" if state.policies.get(target) == "owner-decides" else "agent"


def request_expires_at(req: Request) -> int:
    """When a request still pending then expires (7 days after it was made)."""
    return req.created_at + Limits.request_ttl_ms


def request_view(state: Pircan, req: Request, now_state: str | None = None) -> dict[str, Any]:
    """The JSON of a request for MCP and A2A, its decider read from the target's policy now."""
    return request_json(req, now_state, policy=state.policies.get(req.target))


def _pending_from(conn: Conn, requester: str, target: str, since: int) -> Request | None:
    row = conn.execute(
        f"SELECT {db._REQ} FROM pircan_requests WHERE requester = ? AND target = ? AND state = 'pending' "
        "AND created_at > ? ORDER BY created_at DESC LIMIT 1", (requester, target, since),
    ).fetchone()
    return db._request(row)


async def no_agreement(state: Pircan, actor: str, target: str, code: str, *context: str,
                       text: str | None = None) -> Refused:
    """The refusal of an operation that needs an agreement ``actor`` lacks toward ``target``
    (``code``: NO_AGREEMENT or SCOPE_MISSING). While a request of ``actor``'s to ``target`` is
    pending, it says so: who decides it (the agent or its owner) and when it expires."""
    if code == "NO_AGREEMENT":
        now = state.now_ms()
        req = await state.database.read(_pending_from, actor, target, now - Limits.request_ttl_ms)
        if req is not None:
            who = "its owner decides" if decider(state, target) == "owner" else "the agent decides"
            return Refused(code, *context,
                           text=f"Your contact request {hexid(req.id)} is pending: {who}, until "
                                f"{ts(request_expires_at(req))}",
                           next_step=PENDING_NEXT_STEP)
    return Refused(code, *context, text=text)


def request_state(req: Request, now: int) -> str:
    if req.state == "pending" and rules.request_expired(req.created_at, now):
        return "expired"
    return req.state


def agreement_state(agr: Agreement, now: int) -> str:
    if agr.revoked_at is not None:
        return "revoked"
    return "active" if now < agr.expires_at else "expired"


async def contacts(state: Pircan, actor: str, which: str = "all"
                   ) -> tuple[list[tuple[Request, str]], list[tuple[Agreement, str]]]:
    """The requests and agreements of ``actor`` and of the agents it owns, each with its state now.
    ``which``: all, requests or agreements."""
    if which not in ("all", "requests", "agreements"):
        raise Refused("UNKNOWN_SUBCOMMAND", which, text="Syntax: CONTACT LIST [requests|agreements]")
    accounts = await managed_accounts(state, actor)
    now = state.now_ms()
    requests: list[tuple[Request, str]] = []
    agreements: list[tuple[Agreement, str]] = []
    if which in ("all", "requests"):
        requests = [(r, request_state(r, now)) for r in await state.database.read(db.requests_for, accounts)]
    if which in ("all", "agreements"):
        agreements = [(a, agreement_state(a, now)) for a in await state.database.read(db.agreements_for, accounts)]
    return requests, agreements


# POLICY ----------------------------------------------------------------------------------


def _policy_txn(conn: Conn, account: str, policy: str, actor: str, now: int, audit_id: int,
                by: str) -> None:
    db.set_policy(conn, account, policy)
    db.audit(conn, audit_id, now, actor, account, "policy.set", policy + by)


async def policy(state: Pircan, actor: str, target_name: str | None = None, new_policy: str | None = None,
                 *, via: str = "irc") -> tuple[str, str]:
    """Show (``new_policy`` None) or set the contact policy of ``actor`` or of an agent it owns;
    (account, policy now)."""
    if new_policy is not None:
        if new_policy.lower() not in rules.POLICIES:
            raise Refused("INVALID_POLICY", new_policy)
        new_policy = new_policy.lower()
    target = await managed_account(state, actor, target_name,
                                   "Only an agent and its owner see or set its policy")
    if new_policy is not None:
        await state.database.write(_policy_txn, target, new_policy, actor, state.now_ms(), state.new_id(),
                                   by_whom(actor, target, via))
        state.policies[target] = new_policy
        if state.cluster is not None:
            state.cluster.policy_set(target, new_policy)
    return target, state.policies.get(target, "agent-decides")


# expiry -----------------------------------------------------------------------------------


def _expire_txn(conn: Conn, now: int, requests: list[tuple[Request, int, int]],
                agreements: list[tuple[Agreement, int, list[tuple[str, int]]]]) -> list[tuple[int, str, str]]:
    written: list[tuple[int, str, str]] = []
    for req, audit_id, event_id in requests:
        if not db.expire_request(conn, req.id):
            continue  # decided meanwhile
        db.audit(conn, audit_id, now, "server", req.target, "contact.expire", f"{hexid(req.id)} from {req.requester}",
                 peer=req.requester)
        if db.queue_event(conn, event_id, req.requester, "decision", req.id, now):
            written.append((event_id, req.requester, "decision"))
    for agr, audit_id, parties in agreements:
        if not db.note_expired(conn, agr.id, now):
            continue  # revoked meanwhile, or recorded already
        late = f" ended {ts(agr.expires_at)}" if now - agr.expires_at >= MINUTE_MS * 2 else ""
        db.audit(conn, audit_id, now, "server", agr.requester, "agreement.expire",
                 f"{hexid(agr.id)} with {agr.target}{late}", peer=agr.target)
        for party, event_id in parties:
            if db.queue_event(conn, event_id, party, "agreement", agr.id, now):
                written.append((event_id, party, "agreement"))
    return written


async def sweep(state: Pircan) -> None:
    """Expire requests older than 7 days and agreements past their end (once a minute)."""
    now = state.now_ms()
    state.prune_windows(now)
    state.flush_refusal_summaries(now)
    ended = [a for a in list(state.agreements.values()) if not a.active(now)]
    for agr in ended:
        state.forget_agreement(agr.id)
    stale = await state.database.read(db.stale_requests, now - Limits.request_ttl_ms)
    if not stale and not ended:
        return
    requests = [(req, state.new_id(), state.new_id()) for req in stale]
    agreements = [
        (agr, state.new_id(), [(agr.requester, state.new_id()), (agr.target, state.new_id())]) for agr in ended
    ]
    written = await state.database.write(_expire_txn, now, requests, agreements)
    for event_id, recipient, kind in written:
        state.event_committed(recipient, kind, event_id, now)
    for agr in ended:
        state.agreement_ended(agr, now)
