"""Which nodes are on the network (docs/scaling.md, joining the network and node loss): the
hello and burst of a node that starts, the heartbeat, and a node given up, gone or back.

A mixin of ``ircd.cluster.replica.Replica``, which holds the state it works on.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from ircd.cluster.channels import snapshot
from ircd.store.cluster import release_node

if TYPE_CHECKING:
    from collections.abc import Callable

    from ircd.cluster.channels import ChannelSync
    from ircd.cluster.link import Link
    from ircd.server import Server
    from ircd.state.client import Client
    from ircd.state.cluster import ClusterState
    from ircd.state.local import LocalState

log = logging.getLogger("pircd.cluster")

__all__ = ["DEAD_AFTER", "Liveness", "SPLIT_REASON", "user_record"]

SPLIT_REASON = "*.net *.split"
DEAD_AFTER = 5.0  # seconds without a word from a peer (it says "alive" every second)


class Liveness:
    server: Server
    remote: ClusterState
    link: Link
    state: LocalState
    local: dict[int, Client]
    last_seen: dict[str, float]
    channels: ChannelSync
    nick_taken_over: Callable[[str, int, str], None] | None

    def identity(self, client: Client) -> tuple[str, int] | None:
        raise NotImplementedError

    def _user(self, op: dict[str, Any]) -> None:
        raise NotImplementedError

    def _peer_changed(self, node: str, up: bool) -> None:
        raise NotImplementedError

    def nodes_up(self) -> int:
        """The nodes of the network that this one knows are up, itself too (LUSERS)."""
        return 1 + len(self.link.peers)

    def hello(self) -> None:
        """Say this node is (back) on the network: the others drop what they knew of it and
        send it their users (``_hello``), it sends them its own in return (``_burst``)."""
        self.link.hello()

    def goodbye(self) -> None:
        self.link.broadcast({"op": "gone"})
        self.link.peers.clear()

    def heartbeat(self) -> None:
        """Once a second (the server's tick): tell the peers this node is alive, and give up
        the peers not heard from for ``DEAD_AFTER`` seconds: their users leave with a
        netsplit QUIT and their nicks are freed (docs/scaling.md, node loss)."""
        self.link.broadcast({"op": "alive"})
        self._sweep_gone()
        now = time.monotonic()
        for node in list(self.link.peers):
            if now - self.last_seen.get(node, now) > DEAD_AFTER:
                log.warning("cluster node silent for %.0f s, given up node=%s", DEAD_AFTER, node)
                self.link.peers.discard(node)
                self._drop_node(node, SPLIT_REASON)
                self._peer_changed(node, False)
                if self.server.store is not None:
                    self.server.store.write_nowait(release_node, node)

    def _sweep_gone(self) -> None:
        """Local users that left without a Quit event (an always-on identity ended by REHASH, an
        account deleted: ircd.sessions drops it and tells its peers itself) leave the other
        nodes' state too, within a second."""
        holder = self.state.nick_holder
        for ident, client in [(i, c) for i, c in self.local.items() if holder(c.nick_folded) is not c]:
            del self.local[ident]
            face = holder(client.nick_folded)
            if face is not None and face.group is not None and face.group is client.group:
                self.local[face.id] = face  # the identity stays, another connection is its face
                self.link.broadcast({"op": "rekey", "id": ident, "new": face.id})
            else:
                self.link.broadcast({"op": "quit", "id": ident, "reason": "gone"})

    def _resync(self, node: str) -> None:
        """Exchange state again with ``node`` (this node had given it up: a cut, NATS away):
        send it this node's users and ask for its own. Users either side had dropped come back
        with a JOIN to their channels' members, as after a netsplit."""
        log.warning("cluster node back after it was given up node=%s", node)
        self.link.peers.add(node)
        self._send_burst(node, answer=True)
        self._peer_changed(node, True)

    def _alive(self, op: dict[str, Any]) -> None:
        pass  # ``apply`` noted the time

    def _hello(self, op: dict[str, Any]) -> None:
        node = op["from"]
        self.last_seen[node] = time.monotonic()
        self._drop_node(node, SPLIT_REASON)  # it restarted: its old users are gone
        self._peer_changed(node, False)
        self.link.peers.add(node)  # from here on it gets every change, after this burst
        self._send_burst(node)
        self._peer_changed(node, True)

    def _send_burst(self, node: str, *, answer: bool = False) -> None:
        """This node's users, their channels and those channels' state, to ``node``;
        ``answer``: it should send its own back."""
        users = [{**user_record(self.server, c),
                  "chans": [[ch.name, ch.members.get(c, "")] for ch in c.channels.values()]}
                 for c in self.local.values()]
        channels = {ch for c in self.local.values() for ch in c.channels.values()}
        snaps = [snapshot(ch, self.identity) for ch in channels]
        self.link.to_node(node, {"op": "burst", "users": users, "channels": snaps, "answer": answer})

    def _burst(self, op: dict[str, Any]) -> None:
        """A node's users: the answer to this node's hello (then this node answers with its
        own, which the other has not had), that answer, or a resync (answered too). Its channels
        are settled first (the TS rule: whose prefixes count), then its users join them; joins
        this node did not know are told to the channels' local members (a netjoin)."""
        node = op["from"]
        if node not in self.link.peers or op["answer"]:
            self.link.peers.add(node)
            self._send_burst(node)
            self._peer_changed(node, True)
        accepted = self.channels.burst(op["channels"])
        casefold = self.server.casefold
        for user in op["users"]:
            self._user({**user, "from": node})
            client = self.remote.find_remote(node, user["id"])
            if client is None:
                continue
            for name, modes in user["chans"]:
                join = {"chan": name, "modes": modes}
                self.channels.join(client, join, tell=True, accept=accepted.get(casefold(name), True))
        for folded in accepted:  # a channel whose members did not arrive has no one
            channel = self.state.channel(folded)
            if channel is not None:
                self.server.drop_channel_if_empty(channel)

    def _gone(self, op: dict[str, Any]) -> None:
        self.link.peers.discard(op["from"])
        self._drop_node(op["from"], SPLIT_REASON)
        self._peer_changed(op["from"], False)

    # leaving -----------------------------------------------------------------

    def _drop_node(self, node: str, reason: str) -> None:
        for ident, client in self.remote.remotes_of(node):
            self._drop(node, ident, client, reason, tell=True)

    def _drop(self, node: str, ident: int, client: Client, reason: str, *, tell: bool) -> None:
        """A remote user left. ``tell``: its node cannot tell the local clients (it is gone),
        so this node sends them the QUIT."""
        server, state = self.server, self.state
        if tell:
            peers = {p for p in state.common_peers(client) if p.id in self.local}
            if peers:
                server.delivery.relay(peers, server.relay_from(client, "QUIT", reason))
        for channel in list(client.channels.values()):
            channel.remove_member(client)
            server.drop_channel_if_empty(channel)
        client.channels.clear()
        state.remember(client, int(server.clock()))
        self.remote.drop_remote(node, ident)
        holder = state.nick_holder(client.nick_folded)
        if holder is None:
            server.notify_monitors(client, online=False)
        elif holder.id in self.local and self.nick_taken_over is not None:
            self.nick_taken_over(holder.nick_folded, holder.id, node)  # a local client took the nick over meanwhile


def user_record(server: Server, client: Client) -> dict[str, Any]:
    """What the other nodes keep of a local user."""
    return {"id": client.id, "nick": client.nick, "user": client.user, "host": client.host,
            "realname": client.realname, "account": client.account, "account_kind": client.account_kind,
            "modes": "".join(sorted(client.modes)), "caps": client.caps, "away": client.away,
            "auto_away": client.auto_away,
            "signon": client.signon, "server": server.name, "info": server.config.server.description}
