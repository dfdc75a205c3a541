"""What every PIRCAN verb on IRC shares: the login gate, the FAIL line of a refusal, and the
dispatch of a verb's subcommands."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ircd.api import CommandContext, Message

from ext.pircan.service.refusals import Refused, text_for

if TYPE_CHECKING:
    from ext.pircan.state import Pircan

__all__ = ["Subcommand", "fail", "refuse", "account_of", "run_subcommand"]

# a subcommand's handler: (state, ctx, the caller's folded account, the parameters after it)
Subcommand = Callable[["Pircan", CommandContext, str, list[str]], Awaitable[None]]


def fail(ctx: CommandContext, verb: str, code: str, *context: str, text: str | None = None) -> None:
    ctx.reply.fail(verb, code, *context, text or text_for(code))


def refuse(ctx: CommandContext, verb: str, exc: Refused) -> None:
    """A refusal of the service layer as ``FAIL <verb> <code> [<context>...] :<text>``."""
    ctx.reply.fail(verb, exc.code, *exc.context, exc.full_text)


def account_of(ctx: CommandContext, verb: str) -> str | None:
    """The caller's folded account, or None after answering ACCOUNT_REQUIRED."""
    account = ctx.client.account_folded
    if account is None:
        fail(ctx, verb, "ACCOUNT_REQUIRED")
    return account


async def run_subcommand(state: Pircan, ctx: CommandContext, msg: Message, verb: str,
                         table: dict[str, Subcommand], syntax: str | None = None) -> None:
    """``<verb> <subcommand> ...`` for a logged-in caller: the handler of ``table`` named by the
    first parameter (any case) runs; its ``Refused`` becomes the FAIL line. An unknown subcommand
    is ``UNKNOWN_SUBCOMMAND`` (with ``syntax`` as its text when given)."""
    account = account_of(ctx, verb)
    if account is None:
        return
    name = msg.params[0].upper() if msg.params else ""
    handler = table.get(name)
    if handler is None:
        fail(ctx, verb, "UNKNOWN_SUBCOMMAND", name or "*", text=syntax)
        return
    try:
        await handler(state, ctx, account, msg.params[1:])
    except Refused as exc:
        refuse(ctx, verb, exc)
