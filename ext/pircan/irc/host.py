"""HOST on IRC: an owner's control of its hosted agents (LIST, STATUS, START, STOP, RESTART, LOGS,
STDIN, SIGNAL), over ext.pircan.host.service."""

from __future__ import annotations

from ircd.api import CommandContext, Message

from ext.pircan.host import service
from ext.pircan.irc.common import Subcommand, fail, run_subcommand
from ext.pircan.irc.wire import ts
from ext.pircan.state import Pircan

__all__ = ["handle_host"]

VERB = "HOST"
_SYNTAX = "Syntax: HOST LIST|STATUS|START|STOP|RESTART|LOGS|STDIN|SIGNAL ... (see HELP HOST)"


async def handle_host(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """HOST [LIST] | STATUS|START|STOP|RESTART <agent> | LOGS <agent> ... | STDIN <agent> :<line> | SIGNAL <agent> <sig>"""
    if not msg.params:
        msg = Message(msg.command, ["LIST"], msg.source, msg.tags)
    await run_subcommand(state, ctx, msg, VERB, _SUBCOMMANDS, _SYNTAX)


def _agent_line(ctx: CommandContext, status: service.Status) -> None:
    note = status.note or status.last_exit or ""
    ctx.reply.send(VERB, ctx.client.nick, "AGENT", status.account, status.state,
                   str(status.pid) if status.pid is not None else "*", str(status.restarts),
                   ts(status.started_at), f"{status.start}/{status.restart}",
                   str(status.log_cursor), note or "-")


async def _list(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    found = await service.list_hosted(state, account)
    ref = ctx.reply.start_batch("pircan/host")
    for status in found:
        _agent_line(ctx, status)
    ctx.reply.send(VERB, ctx.client.nick, "END", str(len(found)))
    ctx.reply.end_batch(ref)


def _name(ctx: CommandContext, sub: str, args: list[str], syntax: str) -> str | None:
    if not args:
        fail(ctx, VERB, "NEED_MORE_PARAMS", sub, text=f"Syntax: HOST {sub} {syntax}")
        return None
    return args[0]


async def _status(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    name = _name(ctx, "STATUS", args, "<agent>")
    if name is not None:
        _agent_line(ctx, await service.status(state, account, name))


def _control(op: str, fn):  # type: ignore[no-untyped-def]
    async def run(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
        name = _name(ctx, op, args, "<agent>")
        if name is not None:
            _agent_line(ctx, await fn(state, account, name))

    return run


async def _logs(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    """LOGS <agent> [LINES <n>] [GREP <regex>] [FROM <cursor> [WAIT <ms>]]"""
    name = _name(ctx, "LOGS", args, "<agent> [LINES <n>] [GREP <regex>] [FROM <cursor> [WAIT <ms>]]")
    if name is None:
        return
    options: dict[str, str] = {}
    rest = args[1:]
    while rest:
        key = rest[0].upper()
        if key not in ("LINES", "GREP", "FROM", "WAIT") or len(rest) < 2:
            fail(ctx, VERB, "INVALID_PARAMS", "LOGS", text="Options: LINES <n>, GREP <regex>, FROM <cursor>, WAIT <ms>")
            return
        options[key], rest = rest[1], rest[2:]
    try:
        lines = int(options.get("LINES", "100"))
        cursor = int(options["FROM"]) if "FROM" in options else None
        wait = int(options.get("WAIT", "0"))
    except ValueError:
        fail(ctx, VERB, "INVALID_PARAMS", "LOGS", text="LINES, FROM and WAIT take whole numbers")
        return
    window = await service.logs(state, account, name, lines=lines, grep=options.get("GREP"), cursor=cursor,
                                follow_ms=wait)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/host")
    count = 0
    for raw in window.data.splitlines():
        text = raw.decode("utf-8", "replace")[:400]  # a line of a log, cut to fit one IRC line
        ctx.reply.send(VERB, nick, "LOG", name, text or " ")
        count += 1
    ctx.reply.send(VERB, nick, "LOGEND", name, str(window.cursor), f"{count} lines; FROM {window.cursor} continues")
    ctx.reply.end_batch(ref)


async def _stdin(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if len(args) < 2:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "STDIN", text="Syntax: HOST STDIN <agent> :<line>")
        return
    written = await service.stdin(state, account, args[0], args[1])
    ctx.reply.send(VERB, ctx.client.nick, "SENT", args[0], str(written), "Written to its standard input")


async def _signal(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    if len(args) < 2:
        fail(ctx, VERB, "NEED_MORE_PARAMS", "SIGNAL", text="Syntax: HOST SIGNAL <agent> TERM|INT|HUP|KILL")
        return
    sig = await service.send_signal(state, account, args[0], args[1])
    ctx.reply.send(VERB, ctx.client.nick, "SIGNALLED", args[0], sig, f"SIG{sig} sent to its process group")


_SUBCOMMANDS: dict[str, Subcommand] = {
    "LIST": _list,
    "STATUS": _status,
    "START": _control("START", service.start),
    "STOP": _control("STOP", service.stop),
    "RESTART": _control("RESTART", service.restart),
    "LOGS": _logs,
    "STDIN": _stdin,
    "SIGNAL": _signal,
}
