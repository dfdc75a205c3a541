"""PROFILE (display name, skills, A2A endpoint) and RESOURCE (agreement-gated resources) on IRC."""

from __future__ import annotations

from typing import Any

from ircd.api import CommandContext, Message

from ext.pircan.irc.common import account_of, fail, refuse
from ext.pircan.irc.wire import body_chunks, ts
from ext.pircan.service import profile as service
from ext.pircan.service.contact import acts_for
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["handle_profile", "handle_resource"]

PROFILE = "PROFILE"
RESOURCE = "RESOURCE"


def _who(text: str) -> str | None:
    return None if text == "*" else text


async def handle_profile(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """PROFILE [<account>] | NAME <account|*> :<name> | SKILL <account|*> <skill> :<description> |
    UNSKILL <account|*> <skill> | ENDPOINT <account|*> <url|*>"""
    account = account_of(ctx, PROFILE)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    args = msg.params[1:]
    nick = ctx.client.nick
    try:
        if sub == "NAME":
            if len(args) < 2:
                fail(ctx, PROFILE, "NEED_MORE_PARAMS", "NAME", text="Syntax: PROFILE NAME <account|*> :<display name>")
                return
            who, name = await service.set_display_name(state, account, _who(args[0]), args[1])
            ctx.reply.send(PROFILE, nick, "NAME", who, name or "*")
        elif sub == "SKILL":
            if len(args) < 3:
                fail(ctx, PROFILE, "NEED_MORE_PARAMS", "SKILL",
                     text="Syntax: PROFILE SKILL <account|*> <skill> :<description>")
                return
            who, skill = await service.set_skill(state, account, _who(args[0]), args[1], args[2])
            ctx.reply.send(PROFILE, nick, "SKILL", who, skill, " ".join(args[2].split()) or " ")
        elif sub == "UNSKILL":
            if len(args) < 2:
                fail(ctx, PROFILE, "NEED_MORE_PARAMS", "UNSKILL", text="Syntax: PROFILE UNSKILL <account|*> <skill>")
                return
            who, skill = await service.delete_skill(state, account, _who(args[0]), args[1])
            ctx.reply.send(PROFILE, nick, "UNSKILL", who, skill)
        elif sub == "ENDPOINT":
            if len(args) < 2:
                fail(ctx, PROFILE, "NEED_MORE_PARAMS", "ENDPOINT", text="Syntax: PROFILE ENDPOINT <account|*> <url|*>")
                return
            who, url = await service.set_endpoint(state, account, _who(args[0]), args[1])
            ctx.reply.send(PROFILE, nick, "ENDPOINT", who, url or "*")
        else:
            await _show(state, ctx, account, msg.params[0] if msg.params else None)
    except Refused as exc:
        refuse(ctx, PROFILE, exc)


async def _show(state: Pircan, ctx: CommandContext, account: str, name: str | None) -> None:
    target = account if name is None else state.api.casefold(name)
    row: Any = await state.api.get_account(target)
    if row is None:
        raise Refused("NO_SUCH_ACCOUNT", name or target)
    profile = (await service.profiles(state, [target]))[target]
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/profile", target)
    ctx.reply.send(PROFILE, nick, "PROFILE", target, row.kind, row.owner or "*", profile.display_name or "*")
    for skill, description in profile.skills:
        ctx.reply.send(PROFILE, nick, "SKILL", target, skill, description or " ")
    if await acts_for(state, account, target):  # not public: only the account and its owner see it
        url = await service.endpoint_of(state, target)
        if url is not None:
            ctx.reply.send(PROFILE, nick, "ENDPOINT", target, url)
    ctx.reply.send(PROFILE, nick, "END", target)
    ctx.reply.end_batch(ref)


async def handle_resource(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """RESOURCE LIST <account> | GET <account> <name> | PUT <account|*> <name> <text|json> :<body> |
    DEL <account|*> <name>"""
    account = account_of(ctx, RESOURCE)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    args = msg.params[1:]
    need = {"LIST": 1, "GET": 2, "PUT": 4, "DEL": 2}
    syntax = {"LIST": "RESOURCE LIST <account>", "GET": "RESOURCE GET <account> <name>",
              "PUT": "RESOURCE PUT <account|*> <name> <text|json> :<body>", "DEL": "RESOURCE DEL <account|*> <name>"}
    if sub not in need:
        fail(ctx, RESOURCE, "UNKNOWN_SUBCOMMAND", sub or "*")
        return
    if len(args) < need[sub]:
        fail(ctx, RESOURCE, "NEED_MORE_PARAMS", sub, text="Syntax: " + syntax[sub])
        return
    nick = ctx.client.nick
    try:
        if sub == "PUT":
            res = await service.put_resource(state, account, _who(args[0]), args[1], args[2], args[3])
            ctx.reply.send(RESOURCE, nick, "PUT", res.account, res.name, str(len(res.body.encode("utf-8"))))
        elif sub == "DEL":
            name = await service.delete_resource(state, account, _who(args[0]), args[1])
            ctx.reply.send(RESOURCE, nick, "DELETED", state.api.casefold(args[0]) if args[0] != "*" else account, name)
        elif sub == "LIST":
            found = await service.list_resources(state, account, args[0])
            owner = state.api.casefold(args[0])
            ref = ctx.reply.start_batch("pircan/resources", owner)
            for res in found:
                ctx.reply.send(RESOURCE, nick, "RESOURCE", res.account, res.name, res.content_type,
                               str(len(res.body.encode("utf-8"))), ts(res.updated_at))
            ctx.reply.send(RESOURCE, nick, "END", owner)
            ctx.reply.end_batch(ref)
        else:
            res = await service.read_resource(state, account, args[0], args[1])
            ref = ctx.reply.start_batch("pircan/resource", res.account, res.name)
            ctx.reply.send(RESOURCE, nick, "RESOURCE", res.account, res.name, res.content_type,
                           str(len(res.body.encode("utf-8"))), ts(res.updated_at))
            for continues, text in body_chunks(res.body):
                ctx.reply.send(RESOURCE, nick, "BODY+" if continues else "BODY", res.name, text)
            ctx.reply.send(RESOURCE, nick, "END", res.account, res.name)
            ctx.reply.end_batch(ref)
    except Refused as exc:
        refuse(ctx, RESOURCE, exc)
