"""Registered channels: a channel created by a logged-in account belongs to it.

Its owner gets ``~`` (and ``@``) whenever it joins; its topic, modes, key,
limit and b/e/I lists are written to the store on every change and loaded
at start-up, so they survive a restart. A registered channel stays when
its last member leaves. Writes go through the store's group commit without
holding up the command that caused them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ircd.channel import Channel, ListEntry
from ircd.events import ChannelModeChanged, Joined, TopicChanged
from ircd.store import ChannelRow

if TYPE_CHECKING:
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
    channel = server.registry.channels.get(row.folded)
    if channel is None:
        channel = Channel(row.name, row.folded, row.created_at)
        server.registry.channels[row.folded] = channel
    channel.owner_account = row.owner
    channel.topic, channel.topic_setter, channel.topic_time = row.topic, row.topic_setter, row.topic_time
    channel.modes = set(row.modes)
    channel.key, channel.limit = row.key, row.limit
    channel.lists = {"b": [], "e": [], "I": []}
    for which, mask, set_by, set_at in row.lists:
        channel.lists[which].append(ListEntry(mask, set_by, set_at))
    return channel


class ChannelRegistry:
    def __init__(self, server: "Server", store: "Store") -> None:
        self.server = server
        self.store = store
        server.events.subscribe(Joined, self._joined)
        server.events.subscribe(TopicChanged, self._changed)
        server.events.subscribe(ChannelModeChanged, self._changed)

    async def load(self) -> int:
        rows = await self.store.load_channels()
        for row in rows:
            restore(self.server, row)
        log.info("registered channels loaded count=%d", len(rows))
        return len(rows)

    def save(self, channel: Channel) -> None:
        if channel.owner_account is not None:
            self.store.save_channel(snapshot(channel))

    def _joined(self, event: Joined) -> None:
        if event.created and event.channel.owner_account is not None:
            self.save(event.channel)

    def _changed(self, event: TopicChanged | ChannelModeChanged) -> None:
        self.save(event.channel)
