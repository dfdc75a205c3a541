"""Acting on users of other nodes (docs/scaling.md): an identity moving from its node to
another, the rename of a user of another node whose nick an account takes, and a nick two
users hold after two sides of a split met again.

An identity moves when a connection of its account registers on another node and takes it
over (``ircd.sessions``: always-on, or multiclient, whose connections cannot share one
identity across nodes). The new node holds the identity's whole state already (its copy of
the user: nick, user, host, channels and prefixes), so it hands it to the new connection at
once, as one node hands a detached identity to the connection that takes it over, and tells
the others with ``move``: the old node closes the identity's connections (ERROR, no QUIT) and
keeps the user as one of the new node's, the other nodes change only where its lines go.
Nobody sees it leave or join: the user, its prefix included, is the same.

A mixin of ``ircd.cluster.replica.Replica``, which holds the state it works on.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ircd.cluster.liveness import user_record

if TYPE_CHECKING:
    from collections.abc import Callable

    from ircd.cluster.channels import ChannelSync
    from ircd.cluster.link import Link
    from ircd.server import Server
    from ircd.state.client import Client
    from ircd.state.cluster import ClusterState
    from ircd.state.local import LocalState

log = logging.getLogger("pircd.cluster")

__all__ = ["MOVED", "Moves"]

MOVED = "Nick taken over by a new connection of its account"  # the ERROR of the connections left behind


class Moves:
    server: Server
    remote: ClusterState
    link: Link
    state: LocalState
    local: dict[int, Client]
    channels: ChannelSync
    nick_taken_over: Callable[[str, int, str], None] | None

    def identity(self, client: Client) -> tuple[str, int] | None:
        raise NotImplementedError

    def stand_in(self, op: dict[str, Any]) -> Client:
        raise NotImplementedError

    def repoint(self, client: Client, op: dict[str, Any]) -> None:
        raise NotImplementedError

    # an identity moving here ----------------------------------------------------------

    def move_here(self, client: Client, copy: Client) -> None:
        """``client``, registering here, takes over its account's identity held on another node
        (``copy``, this node's copy of it): nick, identity, channels and prefixes, as
        ``SessionManager.adopt`` gives a detached identity's; then every node is told."""
        who = self.identity(copy)
        assert who is not None
        state = self.state
        self.remote.drop_remote(*who)
        self.server.sessions.adopt(client, copy)
        state.count_user(client, 1)  # counted once, as this node's user now
        self.local[client.id] = client
        if self.nick_taken_over is not None:
            self.nick_taken_over(client.nick_folded, client.id, who[0])
        chans = [[ch.name, ch.members.get(client, "")] for ch in client.channels.values()]
        self.link.broadcast({"op": "move", "node": who[0], "old": who[1], **user_record(self.server, client),
                             "chans": chans})
        log.info("identity moved here nick=%s from=%s", client.nick, who[0])

    def _move(self, op: dict[str, Any]) -> None:
        """An identity moved to the sending node: from this one (its connections close), or from
        a third (only where its lines go changes)."""
        node, old, new_node, new = op["node"], op["old"], op["from"], op["id"]
        if node == self.link.node:
            client = self.local.pop(old, None)
            holds = client is not None and self.state.nick_holder(client.nick_folded) is client
            ghost = self.server.sessions.hand_over(client, MOVED) if client is not None and holds else None
            if ghost is not None:
                heir = self.stand_in(op)
                self.server.sessions.release(ghost, heir)
                self.remote.add_remote(new_node, new, heir)
                self.server.delivery.flush_all()
                return
            if client is not None and not client.closing:
                self.local[old] = client
        else:
            copy = self.remote.find_remote(node, old)
            if copy is not None:
                self.remote.move(node, old, new_node, new)
                self.repoint(copy, op)
                return
        # this node no longer knew the identity (it left meanwhile): the user arrives anew
        self._arrive(op)

    def _arrive(self, op: dict[str, Any]) -> None:
        raise NotImplementedError

    # renames ----------------------------------------------------------------------------

    def rename(self, holder: Client, claimant: Client) -> None:
        """``claimant``, logged in here, takes its account's name, which ``holder``, a user of
        another node, has: that node renames it (``_rename``), this node gives the nick to the
        claimant at once (the caller does), and its row in the nick table becomes this node's."""
        who = self.identity(holder)
        if who is None or claimant.account_folded is None:
            return
        self.link.to_node(who[0], {"op": "rename", "id": who[1], "nick": holder.nick,
                                   "account": claimant.account})
        if self.nick_taken_over is not None:
            self.nick_taken_over(claimant.account_folded, claimant.id, who[0])

    def _rename(self, op: dict[str, Any]) -> None:
        """Another node's user logged in to the account that owns the nick a user of this node
        holds: renamed, as on one node (``AccountService.take_nick``)."""
        client = self.local.get(op["id"])
        accounts = self.server.accounts
        if client is None or accounts is None or client.nick_folded != self.server.casefold(op["nick"]):
            return
        nick = client.nick
        log.info("nick taken id=%d nick=%s by a user of node=%s account=%s", client.id, nick, op["from"],
                 op["account"])
        accounts.give_up_nick(client, f"The nick {nick} belongs to the account {op['account']}, which has "
                              f"logged in", "Nick taken over by its account")

    # a nick held twice ------------------------------------------------------------------

    def settle_nick(self, holder: Client, newcomer: Client, where: tuple[str, int]) -> bool:
        """``newcomer`` (a user of node ``where[0]``) arrives with the nick ``holder`` has, which
        the nick table keeps from happening but for two sides of a split that each gave the other
        up, or a rename on its way. IRC's answer, the same on every node: the user logged in to
        the account of that name keeps it, else the older (signon, then node and id); the other
        is renamed by its own node. True when the newcomer holds the nick here."""
        folded = newcomer.nick_folded
        mine, theirs = holder.account_folded == folded, newcomer.account_folded == folded
        held = self.identity(holder)
        if not holder.registered or held is None:
            wins = True
        elif mine != theirs:
            wins = theirs
        else:
            wins = (newcomer.signon, where) < (holder.signon, held)
        loser = holder if wins else newcomer
        log.warning("cluster nick held twice nick=%s kept by=%s", newcomer.nick, where if wins else held)
        accounts = self.server.accounts
        if not self.server.is_here(loser):
            return wins  # its own node renames it, this node keeps it out of the nick index meanwhile
        if accounts is not None:
            accounts.give_up_nick(loser, f"Nick collision: {loser.nick} is held by another user of the network",
                                  "Nick collision")
        else:
            self.server.disconnect(loser, "Nick collision")
        return wins
