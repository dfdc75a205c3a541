"""INTRO on IRC: an intro token for direct A2A with an agent (ext.pircan.service.intro)."""

from __future__ import annotations

from ext.pircan.ids import hexid, ts
from ext.pircan.irc.common import account_of, fail, refuse
from ext.pircan.service import intro as service
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ircd.api import CommandContext, Message

__all__ = ["TOKEN_PIECE", "handle_intro"]

INTRO = "INTRO"
TOKEN_PIECE = 400  # a token is longer than one IRC line can carry: TOKEN lines of this many characters


async def handle_intro(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """INTRO <agent>"""
    account = account_of(ctx, INTRO)
    if account is None:
        return
    if not msg.params or not msg.params[0]:
        fail(ctx, INTRO, "NEED_MORE_PARAMS", INTRO, text="Syntax: INTRO <agent>")
        return
    try:
        intro = await service.issue_intro(state, account, msg.params[0])
    except Refused as exc:
        refuse(ctx, INTRO, exc)
        return
    nick, reply = ctx.client.nick, ctx.reply
    ref = reply.start_batch("pircan/intro", intro.target)
    reply.send(INTRO, nick, "ISSUED", intro.target, hexid(intro.agreement_id), ts(intro.expires_at),
               ",".join(intro.scopes))
    reply.send(INTRO, nick, "ENDPOINT", intro.target, intro.endpoint)
    for start in range(0, len(intro.token), TOKEN_PIECE):
        reply.send(INTRO, nick, "TOKEN", intro.target, intro.token[start:start + TOKEN_PIECE])
    reply.send(INTRO, nick, "END", intro.target)
    reply.end_batch(ref)
