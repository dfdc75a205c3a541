"""INBOX WAIT on IRC, over ext.pircan.service.waits: its options, and the lines that answer it
(a whole message, a whole task, an EVENT line, or TIMEOUT / GONE / NOTHING / CANCELLED)."""

from __future__ import annotations

from typing import Any

from ircd.api import Client, CommandContext, ReplyBuffer

from ext.pircan import rules
from ext.pircan import store_tasks as tdb
from ext.pircan.irc.common import refuse
from ext.pircan.irc.tasks import task_lines
from ext.pircan.irc.wire import full_message, hexid
from ext.pircan.service import waits
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import Task
from ext.pircan.waiting import WaitEvent

__all__ = ["handle_wait", "answer", "ended", "event_params", "WAIT_OPTIONS", "await_ms_of", "await_reply"]

INBOX = "INBOX"
SEND = "SEND"
WAIT_OPTIONS = "kinds=<kind>[,...] mode=oldest|new tasks=<task-id>[,...] channels=<channel>[,...]"


def _options(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The positional parameters, and the ``key=value`` options (no account name or timeout has '=')."""
    plain: list[str] = []
    options: dict[str, str] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            plain.append(arg)
            continue
        key = key.lower()
        if key not in ("kinds", "mode", "tasks", "channels") or not value:
            raise Refused("INVALID_PARAMS", arg, text=f"INBOX WAIT options: {WAIT_OPTIONS}")
        options[key] = value
    return plain, options


async def handle_wait(state: Pircan, ctx: CommandContext, account: str, args: list[str]) -> None:
    """INBOX WAIT [<from>[,...]|*] [<timeout-ms>] [<option>=<value> ...]: answers at once when
    something it watches is there; otherwise later, without blocking the connection."""
    plain, options = _options(args)
    who, when = (plain[0] if plain else None), (plain[1] if len(plain) > 1 else None)
    if len(plain) == 1 and plain[0][:1] in "0123456789+-.":  # no account name starts so: a timeout alone
        who, when = None, plain[0]
    senders = None if who in (None, "", "*") else who.split(",")  # type: ignore[union-attr]
    timeout = rules.normalize_timeout(when, state.cfg.wait_default_ms)
    reply = ctx.detach()
    client = ctx.client

    def split(key: str) -> list[str] | None:
        return options[key].split(",") if key in options else None

    try:
        await waits.start_wait(
            state, account, senders, timeout,
            on_message=lambda item: answer(state, client, reply, item),
            on_end=lambda kind, detail: ended(state, client, reply, timeout, kind, detail),
            key=client, kinds=waits.kinds_of(split("kinds")), mode=options.get("mode", "oldest").lower(),
            tasks=split("tasks"), channels=split("channels"),
        )
    except Refused as exc:  # nothing waits: the refusal goes out on the buffer kept open for the answer
        refuse(ctx, INBOX, exc)
        reply.flush()
    # The handler returns now: later lines of this connection (PING...) go on being handled.


def answer(state: Pircan, client: Client, reply: ReplyBuffer, item: StoredMessage | Task | WaitEvent) -> None:
    if isinstance(item, Task):  # a change of one of its tasks: the whole task, read first
        state.api.spawn(_answer_task(state, client, reply, item))
        return
    if isinstance(item, WaitEvent):
        reply.send(INBOX, client.nick, "EVENT", *event_params(item))
    else:
        full_message(reply, client.nick, item)
    reply.flush()
    state.api.flush()


async def _answer_task(state: Pircan, client: Client, reply: ReplyBuffer, task: Task) -> None:
    entries = await state.database.read(tdb.entries, task.id)
    task_lines(reply, client.nick, task, entries)
    reply.flush()
    state.api.flush()


def _star(value: Any) -> str:
    return "*" if value in (None, "") else str(value)


def event_params(ev: WaitEvent) -> list[str]:
    """The parameters after ``INBOX <you> EVENT`` (docs/pircan.md, INBOX WAIT): the kind, the
    object's id, its essentials, and a text."""
    d = ev.data
    if ev.taken and ev.key == "message":
        return [ev.kind, ev.ref, d["sender"], d["conversation_id"], "taken",
                "Another wait of your account took this message"]
    if ev.taken:
        return [ev.kind, ev.ref, d["requester"], d["target"], d["state"], "taken",
                "Another wait of your account took this change of the task"]
    if ev.kind == "request":
        return [ev.kind, ev.ref, d["requester"], d["target"], ",".join(d["scopes"]), d["state"],
                _star(d["decider"]), _star(d["expires_at"]), d["purpose"] or " "]
    if ev.kind == "decision":
        return [ev.kind, ev.ref, d["requester"], d["target"], ",".join(d["scopes"]), d["state"],
                _star(d["agreement_id"]), d["purpose"] or " "]
    if ev.kind == "agreement":
        text = {"revoked": f"Revoked by {d['revoked_by']}", "expired": "Expired"}.get(d["state"], "Active")
        return [ev.kind, ev.ref, d["requester"], d["target"], ",".join(d["scopes"]), d["state"],
                d["expires_at"], text]
    if ev.kind == "webhook" and ev.key == "audit":
        return [ev.kind, ev.ref, d["subject"], d["action"], d["detail"] or " "]
    if ev.kind == "channel":
        return [ev.kind, ev.ref, d["channel"], d["from"], _star(d["account"]), d["text"] or " "]
    return [ev.kind, ev.ref]


def ended(state: Pircan, client: Client, reply: ReplyBuffer, timeout: int | None, kind: str, detail: str) -> None:
    nick = client.nick
    if kind == "timeout":
        ms = timeout or 0
        reply.send(INBOX, nick, "TIMEOUT", str(ms), f"No message within {ms} ms")
    elif kind == "gone":
        reply.send(INBOX, nick, "GONE", detail, f"{detail} left the network before sending you a message")
    elif kind == "nothing":
        reply.send(INBOX, nick, "NOTHING", detail)
    else:
        reply.send(INBOX, nick, "CANCELLED", detail)
    reply.flush()
    state.api.flush()


# SEND <account> <in-reply-to|*> <await-ms> :<text> ----------------------------------------------------


def await_ms_of(text: str) -> int:
    """SEND's await time: whole milliseconds (0: until the reply comes); INVALID_PARAMS otherwise."""
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        raise Refused("INVALID_PARAMS", text, text="The await time is a whole number of milliseconds (0: until "
                                                   "the reply comes). Syntax: SEND <account> <in-reply-to|*> "
                                                   "<await-ms> :<text>")
    return int(text)


async def await_reply(state: Pircan, client: Client, sent: StoredMessage, await_ms: int) -> None:
    """After a SEND's receipt went out: the reply (the lines of INBOX WAIT), or SEND <you> NOREPLY.
    The answer has its own lines, without the SEND's label (the receipt answered the label)."""
    reply = state.api.reply_buffer(client)
    timeout = await_ms or None
    mid = hexid(sent.id)

    def no_reply(kind: str, detail: str) -> None:
        text = {"timeout": f"No reply within {await_ms} ms",
                "gone": f"{detail} left the network before replying"}.get(kind, detail)
        reply.send(SEND, client.nick, "NOREPLY", mid, kind, text)
        reply.flush()
        state.api.flush()

    try:
        await waits.start_reply_wait(state, sent, timeout, lambda item: answer(state, client, reply, item),
                                     no_reply, key=(client, SEND))
    except Refused as exc:
        no_reply("cancelled", exc.full_text)
