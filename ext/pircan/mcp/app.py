"""The MCP server of the network, built with the first request to /mcp (``ext/pircan/lazy.py``):
the SDK's server with every tool declared, and its session manager (``sessions.py``) running until
the HTTP listener stops."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings

from ext.pircan.a2a.mcp_tools import register_intro_tool
from ext.pircan.lazy import Built
from ext.pircan.mcp import INSTRUCTIONS
from ext.pircan.mcp.account_tools import register_account_tools
from ext.pircan.mcp.broadcast_tools import register_broadcast_tools
from ext.pircan.mcp.channel_tools import register_channel_tools
from ext.pircan.mcp.host_tools import register_host_tools
from ext.pircan.mcp.profile_tools import register_profile_tools
from ext.pircan.mcp.search_tools import register_search_tools
from ext.pircan.mcp.sessions import CappedSessionManager
from ext.pircan.mcp.task_tools import register_task_tools
from ext.pircan.mcp.tools import register_tools
from ext.pircan.mcp.webhook_tools import register_webhook_tools
from ext.pircan.state import Pircan

__all__ = ["start"]


def _server(state: Pircan) -> Any:
    """The SDK's server object, with resources scoped to the caller's agreements. Its constructor
    configures logging when the process has none; pircd's logging is set up by `pircd serve`, so a
    placeholder handler keeps it a no-op."""
    from ext.pircan.mcp.resources import scoped_server

    root = logging.getLogger()
    placeholder = None
    if not root.handlers:
        placeholder = logging.NullHandler()
        root.addHandler(placeholder)
    try:
        server = scoped_server(state, "pircd", title="PIRCAN agent network", instructions=INSTRUCTIONS,
                               version="0.1", log_level="WARNING")
    finally:
        if placeholder is not None:
            root.removeHandler(placeholder)
    _without_idle_tracing(server._lowlevel_server)
    return server


def _without_idle_tracing(lowlevel: Any) -> None:
    """The SDK wraps every call in an OpenTelemetry span, a no-op until a tracer provider is
    installed, yet about a tenth of a call's work; without one (as pircd runs unless started under
    OpenTelemetry's instrumentation) it is left out, as the SDK's notes allow."""
    from mcp.server._otel import OpenTelemetryMiddleware
    from opentelemetry import trace

    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        lowlevel.middleware[:] = [m for m in lowlevel.middleware if not isinstance(m, OpenTelemetryMiddleware)]


async def start(state: Pircan, built: Built) -> None:
    """Declare the tools, start the session manager, and serve it as ``built.apps["mcp"]``."""
    mcp = _server(state)
    for register in (register_tools, register_task_tools, register_intro_tool, register_webhook_tools,
                     register_search_tools, register_profile_tools, register_channel_tools, register_host_tools,
                     register_broadcast_tools, register_account_tools):
        register(mcp, state)
    hosts, origins = state.api.http_allowed_hosts_and_origins()
    manager = CappedSessionManager(
        state,
        app=mcp._lowlevel_server,
        security_settings=TransportSecuritySettings(
            enable_dns_rebinding_protection="*" not in hosts, allowed_hosts=hosts, allowed_origins=origins,
        ),
    )
    running = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()

    async def run() -> None:  # the manager's task group lives in this one task
        try:
            async with manager.run():
                running.set_result(None)
                await stop.wait()
        finally:
            state.mcp_sessions = None

    task = asyncio.ensure_future(run())
    await asyncio.wait({running, task}, return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        task.result()  # it ended before it ran: its error
        raise RuntimeError("the MCP session manager ended at once")

    async def close() -> None:
        stop.set()
        await task

    built.close.append(close)
    built.apps["mcp"] = manager.asgi_app  # (the SDK's StreamableHTTPASGIApp only calls it)
    state.mcp_sessions = manager
