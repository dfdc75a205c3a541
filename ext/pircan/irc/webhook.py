"""WEBHOOK on IRC: SET, SHOW, CLEAR, ROTATE, TEST, DEAD and REPLAY, over ext.pircan.service.webhooks."""

from __future__ import annotations


from ext.pircan.ids import parse_count
from ext.pircan.irc.common import Subcommand, fail, run_subcommand
from ext.pircan.irc.wire import hexid, ts
from ext.pircan.service import webhooks as service
from ext.pircan.state import Pircan
from ircd.api import CommandContext, Message

__all__ = ["handle_webhook"]

VERB = "WEBHOOK"


async def handle_webhook(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """WEBHOOK <SET|SHOW|CLEAR|ROTATE|TEST|DEAD|REPLAY> ..."""
    await run_subcommand(state, ctx, msg, VERB, _SUBCOMMANDS,
                         "Syntax: WEBHOOK SET|SHOW|CLEAR|ROTATE|TEST|DEAD|REPLAY ... (see HELP WEBHOOK)")


def _one(args: list[str]) -> str | None:
    """The optional account argument."""
    return args[0] if args else None


async def _set(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "SET", text="Syntax: WEBHOOK SET [<account>] <url>")
        return
    name, url = (args[0], args[1]) if len(args) > 1 else (None, args[0])
    endpoint, secret = await service.set_webhook(state, account, url, name)
    if secret is None:
        text = "Webhook set; its secret is unchanged (WEBHOOK ROTATE makes a new one)"
    else:
        text = "Webhook set; store this secret now: it is not shown again"
    ctx.reply.send(VERB, ctx.client.nick, "SET", endpoint.account, endpoint.url, secret or "*", text)


async def _show(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    status = await service.show(state, account, _one(args))
    ep = status.endpoint
    if ep.enabled:
        note = f"last error: {ep.last_error}" if ep.last_error and (ep.last_failure_at or 0) > (ep.last_success_at or 0) \
            else "ok"
    else:
        note = f"disabled after {ep.disabled_reason} at {ts(ep.disabled_at)}"
    ctx.reply.send(VERB, ctx.client.nick, "ENDPOINT", ep.account, ep.url, "active" if ep.enabled else "disabled",
                   str(status.pending), str(status.dead), ts(ep.last_success_at), note)


async def _clear(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    shown, dropped = await service.clear(state, account, _one(args))
    ctx.reply.send(VERB, ctx.client.nick, "CLEARED", shown, str(dropped),
                   f"Webhook removed; {dropped} pending deliver{'y' if dropped == 1 else 'ies'} dropped")


async def _rotate(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    shown, secret = await service.rotate(state, account, _one(args))
    ctx.reply.send(VERB, ctx.client.nick, "SECRET", shown, secret,
                   "Store this secret now: it is not shown again; the old one also signs for 24 hours")


async def _test(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    done = await service.test(state, account, _one(args))
    out = done.outcome
    ctx.reply.send(VERB, ctx.client.nick, "TESTED", done.account, "*" if out.status is None else str(out.status),
                   str(out.elapsed_ms), "ok" if out.ok else out.error)


async def _dead(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    name, limit = None, 50
    for arg in args[:2]:
        count = parse_count(arg, 1, service.DEAD_MAX)
        if count is not None:
            limit = count
        else:
            name = arg
    shown, letters = await service.dead_letters(state, account, name, limit)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/webhook")
    for d in letters:
        ctx.reply.send(VERB, nick, "DEAD", hexid(d.id), hexid(d.event_id), d.kind, ts(d.died_at), str(d.tries),
                       d.reason, d.last_error or "")
    ctx.reply.send(VERB, nick, "END", shown, str(len(letters)))
    ctx.reply.end_batch(ref)


async def _replay(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "REPLAY", text="Syntax: WEBHOOK REPLAY [<account>] <delivery-id>[,...]|ALL")
        return
    name, which = (args[0], args[1]) if len(args) > 1 else (None, args[0])
    shown, count = await service.replay(state, account, which, name)
    ctx.reply.send(VERB, ctx.client.nick, "REPLAYED", shown, str(count),
                   f"{count} dead letter{'' if count == 1 else 's'} queued again")


_SUBCOMMANDS: dict[str, Subcommand] = {
    "SET": _set,
    "SHOW": _show,
    "CLEAR": _clear,
    "ROTATE": _rotate,
    "TEST": _test,
    "DEAD": _dead,
    "REPLAY": _replay,
}
