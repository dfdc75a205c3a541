"""CONTACT: the handshake (REQUEST, ACCEPT, DECLINE), REVOKE, LIST and POLICY.

Each decision is one transaction: the rule checks that need stored state
run inside it, next to the change, its per-recipient events and its audit
rows, so two racing requests cannot both pass a limit and nothing is ever
half-written. A refusal by a limit is audited too (in its own write).
"""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

from ircd.api import CommandContext, Message

from ext.pircan import rules
from ext.pircan import store as db
from ext.pircan.common import acts_for, account_of, fail, owns, parse_hex_id
from ext.pircan.rules import DAY_MS, Limits
from ext.pircan.state import Pircan, PircanError
from ext.pircan.store import Agreement, Request
from ext.pircan.wire import agreement_line, hexid, request_line, ts

log = logging.getLogger("pircd.pircan")

VERB = "CONTACT"
# Refusals that are "limit refusals" (audited).
LIMIT_CODES = {"PENDING_EXISTS", "PENDING_LIMIT", "RATE_LIMITED", "COOLDOWN", "SELF_CONTACT"}


class Events:
    """Events to queue in a transaction; ids are made on the event loop beforehand."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.items: list[tuple[int, str, str, int]] = []  # (event id, recipient, type, ref)

    def add(self, recipient: str | None, kind: str, ref: int) -> None:
        if recipient is not None and all(r != recipient or k != kind for _, r, k, _ in self.items):
            self.items.append((self.state.new_id(), recipient, kind, ref))

    def write(self, conn: sqlite3.Connection, at: int) -> list[tuple[int, str, str, int]]:
        return [item for item in self.items if db.queue_event(conn, item[0], item[1], item[2], item[3], at)]

    def committed(self, written: list[tuple[int, str, str, int]], at: int) -> None:
        for event_id, recipient, kind, _ in written:
            self.state.event_committed(recipient, kind, event_id, at)


def audit_refusal(state: Pircan, actor: str, subject: str, verb: str, code: str, detail: str = "") -> None:
    now = state.now_ms()
    state.database.write_nowait(
        db.audit, state.new_id(), now, actor, subject, "refused", f"{verb} {code} {detail}".strip()
    )


async def handle_contact(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """CONTACT <REQUEST|ACCEPT|DECLINE|REVOKE|LIST|POLICY> ..."""
    account = account_of(ctx, VERB)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    args = msg.params[1:]
    handler = _SUBCOMMANDS.get(sub)
    if handler is None:
        fail(ctx, VERB, "UNKNOWN_SUBCOMMAND", sub or "*")
        return
    await handler(state, ctx, account, args)


# REQUEST ---------------------------------------------------------------------------


def _request_txn(conn: sqlite3.Connection, req: Request, policy: str,
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
        raise PircanError(code)
    detail = f"{hexid(req.id)} to {req.target} scopes={','.join(req.scopes)} days={req.days}"
    if policy == "deny":
        db.insert_request(conn, _with(req, state="denied", decided_at=now, decided_by=req.target))
        db.audit(conn, audit_id, now, req.requester, req.target, "contact.denied", detail)
        return "denied", None, []
    granted = rules.auto_accept_scopes(req.scopes) if policy == "auto-accept" else ()
    if granted:
        agreement = Agreement(agreement_id, req.id, req.requester, req.target, granted, now,
                              now + req.days * DAY_MS, None, None)
        db.insert_request(conn, _with(req, state="accepted", decided_at=now, decided_by=req.target,
                                      agreement_id=agreement_id))
        db.insert_agreement(conn, agreement)
        db.audit(conn, audit_id, now, req.requester, req.target, "contact.auto-accepted",
                 f"{detail} agreement={hexid(agreement_id)}")
        return "accepted", agreement, events.write(conn, now)
    db.insert_request(conn, req)
    db.audit(conn, audit_id, now, req.requester, req.target, "contact.request", detail)
    return "pending", None, events.write(conn, now)


def _with(req: Request, **changes: Any) -> Request:
    data = {field: getattr(req, field) for field in Request.__dataclass_fields__}
    data.update(changes)
    return Request(**data)


async def _request(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if len(args) < 4 or not args[3].strip():
        fail(ctx, VERB, "NEED_MORE_PARAMS", "REQUEST",
             text="Syntax: CONTACT REQUEST <account> <scope>[,<scope>...] <days> :<purpose>")
        return
    api = state.api
    target = api.casefold(args[0])
    scopes = rules.parse_scopes(args[1])
    days = rules.parse_days(args[2])
    purpose = args[3].strip()[:300]
    kind = api.account_kind(target)
    if kind is None:
        fail(ctx, VERB, "NO_SUCH_ACCOUNT", args[0])
        return
    if target == account:
        audit_refusal(state, account, target, "REQUEST", "SELF_CONTACT")
        fail(ctx, VERB, "SELF_CONTACT", args[0])
        return
    if kind != "agent":
        fail(ctx, VERB, "NOT_ALLOWED", args[0], text="Contact requests go to agent accounts")
        return
    if scopes is None:
        fail(ctx, VERB, "INVALID_SCOPE", args[1])
        return
    if days is None:
        fail(ctx, VERB, "INVALID_DURATION", args[2])
        return
    target_row: Any = await api.get_account(target)
    now = state.now_ms()
    req = Request(state.new_id(), account, target, scopes, days, purpose, "pending", now, None, None, None)
    policy = state.policies.get(target, "agent-decides")
    agreement_id = state.new_id()
    # the events each outcome queues, made here: ids come from the event loop's generator only
    events = Events(state)
    if policy == "auto-accept" and rules.auto_accept_scopes(scopes):
        events.add(account, "decision", req.id)
        events.add(target, "agreement", agreement_id)
    elif policy != "deny":
        events.add(target, "request", req.id)
        events.add(target_row.owner if target_row else None, "request", req.id)
    try:
        outcome, agreement, written = await state.database.write(
            _request_txn, req, policy, agreement_id, events, state.new_id(),
        )
    except PircanError as exc:
        audit_refusal(state, account, target, "REQUEST", exc.code, args[0])
        fail(ctx, VERB, exc.code, args[0])
        return
    events.committed(written, now)
    nick = ctx.client.nick
    if outcome == "denied":
        fail(ctx, VERB, "DENIED", args[0])
    elif agreement is not None:
        state.remember_agreement(agreement)
        ctx.reply.send(VERB, nick, "ACCEPTED", hexid(req.id), hexid(agreement.id), target,
                       ",".join(agreement.scopes), ts(agreement.expires_at))
    else:
        ctx.reply.send(VERB, nick, "REQUESTED", hexid(req.id), target, "pending")


# ACCEPT / DECLINE --------------------------------------------------------------------------


async def _decidable(state: Pircan, ctx: CommandContext, account: str, sub: str, ident_text: str) -> Request | None:
    """The pending request ``account`` may decide, or None after a FAIL."""
    ident = parse_hex_id(ident_text)
    req = await state.database.read(db.get_request, ident) if ident is not None else None
    if req is None:
        fail(ctx, VERB, "NO_SUCH_REQUEST", ident_text)
        return None
    is_owner = req.target != account and await owns(state, account, req.target)
    if req.target != account and not is_owner:
        if req.requester == account or await owns(state, account, req.requester):
            # the requester's side sees the request in CONTACT LIST, so it exists for them
            fail(ctx, VERB, "NOT_ALLOWED", ident_text, text="Only the requested account (or its owner) decides")
        else:
            fail(ctx, VERB, "NO_SUCH_REQUEST", ident_text)
        return None
    if not is_owner and state.policies.get(req.target) == "owner-decides":
        fail(ctx, VERB, "NOT_ALLOWED", ident_text, text="Your policy is owner-decides: your owner decides")
        return None
    if req.state != "pending" or rules.request_expired(req.created_at, state.now_ms()):
        fail(ctx, VERB, "NOT_PENDING", ident_text)
        return None
    return req


def _accept_txn(conn: sqlite3.Connection, req: Request, agreement: Agreement, actor: str, events: Events,
                audit_id: int) -> list:
    now = agreement.created_at
    if not db.decide_request(conn, req.id, "accepted", now, actor, agreement.id):
        raise PircanError("NOT_PENDING")
    db.insert_agreement(conn, agreement)
    db.audit(conn, audit_id, now, actor, req.target, "contact.accept",
             f"{hexid(req.id)} from {req.requester} agreement={hexid(agreement.id)} "
             f"scopes={','.join(agreement.scopes)}" + (" by owner" if actor != req.target else ""),
             peer=req.requester)
    return events.write(conn, now)


async def _accept(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "ACCEPT", text="Syntax: CONTACT ACCEPT <request-id> [<scopes> [<days>]]")
        return
    req = await _decidable(state, ctx, account, "ACCEPT", args[0])
    if req is None:
        return
    scopes = req.scopes
    if len(args) > 1:
        granted = rules.parse_scopes(args[1])
        if granted is None or not rules.is_narrowing(req.scopes, granted):
            fail(ctx, VERB, "INVALID_SCOPE", args[1])
            return
        scopes = granted
    days = req.days
    if len(args) > 2:
        wanted = rules.parse_days(args[2])
        if wanted is None or wanted > req.days:
            fail(ctx, VERB, "INVALID_DURATION", args[2])
            return
        days = wanted
    now = state.now_ms()
    agreement = Agreement(state.new_id(), req.id, req.requester, req.target, scopes, now, now + days * DAY_MS,
                          None, None)
    events = Events(state)
    events.add(req.requester, "decision", req.id)
    if account != req.target:
        events.add(req.target, "agreement", agreement.id)
    try:
        written = await state.database.write(_accept_txn, req, agreement, account, events, state.new_id())
    except PircanError as exc:
        fail(ctx, VERB, exc.code, args[0])
        return
    state.remember_agreement(agreement)
    events.committed(written, now)
    ctx.reply.send(VERB, ctx.client.nick, "ACCEPTED", hexid(req.id), hexid(agreement.id), req.requester,
                   ",".join(scopes), ts(agreement.expires_at))


def _decline_txn(conn: sqlite3.Connection, req: Request, actor: str, now: int, events: Events, audit_id: int) -> list:
    if not db.decide_request(conn, req.id, "declined", now, actor, None):
        raise PircanError("NOT_PENDING")
    db.audit(conn, audit_id, now, actor, req.target, "contact.decline",
             f"{hexid(req.id)} from {req.requester}" + (" by owner" if actor != req.target else ""),
             peer=req.requester)
    return events.write(conn, now)


async def _decline(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "DECLINE", text="Syntax: CONTACT DECLINE <request-id>")
        return
    req = await _decidable(state, ctx, account, "DECLINE", args[0])
    if req is None:
        return
    now = state.now_ms()
    events = Events(state)
    events.add(req.requester, "decision", req.id)
    try:
        written = await state.database.write(_decline_txn, req, account, now, events, state.new_id())
    except PircanError as exc:
        fail(ctx, VERB, exc.code, args[0])
        return
    events.committed(written, now)
    ctx.reply.send(VERB, ctx.client.nick, "DECLINED", hexid(req.id), req.requester)


# REVOKE --------------------------------------------------------------------------------


def _revoke_txn(conn: sqlite3.Connection, agreement_id: int, actor: str, now: int, events: Events,
                audit_id: int, subject: str, detail: str, peer: str) -> list:
    if not db.revoke_agreement(conn, agreement_id, now, actor):
        raise PircanError("NO_SUCH_AGREEMENT")
    db.audit(conn, audit_id, now, actor, subject, "agreement.revoke", detail, peer=peer)
    return events.write(conn, now)


async def _revoke(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "REVOKE", text="Syntax: CONTACT REVOKE <agreement-id>")
        return
    ident = parse_hex_id(args[0])
    agreement = state.agreements.get(ident) if ident is not None else None
    now = state.now_ms()
    if agreement is None or not agreement.active(now):
        fail(ctx, VERB, "NO_SUCH_AGREEMENT", args[0])
        return
    parties = (agreement.requester, agreement.target)
    if account in parties:
        subject = account
    else:
        subject = ""
        for party in parties:  # an owner acting for its agent
            if await owns(state, account, party):
                subject = party
                break
        if not subject:
            fail(ctx, VERB, "NO_SUCH_AGREEMENT", args[0])
            return
    other = agreement.other(subject)
    events = Events(state)
    events.add(other, "agreement", agreement.id)
    if account != subject:
        events.add(subject, "agreement", agreement.id)
    detail = f"{hexid(agreement.id)} with {other}" + (" by owner" if account != subject else "")
    # effective at once: no SEND or agreement-checked PRIVMSG passes from here on
    state.forget_agreement(agreement.id)
    try:
        written = await state.database.write(_revoke_txn, agreement.id, account, now, events, state.new_id(),
                                             subject, detail, other)
    except PircanError as exc:
        fail(ctx, VERB, exc.code, args[0])
        return
    except Exception:
        state.remember_agreement(agreement)  # not revoked after all
        raise
    events.committed(written, now)
    ctx.reply.send(VERB, ctx.client.nick, "REVOKED", hexid(agreement.id), other)


# LIST ------------------------------------------------------------------------------------


async def managed_accounts(state: Pircan, account: str) -> list[str]:
    """The account itself and, for an owner, its agents."""
    agents = await state.api.list_accounts(owner=account)
    return [account, *(a.folded for a in agents)]


def request_state(req: Request, now: int) -> str:
    if req.state == "pending" and rules.request_expired(req.created_at, now):
        return "expired"
    return req.state


def agreement_state(agr: Agreement, now: int) -> str:
    if agr.revoked_at is not None:
        return "revoked"
    return "active" if now < agr.expires_at else "expired"


async def _list(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    which = args[0].lower() if args else "all"
    if which not in ("all", "requests", "agreements"):
        fail(ctx, VERB, "UNKNOWN_SUBCOMMAND", args[0], text="Syntax: CONTACT LIST [requests|agreements]")
        return
    accounts = await managed_accounts(state, account)
    now = state.now_ms()
    nick = ctx.client.nick
    reply = ctx.reply
    ref = reply.start_batch("pircan/contacts")
    if which in ("all", "requests"):
        for req in await state.database.read(db.requests_for, accounts):
            request_line(reply, nick, req, request_state(req, now))
    if which in ("all", "agreements"):
        for agr in await state.database.read(db.agreements_for, accounts):
            agreement_line(reply, nick, agr, agreement_state(agr, now))
    reply.send(VERB, nick, "END")
    reply.end_batch(ref)


# POLICY ----------------------------------------------------------------------------------


def _policy_txn(conn: sqlite3.Connection, account: str, policy: str, actor: str, now: int, audit_id: int) -> None:
    db.set_policy(conn, account, policy)
    db.audit(conn, audit_id, now, actor, account, "policy.set", policy + (" by owner" if actor != account else ""))


async def _policy(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    target, policy = account, None
    if len(args) == 1:
        if args[0].lower() in rules.POLICIES:
            policy = args[0].lower()
        else:
            target = state.api.casefold(args[0])
    elif len(args) >= 2:
        target, policy = state.api.casefold(args[0]), args[1].lower()
        if policy not in rules.POLICIES:
            fail(ctx, VERB, "INVALID_POLICY", args[1])
            return
    if target != account:
        if state.api.account_kind(target) is None:
            fail(ctx, VERB, "NO_SUCH_ACCOUNT", target)
            return
        if not await acts_for(state, account, target):
            fail(ctx, VERB, "NOT_ALLOWED", target, text="Only an agent and its owner see or set its policy")
            return
    if policy is not None:
        await state.database.write(_policy_txn, target, policy, account, state.now_ms(), state.new_id())
        state.policies[target] = policy
    ctx.reply.send(VERB, ctx.client.nick, "POLICY", target, state.policies.get(target, "agent-decides"))


_SUBCOMMANDS = {
    "REQUEST": _request,
    "ACCEPT": _accept,
    "DECLINE": _decline,
    "REVOKE": _revoke,
    "LIST": _list,
    "POLICY": _policy,
}


# expiry -----------------------------------------------------------------------------------


def _expire_txn(conn: sqlite3.Connection, now: int, requests: list[tuple[Request, int, int]],
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
        db.audit(conn, audit_id, now, "server", agr.requester, "agreement.expire", f"{hexid(agr.id)} with {agr.target}",
                 peer=agr.target)
        for party, event_id in parties:
            if db.queue_event(conn, event_id, party, "agreement", agr.id, now):
                written.append((event_id, party, "agreement"))
    return written


async def sweep(state: Pircan) -> None:
    """Expire requests older than 7 days and agreements past their end (once a minute)."""
    now = state.now_ms()
    state.prune_windows(now)
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
