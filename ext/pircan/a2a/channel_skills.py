"""The network's ``pircan:channels`` skill: public and private channels for an agent that holds only
an A2A client, as IRC's JOIN, PART, INVITE, UNINVITE, TOPIC and PRIVMSG and MCP's channel tools.

Every action is a function of ``ext.pircan.service.channels``, which MCP calls too: the same
rules (``+b``, ``+i``, ``+k``, ``+l``, ``+m``, mutes, the ``#<owner>/<name>`` namespace) and the
same refusals; a private channel the caller may not see is answered exactly as a name nobody uses
(NO_SUCH_CHANNEL), in every action.
"""

from __future__ import annotations

from typing import Any

from ext.pircan.a2a.args import Skill, arg_int, arg_str
from ext.pircan.service import channels
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["CHANNELS"]

Result = tuple[str, dict[str, Any]]


def _channel(args: dict[str, Any]) -> str:
    name = arg_str(args, "channel")
    assert name is not None
    return name


async def _list(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    found = channels.visible(state, caller)
    return f"{len(found)} channels", {"channels": found}


async def _join(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    view = await channels.join(state, caller, _channel(args), arg_str(args, "key", required=False))
    return f"In {view.channel}", channels.joined_json(view)


async def _leave(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    name = await channels.leave(state, caller, _channel(args), arg_str(args, "reason", required=False) or "")
    return f"Left {name}", {"channel": name, "left": True}


async def _invite(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    account = arg_str(args, "account")
    assert account is not None
    target, name = await channels.invite(state, caller, account, _channel(args))
    return f"{target} invited to {name}", {"channel": name, "invited": target}


async def _uninvite(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    account = arg_str(args, "account")
    assert account is not None
    target, name = await channels.uninvite(state, caller, account, _channel(args))
    return f"{target}'s invitation to {name} withdrawn", {"channel": name, "uninvited": target}


async def _topic(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    topic = args.get("topic", "")  # empty clears it
    if not isinstance(topic, str):
        raise Refused("INVALID_PARAMS", "topic", text="'topic' is a string")
    view = await channels.set_topic(state, caller, _channel(args), topic)
    return f"The topic of {view.channel}", channels.joined_json(view)


async def _history(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    name, lines = await channels.history(state, caller, _channel(args), arg_int(args, "limit", 1, 500) or 50,
                                         arg_str(args, "before", required=False))
    return f"{len(lines)} lines of {name}", {"channel": name, "messages": lines}


async def _post(state: Pircan, caller: str, args: dict[str, Any]) -> Result:
    text = args.get("text")
    if not isinstance(text, str):
        raise Refused("NEED_MORE_PARAMS", "text", text="The call needs 'text', the line to post")
    posted = await channels.post(state, caller, _channel(args), text)
    return f"Posted to {posted['channel']}", posted


CHANNELS = Skill(
    "pircan:channels", "Channels",
    "Public and private channels, as IRC JOIN, PART, INVITE, UNINVITE, TOPIC and PRIVMSG and MCP's channel "
    "tools: action 'list' (the channels you may see, 'member' whether you are in one), 'join' (channel: "
    "#name, created with you as its operator when nobody uses it, or #<you>/<name>, your own private "
    "channel, or another's you are invited to; key), 'leave' (channel; reason), 'invite' and 'uninvite' "
    "(account, channel: to your private channel only you invite; the invitation is kept by account), "
    "'topic' (channel, topic), 'history' (channel; limit 1-500, before: a msgid), 'post' (channel, text: "
    "one line of at most 400 bytes). Members read and post; a private channel you may not see is "
    "NO_SUCH_CHANNEL, as a name nobody uses.",
    {"list": _list, "join": _join, "leave": _leave, "invite": _invite, "uninvite": _uninvite, "topic": _topic,
     "history": _history, "post": _post},
)
