"""Private channels in an owner's namespace: ``#<account>/<name>``.

* Only that account creates channels there (JOIN while logged in); a new one
  is private (mode +P) until the owner sets -P.
* Only the owner invites. An invitation is by account, stored, survives
  restarts and lasts until used (the JOIN) or withdrawn (UNINVITE, or KICK).
  A member who joined stays a member across disconnects and restarts; PART
  or KICK ends that.
* A non-member cannot learn that a private channel exists: the existence
  filter hides it from every channel lookup, so each command answers exactly
  as for a name nobody uses (see the differential test).
* Public channels admit only logged-in accounts unless ``guests_may_join``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ircd.api import Channel, Client, CommandContext, Joined, Kicked, Message, Parted

from ext.pircan import store as db
from ext.pircan.irc.common import account_of, fail
from ext.pircan.state import Pircan

PRIVATE = "P"
ERR_NOSUCHCHANNEL = "403"
ERR_NEEDREGGEDNICK = "477"
ERR_CHANOPRIVSNEEDED = "482"


@dataclass
class Access:
    invited: set[str] = field(default_factory=set)
    members: set[str] = field(default_factory=set)


def namespace_owner(name: str, casefold) -> str | None:
    """The folded account that owns ``#account/name``, or None outside any namespace."""
    if not name.startswith("#"):
        return None
    owner, sep, rest = name[1:].partition("/")
    if not sep or not owner or not rest:
        return None
    return casefold(owner)


class PrivateChannels:
    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.api = state.api
        self.access: dict[str, Access] = {}  # folded channel -> standing invitations and members
        # the server's channels in a namespace: the only ones that can be private (may_hide)
        self.namespaced: set[Channel] = set()

    async def load(self) -> None:
        """The access lists as the database has them (at start-up, and on a cluster node back
        from a split, whose news of other nodes' changes may be lost)."""
        invites, members = await self.state.database.read(db.channel_access)
        access: dict[str, Access] = {}
        for channel, account in invites:
            access.setdefault(channel, Access()).invited.add(account)
        for channel, account in members:
            access.setdefault(channel, Access()).members.add(account)
        self.access = access

    def owner(self, channel: Channel) -> str | None:
        return namespace_owner(channel.name, self.api.casefold)

    def is_private(self, channel: Channel) -> bool:
        return PRIVATE in channel.modes and self.owner(channel) is not None

    def may_see(self, viewer: Client, channel: Channel) -> bool:
        """The existence filter: False hides the channel from ``viewer`` entirely."""
        if PRIVATE not in channel.modes or viewer in channel.members:
            return True
        owner = self.owner(channel)
        if owner is None:
            return True
        account = viewer.account_folded
        if account is None:
            return False
        if account == owner:
            return True
        access = self.access.get(channel.folded)
        return access is not None and (account in access.members or account in access.invited)

    def may_hide(self) -> set[Channel]:
        """The channels ``may_see`` might hide: those in a namespace, private or not (which of
        them are private now, ``may_see`` itself looks at first)."""
        return self.namespaced

    def indexed(self, channel: Channel) -> None:
        if self.owner(channel) is not None:
            self.namespaced.add(channel)

    def unindexed(self, channel: Channel) -> None:
        self.namespaced.discard(channel)

    def forget_accounts(self, accounts: set[str]) -> list[str]:
        """Deleted accounts: drop their invitations and memberships; and their namespaces'
        channels' access lists altogether. The folded names of those channels."""
        namespaced = [name for name in self.access if namespace_owner(name, self.api.casefold) in accounts]
        for name in namespaced:
            del self.access[name]
        for access in self.access.values():
            access.invited -= accounts
            access.members -= accounts
        return namespaced

    def standing_member(self, account: str, channel: Channel) -> bool:
        """The account is in this private channel without a connection in it: its owner, or a
        member who joined once and has not left (for transports that act as an account)."""
        owner = self.owner(channel)
        if owner is None or not self.is_private(channel):
            return False
        access = self.access.get(channel.folded)
        return account == owner or (access is not None and account in access.members)

    def leave_standing(self, channel: Channel, account: str) -> None:
        """A standing member with no identity in the channel leaves it (as its PART would)."""
        access = self.access.get(channel.folded)
        if access is None or account not in access.members:
            return
        access.members.discard(account)
        self.shared(channel.folded)
        self.state.database.write_nowait(
            db.remove_member, channel.folded, account, account, self.state.now_ms(), self.state.new_id(), False,
        )

    def shared(self, folded: str) -> None:
        """Tell a cluster's other nodes the channel's access list as it is now (nothing alone)."""
        link = self.state.cluster
        if link is not None:
            access = self.access.get(folded) or Access()
            link.access_changed(folded, access.invited, access.members)

    def take_access(self, folded: str, invited: set[str], members: set[str]) -> None:
        """Another node's access list of a channel (``shared`` there)."""
        if invited or members:
            self.access[folded] = Access(invited, members)
        else:
            self.access.pop(folded, None)

    # hooks --------------------------------------------------------------------------

    def join_check(self, client: Client, name: str, channel: Channel | None) -> tuple[str, str] | None:
        if client.account_folded is None and not self.state.cfg.guests_may_join:
            return ERR_NEEDREGGEDNICK, self._need_account()
        owner = namespace_owner(name, self.api.casefold)
        if owner is None or client.account_folded == owner:
            return None
        if channel is None:  # not there, or hidden: the same answer either way
            return ERR_NOSUCHCHANNEL, "No such channel"
        return None

    def _need_account(self) -> str:
        """477's text: how to log in, and how a person without an account gets one here."""
        how = {
            "open": "no account yet? PRIVMSG NickServ :REGISTER <password>, then log in",
            "email": "no account yet? PRIVMSG NickServ :REGISTER <password> <email>, then the code sent to it",
            None: "accounts are made by the server's operator (ADMIN says who that is)",
        }[self.api.registration_open]
        return ("You need to be logged in to an account to join channels: SASL (CAP REQ :sasl) or "
                f"PRIVMSG NickServ :IDENTIFY <account> <password>; {how}")

    def created(self, client: Client, channel: Channel) -> None:
        if self.owner(channel) is not None:
            channel.modes.add(PRIVATE)

    def flag_check(self, client: Client, channel: Channel, adding: bool) -> str | None:
        owner = self.owner(channel)
        if owner is None:
            return "Only channels in an account's namespace (#account/name) can be private"
        if client.account_folded != owner:
            return "Only the channel's owner can make it private or public"
        return None

    def invite_check(self, client: Client, target: Client, channel: Channel) -> tuple[str, str] | None:
        owner = self.owner(channel)
        if owner is None or not self.is_private(channel):
            return None
        if client.account_folded != owner:
            return ERR_CHANOPRIVSNEEDED, "Only the channel owner can invite to this channel"
        if target.account_folded is None:
            return ERR_CHANOPRIVSNEEDED, "Only logged-in accounts can be invited to this channel"
        return None

    def invited(self, client: Client, target: Client, channel: Channel) -> None:
        if not self.is_private(channel) or target.account_folded is None:
            return
        self.invite_account(channel, target.account_folded, client.account_folded or "")

    def invite_account(self, channel: Channel, account: str, by: str) -> None:
        """A standing invitation of ``account`` to the private ``channel`` (the owner ``by`` checked)."""
        self.access.setdefault(channel.folded, Access()).invited.add(account)
        self.shared(channel.folded)
        self.state.database.write_nowait(
            db.add_invite, channel.folded, account, by, self.state.now_ms(), self.state.new_id(),
        )

    def joined(self, event: Joined) -> None:
        channel, account = event.channel, event.client.account_folded
        if account is None or not self.is_private(channel) or account == self.owner(channel):
            return
        access = self.access.setdefault(channel.folded, Access())
        changed = account in access.invited or account not in access.members
        access.invited.discard(account)
        if account not in access.members:
            access.members.add(account)
            self.state.database.write_nowait(db.join_member, channel.folded, account, self.state.now_ms())
        if changed:
            self.shared(channel.folded)

    def left(self, event: Parted | Kicked) -> None:
        kicked = isinstance(event, Kicked)
        who = event.target if kicked else event.client  # type: ignore[union-attr]
        account = who.account_folded
        access = self.access.get(event.channel.folded)
        if account is None or access is None or self.owner(event.channel) is None:
            return
        if account in access.members or (kicked and account in access.invited):
            access.members.discard(account)
            if kicked:
                access.invited.discard(account)
            self.shared(event.channel.folded)
            self.state.database.write_nowait(
                db.remove_member, event.channel.folded, account, event.client.account_folded or "",
                self.state.now_ms(), self.state.new_id(), kicked,
            )


async def handle_uninvite(state: Pircan, chans: PrivateChannels, ctx: CommandContext, msg: Message) -> None:
    """UNINVITE <account> <channel>"""
    account = account_of(ctx, "UNINVITE")
    if account is None:
        return
    if len(msg.params) < 2:
        fail(ctx, "UNINVITE", "NEED_MORE_PARAMS", text="Syntax: UNINVITE <account> <channel>")
        return
    target, name = state.api.casefold(msg.params[0]), msg.params[1]
    channel = ctx.server.find_channel(name, ctx.client)
    if channel is None:
        ctx.reply.numeric(ERR_NOSUCHCHANNEL, name, "No such channel")
        return
    if chans.owner(channel) != account:
        ctx.reply.numeric(ERR_CHANOPRIVSNEEDED, channel.name, "Only the channel owner can withdraw invitations")
        return
    access = chans.access.get(channel.folded)
    if access is None or target not in access.invited:
        fail(ctx, "UNINVITE", "NO_SUCH_INVITATION", target, channel.name,
             text="That account has no standing invitation to this channel")
        return
    access.invited.discard(target)
    chans.shared(channel.folded)
    await state.database.write(
        db.withdraw_invite, channel.folded, target, account, state.now_ms(), state.new_id()
    )
    ctx.reply.send("UNINVITE", ctx.client.nick, target, channel.name, "Invitation withdrawn")


def install(state: Pircan) -> PrivateChannels:
    api = state.api
    chans = PrivateChannels(state)
    api.visibility_filter(chans.may_see, chans.may_hide)
    api.channel_index_hook(chans.indexed, chans.unindexed)
    api.member_check(chans.standing_member)
    api.join_check(chans.join_check)
    api.invite_check(chans.invite_check)
    api.invite_hook(chans.invited)
    api.channel_create_hook(chans.created)
    api.channel_flag(PRIVATE, chans.flag_check)
    api.subscribe(Joined, chans.joined)
    api.subscribe(Parted, chans.left)
    api.subscribe(Kicked, chans.left)
    return chans


