"""Several pircd processes as one network: a node's link to the others (docs/scaling.md).

Only a server with a ``[cluster]`` table builds any of this (``ircd.app``): its
``LocalState`` holds the whole network, ``ircd.state.cluster.ClusterState`` which of its
users are other nodes' (the remote users), NICK claims
nicks in the shared PostgreSQL database (``nicks``), and ``replica`` tells the other
nodes what changed here over NATS (``link``) and applies what changed there. A server
without the table runs none of it: no extra work per line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ircd.cluster.link import Frames, Link, shown
from ircd.cluster.nicks import NickClaims
from ircd.cluster.replica import Replica
from ircd.state.cluster import ClusterState
from ircd.state.local import LocalState
from ircd.store.cluster import CLUSTER_MIGRATIONS, CLUSTER_TRACK, NODE_BITS, node_number

if TYPE_CHECKING:
    from ircd.server import Server

__all__ = ["ClusterState", "attach"]

log = logging.getLogger("pircd.cluster")


def attach(server: Server) -> Replica:
    """Make ``server`` a node: NATS and the nick claims start after the store, and the
    node says goodbye before the store closes."""
    config = server.config.cluster
    assert config is not None and isinstance(server.state, LocalState)
    replica: Replica | None = None

    def on_op(op: dict) -> None:
        assert replica is not None
        replica.apply(op)

    def on_lines(frames: Frames) -> None:
        assert replica is not None
        replica.deliver(frames)

    link = Link(config.network, config.node, list(config.nats), on_op, on_lines)
    replica = Replica(server, ClusterState(server.state), link)
    nicks = NickClaims(server, config.node)
    replica.nick_taken_over = nicks.taken_over
    server.remote_users = replica

    async def start() -> None:
        assert server.store is not None
        await server.store.migrate(CLUSTER_TRACK, CLUSTER_MIGRATIONS)
        number = await server.store.write(node_number, config.node)
        server.ids.set_node(number, NODE_BITS)  # before any client can make an id
        freed = await nicks.reset()
        await link.start()
        replica.hello()
        log.info("cluster node=%s number=%d network=%s nats=%s (nicks freed from an earlier run: %d)",
                 config.node, number, config.network, ",".join(shown(url) for url in config.nats), freed)

    async def stop() -> None:
        if link.nc is not None:
            replica.goodbye()
            await link.stop()

    def tick() -> None:
        if link.nc is not None:
            replica.heartbeat()

    server.tick_hooks.append(tick)
    server.on_startup.append(start)
    server.on_shutdown.insert(0, stop)
    return replica
