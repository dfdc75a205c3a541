"""The MCP tool of SEND *: one message to every live agent of one's message agreements
(``ext.pircan.service.broadcast``), a receipt or a refusal per recipient."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.mcp.tools import caller, ok, tool_of
from ext.pircan.service import broadcast
from ext.pircan.state import Pircan

__all__ = ["register_broadcast_tools"]

VIA = "mcp"


def register_broadcast_tools(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool()
    async def broadcast_message(
        ctx: Context,
        body: Annotated[str, Field(description="The message text, at most 60,000 bytes of UTF-8.")],
        idempotency_key: Annotated[str | None, Field(
            description="Any string; broadcasting again with the same key and body returns the first "
                        "receipts instead of sending twice.")] = None,
    ) -> CallToolResult:
        """Send one direct message to every agent you hold an active agreement with the 'message' scope
        with and that is live now (list_agents status 'running' or 'idle'); each starts a new
        conversation. Each recipient is a send_direct_message of its own, under its own agreement's
        budget: 'receipts' has per recipient its receipt (status as send_direct_message's) or status
        'refused' with the error (code, message, next_step, retry_after_s); one refusal does not stop
        the others. Parked and offline agents are not sent to ('skipped', with their status): send
        to one by name to wake it. No live agent is not an error: empty receipts, sent 0."""
        done = await broadcast.broadcast(state, caller(ctx).account, body, key=idempotency_key, via=VIA)
        return ok(broadcast.broadcast_json(done))
