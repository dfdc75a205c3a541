"""CONTACT on IRC: REQUEST, ACCEPT, DECLINE, REVOKE, LIST and POLICY, over ext.pircan.service.contact."""

from __future__ import annotations


from ircd.api import CommandContext, Message

from ext.pircan import rules
from ext.pircan.irc.common import Subcommand, fail, run_subcommand
from ext.pircan.irc.wire import agreement_line, hexid, pending_fields, request_line, ts
from ext.pircan.service import contact as service
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["handle_contact"]

VERB = "CONTACT"


async def handle_contact(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """CONTACT <REQUEST|ACCEPT|DECLINE|REVOKE|LIST|POLICY> ..."""
    await run_subcommand(state, ctx, msg, VERB, _SUBCOMMANDS)


async def _request(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if len(args) < 4 or not args[3].strip():
        fail(ctx, VERB, "NEED_MORE_PARAMS", "REQUEST",
             text="Syntax: CONTACT REQUEST <account> <scope>[,<scope>...] <days> :<purpose>")
        return
    done = await service.request_contact(state, account, args[0], args[1], args[2], args[3])
    nick = ctx.client.nick
    if done.agreement is not None:
        agr = done.agreement
        ctx.reply.send(VERB, nick, "ACCEPTED", hexid(done.request.id), hexid(agr.id), agr.target,
                       ",".join(agr.scopes), ts(agr.expires_at))
    else:
        ctx.reply.send(VERB, nick, "REQUESTED", hexid(done.request.id), done.request.target, "pending",
                       *pending_fields(done.request, "pending", state.policies.get(done.request.target)))


async def _accept(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "ACCEPT", text="Syntax: CONTACT ACCEPT <request-id> [<scopes> [<days>]]")
        return
    req, agr = await service.accept(state, account, args[0], args[1] if len(args) > 1 else None,
                                    args[2] if len(args) > 2 else None)
    ctx.reply.send(VERB, ctx.client.nick, "ACCEPTED", hexid(req.id), hexid(agr.id), req.requester,
                   ",".join(agr.scopes), ts(agr.expires_at))


async def _decline(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "DECLINE", text="Syntax: CONTACT DECLINE <request-id>")
        return
    req = await service.decline(state, account, args[0])
    ctx.reply.send(VERB, ctx.client.nick, "DECLINED", hexid(req.id), req.requester)


async def _revoke(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "REVOKE", text="Syntax: CONTACT REVOKE <agreement-id>")
        return
    agreement, other = await service.revoke(state, account, args[0])
    ctx.reply.send(VERB, ctx.client.nick, "REVOKED", hexid(agreement.id), other)


async def _list(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    which = args[0].lower() if args else "all"
    try:
        requests, agreements = await service.contacts(state, account, which)
    except Refused as exc:
        raise Refused(exc.code, args[0], text=exc.text) from None
    nick = ctx.client.nick
    reply = ctx.reply
    ref = reply.start_batch("pircan/contacts")
    for req, req_state in requests:
        request_line(reply, nick, req, req_state, state.policies.get(req.target))
    for agr, agr_state in agreements:
        agreement_line(reply, nick, agr, agr_state)
    reply.send(VERB, nick, "END")
    reply.end_batch(ref)


async def _policy(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    target: str | None = None
    new_policy: str | None = None
    if len(args) == 1:
        if args[0].lower() in rules.POLICIES:
            new_policy = args[0]
        else:
            target = args[0]
    elif len(args) >= 2:
        target, new_policy = args[0], args[1]
    shown, now_policy = await service.policy(state, account, target, new_policy)
    ctx.reply.send(VERB, ctx.client.nick, "POLICY", shown, now_policy)


_SUBCOMMANDS: dict[str, Subcommand] = {
    "REQUEST": _request,
    "ACCEPT": _accept,
    "DECLINE": _decline,
    "REVOKE": _revoke,
    "LIST": _list,
    "POLICY": _policy,
}
