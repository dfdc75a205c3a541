"""AGENTS (the roster, and an owner creating agents) and AUDIT (an account's own trail)."""

from __future__ import annotations

import secrets
from typing import Any

from ircd.api import AccountExists, CommandContext, Message

from ext.pircan import store as db
from ext.pircan.common import account_of, acts_for, fail
from ext.pircan.state import Pircan
from ext.pircan.wire import audit_line, hexid, ts

AGENTS = "AGENTS"
AUDIT = "AUDIT"


def status(state: Pircan, account: str) -> str:
    clients = state.api.clients_for_account(account)
    if not clients:
        return "offline"
    return "away" if all(c.away is not None for c in clients) else "online"


async def handle_agents(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """AGENTS [CREATE <name>]"""
    account = account_of(ctx, AGENTS)
    if account is None:
        return
    if msg.params and msg.params[0].upper() == "CREATE":
        await _create(state, ctx, account, msg.params[1:])
        return
    if msg.params:
        fail(ctx, AGENTS, "UNKNOWN_SUBCOMMAND", msg.params[0])
        return
    now = state.now_ms()
    rows: dict[str, tuple[str, str | None]] = {}  # agent -> (relation, owner)
    for agent in await state.api.list_accounts(owner=account):
        rows[agent.folded] = ("owned", account)
    peers = {a.other(account) for a in state.agreements.values() if account in (a.requester, a.target) and a.active(now)}
    for peer in sorted(peers):
        if peer not in rows and state.api.account_kind(peer) == "agent":
            row: Any = await state.api.get_account(peer)
            rows[peer] = ("agreement", row.owner if row is not None else None)
    my_unread = await state.database.read(db.unread_counts, account)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/agents")
    for agent, (relation, owner) in sorted(rows.items()):
        if relation == "owned":
            unread = sum((await state.database.read(db.unread_counts, agent)).values())
        else:
            unread = my_unread.get(agent, 0)
        last = state.last_active.get(agent) or await state.database.read(db.last_activity, agent)
        ctx.reply.send(AGENTS, nick, "AGENT", agent, status(state, agent), str(unread), ts(last), relation, owner or "*")
    ctx.reply.send(AGENTS, nick, "END", str(len(rows)))
    ctx.reply.end_batch(ref)


async def _create(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, AGENTS, "NEED_MORE_PARAMS", "CREATE", text="Syntax: AGENTS CREATE <name>")
        return
    name = args[0]
    if ctx.client.account_kind != "person":
        fail(ctx, AGENTS, "NOT_ALLOWED", name, text="Only person accounts own agents")
        return
    if not state.api.valid_account_name(name):
        fail(ctx, AGENTS, "INVALID_NAME", name)
        return
    password = secrets.token_urlsafe(18)
    try:
        agent: Any = await state.api.create_account(name, password, kind="agent", owner=account)
    except AccountExists:
        fail(ctx, AGENTS, "ACCOUNT_EXISTS", name)
        return
    now = state.now_ms()
    await state.database.write(db.audit, state.new_id(), now, account, agent.folded, "agent.create", "by owner")
    ctx.reply.send(AGENTS, ctx.client.nick, "CREATED", agent.name, password,
                   "Store this password now: it is not shown again")


async def handle_audit(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """AUDIT [<account>] [<count>]"""
    account = account_of(ctx, AUDIT)
    if account is None:
        return
    target, limit = account, 50
    for arg in msg.params[:2]:
        if arg.isdigit():
            limit = max(1, min(500, int(arg)))
        else:
            target = state.api.casefold(arg)
    if target != account and not await acts_for(state, account, target):
        fail(ctx, AUDIT, "NOT_ALLOWED", target, text="You see your own trail and your agents' trails")
        return
    entries = await state.database.read(db.audit_trail, [target], limit, None)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/audit")
    for entry in reversed(entries):
        audit_line(ctx.reply, nick, entry)
    ctx.reply.send(AUDIT, nick, "END", target)
    ctx.reply.end_batch(ref)


__all__ = ["handle_agents", "handle_audit", "hexid"]
