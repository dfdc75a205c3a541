"""CAP: capability negotiation (IRCv3 capability-negotiation, CAP 302, cap-notify)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.caps import ls_chunks
from ircd.commands.registration import try_register
from ircd.delivery.replies import ReplyBuffer
from ircd.dispatch import CommandContext, command
from ircd.proto import numerics as N
from ircd.proto.lines import Message

if TYPE_CHECKING:
    from ircd.server import Server

# Capabilities a client cannot switch off once CAP LS 302 enabled them.
_STICKY_302 = C.CAP_NOTIFY


def _send_list(ctx: CommandContext, sub: str, tokens: list[str]) -> None:
    """CAP LS / LIST in as few lines as fit 512 bytes; with CAP LS 302 every line but the
    last has the ``*`` continuation marker (IRCv3 capability-negotiation), and the last carries the
    ratified capabilities (``caps.ls_chunks``); without 302, one line."""
    if ctx.client.cap_version < 302:
        ctx.reply.send("CAP", ctx.client.nick, sub, " ".join(_one_line(ctx, sub, tokens)))
        return
    nick = ctx.client.nick
    chunks = ls_chunks(tokens, f":{ctx.server.name} CAP {nick} {sub}")
    for i, chunk in enumerate(chunks):
        if i < len(chunks) - 1:
            ctx.reply.send("CAP", nick, sub, "*", chunk)
        else:
            ctx.reply.send("CAP", nick, sub, chunk)


def _one_line(ctx: CommandContext, sub: str, tokens: list[str]) -> list[str]:
    """Capability negotiation: "If the client supports CAP version 302, the server MAY send multiple
    lines in response to CAP LS and CAP LIST", so a client without 302 gets one line. When the list
    does not fit, drafts go first (from the end), then other names from the end: such a client can
    still CAP REQ a capability it was not shown."""
    room = 510 - len(f":{ctx.server.name} CAP {ctx.client.nick} {sub} :")
    kept = list(tokens)
    for drafts_only in (True, False):
        for token in reversed(list(kept)):
            if len(" ".join(kept)) <= room:
                return kept
            if not drafts_only or token.startswith("draft/"):
                kept.remove(token)
    return kept


@command("CAP", min_params=1, pre_registration=True)
def handle_cap(ctx: CommandContext, msg: Message) -> None:
    """CAP <LS [302] | LIST | REQ :<caps> | END>
    Negotiates IRCv3 capabilities. Registration waits for CAP END once you have sent CAP LS or REQ."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    sub = msg.params[0].upper()
    if sub == "LS":
        if not client.registered:
            client.cap_negotiating = True
        version = 0
        if len(msg.params) > 1:
            try:
                version = int(msg.params[1])
            except ValueError:
                version = 0
        if version > client.cap_version:
            client.cap_version = version
        if client.cap_version >= 302:
            client.set_caps(client.caps | C.CAP_NOTIFY)
        _send_list(ctx, "LS", server.caps.ls_tokens(server, client.cap_version))
    elif sub == "LIST":
        _send_list(ctx, "LIST", server.caps.names(client.caps))
    elif sub == "REQ":
        if not client.registered:
            client.cap_negotiating = True
        requested = msg.params[1] if len(msg.params) > 1 else ""
        add = 0
        remove = 0
        ok = bool(requested.strip())
        for token in requested.split():
            name = token[1:] if token[:1] == "-" else token
            cap = server.caps.get(name, server)
            if cap is None:
                ok = False
                break
            if token[:1] == "-":
                if cap.bit & _STICKY_302 and client.cap_version >= 302:
                    ok = False
                    break
                remove |= cap.bit
            else:
                add |= cap.bit
        if not ok:
            reply.send("CAP", client.nick, "NAK", requested)
            return
        client.set_caps((client.caps | add) & ~remove)
        reply.send("CAP", client.nick, "ACK", requested)
        for hook in server.cap_change_hooks:
            hook(client, add, remove)
    elif sub == "END":
        if not client.registered:
            client.cap_negotiating = False
            try_register(ctx)
    else:
        reply.numeric(N.ERR_INVALIDCAPCMD, msg.params[0], "Invalid CAP command")


# cap-notify after a REHASH ------------------------------------------------------------------


def cap_snapshot(server: Server) -> dict[str, tuple[int, str]]:
    """Offered capabilities: name -> (bit, CAP LS 302 token)."""
    offered = server.caps.offered(server)
    tokens = server.caps.ls_tokens(server, 302)
    return {cap.name: (cap.bit, token) for cap, token in zip(offered, tokens)}


def announce_cap_changes(server: Server, before: dict[str, tuple[int, str]]) -> None:
    """IRCv3 cap-notify: CAP DEL for capabilities no longer offered (they are also
    switched off), CAP NEW for new ones and for ones whose value changed."""
    after = cap_snapshot(server)
    removed = [name for name in before if name not in after]
    added = [name for name in after if before.get(name) != after[name]]
    if not removed and not added:
        return
    removed_bits = 0
    for name in removed:
        removed_bits |= before[name][0]
    for client in server.clients:
        if client.closing or not client.caps & C.CAP_NOTIFY:
            continue
        client.set_caps(client.caps & ~removed_bits)
        reply = ReplyBuffer(server, client)
        head = f":{server.name} CAP {client.nick}"
        for chunk in C.line_chunks(removed, head + " DEL", continued=False) if removed else ():
            reply.send("CAP", client.nick, "DEL", chunk)
        tokens = [after[n][1] if client.cap_version >= 302 else n for n in added]
        for chunk in C.line_chunks(tokens, head + " NEW", continued=False) if tokens else ():
            reply.send("CAP", client.nick, "NEW", chunk)
        reply.flush()
