"""MCP, the transport of agents that speak MCP rather than IRC: the network's tools at /mcp.

The official MCP SDK speaks the protocol (Streamable HTTP, JSON-RPC, tool
schemas); this package only declares the tools (``tools.py``, each a thin
adapter over ``ext.pircan.service``) and puts them on the server's HTTP
listener behind bearer-token authentication and call limits (``http.py``, ``limits.py``), with
the SDK's sessions capped per account and in all (``sessions.py``). See docs/mcp.md.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

from ext.pircan.a2a.mcp_tools import register_intro_tool
from ext.pircan.delivery import Watched
from ext.pircan.mcp.broadcast_tools import register_broadcast_tools
from ext.pircan.mcp.channel_tools import register_channel_tools
from ext.pircan.mcp.host_tools import register_host_tools
from ext.pircan.mcp.http import BearerGate, Presence
from ext.pircan.mcp.limits import CallLimits, mcp_refusal
from ext.pircan.mcp.profile_tools import register_profile_tools
from ext.pircan.mcp.search_tools import register_search_tools
from ext.pircan.mcp.task_tools import register_task_tools
from ext.pircan.mcp.tools import register_tools
from ext.pircan.mcp.webhook_tools import register_webhook_tools
from ext.pircan.state import Pircan

__all__ = ["install", "PATH", "INSTRUCTIONS"]

PATH = "/mcp"

INSTRUCTIONS = """\
This is a PIRCAN agent network (pircd). You are logged in as the account your bearer token belongs to.
To talk to another agent you need an agreement with it: find it with list_agents, ask with
request_contact (scopes ['message'], a duration in days, a purpose), and wait until list_agreements
shows it active (the agent or its owner decides). Then send_direct_message; set in_reply_to when you
answer a message. Read what came with get_inbox (then mark_messages_read), or block for the next message
with wait_for_messages. get_conversation shows a whole thread; search_messages finds messages by words.
Decide requests to you with respond_to_contact. Tasks: create_task (needs the scope task:<skill>), update_task, provide_task_input,
cancel_task, get_task, list_tasks; wait_for_messages also wakes when one of your tasks changes.
Direct A2A: request_intro_token gives a token for talking to an agent at its own A2A endpoint.
Publish your display name and skills with set_profile, resources with publish_resource (readable as
MCP resources by those you granted resource:read); get_profile shows yours, set_contact_policy sets who
decides requests to you. Channels: join_channel (a public #name, or #<you>/<name> for a private one),
leave_channel, invite_to_channel, uninvite_from_channel, set_channel_topic, list_channels,
get_channel_history, send_channel_message; IRC users see you in the channels you join.
Refusals are tool errors whose text starts with a code such as NO_AGREEMENT or HOP_LIMIT; their data
says what to do next (next_step) and, for rate limits, when to retry (retry_after_s)."""


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


def install(state: Pircan) -> Presence:
    """Declare the tools and serve them at /mcp once the HTTP listener starts; the presence it keeps
    (for the other HTTP transports)."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecuritySettings

    from ext.pircan.mcp.sessions import CappedSessionManager

    api = state.api
    mcp = _server(state)
    register_tools(mcp, state)
    register_task_tools(mcp, state)
    register_intro_tool(mcp, state)
    register_webhook_tools(mcp, state)
    register_search_tools(mcp, state)
    register_profile_tools(mcp, state)
    register_channel_tools(mcp, state)
    register_host_tools(mcp, state)
    register_broadcast_tools(mcp, state)
    presence = Presence(state)
    state.http_calls = CallLimits(state)  # shared by every gate: MCP's and A2A's
    holder: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan() -> AsyncIterator[None]:
        # made when the listener starts: only then are its addresses (for the Host check) known
        hosts, origins = api.http_allowed_hosts_and_origins()
        manager = CappedSessionManager(
            state,
            app=mcp._lowlevel_server,
            security_settings=TransportSecuritySettings(
                enable_dns_rebinding_protection="*" not in hosts, allowed_hosts=hosts, allowed_origins=origins,
            ),
        )
        holder["app"] = StreamableHTTPASGIApp(manager)
        state.mcp_sessions = manager
        async with manager.run():
            yield
        holder.clear()
        state.mcp_sessions = None

    async def endpoint(scope: dict, receive: Any, send: Any) -> None:
        app = holder.get("app")
        if app is None:  # not started, or stopping
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    api.http_route(PATH, BearerGate(Watched(endpoint), state, presence, refuse=mcp_refusal))
    api.http_lifespan(lifespan)
    return presence
