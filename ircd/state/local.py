"""The network's state held in this process's memory: the ``local`` implementation of
``ircd.state.NetworkState``.

Every index is keyed by the folded name (one ``casefold`` for the whole server).
Nothing here writes to a socket or knows a command: commands change the network
through these methods, then tell clients through ``ircd.delivery``.

Channels formed (LUSERS): a channel counts while it has members or an owner. Members
come and go in many places (JOIN, PART, KICK, QUIT, sessions, a cluster's replication),
so there is no running count of them. Instead: a channel that loses its last member
leaves the index at once unless it has an owner (``Server.drop_channel_if_empty``), and
an owner is taken away only from a channel its creator is in (``ircd.chanreg``). So the
one way a channel in the index is not formed is to have entered it so (created before
its first JOIN, restored without an owner, sent by a cluster node before its members):
such channels are kept in ``_unformed`` until they are seen formed or leave.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Callable, Collection, Iterable

from ircd import caps as C
from ircd.state.base import WhowasEntry
from ircd.state.channel import Channel

if TYPE_CHECKING:
    from ircd.state.client import Client

__all__ = ["LocalState"]

_NOBODY: frozenset[Client] = frozenset()


class LocalState:
    """Nicks, channels (members, modes, topics live on ``Channel``), logged-in accounts,
    MONITOR watchers, WHOWAS history and the LUSERS counts of one process."""

    def __init__(self, casefold: Callable[[str], str], whowas_limit: int) -> None:
        self.casefold = casefold
        self.nicks: dict[str, Client] = {}
        # the holder of a folded nick: the dict's own get, bound once (every direct message asks)
        self.nick_holder: Callable[[str], Client | None] = self.nicks.get
        self.channels: dict[str, Channel] = {}
        self._unformed: set[Channel] = set()  # in the index with neither members nor owner, maybe
        # told of each channel the index takes (created, restored, renamed: under its new name) and
        # lets go (destroyed, renamed: under its old name); ExtensionAPI.channel_index_hook
        self.channel_added: list[Callable[[Channel], None]] = []
        self.channel_removed: list[Callable[[Channel], None]] = []
        self.whowas: dict[str, deque[WhowasEntry]] = {}
        self._whowas_order: deque[str] = deque()
        self.whowas_limit = whowas_limit
        # registered connections per logged-in account (folded): who is "visible"
        self.by_account: dict[str, set[Client]] = {}
        self.monitors: dict[str, set[Client]] = {}  # folded nick -> watchers
        self.registered_count = 0  # registered clients, and those of them with +i (for LUSERS)
        self.invisible_count = 0
        self.oper_count = 0
        self.remote_count = 0  # of the registered: users of other nodes of a cluster (ircd.state.cluster)

    def count_user(self, client: Client, sign: int) -> None:
        """``client`` joins (``sign`` 1) or leaves (-1) the LUSERS counts: registered users, and
        of them those with +i and the operators (+o)."""
        self.registered_count += sign
        if "i" in client.modes:
            self.invisible_count += sign
        if "o" in client.modes:
            self.oper_count += sign

    # nicks ---------------------------------------------------------------

    def find_nick(self, nick: str) -> Client | None:
        return self.nicks.get(self.casefold(nick))

    def users(self) -> Collection[Client]:
        return self.nicks.values()

    def add_nick(self, client: Client) -> None:
        """``client`` holds its nick (``client.nick_folded``) from now on."""
        self.nicks[client.nick_folded] = client

    def remove_nick(self, client: Client) -> None:
        """Free ``client``'s nick, if ``client`` holds it."""
        if self.nicks.get(client.nick_folded) is client:
            del self.nicks[client.nick_folded]

    def remember(self, client: Client, now: int) -> None:
        """Keep a WHOWAS entry for a client that is going away."""
        if client.registered:
            self.remember_nick(client.nick, client, now, client.nick_folded)

    def remember_nick(self, nick: str, client: Client, now: int, folded: str | None = None) -> None:
        """Keep a WHOWAS entry for ``nick`` (the client's current or former nick; ``folded``: it
        casefolded, when the caller has that already)."""
        limit = self.whowas_limit
        if limit <= 0:
            return
        if folded is None:
            folded = self.casefold(nick)
        # made as the tuple it is: the named tuple's own __new__ is a Python function, a frame per QUIT
        entry = tuple.__new__(WhowasEntry, (nick, client.user, client.host, client.realname, client.account, now))
        whowas = self.whowas
        entries = whowas.get(folded)
        if entries is None:  # a deque is made only for a nick not remembered yet
            entries = whowas[folded] = deque(maxlen=10)
        entries.appendleft(entry)
        order = self._whowas_order
        order.append(folded)
        while len(order) > limit:
            old = order.popleft()
            bucket = whowas.get(old)
            if bucket:
                bucket.pop()
                if not bucket:
                    del whowas[old]

    def whowas_of(self, folded: str) -> Collection[WhowasEntry]:
        return self.whowas.get(folded, ())

    # channels ------------------------------------------------------------

    def find_channel(self, name: str) -> Channel | None:
        return self.channels.get(self.casefold(name))

    def channel(self, folded: str) -> Channel | None:
        return self.channels.get(folded)

    def all_channels(self) -> Collection[Channel]:
        return self.channels.values()

    def create_channel(self, name: str, now: int) -> Channel:
        channel = Channel(name, self.casefold(name), now)
        self.add_channel(channel)
        return channel

    def add_channel(self, channel: Channel) -> None:
        self.channels[channel.folded] = channel
        if not (channel.members or channel.owner_account):
            self._unformed.add(channel)
        for added in self.channel_added:
            added(channel)

    def remove_channel(self, channel: Channel) -> bool:
        """Forget ``channel``; False when the name is not (or no longer) this channel's."""
        if self.channels.get(channel.folded) is not channel:
            return False
        del self.channels[channel.folded]
        self._unformed.discard(channel)
        for removed in self.channel_removed:
            removed(channel)
        return True

    def channels_formed(self) -> int:
        """The channels with members or an owner (LUSERS' "channels formed"), without a walk over
        all of them: all the channels less those that entered the index unformed and still are."""
        unformed = self._unformed
        if unformed:
            unformed = self._unformed = {ch for ch in unformed if not (ch.members or ch.owner_account)}
        return len(self.channels) - len(unformed)

    def common_peers(self, client: Client) -> set[Client]:
        """Everyone sharing at least one channel with ``client`` (not the client)."""
        peers: set[Client] = set()
        for channel in client.channels.values():
            peers.update(channel.members)
        peers.discard(client)
        return peers

    def peers_with_cap(self, client: Client, bit: int) -> set[Client]:
        """Who hears about a change to ``client`` that capability ``bit`` announces
        (AWAY, ACCOUNT, CHGHOST, SETNAME): channel peers with the capability, plus
        MONITOR watchers that have it and extended-monitor (IRCv3 extended-monitor).
        A set, so a watcher that also shares a channel gets the line once."""
        peers = {p for p in self.common_peers(client) if p.caps & bit}
        watchers = self.monitors.get(client.nick_folded)
        if watchers:
            want = bit | C.EXTENDED_MONITOR
            peers.update(w for w in watchers if w.caps & want == want and w is not client)
        return peers

    # accounts ------------------------------------------------------------

    def account_attached(self, client: Client) -> None:
        """A registered client is now logged in to ``client.account_folded``."""
        if client.account_folded is not None and client.registered:
            self.by_account.setdefault(client.account_folded, set()).add(client)

    def account_detached(self, client: Client, folded: str | None) -> None:
        if folded is None:
            return
        clients = self.by_account.get(folded)
        if clients is not None:
            clients.discard(client)
            if not clients:
                del self.by_account[folded]

    def account_clients(self, folded: str) -> Collection[Client]:
        """The registered connections logged in to the account (empty when none)."""
        return self.by_account.get(folded, _NOBODY)

    def account_online(self, folded: str) -> bool:
        return folded in self.by_account

    # MONITOR -------------------------------------------------------------

    def watchers(self, folded: str) -> Collection[Client]:
        return self.monitors.get(folded, _NOBODY)

    def watch(self, client: Client, folded: str) -> None:
        self.monitors.setdefault(folded, set()).add(client)

    def unwatch(self, client: Client, folded: str) -> None:
        watchers = self.monitors.get(folded)
        if watchers is not None:
            watchers.discard(client)
            if not watchers:
                del self.monitors[folded]

    def unwatch_all(self, client: Client, folded_nicks: Iterable[str]) -> None:
        for folded in folded_nicks:
            self.unwatch(client, folded)
