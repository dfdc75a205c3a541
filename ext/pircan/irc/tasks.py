"""TASK on IRC (CREATE, UPDATE, INPUT, CANCEL, GET, LIST, SNAPSHOT), over ext.pircan.service.tasks."""

from __future__ import annotations

from ircd.api import CommandContext, Message, ReplyBuffer

from ext.pircan.ids import parse_count
from ext.pircan.irc.common import account_of, fail, refuse
from ext.pircan.irc.wire import body_chunks, hexid, ts
from ext.pircan.rules import Limits
from ext.pircan.service import tasks as service
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store_tasks import Task, TaskEntry

__all__ = ["handle_task", "task_lines", "task_line"]

TASK = "TASK"
_SYNTAX = {
    "CREATE": "TASK CREATE <agent> <skill> :<input>",
    "UPDATE": "TASK UPDATE <task-id> <state> [:<text>]",
    "INPUT": "TASK INPUT <task-id> :<text>",
    "CANCEL": "TASK CANCEL <task-id> [:<reason>]",
    "GET": "TASK GET <task-id>",
}
_MIN_ARGS = {"CREATE": 3, "UPDATE": 2, "INPUT": 2, "CANCEL": 1, "GET": 1}


def task_line(reply: ReplyBuffer, nick: str, task: Task, word: str = "TASK") -> None:
    reply.send(TASK, nick, word, hexid(task.id), task.requester, task.target, task.skill, task.state,
               ts(task.created_at), ts(task.updated_at))


def task_lines(reply: ReplyBuffer, nick: str, task: Task, entries: list[TaskEntry]) -> None:
    """A whole task: its line, each entry with its text as BODY/BODY+ lines, then END (a batch)."""
    ref = reply.start_batch("pircan/task", hexid(task.id))
    task_line(reply, nick, task)
    for entry in entries:
        reply.send(TASK, nick, "ENTRY", hexid(task.id), hexid(entry.id), entry.author, entry.kind, entry.state,
                   ts(entry.at), str(len(entry.text.encode("utf-8"))))
        for continues, text in body_chunks(entry.text) if entry.text else ():
            reply.send(TASK, nick, "BODY+" if continues else "BODY", hexid(entry.id), text)
    reply.send(TASK, nick, "END", hexid(task.id))
    reply.end_batch(ref)


async def handle_task(state: Pircan, ctx: CommandContext, msg: Message) -> None:
    """TASK CREATE|UPDATE|INPUT|CANCEL|GET|LIST|SNAPSHOT ..."""
    account = account_of(ctx, TASK)
    if account is None:
        return
    sub = msg.params[0].upper() if msg.params else ""
    args = msg.params[1:]
    if sub not in (*_SYNTAX, "LIST", "SNAPSHOT"):
        fail(ctx, TASK, "UNKNOWN_SUBCOMMAND", sub or "*")
        return
    if len(args) < _MIN_ARGS.get(sub, 0):
        fail(ctx, TASK, "NEED_MORE_PARAMS", sub, text="Syntax: " + _SYNTAX[sub])
        return
    nick = ctx.client.nick
    limit = Limits.send_chars
    try:
        if sub == "CREATE":
            task = await service.create_task(state, account, args[0], args[1], args[2], max_chars=limit)
            ctx.reply.send(TASK, nick, "CREATED", hexid(task.id), task.target, task.skill, task.state)
        elif sub == "UPDATE":
            task = await service.update_task(state, account, args[0], args[1], args[2] if len(args) > 2 else "",
                                             max_chars=limit)
            ctx.reply.send(TASK, nick, "UPDATED", hexid(task.id), task.state)
        elif sub == "INPUT":
            task = await service.provide_input(state, account, args[0], args[1], max_chars=limit)
            ctx.reply.send(TASK, nick, "UPDATED", hexid(task.id), task.state)
        elif sub == "CANCEL":
            task = await service.cancel_task(state, account, args[0], args[1] if len(args) > 1 else "")
            ctx.reply.send(TASK, nick, "UPDATED", hexid(task.id), task.state)
        elif sub == "GET":
            view = await service.get_task(state, account, args[0])
            task_lines(ctx.reply, nick, view.task, view.entries)
        elif sub == "SNAPSHOT":
            await _snapshot(state, ctx, account, args)
        else:
            await _list(state, ctx, account, args)
    except Refused as exc:
        refuse(ctx, TASK, exc)


async def _list(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    """TASK LIST [role=requester|target] [state=<state>] [peer=<account>] [limit=<n>]"""
    filters: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep or key.lower() not in ("role", "state", "peer", "limit"):
            raise Refused("INVALID_PARAMS", arg, text="Filters: role=requester|target state=<state> peer=<account> "
                                                      "limit=<n>")
        filters[key.lower()] = value
    limit = parse_count(filters.get("limit", "50"), 1, service.TASK_LIST_MAX)
    if limit is None:
        raise Refused("INVALID_PARAMS", filters["limit"], text="limit is a number")
    found = await service.list_tasks(state, account, filters.get("role"), filters.get("state"), filters.get("peer"),
                                     limit)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/tasks")
    for task in found:
        task_line(ctx.reply, nick, task)
    ctx.reply.send(TASK, nick, "END", str(len(found)))
    ctx.reply.end_batch(ref)


async def _snapshot(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    """TASK SNAPSHOT [<task-id>[,<task-id>...]]: COMPLETED lines (finished), RUNNING lines, then the counts."""
    ids = [i for arg in args for i in arg.split(",") if i] or None
    snap = await service.task_snapshot(state, account, ids)
    nick = ctx.client.nick
    ref = ctx.reply.start_batch("pircan/tasks")
    for task in snap.completed:
        task_line(ctx.reply, nick, task, "COMPLETED")
    for task in snap.running:
        task_line(ctx.reply, nick, task, "RUNNING")
    ctx.reply.send(TASK, nick, "SNAPSHOT", str(len(snap.completed)), str(len(snap.running)),
                   f"{len(snap.completed)} finished, {len(snap.running)} still running")
    ctx.reply.end_batch(ref)
