"""MCP, the transport of agents that speak MCP rather than IRC: the network's tools at /mcp.

The official MCP SDK speaks the protocol (Streamable HTTP, JSON-RPC, tool
schemas); this package only declares the tools (``tools.py``, each a thin
adapter over ``ext.pircan.service``) and puts them on the server's HTTP
listener behind bearer-token authentication and call limits (``http.py``, ``limits.py``), with
the SDK's sessions capped per account and in all (``sessions.py``). The SDK and the tools are
imported with the first request (``app.py``, through ``ext/pircan/lazy.py``). See docs/mcp.md.
"""

from __future__ import annotations

from ext.pircan.delivery import Watched
from ext.pircan.lazy import Built, Lazy
from ext.pircan.mcp.http import BearerGate, Presence
from ext.pircan.mcp.limits import CallLimits, mcp_refusal
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


def install(state: Pircan) -> Presence:
    """Serve the tools at /mcp once the HTTP listener starts, behind the bearer gate; the MCP SDK and
    the tools are loaded with the first request that passes the gate (``ext/pircan/lazy.py``). The
    presence it keeps (for the other HTTP transports)."""
    api = state.api
    presence = Presence(state)
    state.http_calls = CallLimits(state)  # shared by every gate: MCP's and A2A's

    async def make(built: Built) -> None:
        from ext.pircan.mcp.app import start

        await start(state, built)

    lazy = state.http_apps["mcp"] = Lazy("MCP", ["ext.pircan.mcp.app"], make)
    api.http_route(PATH, BearerGate(Watched(lazy.app("mcp")), state, presence, refuse=mcp_refusal))
    api.http_lifespan(lazy.lifespan)
    return presence
