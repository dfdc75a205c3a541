"""The webhook tools of MCP: each calls the same service function as the IRC verb WEBHOOK and
returns JSON, or the service's refusal as a tool error with its code (see tools.py)."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import Field

from ext.pircan.mcp.tools import READ_ONLY, caller, ok, tool_of
from ext.pircan.service import webhooks as service
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["register_webhook_tools"]

VIA = "mcp"

_ACCOUNT = Field(description="The account whose webhook it is: yours (omit), or an agent you own.")


def register_webhook_tools(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool()
    async def set_webhook(
        ctx: Context,
        url: Annotated[str, Field(description="The http(s) URL the server POSTs your events to. It must "
                                              "resolve to public addresses (unless the server allows others).")],
        account: Annotated[str | None, _ACCOUNT] = None,
    ) -> CallToolResult:
        """Have every event queued for you (messages, contact requests, decisions, agreement changes)
        POSTed to a URL as signed JSON, at least once, with retries. A new webhook's secret is
        returned once (secret); when the webhook existed, its secret is unchanged (secret null) and it
        is enabled again with this URL. Verify each request: PIRCAN-Signature is v1=<hex> of
        HMAC-SHA256(secret, PIRCAN-Timestamp + '.' + body)."""
        endpoint, secret = await service.set_webhook(state, caller(ctx).account, url, account, via=VIA)
        status = await service.show(state, caller(ctx).account, endpoint.account)
        return ok({"webhook": service.endpoint_json(status), "secret": secret})

    @tool(READ_ONLY)
    async def get_webhook(ctx: Context, account: Annotated[str | None, _ACCOUNT] = None) -> CallToolResult:
        """Your webhook (never its secret): URL, whether it is enabled, pending deliveries, dead letters,
        the last success and the last error."""
        status = await service.show(state, caller(ctx).account, account)
        return ok({"webhook": service.endpoint_json(status)})

    @tool()
    async def clear_webhook(ctx: Context, account: Annotated[str | None, _ACCOUNT] = None) -> CallToolResult:
        """Remove your webhook; pending deliveries are dropped (the events stay in your inbox)."""
        shown, dropped = await service.clear(state, caller(ctx).account, account, via=VIA)
        return ok({"cleared": shown, "dropped": dropped})

    @tool()
    async def rotate_webhook_secret(ctx: Context, account: Annotated[str | None, _ACCOUNT] = None) -> CallToolResult:
        """A new secret for your webhook, returned once. For 24 hours requests carry a signature with the
        old secret too, so the receiver can switch over."""
        shown, secret = await service.rotate(state, caller(ctx).account, account, via=VIA)
        return ok({"account": shown, "secret": secret})

    @tool(ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True))
    async def test_webhook(ctx: Context, account: Annotated[str | None, _ACCOUNT] = None) -> CallToolResult:
        """Send a signed test event (PIRCAN-Event: test) to your webhook now and report its answer."""
        done = await service.test(state, caller(ctx).account, account)
        out = done.outcome
        return ok({"account": done.account, "delivery_id": done.delivery_id, "ok": out.ok, "status": out.status,
                   "elapsed_ms": out.elapsed_ms, "error": out.error or None})

    @tool(READ_ONLY)
    async def list_dead_letters(
        ctx: Context,
        account: Annotated[str | None, _ACCOUNT] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="At most this many, the newest.")] = 50,
    ) -> CallToolResult:
        """Deliveries given up on (after 12 tries, 3 days, or when the webhook was disabled by HTTP 410),
        oldest first. replay_dead_letters queues them again."""
        shown, letters = await service.dead_letters(state, caller(ctx).account, account, limit)
        return ok({"account": shown, "dead_letters": [service.dead_letter_json(d) for d in letters]})

    @tool()
    async def replay_dead_letters(
        ctx: Context,
        delivery_ids: Annotated[list[str] | None, Field(description="The dead letters to send again.")] = None,
        all: Annotated[bool, Field(description="Send every dead letter again.")] = False,
        account: Annotated[str | None, _ACCOUNT] = None,
    ) -> CallToolResult:
        """Queue dead letters again (same delivery ids and bodies, due now, with 12 tries and 3 days of
        their own)."""
        if not all and not delivery_ids:
            raise Refused("NEED_MORE_PARAMS", text="Give delivery_ids, or all: true")
        shown, count = await service.replay(state, caller(ctx).account, "ALL" if all else delivery_ids or [],
                                            account, via=VIA)
        return ok({"account": shown, "replayed": count})

    del (set_webhook, get_webhook, clear_webhook, rotate_webhook_secret, test_webhook, list_dead_letters,
         replay_dead_letters)
