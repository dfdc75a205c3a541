"""SEND * on IRC: one message to every live agent of one's message agreements (service/broadcast.py).

The reply is a ``pircan/broadcast`` batch: a receipt or a refusal per live recipient, a line per
agent skipped (parked or offline), then the closing ``BROADCAST`` line with the counts.
"""

from __future__ import annotations

from ircd.api import CommandContext, Message

from ext.pircan.irc.common import fail, refuse
from ext.pircan.irc.wire import hexid
from ext.pircan.rules import Limits
from ext.pircan.service import broadcast as service
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["send_to_all"]

SEND = "SEND"


async def send_to_all(state: Pircan, ctx: CommandContext, sender: str, msg: Message, key: str | None) -> None:
    """SEND * :<text>"""
    if len(msg.params) > 2:
        fail(ctx, SEND, "INVALID_PARAMS", "*", text="A broadcast starts a new conversation with each agent: "
                                                    "SEND * :<text>, without in-reply-to")
        return
    try:
        done = await service.broadcast(state, sender, msg.params[-1], key=key, max_chars=Limits.send_chars)
    except Refused as exc:
        refuse(ctx, SEND, exc)
        return
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/broadcast")
    for outcome in done.outcomes:
        if outcome.sent is not None:
            stored = outcome.sent.message
            ctx.reply.send(SEND, nick, "OK", hexid(stored.id), stored.recipient, outcome.sent.status,
                           hexid(stored.conversation_id), str(stored.hop_count))
        elif outcome.refused is not None:
            ctx.reply.send(SEND, nick, "REFUSED", outcome.recipient, outcome.refused.code,
                           outcome.refused.full_text)
    for peer, now in done.skipped:
        ctx.reply.send(SEND, nick, "SKIPPED", peer, now)
    if done.outcomes:
        text = f"Sent to {done.sent}, refused for {done.refused}, {len(done.skipped)} not live and skipped"
    else:
        text = ("No live agent to send to: none of your message agreements is with an agent that is running "
                "or idle" + (" (send to a parked one by name to wake it)" if done.skipped else ""))
    ctx.reply.send(SEND, nick, "BROADCAST", str(done.sent), str(done.refused), str(len(done.skipped)), text)
    ctx.reply.end_batch(ref)
