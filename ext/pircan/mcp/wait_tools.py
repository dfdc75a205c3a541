"""MCP's wait: ``wait_for_messages``, over ext.pircan.service.waits like IRC's INBOX WAIT, and the
helper that runs one wait for a tool call (``run_wait``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan import store_tasks as tdb
from ext.pircan.delivery import Delivery, of_scope
from ext.pircan.mcp.tools import READ_ONLY, caller, ok, tool_of
from ext.pircan.service import waits
from ext.pircan.service.schema import event_json, message_json, task_json
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import Task
from ext.pircan.waiting import WaitEvent

__all__ = ["register_wait_tool", "run_wait", "wait_result", "request_delivery", "await_reply", "capped"]

Kind = Literal["message", "request", "decision", "agreement", "task", "task-update", "webhook"]


def register_wait_tool(mcp: MCPServer, state: Pircan) -> None:
    tool = tool_of(mcp, state)

    @tool(READ_ONLY)
    async def wait_for_messages(
        ctx: Context,
        sender: Annotated[list[str] | None, Field(description="Wait only for what comes from these accounts: their "
                                                               "messages, task changes and events (omit: from "
                                                               "anyone). An account that does not exist is "
                                                               "refused (NO_SUCH_ACCOUNT).")] = None,
        timeout_ms: Annotated[int, Field(ge=0, description="How long to wait, in milliseconds. The server waits "
                                                           "at most pircan.mcp_wait_max_ms (15 minutes unless "
                                                           "its operator set another): 0, or anything longer, "
                                                           "waits that long, and the result's waited_ms says "
                                                           "how long it was.")] = 120_000,
        kinds: Annotated[list[Kind] | None, Field(description="The event kinds that end the wait (omit: every "
                                                              "kind): message, request (a contact request to "
                                                              "you), decision (on your request), agreement "
                                                              "(one made for you, revoked or expired), task (a "
                                                              "new task for you), task-update, webhook.")] = None,
        mode: Annotated[Literal["oldest", "new"], Field(description="oldest (default): what is already there "
                                                                    "first (the oldest unread message, then the "
                                                                    "oldest unseen task change, then the oldest "
                                                                    "event not yet told), else the next to come; "
                                                                    "new: only what arrives after this call.")
                        ] = "oldest",
        tasks: Annotated[list[str] | None, Field(description="Task ids to watch (tasks you gave or were given): "
                                                             "their next change ends the wait. Without sender, "
                                                             "only these tasks do; with it, its messages and "
                                                             "events too. An id that is not one of your tasks "
                                                             "is refused (NO_SUCH_TASK).")] = None,
        channels: Annotated[list[str] | None, Field(description="Channels you are a member of whose messages "
                                                                "also end the wait (opt-in; others' posts, "
                                                                "answered as {\"event\": {\"kind\": \"channel\", "
                                                                "\"channel_message\": ...}}, not consumed).")
                            ] = None,
    ) -> CallToolResult:
        """Block until something for you arrives (or, in the oldest mode, is already there), and return
        it. A direct message is taken (marked read) and returned whole as {"message": ...}; a change of
        one of your tasks by the other party as {"task": ...} with every entry (you have seen it). A
        contact request, a decision, an agreement change or a webhook notice is returned as {"event":
        {"kind", "id", "event_id", "taken": false, <"request"|"agreement"|"audit">: ...}} and is not
        consumed: every session of your account that waits is told. When two sessions wait, one takes a
        message and the others get {"event": {"kind": "message", "taken": true, "message": <without
        body>}}. Ends with {"timeout": true, "waited_ms"} when the time passes, {"gone": [...]} when
        every account you wait for left the network, or {"nothing": "<why>"} at once when nothing you
        wait for can come (every sender offline, not hosted and without a push endpoint; every watched
        task finished). With channels, a message posted there by another account ends it too, as
        {"event": {"kind": "channel", "id": <msgid>, "channel_message": {channel, msgid, time, command,
        from, account, text}}}. A long-poll: call it again to keep waiting. task_snapshot shows where your
        tasks stand."""
        account = caller(ctx).account
        timeout = capped(state, timeout_ms)
        outcome = await run_wait(state, ctx, account, timeout, senders=sender, kinds=waits.kinds_of(kinds),
                                 mode=mode, tasks=tasks, channels=channels)
        return ok(await wait_result(state, *outcome, timeout))

    del wait_for_messages


def capped(state: Pircan, timeout_ms: int) -> int:
    """A tool's timeout: at most pircan.mcp_wait_max_ms, which 0 also means."""
    limit = state.cfg.mcp_wait_max_ms
    return limit if timeout_ms == 0 else min(timeout_ms, limit)


async def await_reply(state: Pircan, ctx: Context, sent: StoredMessage, timeout_ms: int) -> dict[str, Any]:
    """send_direct_message's await_reply: ``reply`` (the message, taken), or ``reply`` null and
    ``no_reply`` (why: timeout, gone, nothing, cancelled; its text; how long it waited)."""
    timeout = capped(state, timeout_ms)
    kind, value = await waits.await_reply(state, sent, timeout, request_delivery(ctx))
    if kind == "message":
        return {"reply": message_json(value)}
    text = {"timeout": f"No reply within {timeout} ms",
            "gone": f"{value} left the network before replying"}.get(kind, value)
    return {"reply": None, "no_reply": {"reason": kind, "text": text, "waited_ms": timeout}}


def request_delivery(ctx: Context) -> Delivery | None:
    """The HTTP request's Delivery (whether its client is still there), when it has one."""
    request = ctx.request_context.request
    return of_scope(request.scope) if request is not None else None


async def wait_result(state: Pircan, kind: str, value: Any, timeout: int | None) -> dict[str, Any]:
    """A wait's outcome as a tool result's object."""
    if kind == "message" and isinstance(value, Task):  # a change of one of its tasks
        entries = await state.database.read(tdb.entries, value.id)
        return {"task": task_json(value, entries)}
    if kind == "message" and isinstance(value, WaitEvent):
        return {"event": event_json(value)}
    if kind == "message":
        return {"message": message_json(value)}
    if kind == "timeout":
        return {"timeout": True, "waited_ms": timeout}
    if kind == "gone":
        return {"gone": value.split(",")}
    if kind == "nothing":
        return {"nothing": value}
    return {"cancelled": value}


async def run_wait(state: Pircan, ctx: Context, account: str, timeout: int | None, **filters: Any) -> tuple[str, Any]:
    """Run one wait for a tool call (service.waits.wait_once, with the request's Delivery)."""
    return await waits.wait_once(state, account, timeout, request_delivery(ctx), **filters)
