"""REDACT: IRCv3 draft/message-redaction.

    REDACT <target> <msgid> [:<reason>]

The message is looked up in stored history (``ircd/history.py``): its sender
may redact it, and so may the channel's operators (a channel message) and IRC
operators. A redacted message is deleted from history, so CHATHISTORY no
longer returns it (the spec's first choice, "exclude it entirely"); the
REDACT line goes to the target's recipients that negotiated the capability
and to the redacting client. A message that history does not hold (history
off, a direct message between two clients without accounts, pruned) is
answered ``UNKNOWN_MSGID``: the server cannot tell who sent it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.dispatch import CommandContext, command
from ircd.proto.lines import Message
from ircd.proto.msgid import parse_id

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.server import Server
    from ircd.store import HistoryRow

log = logging.getLogger("pircd")

_REDACTABLE = frozenset(("PRIVMSG", "NOTICE", "TAGMSG"))


@command("REDACT", min_params=2, requires_cap=C.MESSAGE_REDACTION)
async def handle_redact(ctx: CommandContext, msg: Message) -> None:
    """REDACT <target> <msgid> [:<reason>]
    Deletes a message you sent (or, as a channel operator, any message in your channel) from
    history and from the screens of clients that support draft/message-redaction."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    target, msgid = msg.params[0], msg.params[1]
    reason = msg.params[2][: server.config.limits.kicklen] if len(msg.params) > 2 and msg.params[2] else None
    history = server.history
    channel = None
    recipient: Client | None = None
    if target[:1] == "#":
        channel = server.find_channel(target, client)
        if channel is None or client not in channel.members:
            reply.fail("REDACT", "INVALID_TARGET", target, f"You cannot delete messages from {target}")
            return
        key: str | None = channel.folded
    else:
        recipient = server.state.find_nick(target)
        if recipient is not None and not recipient.registered:
            recipient = None
        key = history.conversation_with(client, target) if history is not None else None
    ident = parse_id(msgid)
    row = None
    if history is not None and key is not None and ident is not None:
        from ircd.store import history as rows

        row = await history.read(rows.find, key, ident)
    if client.closing:
        return
    if row is None or row.command not in _REDACTABLE:
        reply.fail("REDACT", "UNKNOWN_MSGID", target, msgid, "This message does not exist or is too old")
        return
    may = _is_sender(server, client, row) or client.is_oper
    if channel is not None and not may:
        may = client in channel.members and channel.is_op(client)
    if not may:
        reply.fail("REDACT", "REDACT_FORBIDDEN", target, msgid, "You are not authorised to delete this message")
        return
    assert history is not None and key is not None and ident is not None
    await history.redact(key, ident)
    if client.closing:
        return
    params = [target, msgid] if reason is None else [target, msgid, reason]
    if channel is not None:
        params[0] = channel.name
    relay = server.relay_from(client, "REDACT", *params)
    if channel is not None:
        if server.find_channel(channel.name) is channel:
            server.delivery.relay((m for m in channel.members if m.caps & C.MESSAGE_REDACTION), relay, exclude=client)
    elif recipient is not None and recipient is not client:
        # every connection of the recipient's nick, and the sender's other ones (as the message went)
        found = server.sessions.direct_recipients(client, recipient, False)
        server.delivery.relay((c for c in found if c.caps & C.MESSAGE_REDACTION), relay)
    reply.relay(relay)
    log.info("redact by=%s target=%s msgid=%s sender=%s", client.prefix, target, msgid, row.source)


def _is_sender(server: Server, client: Client, row: HistoryRow) -> bool:
    """The message is the client's own: the same account, or (sent without one) the same
    nick!user@host by a client without an account."""
    if row.account is not None:
        return client.account is not None and server.casefold(row.account) == client.account_folded
    return client.account is None and row.source == client.prefix
