"""The network as every node sees it: this node's changes told to the others, and theirs
applied here (docs/scaling.md).

A change made by a local client is published after the command made it (the core's
events, read by listeners here); the node where it happened has already told every
client concerned, the remote ones through their stand-ins (``RemoteConn``: the lines go
to their node, formatted once, with the msgid and server-time of the node that made
them). So a node applying another node's change only changes its state and tells no
one, except when a node is gone and can no longer speak for its users.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ircd.cluster.channels import ChannelSync
from ircd.cluster.liveness import Liveness, user_record
from ircd.cluster.moves import Moves
from ircd.events import (
    AwayChanged,
    ChannelModeChanged,
    Joined,
    Kicked,
    LoggedIn,
    LoggedOut,
    NickChanged,
    Parted,
    Quit,
    Registered,
    TopicChanged,
    UserChanged,
    UserModeChanged,
)
from ircd.state.client import Client

if TYPE_CHECKING:
    from ircd.cluster.link import Frames, Link
    from ircd.server import Server
    from ircd.state.cluster import ClusterState
    from ircd.state.local import LocalState

log = logging.getLogger("pircd.cluster")

__all__ = ["RemoteConn", "Replica"]

_JOINING = frozenset({"hello", "burst", "gone"})  # what a node not (or no longer) a peer may say


class RemoteConn:
    """The connection of a remote user: its lines go to the node holding the real one."""

    output_full = False  # that node's SendQ protects it

    def __init__(self, link: Link, node: str, ident: int) -> None:
        self.link, self.node, self.ident = link, node, ident

    def write(self, data: bytes | bytearray) -> None:
        self.link.forward(self.node, self.ident, bytes(data))

    def buffered(self) -> int:
        return 0

    def close(self) -> None:
        pass  # a remote user leaves when its own node says so


class Replica(Liveness, Moves):
    def __init__(self, server: Server, remote: ClusterState, link: Link) -> None:
        self.server, self.remote, self.link = server, remote, link
        self.state: LocalState = remote.local
        self.local: dict[int, Client] = {}  # this node's registered clients that the others know
        self.last_seen: dict[str, float] = {}  # peer -> when it last said something (monotonic)
        self.servers: dict[str, tuple[str, str]] = {}  # node -> its server name and description
        # a local client holds the nick of a remote user that left (ircd.cluster.nicks)
        self.nick_taken_over: Callable[[str, int, str], None] | None = None
        self.channels = ChannelSync(server, self.identity, self.member, lambda c: self.local.get(c.id) is c,
                                    self.link.broadcast)
        events = server.events
        for kind, fn in ((Registered, self._registered), (Quit, self._quit), (NickChanged, self._nick),
                         (Joined, self._joined), (Parted, self._parted), (Kicked, self._kicked),
                         (AwayChanged, self._away), (LoggedIn, self._account), (LoggedOut, self._account),
                         (TopicChanged, self._topic_changed), (ChannelModeChanged, self._mode_changed),
                         (UserModeChanged, self._umode), (UserChanged, self._user_changed)):
            events.subscribe(kind, fn)
        server.cap_change_hooks.append(self._caps)
        server.invite_hooks.append(self.channels.invited)

    # this node's changes ---------------------------------------------------

    def _registered(self, ev: Registered) -> None:
        client = ev.client
        if self.state.nick_holder(client.nick_folded) is not client or client.id in self.local:
            return  # a connection sharing another's nick (ircd.sessions), or an identity moved here
        self.local[client.id] = client
        self.link.broadcast({"op": "user", **user_record(self.server, client)})

    def _quit(self, ev: Quit) -> None:
        client = ev.client
        if self.local.pop(client.id, None) is None:
            return
        holder = self.state.nick_holder(client.nick_folded)
        if holder is None:
            self.link.broadcast({"op": "quit", "id": client.id, "reason": ev.reason})
        elif holder is not client:  # the identity stays, held by another connection (ircd.sessions)
            self.local[holder.id] = holder
            self.link.broadcast({"op": "rekey", "id": client.id, "new": holder.id})
        else:  # an always-on identity without a connection: still on the network, away
            self.local[client.id] = client
            self.link.broadcast({"op": "away", "id": client.id, "away": client.away, "auto_away": client.auto_away})

    def _nick(self, ev: NickChanged) -> None:
        if ev.client.id in self.local:
            self.link.broadcast({"op": "nick", "id": ev.client.id, "nick": ev.client.nick})

    def _joined(self, ev: Joined) -> None:
        if ev.client.id in self.local:
            self.channels.joined(ev)

    def _parted(self, ev: Parted) -> None:
        self.channels.left(ev.client, ev.channel)

    def _kicked(self, ev: Kicked) -> None:
        self.channels.left(ev.target, ev.channel)

    def _away(self, ev: AwayChanged) -> None:
        if ev.client.id in self.local:
            self.link.broadcast({"op": "away", "id": ev.client.id, "away": ev.client.away, "auto_away": False})

    def _mode_changed(self, ev: ChannelModeChanged) -> None:
        if ev.client is None or ev.client.id in self.local:  # a change made here, not one applied here
            self.channels.mode_changed(ev)

    def _topic_changed(self, ev: TopicChanged) -> None:
        if ev.client is None or ev.client.id in self.local:
            self.channels.topic_changed(ev)

    def identity(self, client: Client) -> tuple[str, int] | None:
        """Who ``client`` is across the network: (its node, its client id there)."""
        if client.id in self.local:
            return self.link.node, client.id
        node = self.remote.node_of.get(client)
        if node is None or not isinstance(client.conn, RemoteConn):
            return None
        return node, client.conn.ident

    def member(self, node: str, ident: int) -> Client | None:
        """The user (node, client id there), if this node knows it."""
        return self.local.get(ident) if node == self.link.node else self.remote.find_remote(node, ident)

    def _account(self, ev: LoggedIn | LoggedOut) -> None:
        client = ev.client
        if client.id in self.local:
            self.link.broadcast({"op": "account", "id": client.id, "account": client.account,
                                 "account_kind": client.account_kind, "modes": "".join(sorted(client.modes))})

    def _umode(self, ev: UserModeChanged) -> None:
        if ev.client.id in self.local:
            self.link.broadcast({"op": "umode", "id": ev.client.id, "modes": "".join(sorted(ev.client.modes))})

    def _user_changed(self, ev: UserChanged) -> None:
        client = ev.client
        if client.id in self.local:
            self.link.broadcast({"op": "ident", "id": client.id, "user": client.user, "host": client.host,
                                 "realname": client.realname})

    def _caps(self, client: Client, old: int, new: int) -> None:
        if client.id in self.local:
            self.link.broadcast({"op": "caps", "id": client.id, "caps": client.caps})

    def server_of(self, client: Client) -> tuple[str, str] | None:
        """The server a remote user is on (WHOIS 312)."""
        node = self.remote.node_of.get(client)
        return self.servers.get(node) if node is not None else None

    def disconnect(self, client: Client, reason: str, quit_message: str | None) -> None:
        """KILL, or a takeover, of a user of another node: its node closes the connection and
        tells everyone (``Server.disconnect`` sends remote users here)."""
        who = self.identity(client)
        if who is None:
            return
        client.closing = True  # nothing more is sent to it from here; its node's QUIT removes it
        self.link.to_node(who[0], {"op": "kill", "id": who[1], "reason": reason, "quit": quit_message})

    def publish_ext(self, kind: str, data: dict[str, Any], node: str | None) -> None:
        """An extension's message to the other nodes (``ExtensionAPI.publish``)."""
        op = {"op": "ext", "kind": kind, "data": data}
        if node is None:
            self.link.broadcast(op)
        elif node in self.link.peers:
            self.link.to_node(node, op)

    def _ext(self, op: dict[str, Any]) -> None:
        handler = self.server.cluster_handlers.get(op["kind"])
        if handler is None:
            log.warning("cluster node message unknown kind=%r from=%s", op["kind"], op["from"])
            return
        handler(op["from"], op["data"])

    def _peer_changed(self, node: str, up: bool) -> None:
        for hook in self.server.cluster_peer_hooks:
            try:
                hook(node, up)
            except Exception:  # noqa: BLE001 - one extension's failure must not stop the others
                log.exception("cluster node change hook failed node=%s", node)

    # the other nodes' changes ----------------------------------------------

    def apply(self, op: dict[str, Any]) -> None:
        kind, node = op.get("op", ""), op.get("from", "")
        handler = _APPLY.get(kind)
        if handler is None:
            log.warning("cluster op unknown op=%r from=%s", kind, node)
            return
        self.last_seen[node] = time.monotonic()
        if node not in self.link.peers and kind not in _JOINING:
            self._resync(node)  # a node this one had given up for dead: start over with it
        handler(self, op)

    def deliver(self, frames: Frames) -> None:
        """Lines another node formatted for clients of this one."""
        local = self.local
        for idents, data in frames:
            for ident in idents:
                client = local.get(ident)
                if client is not None:
                    client.send(data)

    def _user(self, op: dict[str, Any]) -> None:
        node, ident = op["from"], op["id"]
        if self.remote.find_remote(node, ident) is not None:
            return  # known already (a burst crossing a change)
        client = self.stand_in(op)
        holder = self.state.nick_holder(client.nick_folded)
        held = holder is None or self.settle_nick(holder, client, (node, ident))
        self.remote.add_remote(node, ident, client, held=held)
        if held:
            self.server.notify_monitors(client, online=True)

    def stand_in(self, op: dict[str, Any]) -> Client:
        """This node's copy of the user ``op`` describes (a ``user`` record), not yet on the network."""
        server, node, ident = self.server, op["from"], op["id"]
        self.servers[node] = (op["server"], op["info"])
        conn = RemoteConn(self.link, node, ident)
        client = Client(server.delivery, conn, op["host"], server.next_client_id(), op["signon"], 0.0)
        client.nick, client.nick_folded = op["nick"], server.casefold(op["nick"])
        client.user, client.realname, client.away = op["user"], op["realname"], op["away"]
        client.account = op["account"]
        client.account_folded = server.casefold(op["account"]) if op["account"] else None
        client.account_kind = op["account_kind"]
        client.modes = set(op["modes"])
        client.set_caps(op["caps"])
        client.auto_away = op.get("auto_away", False)
        client.registered = True
        client.update_prefix()
        return client

    def repoint(self, client: Client, op: dict[str, Any]) -> None:
        """The remote user ``client`` is the user ``op`` describes, of another node now (its
        identity moved there): its lines go there, with that connection's capabilities."""
        self.servers[op["from"]] = (op["server"], op["info"])
        client.conn = RemoteConn(self.link, op["from"], op["id"])
        client.set_caps(op["caps"])
        client.away, client.auto_away = op["away"], op.get("auto_away", False)

    def _arrive(self, op: dict[str, Any]) -> None:
        """A user and its channels, told to this node's members of them (as in a burst)."""
        self._user(op)
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            for name, modes in op["chans"]:
                self.channels.join(client, {"chan": name, "modes": modes}, tell=True, accept=True)

    def _quit_op(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            self._drop(op["from"], op["id"], client, op["reason"], tell=False)

    def _kill(self, op: dict[str, Any]) -> None:
        """Another node closes a user of this one: every connection of the identity ends, an
        always-on one too (as KILL does), so the user leaves the network with one QUIT."""
        client = self.local.get(op["id"])
        if client is not None:
            self.server.sessions.end(client, op["reason"], op["quit"])

    def _rekey(self, op: dict[str, Any]) -> None:
        """A remote identity is now held by another connection of its node."""
        client = self.remote.rekey(op["from"], op["id"], op["new"])
        if client is not None and isinstance(client.conn, RemoteConn):
            client.conn.ident = op["new"]

    def _nick_op(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is None:
            return
        server, old_nick, old_folded = self.server, client.nick, client.nick_folded
        self.state.remove_nick(client)
        client.nick, client.nick_folded = op["nick"], server.casefold(op["nick"])
        client.update_prefix()
        holder = self.state.nick_holder(client.nick_folded)
        held = holder is None or holder is client or self.settle_nick(holder, client, (op["from"], op["id"]))
        if held:
            self.state.add_nick(client)
        if old_folded != client.nick_folded:
            self.state.remember_nick(old_nick, client, int(server.clock()))
            if self.state.nick_holder(old_folded) is None:  # else another user took it meanwhile
                server.notify_monitors(client, online=False, nick_folded=old_folded, nick=old_nick)
            if held:
                server.notify_monitors(client, online=True)

    def _join(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            self.channels.join(client, op, tell=False)

    def _part(self, op: dict[str, Any]) -> None:
        self.channels.part(self.member(op["node"], op["id"]), op)

    def _away_op(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            client.away, client.auto_away = op["away"], op.get("auto_away", False)

    def _account_op(self, op: dict[str, Any]) -> None:
        """A remote user logged in or out (an agent gets +B with it)."""
        client = self.remote.find_remote(op["from"], op["id"])
        if client is None:
            return
        self.state.account_detached(client, client.account_folded)
        client.account, client.account_kind = op["account"], op["account_kind"]
        client.account_folded = self.server.casefold(op["account"]) if op["account"] else None
        self.remote.set_modes(client, op["modes"])
        self.state.account_attached(client)

    def _umode_op(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            self.remote.set_modes(client, op["modes"])

    def _ident_op(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            client.user, client.host, client.realname = op["user"], op["host"], op["realname"]
            client.update_prefix()

    def _caps_op(self, op: dict[str, Any]) -> None:
        client = self.remote.find_remote(op["from"], op["id"])
        if client is not None:
            client.set_caps(op["caps"])


_APPLY: dict[str, Callable[[Replica, dict[str, Any]], None]] = {
    "hello": Replica._hello, "burst": Replica._burst, "gone": Replica._gone, "user": Replica._user,
    "quit": Replica._quit_op, "nick": Replica._nick_op, "join": Replica._join, "part": Replica._part,
    "away": Replica._away_op, "caps": Replica._caps_op, "rekey": Replica._rekey,
    "alive": Replica._alive, "account": Replica._account_op, "kill": Replica._kill,
    "umode": Replica._umode_op, "ident": Replica._ident_op, "ext": Replica._ext,
    "move": Replica._move, "rename": Replica._rename,
    "chan": lambda r, op: r.channels.chan(op), "mode": lambda r, op: r.channels.mode(op),
    "topic": lambda r, op: r.channels.topic(op), "invite": lambda r, op: r.channels.invite(op),
}
