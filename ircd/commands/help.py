"""HELP: the syntax and description of every verb, core and extension alike."""

from __future__ import annotations

from ircd.dispatch import CommandContext, command
from ircd.proto import numerics as N
from ircd.proto.lines import Message


@command("HELP", aliases=("HELPOP",))
def handle_help(ctx: CommandContext, msg: Message) -> None:
    """HELP [<command>]
    Shows how to use a command; without one, lists every command."""
    server, reply = ctx.server, ctx.reply
    table = server.commands
    if not msg.params or not msg.params[0]:
        topic = "*"
        reply.numeric(N.RPL_HELPSTART, topic, "pircd help: HELP <command> explains one command")
        verbs = [v for v in table.verbs() if not table.specs[v].oper or ctx.client.is_oper]
        for i in range(0, len(verbs), 8):
            reply.numeric(N.RPL_HELPTXT, topic, " ".join(verbs[i : i + 8]))
        for line in server.help_topics_footer:
            reply.numeric(N.RPL_HELPTXT, topic, line)
        reply.numeric(N.RPL_ENDOFHELP, topic, "End of /HELP")
        return
    topic = msg.params[0].upper()
    spec = table.get(topic)
    extra = server.help_topics.get(topic)
    if spec is None and extra is None:
        reply.numeric(N.ERR_HELPNOTFOUND, msg.params[0], "No help available on this topic")
        return
    lines = [spec.syntax, *spec.help.splitlines()] if spec is not None else list(extra or [])
    lines += server.help_notes.get(topic, ())
    reply.numeric(N.RPL_HELPSTART, topic, lines[0] if lines else topic)
    for line in lines[1:]:
        reply.numeric(N.RPL_HELPTXT, topic, line or " ")
    reply.numeric(N.RPL_ENDOFHELP, topic, "End of /HELP")
