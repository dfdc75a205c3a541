"""Nicks unique across the cluster: NICK asks the shared database before it takes a
nick no node is known to hold (``ircd.store.cluster``: the row's primary key settles
races between nodes).

NICK stays the core's handler; on a cluster node it is wrapped: a nick this node can
answer for by itself (the same nick, an invalid one, one held by a known user, local or
remote) goes straight to the handler, a free one is claimed first. The claim is a write
the connection awaits, so its next lines wait for the answer, as after any async handler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from ircd.commands.registration import valid_nick
from ircd.events import NickChanged, Quit, Registered
from ircd.proto import numerics as N
from ircd.store.cluster import claim_nick, release_nick, release_node, take_over_nick

if TYPE_CHECKING:
    from ircd.dispatch import CommandContext
    from ircd.proto.lines import Message
    from ircd.server import Server
    from ircd.state.client import Client

__all__ = ["NickClaims"]


class NickClaims:
    def __init__(self, server: Server, node: str) -> None:
        self.server, self.node = server, node
        spec = server.commands.specs["NICK"]
        self._handler = spec.handler
        server.commands.specs["NICK"] = dataclasses.replace(spec, handler=self.handle_nick)
        server.events.subscribe(Quit, self._quit)
        server.events.subscribe(NickChanged, self._nick_changed)
        server.events.subscribe(Registered, self._registered)

    async def reset(self) -> int:
        """At start-up: the rows of this node's previous run go (none of its clients is left)."""
        assert self.server.store is not None
        return await self.server.store.write(release_node, self.node)

    def handle_nick(self, ctx: CommandContext, msg: Message) -> Awaitable[None] | None:
        server, client = self.server, ctx.client
        if not msg.params or not msg.params[0]:
            return self._handler(ctx, msg)
        nick = msg.params[0]
        folded = server.casefold(nick)
        if (folded == client.nick_folded or not valid_nick(server, nick, folded)
                or server.state.nick_holder(folded) is not None):
            return self._handler(ctx, msg)
        return self._claim_then_nick(ctx, msg, nick, folded)

    async def _claim_then_nick(self, ctx: CommandContext, msg: Message, nick: str, folded: str) -> None:
        server, client = self.server, ctx.client
        assert server.store is not None
        old = client.nick_folded
        taken = await server.store.write(claim_nick, folded, self.node, client.id, int(server.clock()))
        if not taken:
            if not client.closing:
                ctx.reply.numeric(N.ERR_NICKNAMEINUSE, nick, "Nickname is already in use")
                if not client.registered:
                    client.refused_nick = nick
            return
        if not client.closing:
            result: Any = self._handler(ctx, msg)  # a local client may have taken it meanwhile: 433
            if result is not None:
                await result
        self._release_unheld(folded)  # refused after all, or the client is gone
        if old and old != folded and server.state.nick_holder(old) is None:
            # the old nick's row is gone when NICK is answered (a write after every earlier one)
            await server.store.write(release_nick, old, self.node)

    def _quit(self, ev: Quit) -> None:
        self._release_unheld(ev.client.nick_folded)

    def _registered(self, ev: Registered) -> None:
        self._record(ev.client)

    def _nick_changed(self, ev: NickChanged) -> None:
        self._release_unheld(self.server.casefold(ev.old_nick))
        self._record(ev.client)

    def _record(self, client: Client) -> None:
        """Make sure the row of a nick a local client holds is there: a nick the server gave
        (an agent's account name at login, a forced rename) took no NICK's claim. Only a
        record, after the fact: those nicks are settled by accounts, not by this table."""
        store = self.server.store
        if store is not None and self.server.state.nick_holder(client.nick_folded) is client:
            store.write_nowait(claim_nick, client.nick_folded, self.node, client.id, int(self.server.clock()))

    def taken_over(self, folded: str, ident: int, from_node: str) -> None:
        """The local client ``ident`` holds (or is given) the nick of a user of ``from_node`` that
        has gone, moved here or been renamed: the row is this node's now."""
        store = self.server.store
        if store is not None:
            store.write_nowait(take_over_nick, folded, self.node, ident, int(self.server.clock()), from_node)

    def _release_unheld(self, folded: str) -> None:
        """Free the row of a nick no client of this node holds (any more)."""
        store = self.server.store
        if folded and store is not None and self.server.state.nick_holder(folded) is None:
            store.write_nowait(release_nick, folded, self.node)
