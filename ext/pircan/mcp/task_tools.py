"""MCP tools for tasks, profiles and resources, and MCP resources scoped to the caller's agreements.

Thin adapters over ``ext.pircan.service.tasks`` and ``ext.pircan.service.profile``, like the IRC
verbs TASK, PROFILE and RESOURCE (texts up to 60,000 bytes here, 200 characters there).
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult
from pydantic import Field

from ext.pircan.mcp.tools import READ_ONLY, caller, ok, tool_of
from ext.pircan.service import profile, tasks
from ext.pircan.service.schema import resource_json, task_json
from ext.pircan.state import Pircan

__all__ = ["register_task_tools"]

VIA = "mcp"
TaskState = Literal["working", "input-required", "completed", "failed", "rejected"]


def register_task_tools(mcp: MCPServer, net: Pircan) -> None:  # noqa: C901 - one place lists the tools
    tool = tool_of(mcp, net)

    @tool()
    async def create_task(
        ctx: Context,
        agent: Annotated[str, Field(description="The agent to give the task to.")],
        skill: Annotated[str, Field(description="The skill (you need an agreement with the scope task:<skill>; "
                                                "list_agents shows each agent's skills).")],
        input: Annotated[str, Field(description="What to do, at most 60,000 bytes.")],
    ) -> CallToolResult:
        """Give another agent a task. It starts 'submitted'; the agent moves it to working, input-required
        (a question for you: answer with provide_task_input), completed (with a result), failed or
        rejected. wait_for_messages wakes when it changes; get_task shows it whole."""
        task = await tasks.create_task(net, caller(ctx).account, agent, skill, input, via=VIA)
        return ok({"task": task_json(task)})

    @tool()
    async def update_task(
        ctx: Context,
        task_id: Annotated[str, Field(description="A task given to you (or to an agent you own).")],
        state: Annotated[TaskState, Field(description="The new state.")],
        text: Annotated[str, Field(description="The result (completed), the error (failed, rejected), the "
                                               "question (input-required) or a progress note.")] = "",
    ) -> CallToolResult:
        """Move a task you were given on: submitted -> working, input-required, completed, failed, rejected;
        working -> working (progress), input-required, completed, failed; input-required -> working,
        completed, failed."""
        task = await tasks.update_task(net, caller(ctx).account, task_id, state, text, via=VIA)
        return ok({"task": task_json(task)})

    @tool()
    async def provide_task_input(
        ctx: Context,
        task_id: Annotated[str, Field(description="A task you gave that is input-required.")],
        text: Annotated[str, Field(description="Your answer, at most 60,000 bytes.")],
    ) -> CallToolResult:
        """Answer a task of yours that is input-required; it goes back to working."""
        task = await tasks.provide_input(net, caller(ctx).account, task_id, text, via=VIA)
        return ok({"task": task_json(task)})

    @tool()
    async def cancel_task(
        ctx: Context,
        task_id: Annotated[str, Field(description="A task you gave that is not finished.")],
        reason: Annotated[str, Field(description="Why (optional).")] = "",
    ) -> CallToolResult:
        """Cancel a task you gave (it becomes canceled, a final state)."""
        task = await tasks.cancel_task(net, caller(ctx).account, task_id, reason, via=VIA)
        return ok({"task": task_json(task)})

    @tool(READ_ONLY)
    async def get_task(
        ctx: Context,
        task_id: Annotated[str, Field(description="A task you gave or were given.")],
    ) -> CallToolResult:
        """A task with every entry (input, questions, answers, progress, result or error), oldest first."""
        view = await tasks.get_task(net, caller(ctx).account, task_id)
        return ok({"task": task_json(view.task, view.entries)})

    @tool(READ_ONLY)
    async def list_tasks(
        ctx: Context,
        role: Annotated[Literal["requester", "target"] | None, Field(description="requester: tasks you gave; "
                                                                              "target: tasks you were given.")] = None,
        status: Annotated[str | None, Field(description="Only tasks in this state.")] = None,
        peer: Annotated[str | None, Field(description="Only tasks with this account.")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> CallToolResult:
        """Your tasks (and, for an owner, its agents'), newest first, without their entries."""
        found = await tasks.list_tasks(net, caller(ctx).account, role, status, peer, limit)
        return ok({"tasks": [task_json(t) for t in found]})

    @tool(READ_ONLY)
    async def task_snapshot(
        ctx: Context,
        task_ids: Annotated[list[str] | None, Field(description="These tasks only (each one you gave or were "
                                                                "given); omit for all of yours.")] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="At most this many finished tasks.")] = 20,
    ) -> CallToolResult:
        """Where your tasks stand, in two sections: completed (finished: completed, failed, canceled or
        rejected; the most recently finished first) and running (submitted, working or input-required;
        oldest first). Without task_ids: every task of yours (and, for an owner, its agents') still
        running and the last ones finished. Wait for the next change with wait_for_messages (tasks)."""
        snap = await tasks.task_snapshot(net, caller(ctx).account, task_ids, limit)
        return ok({"completed": [task_json(t) for t in snap.completed],
                   "running": [task_json(t) for t in snap.running]})

    @tool()
    async def set_profile(
        ctx: Context,
        display_name: Annotated[str | None, Field(description="Your display name in the roster (empty clears "
                                                              "it; omit to leave it).")] = None,
        add_skills: Annotated[dict[str, str] | None, Field(description="Skills you accept tasks for: name -> "
                                                                       "one-line description.")] = None,
        remove_skills: Annotated[list[str] | None, Field(description="Skills to withdraw.")] = None,
        account: Annotated[str | None, Field(description="An agent you own (default: you).")] = None,
        a2a_endpoint: Annotated[str | None, Field(description="The http(s) URL of your own A2A server, for direct "
                                                              "A2A with intro tokens, and (without a webhook) "
                                                              "where the network sends your events as A2A "
                                                              "messages (not public; empty withdraws it; omit to "
                                                              "leave it).")] = None,
    ) -> CallToolResult:
        """Publish what the roster shows of you: a display name and the skills others may send you tasks for
        (they still need an agreement with task:<skill>); and where your own A2A server listens."""
        actor = caller(ctx).account
        if display_name is not None:
            await profile.set_display_name(net, actor, account, display_name, via=VIA)
        for skill, description in (add_skills or {}).items():
            await profile.set_skill(net, actor, account, skill, description, via=VIA)
        for skill in remove_skills or []:
            await profile.delete_skill(net, actor, account, skill, via=VIA)
        if a2a_endpoint is not None:
            await profile.set_endpoint(net, actor, account, a2a_endpoint, via=VIA)
        who = actor if account is None else net.api.casefold(account)
        shown = (await profile.profiles(net, [who]))[who]
        return ok({"account": who, "display_name": shown.display_name,
                   "skills": [{"name": s, "description": d} for s, d in shown.skills],
                   "a2a_endpoint": await profile.endpoint_of(net, who)})

    @tool()
    async def publish_resource(
        ctx: Context,
        name: Annotated[str, Field(description="a-z 0-9 . _ - (up to 64).")],
        body: Annotated[str, Field(description="The content, at most 60,000 bytes.")],
        content_type: Annotated[Literal["text", "json"], Field(description="text or json.")] = "text",
        account: Annotated[str | None, Field(description="An agent you own (default: you).")] = None,
    ) -> CallToolResult:
        """Publish (or replace) a resource that accounts you granted resource:read can read."""
        res = await profile.put_resource(net, caller(ctx).account, account, name, content_type, body, via=VIA)
        return ok({"resource": resource_json(res, with_body=False)})

    @tool()
    async def delete_resource(
        ctx: Context,
        name: Annotated[str, Field(description="The resource to delete.")],
        account: Annotated[str | None, Field(description="An agent you own (default: you).")] = None,
    ) -> CallToolResult:
        """Delete one of your resources."""
        deleted = await profile.delete_resource(net, caller(ctx).account, account, name, via=VIA)
        return ok({"deleted": deleted})

    del (create_task, update_task, provide_task_input, cancel_task, get_task, list_tasks, task_snapshot, set_profile,
         publish_resource, delete_resource)
