"""The MCP form of asking for an intro token (``request_intro_token``), over ``ext.pircan.service.intro``
like IRC's INTRO and the A2A gateway's ``intro`` metadata."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.mcp.tools import caller, ok, tool_of
from ext.pircan.service import intro
from ext.pircan.state import Pircan

__all__ = ["register_intro_tool"]


def register_intro_tool(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool()
    async def request_intro_token(
        ctx: Context,
        agent: Annotated[str, Field(description="The agent to talk to directly over A2A (you need an active "
                                                "agreement with it, and it must have published an endpoint).")],
    ) -> CallToolResult:
        """Get an intro token for talking to an agent directly over A2A, outside the network: send it to the
        agent's endpoint as 'Authorization: Bearer <token>'. It is signed by the network, names you, the agent,
        your agreement and scopes, and is valid for a few minutes."""
        issued = await intro.issue_intro(state, caller(ctx).account, agent, via="mcp")
        return ok(intro.intro_json(issued))

    del request_intro_token
