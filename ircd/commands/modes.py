"""MODE for users (i w B, and -o) and channels (b e I C i k l m n s t, q o v)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ircd.state.channel import EXTBAN_MUTE, Channel, normalize_mask
from ircd.commands.channel import no_such_channel
from ircd.dispatch import CommandContext, command
from ircd.events import ChannelModeChanged, UserModeChanged
from ircd.proto import numerics as N
from ircd.proto.lines import Message
from ircd.proto.modes import ALWAYS, FLAG, LIST, PREFIX, SET_ONLY, ModeChange, format_changes, parse_modes

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.server import Server

CHANNEL_MODE_KINDS = {
    "b": LIST,
    "e": LIST,
    "I": LIST,
    "k": ALWAYS,
    "l": SET_ONLY,
    "i": FLAG,
    "m": FLAG,
    "n": FLAG,
    "s": FLAG,
    "t": FLAG,
    "C": FLAG,  # no CTCP but ACTION (messaging.is_restricted_ctcp)
    "q": PREFIX,
    "o": PREFIX,
    "v": PREFIX,
}
USER_SETTABLE = "iwB"

_LIST_REPLIES = {
    "b": (N.RPL_BANLIST, N.RPL_ENDOFBANLIST, "End of channel ban list"),
    "e": (N.RPL_EXCEPTLIST, N.RPL_ENDOFEXCEPTLIST, "End of channel exception list"),
    "I": (N.RPL_INVITELIST, N.RPL_ENDOFINVITELIST, "End of channel invite list"),
}


@command("MODE", min_params=1)
def handle_mode(ctx: CommandContext, msg: Message) -> None:
    """MODE <target> [<modes> [<params>...]]
    Shows or changes user modes (your own: +i invisible, +w wallops, +B bot) or channel modes
    (b e I lists, C no CTCP, i invite-only, k key, l limit, m moderated, n no outside messages,
    s secret, t topic lock, q/o/v member status)."""
    target = msg.params[0]
    if target[:1] == "#":
        channel_mode(ctx, msg)
    else:
        user_mode(ctx, msg)


def user_mode(ctx: CommandContext, msg: Message) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    target = server.state.find_nick(msg.params[0])
    if target is None:
        reply.numeric(N.ERR_NOSUCHNICK, msg.params[0], "No such nick/channel")
        return
    if target is not client:
        reply.numeric(N.ERR_USERSDONTMATCH, "Can't change mode for other users")
        return
    if len(msg.params) < 2:
        reply.numeric(N.RPL_UMODEIS, "+" + "".join(sorted(client.modes)))
        return
    applied: list[ModeChange] = []
    unknown = False
    adding = True
    for ch in msg.params[1]:
        if ch in "+-":
            adding = ch == "+"
        elif ch in USER_SETTABLE or (ch == "o" and not adding):
            if adding and ch not in client.modes:
                client.modes.add(ch)
                applied.append(ModeChange(True, ch, None))
                if ch == "i":
                    server.state.invisible_count += 1
            elif not adding and ch in client.modes:
                client.modes.discard(ch)
                applied.append(ModeChange(False, ch, None))
                if ch == "i":
                    server.state.invisible_count -= 1
                if ch == "o":
                    server.state.oper_count -= 1
                    client.oper_name = None
        elif ch in "oZr":
            continue  # server-controlled modes: silently not changed
        else:
            unknown = True
    if unknown:
        reply.numeric(N.ERR_UMODEUNKNOWNFLAG, "Unknown MODE flag")
    if applied:
        modestr, _ = format_changes(applied)
        reply.send("MODE", client.nick, modestr, source=client.prefix)
        if server.events.wants(UserModeChanged):
            server.events.publish(UserModeChanged(client))


def send_list(ctx: CommandContext, channel: Channel, which: str) -> None:
    item, end, text = _LIST_REPLIES[which]
    for entry in channel.lists[which]:
        ctx.reply.numeric(item, channel.name, entry.mask, entry.set_by, str(entry.set_at))
    ctx.reply.numeric(end, channel.name, text)


def channel_mode(ctx: CommandContext, msg: Message) -> None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    channel = server.find_channel(msg.params[0], client)
    if channel is None:
        no_such_channel(reply, msg.params[0])
        return
    member = client in channel.members
    if len(msg.params) < 2:
        modes, params = channel.mode_string(show_key=member)
        reply.numeric(N.RPL_CHANNELMODEIS, channel.name, modes, *params)
        reply.numeric(N.RPL_CREATIONTIME, channel.name, str(channel.created))
        return
    kinds = mode_kinds(server)
    changes, unknown = parse_modes(msg.params[1], msg.params[2:], kinds)
    for ch in unknown:
        reply.numeric(N.ERR_UNKNOWNMODE, ch, "is unknown mode char to me")
    applied: list[ModeChange] = []
    denied = False
    budget = server.config.limits.modes_per_line
    listed: set[str] = set()
    for change in changes:
        if kinds[change.mode] == LIST and change.arg is None:
            if change.mode not in listed:
                listed.add(change.mode)
                send_list(ctx, channel, change.mode)
            continue
        if not channel.is_op(client) and not client.is_oper and not _is_owner(channel, client):
            if not denied:
                reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You're not channel operator")
                denied = True
            continue
        if change.arg is not None:
            if budget <= 0:
                continue
            budget -= 1
        result = apply_change(ctx, channel, change)
        if result is not None:
            applied.append(result)
    if applied:
        modestr, params = format_changes(applied)
        relay = server.relay_from(client, "MODE", channel.name, modestr, *params)
        reply.relay(relay)
        server.delivery.relay(channel.members, relay, exclude=client)
        server.events.publish(ChannelModeChanged(client, channel, modestr, tuple(params)))


def mode_kinds(server: "Server") -> dict[str, str]:
    """The core's channel modes plus the flags extensions added (api.channel_flag)."""
    if not server.channel_flags:
        return CHANNEL_MODE_KINDS
    return {**CHANNEL_MODE_KINDS, **{letter: FLAG for letter in server.channel_flags}}


def apply_change(ctx: CommandContext, channel: Channel, change: ModeChange) -> ModeChange | None:
    """Apply one change; returns what to announce, or None when nothing changed."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    mode, adding, arg = change.mode, change.adding, change.arg
    kind = CHANNEL_MODE_KINDS.get(mode, FLAG)
    if kind == FLAG:
        if adding == (mode in channel.modes):
            return None
        check = server.channel_flags.get(mode)
        refusal = check(client, channel, adding) if check is not None else None
        if refusal is not None:
            reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, refusal)
            return None
        (channel.modes.add if adding else channel.modes.discard)(mode)
        return change
    if kind == PREFIX:
        if arg is None:
            reply.numeric(N.ERR_NEEDMOREPARAMS, "MODE", "Not enough parameters")
            return None
        return _apply_prefix(ctx, channel, change)
    if mode == "k":
        if adding:
            if not arg or " " in arg or "," in arg or arg[0] == ":":
                reply.numeric(N.ERR_INVALIDKEY, channel.name, "Key is not well-formed")
                return None
            channel.key = arg[:32]
            return ModeChange(True, "k", channel.key)
        if channel.key is None:
            return None
        channel.key = None
        return ModeChange(False, "k", "*")
    if mode == "l":
        if not adding:
            if channel.limit is None:
                return None
            channel.limit = None
            return ModeChange(False, "l", None)
        try:
            limit = int(arg or "")
        except ValueError:
            reply.numeric(N.ERR_INVALIDMODEPARAM, channel.name, "l", arg or "*", "Invalid limit")
            return None
        if limit <= 0:
            reply.numeric(N.ERR_INVALIDMODEPARAM, channel.name, "l", arg or "*", "Invalid limit")
            return None
        if channel.limit == limit:
            return None
        channel.limit = limit
        return ModeChange(True, "l", str(limit))
    # list modes with a mask
    mask = normalize_mask(arg or "")
    if adding and mode == "I" and mask[:2] == EXTBAN_MUTE:
        reply.numeric(N.ERR_INVALIDMODEPARAM, channel.name, mode, mask, "Mutes (m:) belong in the b and e lists")
        return None
    if adding:
        if len(channel.lists[mode]) >= server.config.limits.list_entries:
            reply.numeric(N.ERR_BANLISTFULL, channel.name, mask, "Channel list is full")
            return None
        if not channel.add_list_entry(mode, mask, client.prefix, int(server.clock()), server.casefold):
            return None
        return ModeChange(True, mode, mask)
    removed = channel.remove_list_entry(mode, mask, server.casefold)
    return ModeChange(False, mode, removed) if removed is not None else None


def _apply_prefix(ctx: CommandContext, channel: Channel, change: ModeChange) -> ModeChange | None:
    server, client, reply = ctx.server, ctx.client, ctx.reply
    target = server.state.find_nick(change.arg or "")
    if target is None:
        reply.numeric(N.ERR_NOSUCHNICK, change.arg or "*", "No such nick/channel")
        return None
    if target not in channel.members:
        reply.numeric(N.ERR_USERNOTINCHANNEL, target.nick, channel.name, "They aren't on that channel")
        return None
    if change.mode == "q" and "q" not in (channel.members.get(client) or "") and not client.is_oper \
            and not _is_owner(channel, client):
        reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You must be the channel owner")
        return None
    if not channel.set_prefix(target, change.mode, change.adding):
        return None
    return ModeChange(change.adding, change.mode, target.nick)


def _is_owner(channel: Channel, client: Client) -> bool:
    """The account a registered channel belongs to: it may always change the channel's modes and
    give ``~`` (its own included), like a member with ``~``."""
    return channel.owner_account is not None and channel.owner_account == client.account_folded


def client_mode_string(client: "Client") -> str:
    return "+" + "".join(sorted(client.modes))


def server_set_mode(server: "Server", channel: Channel, modestr: str, *params: str) -> None:
    """Announce a mode change made by the server itself (e.g. owner status on join)."""
    from ircd.delivery.replies import Relay

    relay = Relay(server.name, "MODE", [channel.name, modestr, *params], time=server.server_time())
    server.delivery.relay(channel.members, relay)
