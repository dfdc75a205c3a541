"""The network's state of one node of a cluster: the node's ``LocalState`` holding the
whole network, and which of its users belong to other nodes (docs/scaling.md).

Every node keeps the whole network in its memory: its own clients, and for each user
of another node a stand-in ``Client`` (a *remote user*) whose output goes to the node
that holds its connection (``ircd.cluster``). Remote users sit in the same nick and
channel indexes as local ones, so NAMES, WHOIS, WHO, LUSERS and every fan-out see them
without knowing; what changes them is the cluster's replication, never a command.

``LocalState`` itself is unchanged (and compiled in the compiled build, so it is wrapped,
not subclassed): a server without a cluster runs exactly the code it ran before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ircd.state.local import LocalState

if TYPE_CHECKING:
    from ircd.state.client import Client

__all__ = ["ClusterState"]


class ClusterState:
    """The remote users of a node's ``LocalState``, keyed by (node, that node's client id)."""

    def __init__(self, local: LocalState) -> None:
        self.local = local
        self.remote: dict[tuple[str, int], Client] = {}
        self.node_of: dict[Client, str] = {}  # remote user -> the node holding its connection

    def add_remote(self, node: str, ident: int, client: Client, *, held: bool = True) -> None:
        """A user of ``node`` is on the network: it holds its nick (unless ``held`` is False: another
        user keeps it, and its node renames this one) and counts in LUSERS."""
        local = self.local
        self.remote[(node, ident)] = client
        self.node_of[client] = node
        if held:
            local.add_nick(client)
        local.account_attached(client)
        local.count_user(client, 1)
        local.remote_count += 1

    def rekey(self, node: str, ident: int, new: int) -> Client | None:
        """The user ``ident`` of ``node`` is ``new`` there from now on (another connection
        holds its identity)."""
        client = self.remote.pop((node, ident), None)
        if client is not None:
            self.remote[(node, new)] = client
        return client

    def move(self, node: str, ident: int, new_node: str, new: int) -> Client | None:
        """The user ``ident`` of ``node`` is ``new`` of ``new_node`` from now on (its identity
        moved there, ircd.cluster.moves)."""
        client = self.remote.pop((node, ident), None)
        if client is not None:
            self.remote[(new_node, new)] = client
            self.node_of[client] = new_node
        return client

    def set_modes(self, client: Client, modes: str) -> None:
        """A remote user's user modes changed: the LUSERS counts follow."""
        local, new = self.local, set(modes)
        local.invisible_count += ("i" in new) - ("i" in client.modes)
        local.oper_count += ("o" in new) - ("o" in client.modes)
        client.modes = new

    def find_remote(self, node: str, ident: int) -> Client | None:
        return self.remote.get((node, ident))

    def drop_remote(self, node: str, ident: int) -> Client | None:
        """Forget a remote user (its channels are the caller's to leave first)."""
        client = self.remote.pop((node, ident), None)
        if client is None:
            return None
        local = self.local
        del self.node_of[client]
        local.remove_nick(client)
        local.account_detached(client, client.account_folded)
        local.count_user(client, -1)
        local.remote_count -= 1
        return client

    def remotes_of(self, node: str) -> list[tuple[int, Client]]:
        """The users of ``node`` (a copy: the caller may drop them while going through it)."""
        return [(ident, c) for (n, ident), c in self.remote.items() if n == node]
