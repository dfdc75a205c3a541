"""Who may see what.

Two questions, answered in one place so every command agrees:

* ``channel_exists_for(viewer, channel)``: may the viewer learn that the
  channel exists at all? Core channels always exist; extensions register
  *existence filters* (PIRCAN private channels exist only for their members
  and owner). A channel that does not exist for a viewer must be answered
  exactly like a name nobody uses.
* ``channel_listed_for(viewer, channel)``: does it show in LIST, WHOIS
  channel lists and WHO by mask? Members always see it; others only when it
  is not secret (+s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client

__all__ = ["Visibility"]

ExistenceFilter = Callable[["Client", "Channel"], bool]


class Visibility:
    def __init__(self) -> None:
        self.filters: list[ExistenceFilter] = []

    def add_filter(self, fn: ExistenceFilter) -> None:
        self.filters.append(fn)

    def channel_exists_for(self, viewer: "Client", channel: "Channel") -> bool:
        for fn in self.filters:
            if not fn(viewer, channel):
                return False
        return True

    def channel_listed_for(self, viewer: "Client", channel: "Channel") -> bool:
        if viewer in channel.members:
            return True
        if "s" in channel.modes or "p" in channel.modes:
            return False
        return self.channel_exists_for(viewer, channel)

    def shares_channel(self, a: "Client", b: "Client") -> bool:
        if len(a.channels) > len(b.channels):
            a, b = b, a
        return any(folded in b.channels for folded in a.channels)

    def user_listed_for(self, viewer: "Client", target: "Client") -> bool:
        """Whether ``target`` shows in a WHO by mask (not +i, or shares a channel)."""
        if viewer is target or "i" not in target.modes or viewer.is_oper:
            return True
        return self.shares_channel(viewer, target)
