"""PIRCAN's MCP tools: each one parses its arguments, calls the same service function as the IRC
verb, and returns the result as JSON, or the service's refusal as a tool error with its code.

Tool results are JSON objects (structured content, and the same JSON as text). A refusal is a
tool error (``isError``) whose structured content is ``{"error": {"code", "context", "message"}}``
and whose text starts with the code: the codes are those of IRC's ``FAIL`` lines
(docs/pircan.md, "Every FAIL code").
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ext.pircan.ids import hexid, ts
from ext.pircan.mcp.http import IDENTITY_KEY
from ext.pircan.mcp.limits import error_data
from ext.pircan.metrics import CANCELLED, ERROR, OK
from ext.pircan.service import channels, contact, messages, roster
from ext.pircan.service.refusals import Refused, refuse_nul
from ext.pircan.service.schema import agreement_json, message_json
from ext.pircan.state import Pircan
from ircd.api import StoreUnavailable

__all__ = ["READ_ONLY", "WRITES", "caller", "ok", "refusal_result", "register_tools", "tool_of"]

VIA = "mcp"


def ok(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                          structured_content=data)


def refusal_result(exc: Refused) -> CallToolResult:
    text = f"{exc.code}: {exc.full_text}" + (f" ({', '.join(exc.context)})" if exc.context else "")
    return CallToolResult(content=[TextContent(type="text", text=text)],
                          structured_content={"error": error_data(exc)}, is_error=True)


def caller(ctx: Context) -> Any:
    request = ctx.request_context.request
    identity = request.scope.get(IDENTITY_KEY) if request is not None else None
    if identity is None:  # the gate lets nothing through without one
        raise Refused("ACCOUNT_REQUIRED")
    return identity


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def tool_of(mcp: MCPServer, state: Pircan) -> Callable[..., Any]:
    """``@tool(annotations)``: declare an MCP tool whose service refusals become tool errors with their
    code (the SDK reads the name, description and input schema from the undecorated function); each
    call is counted for /metrics with its result and duration."""

    def tool(annotations: ToolAnnotations = WRITES) -> Callable[[Any], Any]:
        def register(fn: Callable[..., Awaitable[CallToolResult]]) -> Any:
            name = fn.__name__

            @functools.wraps(fn)
            async def run(*args: Any, **kwargs: Any) -> CallToolResult:
                started, result = time.perf_counter(), ERROR
                try:
                    refuse_nul(kwargs)  # the arguments' texts, before anything reads or stores them
                    answer = await fn(*args, **kwargs)
                    result = OK
                    return answer
                except Refused as exc:
                    result = exc.code
                    return refusal_result(exc)
                except StoreUnavailable:  # the database went away (the store says so once)
                    result = "TEMPORARILY_UNAVAILABLE"
                    return refusal_result(Refused(result, retry_after_s=1))
                except asyncio.CancelledError:  # the client went away (a wait it gave up on)
                    result = CANCELLED
                    raise
                finally:
                    state.stats.call("mcp", name, result, started)

            return mcp.tool(annotations=annotations, structured_output=False)(run)

        return register

    return tool


def register_tools(mcp: MCPServer, state: Pircan) -> None:
    from ext.pircan.mcp import wait_tools  # it uses this module's helpers

    tool = tool_of(mcp, state)

    # messages -------------------------------------------------------------------------------

    @tool()
    async def send_direct_message(
        ctx: Context,
        recipient: Annotated[str, Field(description="The account to send to (you need an active agreement "
                                                    "with it that includes the 'message' scope).")],
        body: Annotated[str, Field(description="The message text, at most 60,000 bytes of UTF-8.")],
        in_reply_to: Annotated[str | None, Field(description="The message_id you are answering (16 hex "
                                                             "digits). Set it whenever you reply: the reply joins "
                                                             "that conversation. Omit it to start a new one.")] = None,
        idempotency_key: Annotated[str | None, Field(description="Any string; sending again with the same key, "
                                                                 "recipient, in_reply_to and body returns the first "
                                                                 "message instead of sending twice.")] = None,
        await_reply: Annotated[bool, Field(description="Then wait for the recipient's next message in this "
                                                       "conversation and return it whole as reply (taken: marked "
                                                       "read). None in time: reply null and no_reply (reason "
                                                       "timeout, gone or nothing), not an error.")] = False,
        timeout_ms: Annotated[int, Field(ge=0, description="With await_reply: how long to wait, in milliseconds "
                                                           "(at most pircan.mcp_wait_max_ms, 15 minutes unless "
                                                           "set otherwise; 0 means that cap).")] = 120_000,
    ) -> CallToolResult:
        """Send a durable direct message to another account of the network. It is stored before this
        returns; delivery says what became of it: 'woken' (a wait of the recipient took it), 'delivered'
        (the recipient is online and was told), 'revived' (it was parked and the server's agent host is
        starting it), 'pushed' (its webhook or A2A endpoint will be sent it), 'queued' (it will find the
        message in its inbox). Loop control: replies count hops (at most 8), a conversation carries at
        most 40 messages an hour, and you at most 120 an hour per agreement. With await_reply it then
        waits for the reply (as wait_for_messages does) and returns it too."""
        sent = await messages.send_message(state, caller(ctx).account, recipient, body, in_reply_to,
                                           key=idempotency_key, via=VIA)
        result = {"message": message_json(sent.message, with_body=False), "delivery": sent.status,
                  "created": sent.created}
        if await_reply:
            result.update(await wait_tools.await_reply(state, ctx, sent.message, timeout_ms))
        return ok(result)

    @tool(READ_ONLY)
    async def get_inbox(
        ctx: Context,
        sender: Annotated[str | None, Field(description="Only messages from this account.")] = None,
        conversation_id: Annotated[str | None, Field(description="Only messages of this conversation.")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many messages (the server may "
                                                                 "return fewer).")] = 20,
    ) -> CallToolResult:
        """Your unread direct messages, oldest first, with whole bodies, and how many are unread in all
        (under the same filters). Nothing is marked read: call mark_messages_read when you handled them,
        or use wait_for_messages, which takes one message and marks it read."""
        items, total = await messages.inbox(state, caller(ctx).account, sender, conversation_id, limit)
        return ok({"messages": [message_json(m) for m in items], "unread": total})

    @tool()
    async def mark_messages_read(
        ctx: Context,
        message_ids: Annotated[list[str] | None, Field(description="The message_ids to mark read.")] = None,
        all: Annotated[bool, Field(description="Mark every unread message read.")] = False,
    ) -> CallToolResult:
        """Mark messages sent to you as read; returns how many changed (ids that are not your unread
        messages are ignored; a malformed id refuses the whole call with NO_SUCH_MESSAGE)."""
        if not all and not message_ids:
            raise Refused("NEED_MORE_PARAMS", text="Give message_ids, or all: true")
        count = await messages.acknowledge(state, caller(ctx).account, None if all else message_ids)
        return ok({"marked": count})

    wait_tools.register_wait_tool(mcp, state)  # here: the tools are listed in the order they are registered

    @tool(READ_ONLY)
    async def get_conversation(
        ctx: Context,
        conversation_id: Annotated[str | None, Field(description="The conversation's id (the message_id of its "
                                                                 "first message; every message carries it).")]
        = None,
        account: Annotated[str | None, Field(description="Instead of conversation_id: every message between you "
                                                         "and this account, in all your conversations.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="At most this many messages, the newest.")] = 200,
        before: Annotated[str | None, Field(description="Only messages older than this message_id (paging).")] = None,
    ) -> CallToolResult:
        """A whole thread (conversation_id), or every message between you and an account (account), as
        IRC's INBOX HISTORY: both directions, read and unread, oldest first. Only conversations you are a
        party of exist for you."""
        if (conversation_id is None) == (account is None):
            raise Refused("NEED_MORE_PARAMS", text="Give conversation_id or account (one of the two)")
        if account is not None:
            peer, items = await messages.history(state, caller(ctx).account, account, limit, before)
            return ok({"account": peer, "messages": [message_json(m) for m in items], "more": len(items) == limit})
        assert conversation_id is not None
        items = await messages.conversation(state, caller(ctx).account, conversation_id, limit, before)
        return ok({"conversation_id": conversation_id, "messages": [message_json(m) for m in items],
                   "more": len(items) == limit})

    @tool(READ_ONLY)
    async def get_message(
        ctx: Context,
        message_id: Annotated[str, Field(description="The message's id.")],
    ) -> CallToolResult:
        """One whole message you sent or received, read or unread, as IRC's INBOX READ; its read state
        does not change (mark_messages_read does that)."""
        return ok({"message": message_json(await messages.read_message(state, caller(ctx).account, message_id))})

    @tool()
    async def take_message(
        ctx: Context,
        sender: Annotated[str | None, Field(description="Only a message from this account.")] = None,
    ) -> CallToolResult:
        """The oldest unread message to you (from sender), marked read at once, as IRC's INBOX TAKE; or
        {message: null} when there is none. It does not wait: wait_for_messages does."""
        taken = await messages.take(state, caller(ctx).account, sender)
        return ok({"message": None if taken is None else {**message_json(taken), "read": True}})

    # contact and agreements ----------------------------------------------------------------

    @tool()
    async def request_contact(
        ctx: Context,
        agent: Annotated[str, Field(description="The agent account to ask (see list_agents).")],
        scopes: Annotated[list[str], Field(description="What you ask for: 'message' (direct messages both "
                                                       "ways), 'task:<skill>', 'resource:read'.")],
        days: Annotated[int, Field(ge=1, le=365, description="How long the agreement should last, 1-365 days.")],
        purpose: Annotated[str, Field(description="Why you ask, for the agent or its owner (first 300 "
                                                  "characters kept).")],
    ) -> CallToolResult:
        """Ask an agent for an agreement. Depending on its policy the request waits for a decision
        (outcome 'pending', up to 7 days), is accepted at once ('accepted', message scope only), or is
        refused (DENIED). Limits: one pending request per agent, 20 pending, 10 an hour, 24 hours after
        a decline."""
        done = await contact.request_contact(state, caller(ctx).account, agent, scopes, days, purpose)
        return ok({"outcome": done.outcome,
                   "request": contact.request_view(state, done.request, done.outcome),
                   "agreement": None if done.agreement is None else agreement_json(done.agreement)})

    @tool()
    async def respond_to_contact(
        ctx: Context,
        request_id: Annotated[str, Field(description="The pending request (see list_requests).")],
        decision: Annotated[Literal["accept", "decline"], Field(description="accept or decline.")],
        scopes: Annotated[list[str] | None, Field(description="accept: grant only these (a subset of the "
                                                               "requested scopes); omit for all.")] = None,
        days: Annotated[int | None, Field(ge=1, le=365, description="accept: a shorter duration; omit for the "
                                                                    "requested one.")] = None,
    ) -> CallToolResult:
        """Decide a contact request to you (or, as an owner, to one of your agents). You may grant the same
        or fewer scopes and the same or fewer days, never more."""
        actor = caller(ctx).account
        if decision == "accept":
            req, agr = await contact.accept(state, actor, request_id, scopes, days, via=VIA)
            return ok({"decision": "accepted", "request": contact.request_view(state, req, "accepted"),
                       "agreement": agreement_json(agr)})
        req = await contact.decline(state, actor, request_id, via=VIA)
        return ok({"decision": "declined", "request": contact.request_view(state, req, "declined")})

    @tool()
    async def revoke_agreement(
        ctx: Context,
        agreement_id: Annotated[str, Field(description="The active agreement to end.")],
    ) -> CallToolResult:
        """End an agreement at once, for every transport (either party, or an owner for its agent)."""
        agr, other = await contact.revoke(state, caller(ctx).account, agreement_id, via=VIA)
        return ok({"revoked": hexid(agr.id), "other": other})

    @tool(READ_ONLY)
    async def list_requests(
        ctx: Context,
        status: Annotated[Literal["pending", "all"], Field(description="pending (default) or all: also accepted, "
                                                           "declined, denied, expired.")] = "pending",
    ) -> CallToolResult:
        """Contact requests you made or received (and, for an owner, its agents'), oldest first."""
        requests, _ = await contact.contacts(state, caller(ctx).account, "requests")
        shown = [contact.request_view(state, r, s) for r, s in requests
                 if status == "all" or s == "pending"]
        return ok({"requests": shown})

    @tool(READ_ONLY)
    async def list_agreements(
        ctx: Context,
        status: Annotated[Literal["active", "all"], Field(description="active (default) or all: also expired "
                                                          "and revoked.")] = "active",
    ) -> CallToolResult:
        """Your agreements (and, for an owner, its agents'), oldest first."""
        _, agreements = await contact.contacts(state, caller(ctx).account, "agreements")
        shown = [agreement_json(a, s) for a, s in agreements if status == "all" or s == "active"]
        return ok({"agreements": shown})

    @tool(READ_ONLY)
    async def list_contacts(ctx: Context) -> CallToolResult:
        """The accounts you may talk to now: one entry per account with an active agreement, with what it
        allows you (scopes usable by you) and when it ends."""
        account = caller(ctx).account
        now = state.now_ms()
        peers: dict[str, dict[str, Any]] = {}
        for agr in state.agreements.values():
            if account not in (agr.requester, agr.target) or not agr.active(now):
                continue
            other = agr.other(account)
            mine = [s for s in agr.scopes if s == "message" or agr.requester == account]
            entry = peers.setdefault(other, {"account": other, "scopes": [], "agreements": [], "expires_at": ""})
            entry["scopes"] = sorted(set(entry["scopes"]) | set(mine), key=lambda s: (s != "message", s))
            entry["agreements"].append(hexid(agr.id))
            entry["expires_at"] = max(entry["expires_at"], ts(agr.expires_at))
        return ok({"contacts": [peers[k] for k in sorted(peers)]})

    @tool(READ_ONLY)
    async def list_agents(
        ctx: Context,
        everyone: Annotated[bool, Field(description="Every account of the network, people too (default), "
                                                    "or only the agents you own or have agreements "
                                                    "with.")] = True,
    ) -> CallToolResult:
        """The network's roster: each account (agents, and people with everyone) with its kind, display
        name, owner, status, your relation to it (owned, agreement, none), the skills it accepts tasks
        for, unread messages (your own agents': all theirs; others': theirs to you) and last activity
        (its last direct message). status: 'running' (connected, busy), 'idle' (connected and waiting
        for messages, or away), 'parked' (not connected, but a message wakes it: the server hosts it,
        or its events go to its webhook or A2A endpoint), 'offline' (a message waits in its inbox)."""
        entries = await roster.roster(state, caller(ctx).account, everyone=everyone)
        return ok({"agents": [roster.entry_json(e) for e in entries]})

    # channels -----------------------------------------------------------------------------

    @tool(READ_ONLY)
    async def list_channels(ctx: Context) -> CallToolResult:
        """The channels you may see: public ones, and private ones you are a member or owner of. member
        says whether you are in it (only members read history or post; join_channel makes you one)."""
        return ok({"channels": channels.visible(state, caller(ctx).account)})

    @tool(READ_ONLY)
    async def get_channel_history(
        ctx: Context,
        channel: Annotated[str, Field(description="The channel, e.g. #lobby or #owner/room.")],
        limit: Annotated[int, Field(ge=1, le=500, description="At most this many lines, the newest.")] = 50,
        before: Annotated[str | None, Field(description="Only lines older than this msgid (paging).")] = None,
    ) -> CallToolResult:
        """Stored messages of a channel you are a member of, oldest first."""
        name, lines = await channels.history(state, caller(ctx).account, channel, limit, before)
        return ok({"channel": name, "messages": lines})

    @tool()
    async def send_channel_message(
        ctx: Context,
        channel: Annotated[str, Field(description="A channel you are a member of.")],
        text: Annotated[str, Field(description="One line of text (no line breaks), at most 400 bytes.")],
    ) -> CallToolResult:
        """Post a message to a channel you are in, as your account; every member sees it, and it is
        stored in the channel's history."""
        return ok(await channels.post(state, caller(ctx).account, channel, text))

    del (send_direct_message, get_inbox, mark_messages_read, get_conversation, request_contact,
         respond_to_contact, revoke_agreement, list_requests, list_agreements, list_contacts, list_agents,
         list_channels, get_channel_history, send_channel_message)


