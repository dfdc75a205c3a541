"""The roster (agents an account owns or has agreements with, or every agent), agent creation, the audit trail."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from ircd.api import AccountExists, TooManyAgents

from ext.pircan import store as db
from ext.pircan.ids import ts
from ext.pircan.service.contact import acts_for
from ext.pircan.service.events import by_whom
from ext.pircan.service.profile import profiles
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store import AuditEntry

__all__ = ["RosterEntry", "roster", "status", "STATUSES", "entry_json", "create_agent", "audit_trail",
           "AUDIT_MAX"]

AUDIT_MAX = 500


@dataclass(frozen=True, slots=True)
class RosterEntry:
    name: str
    status: str  # running, idle, parked or offline (status())
    unread: int
    last_active: int | None
    relation: str  # owned, agreement, or none (AGENTS ALL)
    owner: str | None
    kind: str = "agent"  # agent or person
    display_name: str = ""
    skills: tuple[tuple[str, str], ...] = ()  # (skill, description)


STATUSES = ("running", "idle", "parked", "offline")


def status(state: Pircan, account: str) -> str:
    """Where ``account`` is, as the roster says it:

    * ``running``: connected (IRC, or an MCP or A2A session) and busy: no wait of its is open;
    * ``idle``: connected and waiting (an open INBOX WAIT, wait_for_messages or pircan:inbox wait),
      or every IRC connection of it is marked AWAY;
    * ``parked``: not connected, but a message will wake it: the agent host may start it, or its
      events are pushed to a webhook or an A2A endpoint;
    * ``offline``: none of these; a message waits in its inbox until it comes.
    """
    clients = state.api.clients_for_account(account)
    if clients or account in state.elsewhere:
        if any(not w.done for w in state.waiters.get(account, ())):
            return "idle"
        if clients and account not in state.elsewhere and all(c.away is not None for c in clients):
            return "idle"
        return "running"
    if state.wakeable(account) or state.pushed(account):
        return "parked"
    return "offline"


async def roster(state: Pircan, actor: str, everyone: bool = False) -> list[RosterEntry]:
    """The agents ``actor`` owns or has an active agreement with (every other account with
    ``everyone``, persons included), by name, each with its kind, display name and skills.
    unread: for one's own agents, their unread messages; for others, theirs to ``actor``."""
    now = state.now_ms()
    rows: dict[str, tuple[str, str | None, str]] = {}  # account -> (relation, owner, kind)
    for agent in await state.api.list_accounts(owner=actor):
        rows[agent.folded] = ("owned", actor, agent.kind)
    peers = {a.other(actor) for a in state.agreements.values() if actor in (a.requester, a.target) and a.active(now)}
    for peer in sorted(peers):
        if peer not in rows and state.api.account_kind(peer) == "agent":
            row: Any = await state.api.get_account(peer)
            rows[peer] = ("agreement", row.owner if row is not None else None, "agent")
    if everyone:
        for account in await state.api.list_accounts():
            if account.folded not in rows and account.folded != actor:
                rows[account.folded] = ("none", account.owner, account.kind)
    public = await profiles(state, list(rows))
    my_unread = await state.database.read(db.unread_counts, actor)
    entries = []
    for agent, (relation, owner, kind) in sorted(rows.items()):
        if relation == "owned":
            unread = sum((await state.database.read(db.unread_counts, agent)).values())
        else:
            unread = my_unread.get(agent, 0)
        last = state.last_active.get(agent) or await state.database.read(db.last_activity, agent)
        profile = public[agent]
        entries.append(RosterEntry(agent, status(state, agent), unread, last, relation, owner, kind,
                                   profile.display_name, tuple(profile.skills)))
    return entries


def entry_json(entry: RosterEntry) -> dict[str, Any]:
    """A roster entry as MCP's list_agents and A2A's pircan:agents give it."""
    return {"name": entry.name, "kind": entry.kind, "display_name": entry.display_name, "owner": entry.owner,
            "status": entry.status, "relation": entry.relation,
            "skills": [{"name": s, "description": d} for s, d in entry.skills],
            "unread": entry.unread,
            "last_active": None if entry.last_active is None else ts(entry.last_active)}


async def create_agent(state: Pircan, actor: str, actor_kind: str | None, name: str,
                       *, via: str = "irc") -> tuple[str, str]:
    """A person creates an agent it owns; (the agent's name as created, its password, shown once)."""
    if actor_kind != "person":
        raise Refused("NOT_ALLOWED", name, text="Only person accounts own agents")
    if not state.api.valid_account_name(name):
        raise Refused("INVALID_NAME", name)
    password = secrets.token_urlsafe(18)
    try:
        agent: Any = await state.api.create_account(name, password, kind="agent", owner=actor)
    except AccountExists:
        raise Refused("ACCOUNT_EXISTS", name) from None
    except TooManyAgents as exc:
        raise Refused("AGENT_LIMIT", name, text=f"You own {exc.limit} agent{'s' if exc.limit != 1 else ''}, as many as this network allows "
                      "(accounts.agents_per_owner)", next_step="Delete one you no longer need first (the portal's "
                      "agent page)") from None
    await state.database.write(db.audit, state.new_id(), state.now_ms(), actor, agent.folded, "agent.create",
                               by_whom(actor, agent.folded, via).strip())
    return agent.name, password


async def audit_trail(state: Pircan, actor: str, target_name: str | None = None, limit: int = 50,
                      before: int | None = None) -> tuple[str, list[AuditEntry]]:
    """The newest ``limit`` audit entries of ``actor`` or of an agent it owns, oldest first."""
    target = actor if target_name is None else state.api.casefold(target_name)
    if target != actor and not await acts_for(state, actor, target):
        raise Refused("NOT_ALLOWED", target, text="You see your own trail and your agents' trails")
    row: Any = await state.api.get_account(target)
    since = row.created_at if row is not None else 0
    entries = await state.database.read(db.audit_trail, [target], max(1, min(limit, AUDIT_MAX)), before, since)
    entries.reverse()
    return target, entries
