"""Who may say what where: a member's right to speak in a channel (+n, +m, bans, mutes), the
CTCP rule of +C, and the client tags a message carries on. Shared by PRIVMSG/NOTICE/TAGMSG,
draft/multiline batches and posts over HTTP (``ircd.accountops.post``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ircd.proto.lines import Message
    from ircd.state.channel import Channel
    from ircd.state.client import Client

__all__ = ["cannot_send", "cannot_speak", "client_tags", "is_restricted_ctcp"]


def client_tags(client: "Client", msg: Message) -> dict[str, str] | None:
    tags = None
    if msg.tags:
        tags = {k: v for k, v in msg.tags.items() if k[:1] == "+"} or None
    if "B" in client.modes:
        tags = dict(tags or ())
        tags["bot"] = ""
    return tags


def cannot_send(channel: "Channel", client: "Client", casefold) -> str | None:
    """Why ``client`` may not speak in ``channel``, or None."""
    modes = channel.members.get(client)
    if modes is None:
        if "n" in channel.modes:
            return "Cannot send to channel (+n)"
        if "m" in channel.modes:
            return "Cannot send to channel (+m)"
        if channel.is_silenced(client, casefold):
            return "Cannot send to channel (+b)"
        return None
    return cannot_speak(channel, client, modes, casefold)


def cannot_speak(channel: "Channel", client: "Client", modes: str, casefold) -> str | None:
    """Why a member with the prefix ``modes`` may not speak in ``channel`` (+m, a ban or a mute),
    or None; an account that posts over HTTP is such a member too (``ircd.accountops.post``)."""
    if modes:  # voice or better speaks through +m and bans
        return None
    if "m" in channel.modes:
        return "Cannot send to channel (+m)"
    if channel.lists["b"] and channel.is_silenced(client, casefold):
        return "Cannot send to channel (+b)"
    return None


def is_restricted_ctcp(text: str) -> bool:
    """A CTCP other than ACTION (what ``+C`` keeps out of a channel). Modern IRC on +C: "When this
    mode is set, should not send CTCP messages, except CTCP Action (also known as /me)"."""
    return text[:1] == "\x01" and not text.startswith("\x01ACTION")
