"""TOKEN: bearer tokens for the HTTP transports, managed over IRC by an account or its owner."""

from __future__ import annotations

import time

from ircd.dispatch import CommandContext, command
from ircd.proto.lines import Message
from ircd.tokens import TokenRefused

VERB = "TOKEN"


def _ms(value: int | None) -> str:
    if value is None:
        return "*"
    return time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(value / 1000)) + "%03dZ" % (value % 1000)


@command("TOKEN", min_params=1)
async def handle_token(ctx: CommandContext, msg: Message) -> None:
    """TOKEN ADD <account> [<name>] | TOKEN LIST [<account>] | TOKEN REVOKE <account> [<name>]
    Bearer tokens let an account use the HTTP transports (MCP at /mcp). You manage your own
    tokens and those of the agents you own. A new token is shown once, only its hash is kept:
      TOKEN <you> CREATED <account> <name> <token> :Store this token now: it is not shown again
    LIST:   TOKEN <you> TOKEN <account> <name> <created> <last-used|*> ... then TOKEN <you> END <account>
    REVOKE: every token of the account, or the one named; refused at its next request:
      TOKEN <you> REVOKED <account> <count>
    Errors: FAIL TOKEN <code> with ACCOUNT_REQUIRED, NO_SUCH_ACCOUNT, NOT_ALLOWED, INVALID_NAME,
      TOKEN_EXISTS, NO_SUCH_TOKEN, NEED_MORE_PARAMS, UNKNOWN_SUBCOMMAND."""
    client, reply, tokens = ctx.client, ctx.reply, ctx.server.tokens
    actor = client.account_folded
    if tokens is None:
        reply.fail(VERB, "UNAVAILABLE", "This server has no account store")
        return
    if actor is None:
        reply.fail(VERB, "ACCOUNT_REQUIRED", "You must be logged in to an account to manage tokens")
        return
    sub, args = msg.params[0].upper(), msg.params[1:]
    if sub not in ("ADD", "LIST", "REVOKE"):
        reply.fail(VERB, "UNKNOWN_SUBCOMMAND", msg.params[0], "Subcommands: ADD, LIST, REVOKE (see HELP TOKEN)")
        return
    if sub != "LIST" and not args:
        reply.fail(VERB, "NEED_MORE_PARAMS", sub, f"Syntax: TOKEN {sub} <account> [<name>]")
        return
    account = ctx.server.casefold(args[0]) if args else actor
    name = args[1] if len(args) > 1 else None
    nick = client.nick
    try:
        if sub == "ADD":
            row, text = await tokens.create(actor, account, name)
            reply.send(VERB, nick, "CREATED", row.account, row.name, text,
                       "Store this token now: it is not shown again")
        elif sub == "LIST":
            found = await tokens.list(actor, account)
            ref = reply.start_batch("pircd/tokens")
            for row in found:
                reply.send(VERB, nick, "TOKEN", row.account, row.name, _ms(row.created_at), _ms(row.last_used_at))
            reply.send(VERB, nick, "END", account)
            reply.end_batch(ref)
        else:
            count = await tokens.revoke(actor, account, name)
            reply.send(VERB, nick, "REVOKED", account, str(count))
    except TokenRefused as exc:
        reply.fail(VERB, exc.code, name if exc.code in ("NO_SUCH_TOKEN", "TOKEN_EXISTS", "INVALID_NAME") and name
                   else account, exc.text)
