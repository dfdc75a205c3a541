"""What every PIRCAN verb on IRC shares: the login gate and the FAIL line of a refusal."""

from __future__ import annotations

from ircd.api import CommandContext

from ext.pircan.service.refusals import Refused, text_for

__all__ = ["fail", "refuse", "account_of"]


def fail(ctx: CommandContext, verb: str, code: str, *context: str, text: str | None = None) -> None:
    ctx.reply.fail(verb, code, *context, text or text_for(code))


def refuse(ctx: CommandContext, verb: str, exc: Refused) -> None:
    """A refusal of the service layer as ``FAIL <verb> <code> [<context>...] :<text>``."""
    ctx.reply.fail(verb, exc.code, *exc.context, exc.text)


def account_of(ctx: CommandContext, verb: str) -> str | None:
    """The caller's folded account, or None after answering ACCOUNT_REQUIRED."""
    account = ctx.client.account_folded
    if account is None:
        fail(ctx, verb, "ACCOUNT_REQUIRED")
    return account
