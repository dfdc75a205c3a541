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
from typing import Annotated, Any, Awaitable, Callable, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ircd.api import StoreUnavailable

from ext.pircan import store_tasks as tdb
from ext.pircan.delivery import Delivery, of_scope
from ext.pircan.ids import hexid, parse_id, ts
from ext.pircan.mcp.http import IDENTITY_KEY
from ext.pircan.service import contact, messages, roster
from ext.pircan.service.refusals import Refused
from ext.pircan.service.schema import agreement_json, message_json, request_json, task_json
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import Task

__all__ = ["register_tools", "refusal_result", "ok", "caller", "tool_of", "READ_ONLY", "WRITES"]

VIA = "mcp"


def ok(data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(data, ensure_ascii=False))],
                          structured_content=data)


def refusal_result(exc: Refused) -> CallToolResult:
    error = {"code": exc.code, "context": list(exc.context), "message": exc.text, **exc.fields()}
    text = f"{exc.code}: {exc.full_text}" + (f" ({', '.join(exc.context)})" if exc.context else "")
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content={"error": error},
                          is_error=True)


def caller(ctx: Context) -> Any:
    request = ctx.request_context.request
    identity = request.scope.get(IDENTITY_KEY) if request is not None else None
    if identity is None:  # the gate lets nothing through without one
        raise Refused("ACCOUNT_REQUIRED")
    return identity


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)


def tool_of(mcp: MCPServer) -> Callable[..., Any]:
    """``@tool(annotations)``: declare an MCP tool whose service refusals become tool errors with their
    code (the SDK reads the name, description and input schema from the undecorated function)."""

    def tool(annotations: ToolAnnotations = WRITES) -> Callable[[Any], Any]:
        def register(fn: Callable[..., Awaitable[CallToolResult]]) -> Any:
            @functools.wraps(fn)
            async def run(*args: Any, **kwargs: Any) -> CallToolResult:
                try:
                    return await fn(*args, **kwargs)
                except Refused as exc:
                    return refusal_result(exc)
                except StoreUnavailable:  # the database went away (the store says so once)
                    return refusal_result(Refused("TEMPORARILY_UNAVAILABLE", retry_after_s=1))

            return mcp.tool(annotations=annotations, structured_output=False)(run)

        return register

    return tool


def register_tools(mcp: MCPServer, state: Pircan) -> None:  # noqa: C901 - one place lists every tool
    api = state.api
    tool = tool_of(mcp)

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
    ) -> CallToolResult:
        """Send a durable direct message to another account of the network. It is stored before this
        returns; status 'notified' means the recipient is online, 'queued' that it will find the message
        in its inbox. Loop control: replies count hops (at most 8), a conversation carries at most 40
        messages an hour, and you at most 120 an hour per agreement."""
        sent = await messages.send_message(state, caller(ctx).account, recipient, body, in_reply_to,
                                           key=idempotency_key)
        return ok({"message": message_json(sent.message, with_body=False), "status": sent.status, "created": sent.created})

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

    @tool()
    async def wait_for_messages(
        ctx: Context,
        sender: Annotated[list[str] | None, Field(description="Wait only for messages from these accounts "
                                                               "(omit: from anyone).")] = None,
        timeout_ms: Annotated[int, Field(ge=0, description="How long to wait, in milliseconds; 0 waits "
                                                           "as long as the server allows.")] = 120_000,
    ) -> CallToolResult:
        """Block until a direct message for you arrives (or is already unread), take it (marked read)
        and return it whole as {"message": ...}; or until one of your tasks is changed by the other party
        ({"task": ...} with every entry). Ends with {"timeout": true} when the time passes, or
        {"gone": [...]} when every account you wait for has left the network. A long-poll: call it again
        to keep waiting."""
        account = caller(ctx).account
        limit = state.cfg.mcp_wait_max_ms
        timeout = limit if timeout_ms == 0 else min(timeout_ms, limit)
        kind, value = await _wait(state, ctx, account, sender, timeout)
        if kind == "message" and isinstance(value, Task):  # a change of one of its tasks
            entries = await state.database.read(tdb.entries, value.id)
            return ok({"task": task_json(value, entries)})
        if kind == "message":
            return ok({"message": message_json(value)})
        if kind == "timeout":
            return ok({"timeout": True, "waited_ms": timeout})
        if kind == "gone":
            return ok({"gone": value.split(",")})
        return ok({"cancelled": value})

    @tool(READ_ONLY)
    async def get_conversation(
        ctx: Context,
        conversation_id: Annotated[str, Field(description="The conversation's id (the message_id of its first "
                                                          "message; every message carries it).")],
        limit: Annotated[int, Field(ge=1, le=200, description="At most this many messages, the newest.")] = 200,
        before: Annotated[str | None, Field(description="Only messages older than this message_id (paging).")] = None,
    ) -> CallToolResult:
        """A whole thread, both directions, read and unread, oldest first. Only conversations you are a
        party of exist for you."""
        items = await messages.conversation(state, caller(ctx).account, conversation_id, limit, before)
        return ok({"conversation_id": conversation_id, "messages": [message_json(m) for m in items],
                   "more": len(items) == limit})

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
        return ok({"outcome": done.outcome, "request": request_json(done.request, done.outcome,
                                                                            state.policies.get(done.request.target)),
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
            return ok({"decision": "accepted", "request": request_json(req, "accepted"),
                       "agreement": agreement_json(agr)})
        req = await contact.decline(state, actor, request_id, via=VIA)
        return ok({"decision": "declined", "request": request_json(req, "declined")})

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
        shown = [request_json(r, s, state.policies.get(r.target)) for r, s in requests
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
        everyone: Annotated[bool, Field(description="Every agent of the network (default), or only those you "
                                                    "own or have agreements with.")] = True,
    ) -> CallToolResult:
        """The network's roster: each account (agents, and people with everyone) with its kind, display
        name, owner, whether it is online, your relation to it (owned, agreement, none), the skills it
        accepts tasks for, unread messages and last activity."""
        entries = await roster.roster(state, caller(ctx).account, everyone=everyone)
        return ok({"agents": [
            {"name": e.name, "kind": e.kind, "display_name": e.display_name, "owner": e.owner, "status": e.status,
             "relation": e.relation, "skills": [{"name": s, "description": d} for s, d in e.skills],
             "unread": e.unread, "last_active": None if e.last_active is None else ts(e.last_active)}
            for e in entries
        ]})

    # channels -----------------------------------------------------------------------------

    @tool(READ_ONLY)
    async def list_channels(ctx: Context) -> CallToolResult:
        """The channels you may see: public ones, and private ones you are a member or owner of. member
        says whether you are in it (only members read history or post; join_channel makes you one)."""
        infos = api.account_channels(caller(ctx).account)
        return ok({"channels": [
            {"name": c.name, "topic": c.topic, "members": c.members, "member": c.member, "modes": c.modes}
            for c in infos
        ]})

    @tool(READ_ONLY)
    async def get_channel_history(
        ctx: Context,
        channel: Annotated[str, Field(description="The channel, e.g. #lobby or #owner/room.")],
        limit: Annotated[int, Field(ge=1, le=500, description="At most this many lines, the newest.")] = 50,
        before: Annotated[str | None, Field(description="Only lines older than this msgid (paging).")] = None,
    ) -> CallToolResult:
        """Stored messages of a channel you are a member of, oldest first."""
        account = caller(ctx).account
        found = api.account_find_channel(account, channel)
        if found is None or not api.account_in_channel(account, found):
            raise _no_channel(channel, found)
        before_id = None
        if before is not None:
            before_id = parse_id(before)
            if before_id is None:
                raise Refused("NO_SUCH_MESSAGE", before)
        rows = await api.channel_history(found, limit, before_id)
        return ok({"channel": found.name, "messages": [
            {"msgid": hexid(r.id), "time": r.time, "command": r.command, "from": r.source.split("!", 1)[0],
             "account": r.account, "text": r.text} for r in rows
        ]})

    @tool()
    async def send_channel_message(
        ctx: Context,
        channel: Annotated[str, Field(description="A channel you are a member of.")],
        text: Annotated[str, Field(description="One line of text (no line breaks), at most 400 bytes.")],
    ) -> CallToolResult:
        """Post a message to a channel you are in, as your account; every member sees it, and it is
        stored in the channel's history."""
        identity = caller(ctx)
        found = api.account_find_channel(identity.account, channel)
        if found is None or not api.account_in_channel(identity.account, found):
            raise _no_channel(channel, found)
        if not text.strip():
            raise Refused("EMPTY", channel)
        if "\n" in text or "\r" in text or "\0" in text or len(text.encode("utf-8")) > CHANNEL_TEXT_BYTES:
            raise Refused("TOO_LONG", channel, text=f"One line of at most {CHANNEL_TEXT_BYTES} bytes, without line "
                                                    "breaks")
        row: Any = await api.get_account(identity.account)
        relay = api.account_post(identity.account, row.name if row is not None else identity.account, found, text)
        if isinstance(relay, str):
            raise Refused("CANNOT_SEND", found.name, text=relay)
        return ok({"channel": found.name, "msgid": relay.msgid, "time": relay.time})

    del (send_direct_message, get_inbox, mark_messages_read, wait_for_messages, get_conversation, request_contact,
         respond_to_contact, revoke_agreement, list_requests, list_agreements, list_contacts, list_agents,
         list_channels, get_channel_history, send_channel_message)


CHANNEL_TEXT_BYTES = 400


def request_delivery(ctx: Context) -> Delivery | None:
    """The HTTP request's Delivery (whether its client is still there), when it has one."""
    request = ctx.request_context.request
    return of_scope(request.scope) if request is not None else None


async def _wait(state: Pircan, ctx: Context, account: str, senders: list[str] | None,
                timeout: int | None) -> tuple[str, Any]:
    """Run one wait (service.messages.start_wait) for a tool call: (kind, value). What it takes counts
    as taken only if the call's client is still there when the answer is written: a client that
    disconnects ends the wait, and anything taken for it is unread (unseen) again."""
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Any] = loop.create_future()
    delivery = request_delivery(ctx)

    def on_message(item: StoredMessage | Task) -> None:
        if outcome.done():  # the caller went away: it stays unread (unseen)
            messages.put_back(state, account, item)
        elif delivery is None or delivery.hold(lambda: messages.put_back(state, account, item)):
            outcome.set_result(("message", item))
        else:
            outcome.set_result(("cancelled", "The client disconnected"))

    def on_end(kind: str, detail: str) -> None:
        if not outcome.done():
            outcome.set_result((kind, detail))

    waiter = messages.start_wait(state, account, senders, timeout, on_message, on_end)
    gone = None if delivery is None else loop.create_task(delivery.gone.wait())
    try:
        if gone is not None:
            await asyncio.wait({outcome, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not outcome.done():
                outcome.set_result(("cancelled", "The client disconnected"))
        return await outcome
    finally:
        if gone is not None:
            gone.cancel()
        if not outcome.done():
            outcome.cancel()
        state.end_wait(waiter)


def _no_channel(name: str, found: Any) -> Refused:
    """Not a member: a channel you may see says so; one you may not see is answered as a name nobody uses."""
    if found is None:
        return Refused("NO_SUCH_CHANNEL", name, text="No such channel")
    return Refused("NOT_MEMBER", name, text="You are not a member of this channel")

