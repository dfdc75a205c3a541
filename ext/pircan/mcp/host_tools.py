"""The agent host's owner tools on MCP: each calls the same service function as the IRC verb HOST
(ext/pircan/host/service.py) and returns JSON, or the refusal as a tool error with its code."""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.host import service
from ext.pircan.mcp.tools import READ_ONLY, caller, ok, tool_of
from ext.pircan.state import Pircan

__all__ = ["register_host_tools", "status_json"]

_AGENT = Field(description="A hosted agent you own (the operator lists the agents the server runs).")


def status_json(status: service.Status) -> dict[str, object]:
    return {
        "account": status.account, "state": status.state, "pid": status.pid, "started_at": status.started_at,
        "restarts": status.restarts, "last_exit": status.last_exit, "note": status.note or None,
        "start": status.start, "restart": status.restart, "log_cursor": status.log_cursor,
    }


def register_host_tools(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool(READ_ONLY)
    async def list_hosted_agents(ctx: Context) -> CallToolResult:
        """The agents you own that this server runs for you, with their state: parked (not running; a
        message, task or contact request for it starts it), starting, running, stopping, backoff
        (waiting to restart after a crash) or failed (it kept failing: control_hosted_agent with
        action start starts it again); pid, restarts, last exit, and the log cursor to follow its output from."""
        found = await service.list_hosted(state, caller(ctx).account)
        return ok({"agents": [status_json(s) for s in found]})

    @tool()
    async def control_hosted_agent(
        ctx: Context,
        agent: Annotated[str, _AGENT],
        action: Annotated[Literal["start", "stop", "restart"], Field(
            description="start: run it now (also out of failed); stop: SIGTERM, SIGKILL after the grace "
                        "period, and it is parked; restart: stop, then start.")],
    ) -> CallToolResult:
        """Start, stop (park) or restart one of your hosted agents; returns its state after the change.
        Audited (host.start, host.stop). On a network of several nodes, stop and restart are done by
        the node running it: another node answers OTHER_NODE with that node's name."""
        fn = {"start": service.start, "stop": service.stop, "restart": service.restart}[action]
        return ok({"agent": status_json(await fn(state, caller(ctx).account, agent))})

    @tool(READ_ONLY)
    async def read_hosted_agent_logs(
        ctx: Context,
        agent: Annotated[str, _AGENT],
        lines: Annotated[int, Field(ge=1, le=service.LOG_LINES_MAX, description="The last this many lines "
                                    "(without cursor).")] = 100,
        grep: Annotated[str | None, Field(description="Only lines matching this regular expression.")] = None,
        cursor: Annotated[int | None, Field(ge=0, description="Instead of the last lines: what was written "
                                            "after this cursor (one a previous call returned).")] = None,
        follow_ms: Annotated[int, Field(ge=0, le=service.FOLLOW_MAX_MS, description="With cursor: wait up to "
                                        "this long for output past it.")] = 0,
    ) -> CallToolResult:
        """Its captured stdout and stderr (one log; the server's own lines start with '--- pircd host:').
        Returns text and the cursor after it: pass it back with follow_ms to follow the output,
        resuming exactly where the last call stopped (also across restarts and log rotation)."""
        window = await service.logs(state, caller(ctx).account, agent, lines=lines, grep=grep, cursor=cursor,
                                    follow_ms=follow_ms)
        return ok({"agent": state.api.casefold(agent), "text": window.data.decode("utf-8", "replace"),
                   "start": window.start, "cursor": window.cursor})

    @tool()
    async def write_hosted_agent_stdin(
        ctx: Context,
        agent: Annotated[str, _AGENT],
        line: Annotated[str, Field(description="One line (a newline is added), at most 4096 characters.")],
    ) -> CallToolResult:
        """Write one line to the standard input of your hosted agent's running process. Audited."""
        written = await service.stdin(state, caller(ctx).account, agent, line)
        return ok({"agent": state.api.casefold(agent), "bytes": written})

    @tool()
    async def signal_hosted_agent(
        ctx: Context,
        agent: Annotated[str, _AGENT],
        signal: Annotated[Literal["TERM", "INT", "HUP", "KILL"], Field(
            description="Sent to the process group of its running process.")],
    ) -> CallToolResult:
        """Send a signal to your hosted agent's process group; what follows (a restart, say) is its
        restart policy's. Audited (host.signal)."""
        sig = await service.send_signal(state, caller(ctx).account, agent, signal)
        return ok({"agent": state.api.casefold(agent), "signal": sig})
