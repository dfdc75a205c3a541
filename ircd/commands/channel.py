"""Channel membership and state: JOIN, PART, TOPIC, NAMES, LIST, INVITE, KICK."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ircd import caps as C
from ircd.state.channel import CHANNEL_TYPES, Channel, prefix_of
from ircd.dispatch import CommandContext, command
from ircd.events import Joined, Kicked, Parted, TopicChanged
from ircd.proto import numerics as N
from ircd.proto.elist import parse_list_query
from ircd.proto.lines import Message
from ircd.delivery.replies import Relay, ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.server import Server

_BAD_CHANNEL_CHARS = frozenset(" ,\x07\x00\r\n")


def valid_channel_name(server: "Server", name: str) -> bool:
    if not (1 < len(name) <= server.channellen and name[0] in CHANNEL_TYPES):
        return False
    if name.isascii() and name.isprintable():  # no control character: only a space or comma can be wrong
        return " " not in name and "," not in name
    return not _BAD_CHANNEL_CHARS.intersection(name)


def no_such_channel(reply: ReplyBuffer, name: str) -> None:
    reply.numeric(N.ERR_NOSUCHCHANNEL, name, "No such channel")


# JOIN ----------------------------------------------------------------------


def join_relays(server: "Server", client: "Client", channel: Channel) -> tuple[Relay, Relay]:
    """The plain and the extended-join form of a JOIN line."""
    plain = server.relay_from(client, "JOIN", channel.name)
    return plain, extended_join(client, channel, plain)


def extended_join(client: "Client", channel: Channel, plain: Relay) -> Relay:
    """The extended-join form of the JOIN line ``plain`` (IRCv3 extended-join)."""
    return Relay(
        client.prefix,
        "JOIN",
        [channel.name, client.account or "*", client.realname],
        time=plain.time,
        account=client.account,
    )


def broadcast_join(ctx: CommandContext, client: "Client", channel: Channel, echo: bool) -> None:
    """Send the JOIN line to the channel (to the joiner through its reply buffer when ``echo``)."""
    server = ctx.server
    plain = server.relay_from(client, "JOIN", channel.name)
    plain_to: list[Client] = []
    extended_to: list[Client] = []
    away_to: list[Client] = []
    away = client.away
    for member in channel.members:
        if member is client:
            continue
        (extended_to if member.caps & C.EXTENDED_JOIN else plain_to).append(member)
        if away is not None and member.caps & C.AWAY_NOTIFY:
            away_to.append(member)
    if plain_to:
        server.delivery.relay(plain_to, plain)
    # the extended form is formatted only when someone gets it
    extended = extended_join(client, channel, plain) if extended_to or client.caps & C.EXTENDED_JOIN else plain
    if extended_to:
        server.delivery.relay(extended_to, extended)
    if away_to:
        server.delivery.relay(away_to, server.relay_from(client, "AWAY", away or ""))
    if echo:
        ctx.reply.relay(extended if client.caps & C.EXTENDED_JOIN else plain)
    else:
        client.send((extended if client.caps & C.EXTENDED_JOIN else plain).for_client(client))


def join_refusal(server: "Server", client: "Client", channel: Channel, key: str | None) -> tuple[str, str] | None:
    """Why ``client`` may not join an existing channel, as (numeric, text), or None."""
    if channel.owner_account is not None and channel.owner_account == client.account_folded:
        return None  # a registered channel's owner is never locked out of it
    cf = server.casefold
    invited = client.nick_folded in channel.invited
    if channel.limit is not None and channel.user_count() >= channel.limit and not invited:
        return N.ERR_CHANNELISFULL, "Cannot join channel (+l)"
    if "i" in channel.modes and not invited and not channel.is_invex(client, cf):
        return N.ERR_INVITEONLYCHAN, "Cannot join channel (+i)"
    if channel.key is not None and key != channel.key and not invited:
        return N.ERR_BADCHANNELKEY, "Cannot join channel (+k)"
    if channel.is_banned(client, cf) and not invited:
        return N.ERR_BANNEDFROMCHAN, "Cannot join channel (+b)"
    return None


def initial_prefixes(channel: Channel, client: "Client", created: bool) -> str:
    """A registered channel's owner gets ~ and @ on every join; a creator gets @."""
    if channel.owner_account is not None and channel.owner_account == client.account_folded:
        return "qo"
    return "o" if created else ""


def send_topic(reply: ReplyBuffer, channel: Channel, *, empty_reply: bool) -> None:
    if channel.topic:
        reply.numeric(N.RPL_TOPIC, channel.name, channel.topic)
        reply.numeric(N.RPL_TOPICWHOTIME, channel.name, channel.topic_setter, str(channel.topic_time))
    elif empty_reply:
        reply.numeric(N.RPL_NOTOPIC, channel.name, "No topic is set")


def join_channel(ctx: CommandContext, name: str, key: str | None) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    if not valid_channel_name(server, name):
        no_such_channel(reply, name)
        return
    channel = server.find_channel(name, client)
    if channel is not None and client in channel.members:
        return
    for check in server.join_checks:
        refusal = check(client, name, channel)
        if refusal is not None:
            reply.numeric(refusal[0], name, refusal[1])
            return
    if len(client.channels) >= server.channels_per_client:
        reply.numeric(N.ERR_TOOMANYCHANNELS, name, "You have joined too many channels")
        return
    created = channel is None
    if channel is None:
        if server.state.channel(server.casefold(name)) is not None:
            # exists but hidden from this client: refuse exactly like an unknown name would be
            no_such_channel(reply, name)
            return
        channel = server.state.create_channel(name, int(server.clock()))
        channel.modes.update("nt")
        if client.account_folded is not None and server.config.channels.registration:
            channel.owner_account = client.account_folded  # registered to its creator
        channel.add_member(client, initial_prefixes(channel, client, created=True))
        for create_hook in server.channel_create_hooks:
            create_hook(client, channel)
    else:
        refusal = join_refusal(server, client, channel, key)
        if refusal is not None:
            reply.numeric(refusal[0], channel.name, refusal[1])
            return
        channel.invited.discard(client.nick_folded)
        channel.add_member(client, initial_prefixes(channel, client, created=False))
    broadcast_join(ctx, client, channel, echo=True)
    server.events.publish(Joined(client, channel, created))
    answer_join(server, client, reply, channel)


def answer_join(
    server: Server, client: Client, reply: ReplyBuffer, channel: Channel,
    skip: Callable[[Client, Channel, ReplyBuffer], None] | None = None,
) -> None:
    """What a JOIN answers after its own line, also where a client is put in a channel another way
    (a RENAME's fallback, a connection given its identity's channels): the join hooks but ``skip``
    (MARKREAD, METADATA), the topic, and NAMES unless the client has no-implicit-names."""
    for hook in server.join_hooks:
        if hook != skip:
            hook(client, channel, reply)
    send_topic(reply, channel, empty_reply=False)
    if not client.caps & C.NO_IMPLICIT_NAMES:
        send_names(server, client, reply, channel)


@command(
    "JOIN", min_params=1,
    doc="""JOIN <channel>{,<channel>} [<key>{,<key>}]
    Joins channels, creating them if they do not exist. JOIN 0 leaves every channel.""",
)
def handle_join(ctx: CommandContext, msg: Message) -> None:
    if msg.params[0] == "0":
        for channel in list(ctx.client.channels.values()):
            part_channel(ctx, channel, "")
        return
    names = msg.params[0].split(",")
    keys = msg.params[1].split(",") if len(msg.params) > 1 else []
    for i, name in enumerate(names):
        if name:
            join_channel(ctx, name, keys[i] if i < len(keys) else None)


# PART ----------------------------------------------------------------------


def part_channel(ctx: CommandContext, channel: Channel, reason: str) -> None:
    server, client = ctx.server, ctx.client
    params = [channel.name, reason] if reason else [channel.name]
    relay = server.relay_from(client, "PART", *params)
    ctx.reply.relay(relay)
    server.delivery.relay(channel.members, relay, exclude=client)
    channel.remove_member(client)
    server.events.publish(Parted(client, channel, reason))
    server.drop_channel_if_empty(channel)


@command(
    "PART", min_params=1,
    doc="""PART <channel>{,<channel>} [:<reason>]
    Leaves channels.""",
)
def handle_part(ctx: CommandContext, msg: Message) -> None:
    reason = msg.params[1][: ctx.server.config.limits.kicklen] if len(msg.params) > 1 else ""
    for name in msg.params[0].split(","):
        if not name:
            continue
        channel = ctx.server.find_channel(name, ctx.client)
        if channel is None:
            no_such_channel(ctx.reply, name)
        elif ctx.client not in channel.members:
            ctx.reply.numeric(N.ERR_NOTONCHANNEL, channel.name, "You're not on that channel")
        else:
            part_channel(ctx, channel, reason)


# TOPIC ---------------------------------------------------------------------


@command(
    "TOPIC", min_params=1,
    doc="""TOPIC <channel> [:<topic>]
    Shows the topic, or sets it (an empty topic clears it). With +t only operators may set it.""",
)
def handle_topic(ctx: CommandContext, msg: Message) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    channel = server.find_channel(msg.params[0], client)
    if channel is None:
        no_such_channel(reply, msg.params[0])
        return
    is_member = client in channel.members
    if len(msg.params) < 2:
        if not is_member and not server.visibility.channel_listed_for(client, channel):
            reply.numeric(N.ERR_NOTONCHANNEL, channel.name, "You're not on that channel")
            return
        send_topic(reply, channel, empty_reply=True)
        return
    if not is_member:
        reply.numeric(N.ERR_NOTONCHANNEL, channel.name, "You're not on that channel")
        return
    if "t" in channel.modes and not channel.is_op(client):
        reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You're not channel operator")
        return
    topic = msg.params[1][: server.config.limits.topiclen]
    channel.topic = topic
    channel.topic_setter = client.prefix
    channel.topic_time = int(server.clock())
    relay = server.relay_from(client, "TOPIC", channel.name, topic, msgid=True)
    reply.relay(relay)
    server.delivery.relay(channel.members, relay, exclude=client)
    server.events.publish(TopicChanged(client, channel, relay))


# NAMES ---------------------------------------------------------------------


def send_names(server: "Server", client: "Client", reply: ReplyBuffer, channel: Channel, end: str | None = None) -> None:
    """The 353 lines of ``channel`` and the 366 that ends them (naming ``end``: several channels
    of one NAMES share one 366); ``end=""`` sends no 366."""
    multi = bool(client.caps & C.MULTI_PREFIX)
    full = bool(client.caps & C.USERHOST_IN_NAMES)
    member = client in channel.members
    symbol = "@" if "s" in channel.modes else "*" if "p" in channel.modes else "="
    names = [
        (prefix_of(modes, multi) if modes else "") + (other.prefix if full else other.nick)
        for other, modes in channel.members.items()
        # a nick's further connections once; +i users only for members
        if not other.shadow and (member or "i" not in other.modes)
    ]
    # keep each 353 within the line limit
    budget = 400 - len(server.name) - len(client.nick) - len(channel.name)
    text = " ".join(names)
    if len(text) < budget:  # all in one line: what the loop below makes of it too
        if names:
            reply.numeric(N.RPL_NAMREPLY, symbol, channel.name, text)
    else:
        chunk: list[str] = []
        size = 0
        for name in names:
            if chunk and size + len(name) + 1 > budget:
                reply.numeric(N.RPL_NAMREPLY, symbol, channel.name, " ".join(chunk))
                chunk, size = [], 0
            chunk.append(name)
            size += len(name) + 1
        if chunk:
            reply.numeric(N.RPL_NAMREPLY, symbol, channel.name, " ".join(chunk))
    if end != "":
        reply.numeric(N.RPL_ENDOFNAMES, end or channel.name, "End of /NAMES list")


@command(
    "NAMES",
    doc="""NAMES [<channel>{,<channel>}]
    Lists the members of channels, with their prefixes (~ owner, @ operator, + voice).""",
)
def handle_names(ctx: CommandContext, msg: Message) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    if not msg.params or not msg.params[0]:
        reply.numeric(N.RPL_ENDOFNAMES, "*", "End of /NAMES list")
        return
    names = [name for name in msg.params[0].split(",") if name]
    if len(names) > server.config.limits.targets:
        reply.numeric(N.ERR_TOOMANYTARGETS, msg.params[0], f"Too many targets (at most {server.config.limits.targets})")
        return
    # RFC 2812 3.2.5 and Modern IRC: the 353 lines of each channel, then one 366 naming the
    # whole <channel>{,<channel>} parameter
    end = msg.params[0]
    for name in names:
        channel = server.find_channel(name, client)
        if channel is not None and server.visibility.channel_listed_for(client, channel):
            send_names(server, client, reply, channel, "")
            if len(names) == 1:
                end = channel.name
    reply.numeric(N.RPL_ENDOFNAMES, end, "End of /NAMES list")


# LIST ----------------------------------------------------------------------


@command(
    "LIST",
    doc="""LIST [<term>{,<term>}]
    Lists channels with their member counts and topics. Terms: channel names, masks (#ch*),
    !mask (not matching), >N and <N (members), C<N and C>N (created less/more than N minutes
    ago), T<N and T>N (topic set less/more than N minutes ago).""",
)
def handle_list(ctx: CommandContext, msg: Message) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    reply.numeric(N.RPL_LISTSTART, "Channel", "Users  Name")
    query = parse_list_query(msg.params, server.casefold)
    if query.only_names:
        found = (server.find_channel(name, client) for name in query.names)
        channels = [ch for ch in found if ch is not None]
    else:
        now = server.clock()
        channels = [
            ch for ch in server.state.all_channels()
            if query.matches(ch.folded, ch.user_count(), ch.created, ch.topic_time if ch.topic else 0, now)
        ]
    for channel in channels:
        if not server.visibility.channel_listed_for(client, channel):
            continue
        count = sum(1 for m in channel.members
                    if not m.shadow and ("i" not in m.modes or client in channel.members or m is client))
        reply.numeric(N.RPL_LIST, channel.name, str(count), channel.topic)
    reply.numeric(N.RPL_LISTEND, "End of /LIST")


# INVITE --------------------------------------------------------------------


@command(
    "INVITE",
    doc="""INVITE [<nick> <channel>]
    Invites someone to a channel; needed to join a +i channel. On +i channels only operators may invite.
    Without parameters, lists the channels you are invited to.""",
)
def handle_invite(ctx: CommandContext, msg: Message) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    if not msg.params:
        _list_invites(ctx)
        return
    if len(msg.params) < 2:
        reply.numeric(N.ERR_NEEDMOREPARAMS, "INVITE", "Not enough parameters")
        return
    nick, name = msg.params[0], msg.params[1]
    target = server.state.find_nick(nick)
    if target is None or not target.registered:
        reply.numeric(N.ERR_NOSUCHNICK, nick, "No such nick/channel")
        return
    channel = server.find_channel(name, client)
    if channel is None:
        no_such_channel(reply, name)
        return
    if client not in channel.members:
        reply.numeric(N.ERR_NOTONCHANNEL, channel.name, "You're not on that channel")
        return
    for check in server.invite_checks:
        refusal = check(client, target, channel)
        if refusal is not None:
            reply.numeric(refusal[0], channel.name, refusal[1])
            return
    if "i" in channel.modes and not channel.is_op(client):
        reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You're not channel operator")
        return
    if target in channel.members:
        reply.numeric(N.ERR_USERONCHANNEL, target.nick, channel.name, "is already on channel")
        return
    channel.invited.add(target.nick_folded)
    reply.numeric(N.RPL_INVITING, target.nick, channel.name)
    if target.away is not None:
        reply.numeric(N.RPL_AWAY, target.nick, target.away)
    relay = server.relay_from(client, "INVITE", target.nick, channel.name)
    target.send(relay.for_client(target))
    notify = [
        m for m in channel.members
        if m.caps & C.INVITE_NOTIFY and m is not client and m is not target and channel.is_op(m)
    ]
    server.delivery.relay(notify, relay)
    for hook in server.invite_hooks:
        hook(client, target, channel)


def _list_invites(ctx: CommandContext) -> None:
    """Modern IRC: "Servers MAY allow the INVITE with no parameter, and reply with a list of
    channels the sender is invited to as RPL_INVITELIST (336) numerics, ending with a
    RPL_ENDOFINVITELIST (337) numeric." """
    folded = ctx.client.nick_folded
    for channel in ctx.server.state.all_channels():
        if folded in channel.invited:
            ctx.reply.numeric(N.RPL_INVITED, channel.name)
    ctx.reply.numeric(N.RPL_ENDOFINVITED, "End of /INVITE list")


# KICK ----------------------------------------------------------------------


@command(
    "KICK", min_params=2,
    doc="""KICK <channel>{,<channel>} <nick>{,<nick>} [:<reason>]
    Removes members from a channel. Needs channel operator status. With several
    channels, each channel goes with the nick in the same position.""",
)
def handle_kick(ctx: CommandContext, msg: Message) -> None:
    server, reply = ctx.server, ctx.reply
    names = [n for n in msg.params[0].split(",") if n]
    nicks = [n for n in msg.params[1].split(",") if n]
    # RFC 2812 3.2.8: "there MUST be either one channel parameter and multiple
    # user parameter, or as many channel parameters as there are user parameters"
    if not names or not nicks or (len(names) > 1 and len(names) != len(nicks)):
        reply.numeric(N.ERR_NEEDMOREPARAMS, "KICK", "Not enough parameters")
        return
    limit = server.config.limits.targets
    if len(nicks) > limit:
        reply.numeric(N.ERR_TOOMANYTARGETS, msg.params[1], f"Too many targets (at most {limit})")
        return
    reason = msg.params[2] if len(msg.params) > 2 and msg.params[2] else ctx.client.nick
    reason = reason[: server.config.limits.kicklen]
    pairs = zip(names, nicks) if len(names) > 1 else ((names[0], nick) for nick in nicks)
    refused: set[str] = set()  # channels already answered with an error
    for name, nick in pairs:
        folded = server.casefold(name)
        if folded not in refused and not _kick_one(ctx, name, nick, reason):
            refused.add(folded)


def _kick_one(ctx: CommandContext, name: str, nick: str, reason: str) -> bool:
    """Kick ``nick`` from ``name``; False when the kicker may not kick there at all."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    channel = server.find_channel(name, client)
    if channel is None:
        no_such_channel(reply, name)
        return False
    if client not in channel.members:
        reply.numeric(N.ERR_NOTONCHANNEL, channel.name, "You're not on that channel")
        return False
    if not channel.is_op(client):
        reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You're not channel operator")
        return False
    target = server.state.find_nick(nick)
    if target is None or target not in channel.members:
        reply.numeric(N.ERR_USERNOTINCHANNEL, nick, channel.name, "They aren't on that channel")
        return True
    if "q" in (channel.members.get(target) or "") and "q" not in (channel.members.get(client) or ""):
        reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You cannot kick the channel owner")
        return True
    kick_member(ctx, channel, target, reason)
    return True


def kick_member(ctx: CommandContext, channel: Channel, target: "Client", reason: str) -> None:
    server, client = ctx.server, ctx.client
    relay = server.relay_from(client, "KICK", channel.name, target.nick, reason)
    ctx.reply.relay(relay)
    server.delivery.relay(channel.members, relay, exclude=client)
    channel.remove_member(target)
    server.events.publish(Kicked(client, channel, target, reason))
    server.drop_channel_if_empty(channel)
