"""Channels between nodes, and IRC's timestamp rule (TS) for two nodes' differing views of one
channel (docs/scaling.md, channels).

Every channel has a creation time, its TS (``Channel.created``, the time 329 shows), carried
with the JOIN that created it, with every other JOIN and MODE, and in bursts. A node that
hears of a channel it holds with another TS (two nodes created it in the same moment, or each
side of a split made its own) applies the TS rule as TS6 servers do:

- theirs is older: this node's side loses. Its modes, lists and every member's ``@``/``+``
  go, the other side's state is taken, and this node tells its own clients so with MODE lines;
- theirs is newer: this node's side wins, the other side's modes and prefixes are not taken
  (that node, applying the same rule, takes this side's);
- the same TS: both are kept, merged (flag modes and lists joined, the higher key and limit,
  the newer topic, each member's prefixes joined), the gain told to this node's clients.

A MODE travels as its changes (``mode``), not as the whole channel, so two nodes changing
one channel in the same moment keep both changes; a change from a channel with a newer TS
than this node's is from the losing side and is dropped, as TS6's TMODE is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from ircd import caps as C
from ircd.commands.channel import extended_join
from ircd.commands.modes import CHANNEL_MODE_KINDS, mode_kinds
from ircd.delivery.replies import Relay
from ircd.proto.modes import LIST, PREFIX, ModeChange, format_changes, parse_modes
from ircd.state.channel import ListEntry, sort_prefix_modes

if TYPE_CHECKING:
    from ircd.events import ChannelModeChanged, Joined, TopicChanged
    from ircd.server import Server
    from ircd.state.channel import Channel
    from ircd.state.client import Client

__all__ = ["ChannelSync", "apply_snapshot", "snapshot"]

# who a member is across the network: (its node, its client id there)
Identity = Callable[["Client"], "tuple[str, int] | None"]
# the member of a channel that (node, client id) names, if this node knows it
Member = Callable[[str, int], "Client | None"]


def snapshot(channel: Channel, identity: Identity) -> dict[str, Any]:
    members = []
    for member, prefix in channel.members.items():
        who = identity(member)
        if who is not None:
            members.append([who[0], who[1], prefix])
    return {
        "chan": channel.name, "ts": channel.created, "modes": "".join(sorted(channel.modes)), "key": channel.key,
        "limit": channel.limit, "topic": channel.topic, "topic_setter": channel.topic_setter,
        "topic_time": channel.topic_time,
        "lists": {which: [[e.mask, e.set_by, e.set_at] for e in entries]
                  for which, entries in channel.lists.items()},
        "members": members,
    }


def apply_snapshot(channel: Channel, snap: dict[str, Any], identity: Identity) -> None:
    """Take a channel's state as another node sent it."""
    channel.modes = set(snap["modes"])
    channel.key, channel.limit = snap["key"], snap["limit"]
    channel.topic, channel.topic_setter = snap["topic"], snap["topic_setter"]
    channel.topic_time = snap["topic_time"]
    channel.lists = {which: [ListEntry(mask, by, at) for mask, by, at in entries]
                     for which, entries in snap["lists"].items()}
    _take_prefixes(channel, snap, identity, merge=False)


def merge_snapshot(channel: Channel, snap: dict[str, Any], identity: Identity) -> None:
    """Join another node's state of a channel of the same TS with this node's (TS6's merge)."""
    channel.modes |= set(snap["modes"])
    if snap["key"] is not None and (channel.key is None or snap["key"] > channel.key):
        channel.key = snap["key"]
    if snap["limit"] is not None and (channel.limit is None or snap["limit"] > channel.limit):
        channel.limit = snap["limit"]
    if (snap["topic_time"], snap["topic"]) > (channel.topic_time, channel.topic):
        channel.topic, channel.topic_setter = snap["topic"], snap["topic_setter"]
        channel.topic_time = snap["topic_time"]
    for which, entries in snap["lists"].items():
        known = {e.mask for e in channel.lists[which]}
        channel.lists[which].extend(ListEntry(mask, by, at) for mask, by, at in entries if mask not in known)
    _take_prefixes(channel, snap, identity, merge=True)


def _take_prefixes(channel: Channel, snap: dict[str, Any], identity: Identity, *, merge: bool) -> None:
    prefixes = {(node, ident): prefix for node, ident, prefix in snap["members"]}
    for member, old in channel.members.items():
        who = identity(member)
        if who is not None and who in prefixes:
            channel.members[member] = sort_prefix_modes(old + prefixes[who]) if merge else prefixes[who]


def reset(channel: Channel, ts: int) -> None:
    """This node's side of a channel lost to an older one: nothing of its modes is left."""
    channel.created = ts
    channel.modes = set()
    channel.key = channel.limit = None
    channel.lists = {which: [] for which in channel.lists}
    for member in channel.members:
        channel.members[member] = ""


class _Seen(NamedTuple):
    """A channel's modes before a change this node must tell its clients about."""

    modes: set[str]
    key: str | None
    limit: int | None
    lists: dict[str, list[str]]
    topic: str
    prefixes: dict[Client, str]


def _seen(channel: Channel) -> _Seen:
    return _Seen(set(channel.modes), channel.key, channel.limit,
                 {which: [e.mask for e in entries] for which, entries in channel.lists.items()},
                 channel.topic, dict(channel.members))


def _changes(channel: Channel, seen: _Seen) -> list[ModeChange]:
    """The MODE changes from ``seen`` to the channel as it is: what was taken away, then what came."""
    out = [ModeChange(False, m, None) for m in sorted(seen.modes - channel.modes)]
    if seen.key is not None and channel.key != seen.key:
        out.append(ModeChange(False, "k", "*"))
    if seen.limit is not None and channel.limit is None:
        out.append(ModeChange(False, "l", None))
    for which, masks in seen.lists.items():
        now = {e.mask for e in channel.lists[which]}
        out.extend(ModeChange(False, which, mask) for mask in masks if mask not in now)
    for member, old in seen.prefixes.items():
        new = channel.members.get(member, "")
        out.extend(ModeChange(False, m, member.nick) for m in old if m not in new)
    out.extend(ModeChange(True, m, None) for m in sorted(channel.modes - seen.modes))
    if channel.key is not None and channel.key != seen.key:
        out.append(ModeChange(True, "k", channel.key))
    if channel.limit is not None and channel.limit != seen.limit:
        out.append(ModeChange(True, "l", str(channel.limit)))
    for which, entries in channel.lists.items():
        out.extend(ModeChange(True, which, e.mask) for e in entries if e.mask not in seen.lists[which])
    for member, new in channel.members.items():
        old = seen.prefixes.get(member, "")
        out.extend(ModeChange(True, m, member.nick) for m in new if m not in old)
    return out


def tell_modes(server: Server, channel: Channel, changes: list[ModeChange], to: list[Client]) -> None:
    """MODE lines from this server to ``to`` (local clients), at most MODES changes with a
    parameter each."""
    if not to:
        return
    per_line = server.config.limits.modes_per_line
    while changes:
        part, changes = changes[:per_line], changes[per_line:]
        modestr, params = format_changes(part)
        server.delivery.relay(to, Relay(server.name, "MODE", [channel.name, modestr, *params],
                                        time=server.server_time()))


def netjoin(server: Server, client: Client, channel: Channel, members: list[Client]) -> None:
    """Tell ``members`` (local clients) that ``client`` is in ``channel``: its JOIN, plain or
    extended as each asked, as the JOIN command would have, and its prefixes from this server."""
    if not members:
        return
    plain = server.relay_from(client, "JOIN", channel.name)
    extended = [m for m in members if m.caps & C.EXTENDED_JOIN]
    server.delivery.relay([m for m in members if not m.caps & C.EXTENDED_JOIN], plain)
    if extended:
        server.delivery.relay(extended, extended_join(client, channel, plain))
    prefix = channel.members.get(client, "")
    tell_modes(server, channel, [ModeChange(True, m, client.nick) for m in prefix], members)


def encode_modes(server: Server, channel: Channel, ev: ChannelModeChanged,
                 identity: Identity) -> list[list[Any]] | None:
    """A MODE's changes as the other nodes apply them: members named by (node, id), list entries
    with their setter and time; None when one cannot be said so (the whole channel goes instead)."""
    kinds = mode_kinds(server)
    changes, _ = parse_modes(ev.modes, list(ev.params), kinds)
    out: list[list[Any]] = []
    for adding, mode, arg in changes:
        kind = kinds.get(mode)
        if kind == PREFIX:
            target = server.state.find_nick(arg or "")
            who = identity(target) if target is not None else None
            if who is None:
                return None
            out.append([adding, mode, list(who)])
        elif kind == LIST:
            entry = next((e for e in channel.lists[mode] if e.mask == arg), None)
            if adding and entry is None:
                return None
            out.append([adding, mode, [entry.mask, entry.set_by, entry.set_at] if adding and entry else [arg]])
        elif mode == "k":
            out.append([adding, mode, arg if adding else None])
        elif mode == "l":
            out.append([adding, mode, int(arg or 0) if adding else None])
        else:
            out.append([adding, mode, None])
    return out


def apply_modes(channel: Channel, changes: list[list[Any]], member: Member) -> None:
    for adding, mode, arg in changes:
        kind = CHANNEL_MODE_KINDS.get(mode)
        if kind == LIST:
            entries = [e for e in channel.lists[mode] if e.mask != arg[0]]
            if adding:
                entries.append(ListEntry(arg[0], arg[1], arg[2]))
            channel.lists[mode] = entries
        elif kind == PREFIX:
            client = member(arg[0], arg[1])
            if client is not None:
                channel.set_prefix(client, mode, adding)
        elif mode == "k":
            channel.key = arg
        elif mode == "l":
            channel.limit = arg
        else:
            (channel.modes.add if adding else channel.modes.discard)(mode)


class ChannelSync:
    """The channel ops of one node: what it publishes after a JOIN, PART, KICK, MODE, TOPIC or
    INVITE here, and how it applies another node's."""

    def __init__(self, server: Server, identity: Identity, member: Member,
                 local: Callable[[Client], bool], broadcast: Callable[[dict[str, Any]], None]) -> None:
        self.server, self.identity, self.member = server, identity, member
        self.is_local, self.broadcast = local, broadcast

    def locals_in(self, channel: Channel) -> list[Client]:
        return [m for m in channel.members if self.is_local(m)]

    # this node's changes ------------------------------------------------------------

    def joined(self, ev: Joined) -> None:
        channel = ev.channel
        modes = channel.members.get(ev.client, "")
        op = {"op": "join", "id": ev.client.id, "chan": channel.name, "modes": modes, "ts": channel.created}
        if ev.created:  # with the modes it was created with (PIRCAN's private channels: +P)
            op["state"] = snapshot(channel, self.identity)
        self.broadcast(op)

    def left(self, client: Client, channel: Channel) -> None:
        who = self.identity(client)  # a remote user kicked here: its node and the others learn it too
        if who is not None:
            self.broadcast({"op": "part", "node": who[0], "id": who[1], "chan": channel.folded})

    def mode_changed(self, ev: ChannelModeChanged) -> None:
        changes = encode_modes(self.server, ev.channel, ev, self.identity)
        if changes is None:
            self.broadcast({"op": "chan", **snapshot(ev.channel, self.identity)})
        else:
            self.broadcast({"op": "mode", "chan": ev.channel.name, "ts": ev.channel.created, "changes": changes})

    def topic_changed(self, ev: TopicChanged) -> None:
        channel = ev.channel
        self.broadcast({"op": "topic", "chan": channel.name, "ts": channel.created, "topic": channel.topic,
                        "setter": channel.topic_setter, "time": channel.topic_time})

    def invited(self, client: Client, target: Client, channel: Channel) -> None:
        self.broadcast({"op": "invite", "chan": channel.name, "nick": target.nick_folded})

    # the other nodes' changes ---------------------------------------------------------

    def arrive(self, name: str, ts: int, snap: dict[str, Any] | None) -> tuple[Channel, bool]:
        """The channel ``name`` as another node has it (TS ``ts``, its state ``snap`` if sent):
        created here if new, else settled by the TS rule. Whether that node's modes and member
        prefixes count (its TS is not newer)."""
        server = self.server
        channel = server.state.channel(server.casefold(name))
        if channel is None:
            channel = server.state.create_channel(name, ts)
            if snap is not None:
                apply_snapshot(channel, snap, self.identity)
            return channel, True
        if ts > channel.created:
            return channel, False
        if ts == channel.created and snap is None:  # a JOIN to a channel both know: nothing to settle
            return channel, True
        seen = _seen(channel)  # a copy of the members: only where two views of a channel meet
        if ts < channel.created:
            reset(channel, ts)
            if snap is not None:
                apply_snapshot(channel, snap, self.identity)
        elif snap is not None:
            merge_snapshot(channel, snap, self.identity)
        local = self.locals_in(channel)
        tell_modes(server, channel, _changes(channel, seen), local)
        if channel.topic != seen.topic and channel.topic:
            server.delivery.relay(local, Relay(server.name, "TOPIC", [channel.name, channel.topic],
                                               time=server.server_time()))
        return channel, True

    def join(self, client: Client, op: dict[str, Any], *, tell: bool, accept: bool | None = None) -> None:
        """The remote user ``client`` joined. A JOIN that created the channel on its node was
        told to no one here (that node knew of no member): this node tells its own members, as it
        does for a burst's (``tell``)."""
        if accept is None:
            channel, accept = self.arrive(op["chan"], op["ts"], op.get("state"))
        else:
            found = self.server.state.channel(self.server.casefold(op["chan"]))
            if found is None:
                return
            channel = found
        if client in channel.members:
            return
        channel.add_member(client, op["modes"] if accept else "")
        client.channels[channel.folded] = channel
        channel.invited.discard(client.nick_folded)
        if tell or "state" in op:
            netjoin(self.server, client, channel, [m for m in self.locals_in(channel) if m is not client])

    def part(self, client: Client | None, op: dict[str, Any]) -> None:
        channel = self.server.state.channel(op["chan"])
        if client is None or channel is None or client not in channel.members:
            return
        channel.remove_member(client)
        client.channels.pop(channel.folded, None)
        self.server.drop_channel_if_empty(channel)

    def chan(self, op: dict[str, Any]) -> None:
        """A channel's whole state after a change on its node (a MODE its changes cannot say):
        taken as it is, as the newest word on a channel of the same TS."""
        channel = self.server.state.channel(self.server.casefold(op["chan"]))
        if channel is None:  # a channel's state without members here: no channel
            return
        if op["ts"] == channel.created:
            apply_snapshot(channel, op, self.identity)
        else:
            self.arrive(op["chan"], op["ts"], op)

    def mode(self, op: dict[str, Any]) -> None:
        channel = self.server.state.channel(self.server.casefold(op["chan"]))
        if channel is not None and op["ts"] <= channel.created:
            apply_modes(channel, op["changes"], self.member)

    def topic(self, op: dict[str, Any]) -> None:
        channel = self.server.state.channel(self.server.casefold(op["chan"]))
        if channel is not None and op["ts"] <= channel.created:
            channel.topic, channel.topic_setter, channel.topic_time = op["topic"], op["setter"], op["time"]

    def invite(self, op: dict[str, Any]) -> None:
        """An INVITE on another node: the invited user may pass ``+i`` (and ``+k``, ``+l``, bans)
        wherever it joins, on its own node above all."""
        channel = self.server.state.channel(self.server.casefold(op["chan"]))
        if channel is not None:
            channel.invited.add(op["nick"])

    def burst(self, snaps: Iterable[dict[str, Any]]) -> dict[str, bool]:
        """The channels of a burst, settled before its users join them: for each (folded), whether
        the sender's member prefixes count."""
        accepted = {}
        for snap in snaps:
            channel, accepted[self.server.casefold(snap["chan"])] = self.arrive(snap["chan"], snap.get("ts", 0), snap)
        return accepted
