"""Several connections of one account sharing a nick (multiclient), and always-on accounts.

pircd keeps one ``Client`` per connection. When a connection logged in to an account asks, before it
registers, for the nick that a connection of the same account holds (``accounts.multiclient``), it
does not take the nick over: it *joins* that identity. Every connection of a group is a full member
of the group's channels, with the same prefixes, so channel fan-out, capability-dependent lines and
echoes reach each one as for any member, formatted for its own capabilities. What other clients see
stays one user: the network's state maps the nick to one connection of the group (the *face*), the others
are *shadows* that NAMES, WHO, LIST counts and the ``+l`` limit leave out, and a connection that
leaves while others stay quits silently.

An account with always-on (``accounts.always_on``: agents by default) keeps its identity when its
last connection goes: the ``Client`` keeps its nick and its channels, marked away, with no
connection (``detached``: nothing is queued for it). It is not *visible* in PIRCAN's sense (no
connection is logged in: NOTIFY waits, SEND receipts say ``queued``). The next connection of the
account that asks for the nick takes its place and is given its channels back (JOIN, topic, NAMES and
MARKREAD for each). It ends when the account is deleted or suspended, an operator KILLs the nick, a
REHASH no longer allows it, or the server stops.

On a node of a cluster the connections of an identity are all on one node: a connection of the
account registering with the nick on another node takes the identity over there, as a connection takes
over a detached one here (``ircd.cluster.moves``: ``hand_over`` and ``release`` are this node's side).

Invariants: the connections of a group have the same nick, user, host, real name, account, away and
user modes (one ``set`` object); each is in every channel of the group with the same prefix string;
exactly one of them (the face) holds the nick in ``server.state``, and only the others have ``shadow`` set.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.delivery.replies import ReplyBuffer
from ircd.state.client import Sessions

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client
    from ircd.server import Server

__all__ = ["AWAY_TEXT", "SessionManager", "Sessions", "copy_identity", "take_channels"]

log = logging.getLogger("pircd")
AWAY_TEXT = "Not connected"


class _Detached:
    """The connection of an always-on identity that has none: everything written is dropped."""

    output_full = False

    def write(self, data: bytes | bytearray) -> None:
        return None

    def buffered(self) -> int:
        return 0

    def close(self) -> None:
        return None


DETACHED = _Detached()


class SessionManager:
    def __init__(self, server: Server) -> None:
        from ircd.events import Rehashed  # ircd.events imports ircd.state.client, which imports this module

        self.server = server
        self.ghosts: dict[str, Client] = {}  # always-on identities without a connection, by account
        self.shadows = 0  # connections that share a nick with another (not counted as users)
        self.ending = False  # in end(): a connection going does not leave its identity detached
        self.moving = False  # in hand_over(): a connection going leaves its identity, quietly, to its new node
        server.events.subscribe(Rehashed, self._rehashed)
        server.join_hooks.append(self._joined)

    # policy -------------------------------------------------------------------------

    def may_share(self, client: Client, holder: Client) -> bool:
        """Whether ``client``, still registering, joins ``holder``'s identity instead of taking its
        nick: same account, and ``holder`` is detached (always-on) or multiclient is on for the account's kind."""
        account = client.account_folded
        if client.registered or account is None or holder.account_folded != account or not holder.registered:
            return False
        if not self.server.is_here(holder):  # held on another node of a cluster: the identity moves here
            return self.always_on(client) or self.multiclient(client)
        return holder.detached or self.multiclient(client)

    def multiclient(self, client: Client) -> bool:
        mode = self.server.config.accounts.multiclient
        return mode == "all" or (mode == "persons" and client.account_kind != "agent")

    def always_on(self, client: Client) -> bool:
        mode = self.server.config.accounts.always_on
        if client.account_folded is None or mode == "off":
            return False
        return mode == "all" or client.account_kind == "agent"

    def share_nick(self, client: Client, holder: Client) -> None:
        """Before registration: ``client`` goes by ``holder``'s nick and joins it when it registers."""
        self.server.state.remove_nick(client)
        client.nick, client.nick_folded = holder.nick, holder.nick_folded
        client.refused_nick = None

    # joining an identity --------------------------------------------------------------

    def attach(self, client: Client, holder: Client) -> None:
        """``client`` finishes registering as a connection of ``holder``'s identity (the state's
        holder of its nick): it takes a detached identity's place, or joins a live one's group."""
        if holder.detached:
            self.adopt(client, holder)
        elif not self.server.is_here(holder):  # its node hands it over (ircd.cluster.moves)
            self.server.remote_users.move_here(client, holder)
        else:
            group = holder.group
            if group is None:
                group = holder.group = Sessions(holder)
            group.members.append(client)
            client.group = group
            client.shadow = True
            self.shadows += 1
            copy_identity(holder, client)
            for channel in holder.channels.values():
                channel.members[client] = channel.members[holder]
                channel.shadows += 1
                client.channels[channel.folded] = channel
        log.info("attached id=%d nick=%s account=%s", client.id, client.nick, client.account)

    def adopt(self, client: Client, ghost: Client) -> None:
        """``client`` takes the place of ``ghost`` (a detached identity, or on a cluster node this
        node's copy of an identity moving here): its nick, identity and channels; back if away."""
        server = self.server
        if self.ghosts.get(ghost.account_folded or "") is ghost:
            del self.ghosts[ghost.account_folded or ""]
        copy_identity(ghost, client)
        server.state.add_nick(client)
        take_channels(ghost, client)
        if client.auto_away:
            client.away = None
            client.auto_away = False
            server.delivery.relay(server.state.peers_with_cap(client, C.AWAY_NOTIFY), server.relay_from(client, "AWAY"))

    def rejoin_burst(self, client: Client, reply: ReplyBuffer) -> None:
        """After the welcome: the identity's channels, as if the connection had joined each (JOIN,
        then MARKREAD, topic and NAMES, as a JOIN answers)."""
        from ircd.commands.channel import answer_join, join_relays

        server = self.server
        for channel in list(client.channels.values()):
            plain, extended = join_relays(server, client, channel)
            reply.relay(extended if client.caps & C.EXTENDED_JOIN else plain)
            answer_join(server, client, reply, channel, skip=self._joined)

    def _joined(self, client: Client, channel: Channel, reply: ReplyBuffer) -> None:
        """A connection of a group joined a channel: the others (members already, so the JOIN line
        reached them) get what a JOIN answers: MARKREAD, topic and NAMES."""
        group = client.group
        if group is None:
            return
        from ircd.commands.channel import answer_join

        server = self.server
        for other in group.members:
            if other is client or other.closing:
                continue
            own = ReplyBuffer(server, other)
            answer_join(server, other, own, channel, skip=self._joined)
            own.flush()

    # an identity for an account with no connection ------------------------------------

    def summon(self, account: str, name: str) -> Client | None:
        """The account's identity, for a transport that acts as the account without an IRC
        connection (joining a channel over MCP): the connection holding its nick, or its detached
        identity; else, when the account may be always-on, a new detached identity (registered,
        away, in no channel yet), which a connection of the account takes over as after a
        disconnect. None when another client holds the nick or always-on is off for the account."""
        from ircd.accountops import viewer_for

        server = self.server
        holder = server.state.nick_holder(account)
        if holder is not None:
            return holder if holder.registered and holder.account_folded == account else None
        ghost = viewer_for(server, account, name)
        if not self.always_on(ghost):
            return None
        ghost.realname = name
        ghost.registered = True
        for mode in server.config.server.default_user_modes:
            if mode in "iwB":
                ghost.modes.add(mode)
        if ghost.account_kind == "agent":
            ghost.modes.add("B")  # as an agent's login sets it (ircd.accounts)
        server.state.add_nick(ghost)
        server.state.count_user(ghost, 1)
        self._detach(ghost)
        server.notify_monitors(ghost, online=True)
        return ghost

    # leaving --------------------------------------------------------------------------

    def keep(self, client: Client) -> bool:
        """A registered connection is going: True when its identity stays (other connections share
        it, or it is always-on and becomes detached), so no QUIT is relayed and nothing is left."""
        group = client.group
        if group is not None:
            self._leave_group(client, group)
            return True
        if not self.ending and (self.moving or self.always_on(client)) and not client.detached:
            self._detach(client)
            return True
        return False

    def _leave_group(self, client: Client, group: Sessions) -> None:
        server = self.server
        group.members.remove(client)
        if client.shadow:
            self.shadows -= 1
        else:
            face = group.members[0]
            face.shadow = False
            self.shadows -= 1
            group.face = face
            server.state.add_nick(face)
        for channel in client.channels.values():
            if channel.members.pop(client, None) is not None:
                channel.shadows -= 1
        client.channels = {}
        client.group = None
        client.shadow = False
        if len(group.members) == 1:
            group.members[0].group = None

    def _detach(self, client: Client) -> None:
        server = self.server
        client.detached = True
        client.conn = DETACHED
        client.outbuf = []
        client.outlen = 0
        client.extra_lines = 0
        self.ghosts[client.account_folded or ""] = client
        if client.away is None and not self.moving:
            client.away = AWAY_TEXT
            client.auto_away = True
            relay = server.relay_from(client, "AWAY", AWAY_TEXT)
            server.delivery.relay(server.state.peers_with_cap(client, C.AWAY_NOTIFY), relay)
        log.info("detached id=%d nick=%s account=%s", client.id, client.nick, client.account)

    def drop(self, ghost: Client, reason: str) -> None:
        """End a detached identity: its peers see it quit, its nick and channels are freed."""
        server = self.server
        if self.ghosts.get(ghost.account_folded or "") is ghost:
            del self.ghosts[ghost.account_folded or ""]
        ghost.detached = False  # closing stays: nothing more is written to it
        server.delivery.relay(server.state.common_peers(ghost), server.relay_from(ghost, "QUIT", reason))
        for channel in list(ghost.channels.values()):
            channel.remove_member(ghost)
            server.drop_channel_if_empty(channel)
        server.state.count_user(ghost, -1)
        server.state.remember(ghost, int(server.clock()))
        server.notify_monitors(ghost, online=False)
        server.state.remove_nick(ghost)
        if ghost.account_folded is not None:
            server.read_markers.account_gone(ghost.account_folded)
        log.info("always-on ended nick=%s account=%s reason=%r", ghost.nick, ghost.account, reason)
        server.flush_all()

    def end(self, client: Client, reason: str, quit_message: str | None = None) -> None:
        """Close every connection of ``client``'s identity and end it, always-on or not (KILL, the
        account deleted or suspended): each connection gets ERROR, its peers one QUIT."""
        server = self.server
        self.ending = True
        try:
            for each in list(client.group.members) if client.group is not None else [client]:
                server.disconnect(each, reason, quit_message=quit_message)
        finally:
            self.ending = False

    def hand_over(self, client: Client, reason: str) -> Client | None:
        """The identity of ``client`` moves to another node of a cluster (ircd.cluster.moves): each of
        its connections here gets ERROR, no one a QUIT or an AWAY. Returns the identity, detached,
        with its nick and channels, for ``release`` once its new holder has them (None if a
        connection of it was closing already, and the identity with it)."""
        server = self.server
        self.moving = True
        try:
            for each in list(client.group.members) if client.group is not None else [client]:
                if not each.detached:
                    server.disconnect(each, reason)
        finally:
            self.moving = False
        ghost = server.state.nick_holder(client.nick_folded)
        return ghost if ghost is not None and ghost.detached else None

    def release(self, ghost: Client, heir: Client) -> None:
        """Forget a detached identity whose nick and channels ``heir`` (a user of another node) holds
        now: no QUIT, no MONITOR offline, nothing remembered; the counts are the heir's to keep."""
        state = self.server.state
        if self.ghosts.get(ghost.account_folded or "") is ghost:
            del self.ghosts[ghost.account_folded or ""]
        ghost.detached = False
        ghost.closing = True
        take_channels(ghost, heir)
        state.remove_nick(ghost)
        state.count_user(ghost, -1)
        log.info("handed over nick=%s account=%s", ghost.nick, ghost.account)

    def drop_account(self, account: str, reason: str) -> None:
        ghost = self.ghosts.get(account)
        if ghost is not None:
            self.drop(ghost, reason)

    def _rehashed(self, event: object) -> None:
        for ghost in list(self.ghosts.values()):
            if not self.always_on(ghost):
                self.drop(ghost, "Always-on turned off")

    def direct_recipients(self, sender: Client, target: Client, tagmsg: bool) -> list[Client]:
        """Who gets a direct message: every connection of the target's nick, and the sender's other
        connections (they see what their nick sent, as with a bouncer); TAGMSG only with
        message-tags."""
        found: list[Client] = list(target.group.members) if target.group is not None else [target]
        if sender.group is not None:
            found += [c for c in sender.group.members if c is not sender and c not in found]
        if tagmsg:
            found = [c for c in found if c.caps & C.MESSAGE_TAGS]
        return found

    # identity changes -----------------------------------------------------------------

    def become_face(self, client: Client) -> None:
        """Make ``client`` the connection of its group that holds the nick (before a NICK)."""
        group = client.group
        if group is None or group.face is client:
            return
        old = group.face
        state = self.server.state
        state.remove_nick(old)
        state.add_nick(client)
        old.shadow, client.shadow = True, False
        group.face = client

    def sync(self, client: Client) -> None:
        """Copy ``client``'s identity (after NICK, AWAY, SETNAME, a host change) to the other
        connections of its group."""
        group = client.group
        if group is None:
            return
        for other in group.members:
            if other is not client:
                copy_identity(client, other)


def take_channels(source: Client, target: Client) -> None:
    """``target`` takes ``source``'s place in each of its channels, with its prefixes."""
    for channel in list(source.channels.values()):
        channel.members[target] = channel.members.pop(source, "")
        target.channels[channel.folded] = channel
    source.channels = {}


def copy_identity(source: Client, target: Client) -> None:
    target.nick, target.nick_folded = source.nick, source.nick_folded
    target.user, target.host, target.realname = source.user, source.host, source.realname
    target.account, target.account_folded, target.account_kind = (
        source.account, source.account_folded, source.account_kind,
    )
    target.away, target.auto_away = source.away, source.auto_away
    target.modes = source.modes
    target.oper_name = source.oper_name
    target.signon = source.signon
    target.update_prefix()
