"""Who may see what.

Two questions, answered in one place so every command agrees:

* ``channel_exists_for(viewer, channel)``: may the viewer learn that the
  channel exists at all? Core channels always exist; extensions register
  *existence filters* (PIRCAN private channels exist only for their members
  and owner). A channel that does not exist for a viewer must be answered
  exactly like a name nobody uses. A filter may also name the channels it
  might hide (``may_hide``), so that a count of the channels a viewer sees
  (LUSERS, on every registration) asks about those alone, not every channel.
* ``channel_listed_for(viewer, channel)``: does it show in LIST, WHOIS
  channel lists and WHO by mask? Members always see it; others only when it
  is not secret (+s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client

__all__ = ["Visibility"]

ExistenceFilter = Callable[["Client", "Channel"], bool]
# the channels an existence filter might hide from someone, as they are now
MayHide = Callable[[], Iterable["Channel"]]


class Visibility:
    def __init__(self) -> None:
        self.filters: list[ExistenceFilter] = []
        self._may_hide: list[MayHide] = []
        self._unnamed = 0  # filters that do not name the channels they might hide

    def add_filter(self, fn: ExistenceFilter, may_hide: MayHide | None = None) -> None:
        """``fn(viewer, channel)`` False hides the channel from the viewer. ``may_hide()``, when
        given, returns every channel ``fn`` might answer False for (more will do, none may be
        missing); without it, a count over all channels asks ``fn`` about each of them."""
        self.filters.append(fn)
        if may_hide is None:
            self._unnamed += 1
        else:
            self._may_hide.append(may_hide)

    def may_hide(self) -> Iterable[Channel] | None:
        """The channels some filter might hide from someone, each once; None when a filter does
        not name them (then any channel might be hidden). With one filter, its own list as it is
        (LUSERS asks on every registration: a set is not copied)."""
        if self._unnamed:
            return None
        if len(self._may_hide) == 1:
            named = self._may_hide[0]()
            return named if isinstance(named, (set, frozenset)) else set(named)
        found: set[Channel] = set()
        for names in self._may_hide:
            found.update(names())
        return found

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
