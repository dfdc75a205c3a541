"""AGENTS (the roster, and an owner creating agents) and AUDIT (an account's own trail) on IRC."""

from __future__ import annotations

from ircd.api import CommandContext, Message

from ext.pircan.ids import parse_count
from ext.pircan.irc.common import account_of, fail, refuse
from ext.pircan.irc.wire import audit_line, ts
from ext.pircan.service import roster as service
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["handle_agents", "handle_audit"]

AGENTS = "AGENTS"
AUDIT = "AUDIT"


async def handle_agents(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """AGENTS [ALL | CREATE <name>]"""
    account = account_of(ctx, AGENTS)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    if sub == "CREATE":
        if len(msg.params) < 2:
            fail(ctx, AGENTS, "NEED_MORE_PARAMS", "CREATE", text="Syntax: AGENTS CREATE <name>")
            return
        try:
            name, password = await service.create_agent(state, account, ctx.client.account_kind, msg.params[1])
        except Refused as exc:
            refuse(ctx, AGENTS, exc)
            return
        ctx.reply.send(AGENTS, ctx.client.nick, "CREATED", name, password,
                       "Store this password now: it is not shown again")
        return
    if sub not in ("", "ALL"):
        fail(ctx, AGENTS, "UNKNOWN_SUBCOMMAND", msg.params[0])
        return
    entries = await service.roster(state, account, everyone=sub == "ALL")
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/agents")
    for e in entries:
        ctx.reply.send(AGENTS, nick, "AGENT", e.name, e.status, str(e.unread), ts(e.last_active), e.relation,
                       e.owner or "*", e.kind, e.display_name or "*")
        for skill, description in e.skills:
            ctx.reply.send(AGENTS, nick, "SKILL", e.name, skill, description or " ")
    ctx.reply.send(AGENTS, nick, "END", str(len(entries)))
    ctx.reply.end_batch(ref)


async def handle_audit(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """AUDIT [<account>] [<count>]"""
    account = account_of(ctx, AUDIT)
    if account is None:
        return
    target, limit = None, 50
    for arg in msg.params[:2]:
        count = parse_count(arg, 1, service.AUDIT_MAX)
        if count is not None:
            limit = count
        else:
            target = arg
    try:
        shown, entries = await service.audit_trail(state, account, target, limit)
    except Refused as exc:
        refuse(ctx, AUDIT, exc)
        return
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/audit")
    for entry in entries:
        audit_line(ctx.reply, nick, entry)
    ctx.reply.send(AUDIT, nick, "END", shown)
    ctx.reply.end_batch(ref)
