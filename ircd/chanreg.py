"""Registered channels: a channel created by a logged-in account belongs to it.

Its creator gets ``@``, as the creator of any channel does (RFC 1459 section
1.3: "the creating user becomes a channel operator"); afterwards the owner gets ``~``
(and ``@``) whenever it joins, and may give itself ``~`` with ``MODE +q``
at any time. Its topic, modes, key,
limit and b/e/I lists are written to the store on every change and loaded
at start-up, so they survive a restart. A registered channel stays when
its last member leaves. Writes go through the store's group commit without
holding up the command that caused them.

An account owns at most ``channels.registered_per_account`` registered
channels: past that, a channel it creates is an ordinary one (it vanishes
with its last member) and the creator is told so with a ``WARN JOIN``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ircd.state.channel import Channel, ListEntry, normalize_mask
from ircd.events import ChannelModeChanged, Joined, TopicChanged
from ircd.store import ChannelRow

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.delivery.replies import ReplyBuffer
    from ircd.server import Server
    from ircd.store import Store

log = logging.getLogger("pircd")


def snapshot(channel: Channel) -> ChannelRow:
    assert channel.owner_account is not None
    return ChannelRow(
        name=channel.name,
        folded=channel.folded,
        owner=channel.owner_account,
        created_at=channel.created,
        topic=channel.topic,
        topic_setter=channel.topic_setter,
        topic_time=channel.topic_time,
        modes="".join(sorted(channel.modes)),
        key=channel.key,
        limit=channel.limit,
        lists=tuple(
            (which, e.mask, e.set_by, e.set_at) for which in "beI" for e in channel.lists[which]
        ),
    )


def restore(server: "Server", row: ChannelRow) -> Channel:
    channel = server.state.channel(row.folded)
    if channel is None:
        channel = Channel(row.name, row.folded, row.created_at)
        server.state.add_channel(channel)
    channel.owner_account = row.owner
    channel.topic, channel.topic_setter, channel.topic_time = row.topic, row.topic_setter, row.topic_time
    channel.modes = set(row.modes)
    channel.key, channel.limit = row.key, row.limit
    channel.lists = {"b": [], "e": [], "I": []}
    for which, mask, set_by, set_at in row.lists:
        channel.lists[which].append(ListEntry(normalize_mask(mask), set_by, set_at))  # $a: of old versions
    return channel


class ChannelRegistry:
    def __init__(self, server: "Server", store: "Store") -> None:
        self.server = server
        self.store = store
        self.owned: dict[str, int] = {}  # folded account -> registered channels it owns
        self._not_registered: Channel | None = None  # created past the limit by the JOIN running now
        server.events.subscribe(Joined, self._joined)
        server.events.subscribe(TopicChanged, self._changed)
        server.events.subscribe(ChannelModeChanged, self._changed)
        server.channel_create_hooks.append(self._created)
        server.join_hooks.append(self._warn_not_registered)

    async def load(self) -> int:
        rows = await self.store.load_channels()
        for row in rows:
            restore(self.server, row)
            self.owned[row.owner] = self.owned.get(row.owner, 0) + 1
        log.info("registered channels loaded count=%d", len(rows))
        return len(rows)

    def _created(self, client: Client, channel: Channel) -> None:
        """A new channel is registered to its creator's account unless the account owns its limit.
        Either way its creator is an operator (``@``) for now, not yet ``~``: the JOIN gave it
        the prefixes of an owner joining its channel."""
        owner = channel.owner_account
        if owner is None:
            return
        channel.set_prefix(client, "q", False)
        if self.owned.get(owner, 0) >= self.server.config.channels.registered_per_account:
            channel.owner_account = None
            self._not_registered = channel
            return
        self.owned[owner] = self.owned.get(owner, 0) + 1

    def _warn_not_registered(self, client: Client, channel: Channel, reply: ReplyBuffer) -> None:
        if channel is not self._not_registered:
            return
        self._not_registered = None
        limit = self.server.config.channels.registered_per_account
        reply.warn("JOIN", "REGISTRATION_LIMIT", channel.name,
                   f"Channel not registered: your account already owns {limit} registered channels")

    def save(self, channel: Channel) -> None:
        if channel.owner_account is not None:
            self.store.save_channel(snapshot(channel))

    def _joined(self, event: Joined) -> None:
        if event.created and event.channel.owner_account is not None:
            self.save(event.channel)

    def _changed(self, event: TopicChanged | ChannelModeChanged) -> None:
        self.save(event.channel)
