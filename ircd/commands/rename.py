"""RENAME: IRCv3 draft/channel-rename.

A rename keeps everything the channel has (members and their prefixes, modes,
lists, topic, metadata, stored history); only its name changes. Members with
the capability get ``RENAME <old> <new> :<reason>``; the others get the
spec's fallback: a PART of the old name and a JOIN of the new one with its
topic and NAMES, unless only the name's case changed.

Not renamed: a channel carrying a mode an extension added (PIRCAN's private
``+P`` channels, whose access lists the extension keys by name), and a new
name that an extension's join check would refuse the renamer (PIRCAN's
``#account/name`` namespaces).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.commands.channel import answer_join, no_such_channel, valid_channel_name
from ircd.dispatch import CommandContext, command
from ircd.events import ChannelRenamed
from ircd.proto import numerics as N
from ircd.proto.lines import Message
from ircd.delivery.replies import Relay, ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client
    from ircd.server import Server


@command("RENAME", min_params=2)
def handle_rename(ctx: CommandContext, msg: Message) -> None:
    """RENAME <channel> <new-name> [:<reason>]
    Renames a channel you are an operator of, keeping its members, modes, topic and history
    (IRCv3 draft/channel-rename)."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    old_name, new_name = msg.params[0], msg.params[1]
    reason = msg.params[2][: server.config.limits.kicklen] if len(msg.params) > 2 else ""
    channel = server.find_channel(old_name, client)
    if channel is None:
        no_such_channel(reply, old_name)
        return
    if client not in channel.members:
        reply.numeric(N.ERR_NOTONCHANNEL, channel.name, "You're not on that channel")
        return
    if not channel.is_op(client):
        reply.numeric(N.ERR_CHANOPRIVSNEEDED, channel.name, "You're not channel operator")
        return
    refusal = _refusal(server, client, channel, new_name)
    if refusal is not None:
        reply.fail("RENAME", refusal[0], channel.name, new_name, refusal[1])
        return
    old_name, old_folded = channel.name, channel.folded
    rename_channel(server, channel, new_name)
    relay = server.relay_from(client, "RENAME", old_name, channel.name, reason)
    case_only = channel.folded == old_folded
    for member in list(channel.members):
        out = reply if member is client else ReplyBuffer(server, member)
        if member.caps & C.CHANNEL_RENAME:
            out.relay(relay)
        elif not case_only:
            _fallback(server, member, out, channel, old_name, reason)
        if out is not reply:
            out.flush()
    server.events.publish(ChannelRenamed(client, channel, old_name, old_folded, reason))
    if channel.owner_account is not None and server.store is not None:
        from ircd.chanreg import snapshot

        if old_folded != channel.folded:
            server.store.delete_channel(old_folded)
        server.store.save_channel(snapshot(channel))


def _refusal(server: Server, client: Client, channel: Channel, new_name: str) -> tuple[str, str] | None:
    if not valid_channel_name(server, new_name):
        return "CANNOT_RENAME", "That is not a valid channel name"
    folded = server.casefold(new_name)
    if folded != channel.folded and server.state.channel(folded) is not None:
        return "CHANNEL_NAME_IN_USE", "The channel name is already taken"
    if any(letter in channel.modes for letter in server.channel_flags):
        return "CANNOT_RENAME", "This channel cannot be renamed"
    for check in server.join_checks:
        refused = check(client, new_name, None)
        if refused is not None:
            return "CANNOT_RENAME", refused[1]
    return None


def rename_channel(server: Server, channel: Channel, new_name: str) -> None:
    """Give ``channel`` its new name in the network's state and in each member's channel index."""
    old_folded = channel.folded
    state = server.state
    state.remove_channel(channel)
    channel.name = new_name
    channel.folded = server.casefold(new_name)
    state.add_channel(channel)
    folded = channel.folded
    for member in channel.members:
        member.channels.pop(old_folded, None)
        member.channels[folded] = channel


def _fallback(
    server: Server, member: Client, out: ReplyBuffer, channel: Channel, old_name: str, reason: str
) -> None:
    """draft/channel-rename: "Send the client a PART message for the old channel name, with part
    message matching the rename reason if given", then "a JOIN message followed by the usual
    messages that would be sent if the client had joined the new channel normally"."""
    params = [old_name, reason] if reason else [old_name]
    out.relay(Relay(member.prefix, "PART", params, account=member.account))
    if member.caps & C.EXTENDED_JOIN:
        join = [channel.name, member.account or "*", member.realname]
    else:
        join = [channel.name]
    out.relay(Relay(member.prefix, "JOIN", join, account=member.account))
    answer_join(server, member, out, channel)
