"""A channel's state between nodes: after a MODE or TOPIC on one node, the whole channel
(flag modes, key, limit, topic, the b/e/I lists and every member's prefix) goes to the
others, which take it as it is. The last change published wins; two nodes changing one
channel at the same moment may lose one of the two changes (docs/scaling.md, what is next).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ircd import caps as C
from ircd.commands.channel import extended_join
from ircd.state.channel import ListEntry

if TYPE_CHECKING:
    from ircd.server import Server
    from ircd.state.channel import Channel
    from ircd.state.client import Client

__all__ = ["apply_snapshot", "netjoin", "snapshot"]

# who a member is across the network: (its node, its client id there)
Identity = Callable[["Client"], "tuple[str, int] | None"]


def snapshot(channel: Channel, identity: Identity) -> dict[str, Any]:
    members = []
    for member, prefix in channel.members.items():
        who = identity(member)
        if who is not None:
            members.append([who[0], who[1], prefix])
    return {
        "chan": channel.name, "modes": "".join(sorted(channel.modes)), "key": channel.key,
        "limit": channel.limit, "topic": channel.topic, "topic_setter": channel.topic_setter,
        "topic_time": channel.topic_time,
        "lists": {which: [[e.mask, e.set_by, e.set_at] for e in entries]
                  for which, entries in channel.lists.items()},
        "members": members,
    }


def apply_snapshot(channel: Channel, snap: dict[str, Any], identity: Identity) -> None:
    channel.modes = set(snap["modes"])
    channel.key, channel.limit = snap["key"], snap["limit"]
    channel.topic, channel.topic_setter = snap["topic"], snap["topic_setter"]
    channel.topic_time = snap["topic_time"]
    channel.lists = {which: [ListEntry(mask, by, at) for mask, by, at in entries]
                     for which, entries in snap["lists"].items()}
    prefixes = {(node, ident): prefix for node, ident, prefix in snap["members"]}
    for member in channel.members:
        who = identity(member)
        if who is not None and who in prefixes:
            channel.members[member] = prefixes[who]


def netjoin(server: Server, client: Client, channel: Channel, members: list[Client]) -> None:
    """Tell ``members`` (local clients) that ``client`` is in ``channel``: its JOIN, plain or
    extended as each asked, as the JOIN command would have."""
    plain = server.relay_from(client, "JOIN", channel.name)
    extended = [m for m in members if m.caps & C.EXTENDED_JOIN]
    server.delivery.relay([m for m in members if not m.caps & C.EXTENDED_JOIN], plain)
    if extended:
        server.delivery.relay(extended, extended_join(client, channel, plain))
