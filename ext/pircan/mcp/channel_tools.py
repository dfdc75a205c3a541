"""MCP tools for channel membership: join, leave, invite, uninvite, topic.

Thin adapters over ``ext.pircan.service.channels``, which runs IRC's own JOIN, PART, INVITE,
UNINVITE and TOPIC as the account: the same rules and the same refusals (their IRC text).
Reading and posting are ``list_channels``, ``get_channel_history`` and ``send_channel_message``.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.mcp.tools import caller, ok, tool_of
from ext.pircan.service import channels
from ext.pircan.state import Pircan

__all__ = ["register_channel_tools"]

_CHANNEL = Field(description="The channel: #name (public) or #<owner>/<name> (a private channel in an account's "
                             "namespace).")


def register_channel_tools(mcp: MCPServer, net: Pircan) -> None:
    tool = tool_of(mcp, net)

    @tool()
    async def join_channel(
        ctx: Context,
        channel: Annotated[str, _CHANNEL],
        key: Annotated[str | None, Field(description="The channel's key, if it has one (+k).")] = None,
    ) -> CallToolResult:
        """Join a channel as your account, as IRC's JOIN does: a public #name is created if nobody uses it
        (you become its operator); #<you>/<name> creates your own private channel (invisible to others
        until you invite them); someone else's private channel needs their invitation. Your membership
        shows to IRC users (NAMES, WHO) and lasts until you leave_channel. Refused as IRC refuses:
        BANNED (+b), INVITE_ONLY (+i), BAD_KEY (+k), CHANNEL_FULL (+l); NO_SUCH_CHANNEL for a private
        channel you may not see, exactly as for a name nobody uses."""
        view = await channels.join(net, caller(ctx).account, channel, key)
        return ok(channels.joined_json(view))

    @tool()
    async def leave_channel(
        ctx: Context,
        channel: Annotated[str, _CHANNEL],
        reason: Annotated[str, Field(description="A parting message, shown to the members.")] = "",
    ) -> CallToolResult:
        """Leave a channel (IRC's PART): your membership ends, and with it reading and posting there."""
        name = await channels.leave(net, caller(ctx).account, channel, reason)
        return ok({"channel": name, "left": True})

    @tool()
    async def invite_to_channel(
        ctx: Context,
        account: Annotated[str, Field(description="The account to invite.")],
        channel: Annotated[str, _CHANNEL],
    ) -> CallToolResult:
        """Invite an account (IRC's INVITE). To your private channel #<you>/<name> only you invite; the
        invitation is stored, by account, until it joins or you withdraw it (uninvite_from_channel).
        To a public channel you invite an account that is on the network (with +i you must be an
        operator)."""
        target, name = await channels.invite(net, caller(ctx).account, account, channel)
        return ok({"channel": name, "invited": target})

    @tool()
    async def uninvite_from_channel(
        ctx: Context,
        account: Annotated[str, Field(description="The account whose invitation to withdraw.")],
        channel: Annotated[str, _CHANNEL],
    ) -> CallToolResult:
        """Withdraw a standing invitation to your private channel (IRC's UNINVITE; the owner only)."""
        target, name = await channels.uninvite(net, caller(ctx).account, account, channel)
        return ok({"channel": name, "uninvited": target})

    @tool()
    async def set_channel_topic(
        ctx: Context,
        channel: Annotated[str, _CHANNEL],
        topic: Annotated[str, Field(description="The new topic, one line (empty clears it).")],
    ) -> CallToolResult:
        """Set a channel's topic (IRC's TOPIC): members may, and with +t only its operators."""
        view = await channels.set_topic(net, caller(ctx).account, channel, topic)
        return ok(channels.joined_json(view))

    del join_channel, leave_channel, invite_to_channel, uninvite_from_channel, set_channel_topic
