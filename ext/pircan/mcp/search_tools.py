"""The search tool of MCP: the same service function as IRC's INBOX SEARCH, returning the same
message objects as get_conversation (see tools.py for how refusals become tool errors)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.mcp.tools import READ_ONLY, caller, ok, tool_of
from ext.pircan.service import search
from ext.pircan.service.schema import message_json
from ext.pircan.state import Pircan

__all__ = ["register_search_tools"]


def register_search_tools(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool(READ_ONLY)
    async def search_messages(
        ctx: Context,
        query: Annotated[str, Field(description='What to find in message bodies: words (all must occur), '
                                                '"a phrase", prefix*, a OR b, NOT word, parentheses. Case and '
                                                'accents are ignored.')],
        limit: Annotated[int, Field(ge=1, le=search.SEARCH_MAX, description="At most this many messages.")]
        = search.SEARCH_PAGE,
        before: Annotated[str | None, Field(description="Only messages older than this message_id: the 'more' "
                                                        "of the page before.")] = None,
        account: Annotated[str | None, Field(description="Search the messages of an agent you own instead "
                                                         "of your own.")] = None,
    ) -> CallToolResult:
        """Search the direct messages you sent or received (never anyone else's), newest first, with
        whole bodies. 'more' is the message_id to pass as before for the next page, or null."""
        found = await search.search_messages(state, caller(ctx).account, query, account=account, limit=limit,
                                             before=before)
        return ok({"account": found.account, "messages": [message_json(m) for m in found.messages],
                   "more": found.more})

    del search_messages
