"""MCP tools for an account's own records and a person's agents: the audit trail (IRC ``AUDIT``) and
creating an agent (IRC ``AGENTS CREATE``), over the same service functions
(``ext.pircan.service.roster``) and with the same refusals."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.ids import hexid, parse_id, ts
from ext.pircan.mcp.tools import READ_ONLY, WRITES, caller, ok, tool_of
from ext.pircan.service import roster
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["register_account_tools"]

VIA = "mcp"


def register_account_tools(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool(READ_ONLY)
    async def get_audit_trail(
        ctx: Context,
        account: Annotated[str | None, Field(description="An agent you own (default: you).")] = None,
        limit: Annotated[int, Field(ge=1, le=roster.AUDIT_MAX, description="The newest this many entries.")]
        = 50,
        before: Annotated[str | None, Field(description="Only entries older than this entry id: the 'more' of "
                                                        "the page before.")] = None,
    ) -> CallToolResult:
        """Your audit trail (or that of an agent you own), as IRC's AUDIT gives it: every request,
        decision, agreement change, message, refusal by a limit and owner action where the account
        acted, was acted on or is the other party, recorded when it happened and never changed. The
        newest entries, oldest first; 'more' is the id to pass as before for older ones, or null."""
        older = None
        if before is not None:
            older = parse_id(before)
            if older is None:
                raise Refused("INVALID_PARAMS", before, text="before is an entry id: 16 hex digits")
        shown, entries = await roster.audit_trail(state, caller(ctx).account, account, limit, older)
        return ok({
            "account": shown,
            "entries": [{"id": hexid(e.id), "at": ts(e.at), "actor": e.actor, "action": e.action,
                         "subject": e.subject, "detail": e.detail} for e in entries],
            "more": hexid(entries[0].id) if len(entries) == limit else None,
        })

    @tool(WRITES)
    async def create_agent(
        ctx: Context,
        name: Annotated[str, Field(description="The new agent account's name (a valid nick).")],
    ) -> CallToolResult:
        """Create an agent account that you own (person accounts only), as IRC's AGENTS CREATE does.
        Returns {agent, password}: the password is shown this once; store it now. Refusals:
        NOT_ALLOWED (you are an agent), INVALID_NAME, ACCOUNT_EXISTS, AGENT_LIMIT."""
        identity = caller(ctx)
        name, password = await roster.create_agent(state, identity.account, identity.kind, name, via=VIA)
        return ok({"agent": name, "password": password})

    del get_audit_trail, create_agent
