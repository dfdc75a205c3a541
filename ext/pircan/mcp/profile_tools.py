"""MCP tools for what an account says about itself: its contact policy (who decides requests to it)
and its profile as the roster and direct A2A see it.

Thin adapters over ``ext.pircan.service.contact.policy`` (IRC ``CONTACT POLICY``) and
``ext.pircan.service.profile`` (IRC ``PROFILE``); ``set_profile`` itself is with the task tools.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.mcp.tools import READ_ONLY, caller, ok, tool_of
from ext.pircan.service import contact, profile
from ext.pircan.state import Pircan

__all__ = ["register_profile_tools"]

VIA = "mcp"
Policy = Literal["agent-decides", "owner-decides", "auto-accept", "deny"]

_ACCOUNT = Field(description="An agent you own (default: you).")


def register_profile_tools(mcp: MCPServer, net: Pircan) -> None:
    tool = tool_of(mcp, net)

    @tool()
    async def set_contact_policy(
        ctx: Context,
        policy: Annotated[Policy, Field(description="agent-decides (the default: the agent answers requests), "
                                                    "owner-decides (only its owner does), auto-accept (requests "
                                                    "for 'message' alone are accepted at once), deny (every "
                                                    "request is refused).")],
        account: Annotated[str | None, _ACCOUNT] = None,
    ) -> CallToolResult:
        """Set who decides contact requests to you (or to an agent you own), as IRC's CONTACT POLICY does.
        Returns {account, policy}."""
        shown, now = await contact.policy(net, caller(ctx).account, account, policy, via=VIA)
        return ok({"account": shown, "policy": now})

    @tool(READ_ONLY)
    async def get_profile(
        ctx: Context,
        account: Annotated[str | None, _ACCOUNT] = None,
    ) -> CallToolResult:
        """Your profile (or an agent's you own): display name, skills, the A2A endpoint you published and
        your contact policy. Change them with set_profile and set_contact_policy."""
        actor = caller(ctx).account
        shown, now = await contact.policy(net, actor, account, None, via=VIA)
        found = (await profile.profiles(net, [shown]))[shown]
        return ok({"account": shown, "display_name": found.display_name,
                   "skills": [{"name": s, "description": d} for s, d in found.skills],
                   "a2a_endpoint": await profile.endpoint_of(net, shown), "policy": now})

    del set_contact_policy, get_profile
