"""MONITOR: online/offline notifications for a list of nicks (IRCv3 monitor)."""

from __future__ import annotations

from ircd.dispatch import CommandContext, command
from ircd.proto import numerics as N
from ircd.proto.lines import Message


def _status(ctx: CommandContext, nicks: list[str]) -> None:
    server, reply = ctx.server, ctx.reply
    online, offline = [], []
    for nick in nicks:
        target = server.state.find_nick(nick)
        if target is not None and target.registered:
            online.append(target.prefix)
        else:
            offline.append(nick)
    for code, items in ((N.RPL_MONONLINE, online), (N.RPL_MONOFFLINE, offline)):
        chunk: list[str] = []
        for item in items:
            if chunk and sum(len(i) + 1 for i in chunk) + len(item) > 400:
                reply.numeric(code, ",".join(chunk))
                chunk = []
            chunk.append(item)
        if chunk:
            reply.numeric(code, ",".join(chunk))


@command("MONITOR", min_params=1)
def handle_monitor(ctx: CommandContext, msg: Message) -> None:
    """MONITOR <+|-> <nick>{,<nick>} | MONITOR <C|L|S>
    Watches nicks: + adds, - removes, C clears, L lists, S shows who is online now."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    sub = msg.params[0]
    watching = client.monitoring if client.monitoring is not None else set()
    if sub in ("+", "-"):
        if len(msg.params) < 2:
            reply.numeric(N.ERR_NEEDMOREPARAMS, "MONITOR", "Not enough parameters")
            return
        nicks = [n for n in msg.params[1].split(",") if n]
        if sub == "-":
            for nick in nicks:
                folded = server.casefold(nick)
                watching.discard(folded)
                server.state.unwatch(client, folded)
            client.monitoring = watching or None
            return
        limit = server.config.limits.monitor
        added = []
        for i, nick in enumerate(nicks):
            folded = server.casefold(nick)
            if folded in watching:
                continue
            if len(watching) >= limit:
                reply.numeric(N.ERR_MONLISTFULL, str(limit), ",".join(nicks[i:]), "Monitor list is full")
                break
            watching.add(folded)
            server.state.watch(client, folded)
            added.append(nick)
        client.monitoring = watching or None
        _status(ctx, added)
    elif sub.upper() == "C":
        server.state.unwatch_all(client, watching)
        client.monitoring = None
    elif sub.upper() == "L":
        names = sorted(watching)
        chunk: list[str] = []
        for name in names:
            if chunk and sum(len(n) + 1 for n in chunk) + len(name) > 400:
                reply.numeric(N.RPL_MONLIST, ",".join(chunk))
                chunk = []
            chunk.append(name)
        if chunk:
            reply.numeric(N.RPL_MONLIST, ",".join(chunk))
        reply.numeric(N.RPL_ENDOFMONLIST, "End of MONITOR list")
    elif sub.upper() == "S":
        _status(ctx, sorted(watching))
    else:
        reply.numeric(N.ERR_UNKNOWNCOMMAND, "MONITOR", "Unknown MONITOR subcommand")
