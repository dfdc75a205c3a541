"""Received lines, from bytes to a command handler: parsing, flood control and the gate.

``handle_line`` returns None when the line is done, a float when flood control
wants the line retried after that many seconds, or an awaitable when an async
handler is still running; the caller must not feed that connection another
line until the awaitable is done, so a connection's lines are always handled
in order.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, Awaitable, Final

from ircd import caps as C
from ircd.delivery.replies import ReplyBuffer
from ircd.dispatch import CommandContext, CommandSpec
from ircd.proto import numerics as N
from ircd.proto.lines import MAX_CLIENT_TAGS, LineError, Message, command_of, label_of, parse_line
from ircd.store.errors import UNAVAILABLE_TEXT, StoreUnavailable

if TYPE_CHECKING:
    from ircd.server import Server
    from ircd.state.client import Client

__all__ = ["INPUT_TOO_LONG_TEXT", "Intake"]

_ACTIVITY: Final = frozenset(("PRIVMSG", "NOTICE", "TAGMSG"))  # what counts as activity (WHOIS idle time)
_INVALID_UTF8 = "Message rejected, your message contained invalid UTF-8"
_FORBIDDEN_CHARACTER = "Message rejected, your message contained a CR or NUL character"
INPUT_TOO_LONG_TEXT = ("Input line was too long: at most 512 bytes with its CR LF, and 4094 bytes of client tags; "
                       "split the text into shorter lines")

log = logging.getLogger("pircd")


class Intake:
    """The lines of every connection go through ``handle_line`` (``ircd.net`` calls it)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.clock = server.clock
        self._specs = server.commands.specs  # the verb -> spec dict, looked up for every line
        self.lines_in = 0  # for /metrics: a plain int, so the per-line path pays one addition

    def handle_line(self, client: Client, raw: bytes) -> None | float | Awaitable[None]:
        if client.closing:
            return None
        self.lines_in += 1
        now = self.clock()
        client.last_read = now
        client.ping_sent = 0.0
        server = self.server
        try:
            msg = parse_line(raw, utf8only=server.utf8only, max_tag_data=MAX_CLIENT_TAGS)
        except LineError as exc:
            return self._line_error(client, raw, exc.kind, now)
        if msg is None:
            return None
        command = msg.command
        spec = self._specs.get(command)
        if server.flood_enabled and (spec is None or spec.flood_cost):  # an unknown verb costs too
            delay = self._flood_delay(client, now)
            if delay > 0 and not _in_client_batch(client, msg):
                return delay
        tags = msg.tags
        label = tags.get("label") if tags is not None and client.caps & C.LABELED_RESPONSE else None
        if spec is None or not (client.registered and spec.open):
            if self._refused(spec, client, msg, label):
                return None
            assert spec is not None  # an unknown verb is always refused
        if command in _ACTIVITY and client.registered:
            client.last_active = now
        ctx = CommandContext(server, client, None, msg, label)
        try:
            result = spec.handler(ctx, msg)
        except Exception:
            self._handler_failed(ctx, raw)
            return None
        if result is not None:  # a coroutine: async handler, or a sync one that went async
            return self._finish_async(ctx, result, raw)  # type: ignore[arg-type]
        ctx.finish()
        return None

    def _refused(self, spec: CommandSpec | None, client: Client, msg: Message, label: str | None) -> bool:
        """The command gate: answer and return True when ``client`` may not run ``msg`` now.

        ``handle_line`` comes here only for an unknown verb, or when the client is
        not registered yet or the verb has a requirement (``CommandSpec.open``)."""
        params: tuple[str, ...]
        if spec is None:
            code, params = N.ERR_UNKNOWNCOMMAND, (msg.command, "Unknown command")
        elif not client.registered and not spec.pre_registration:
            code, params = N.ERR_NOTREGISTERED, ("You have not registered",)
        elif spec.oper and not client.is_oper:
            code, params = N.ERR_NOPRIVILEGES, ("Permission Denied- You're not an IRC operator",)
        elif len(msg.params) < spec.min_params:
            code, params = N.ERR_NEEDMOREPARAMS, (msg.command, "Not enough parameters")
        elif spec.requires_cap and not client.caps & spec.requires_cap:
            reply = ReplyBuffer(self.server, client, label)
            reply.fail(msg.command, "NEED_CAPABILITY", "This command needs a capability you have not enabled")
            reply.flush()
            return True
        else:
            return False  # the usual case: no reply buffer is made
        reply = ReplyBuffer(self.server, client, label)
        reply.numeric(code, *params)
        reply.flush()
        return True

    async def _finish_async(self, ctx: CommandContext, coro: Awaitable[None], raw: bytes) -> None:
        try:
            await coro
        except Exception:
            self._handler_failed(ctx, raw)
            return
        ctx.finish()
        self.server.flush_all()

    def _handler_failed(self, ctx: CommandContext, raw: bytes) -> None:
        reply = ReplyBuffer(self.server, ctx.client, ctx.label)
        if isinstance(sys.exc_info()[1], StoreUnavailable):  # said once by the store, not per command
            reply.fail(ctx.msg.command, "TEMPORARILY_UNAVAILABLE", UNAVAILABLE_TEXT)
        else:
            log.exception("handler error id=%d line=%r", ctx.client.id, _redact(raw))
            reply.fail(ctx.msg.command, "INTERNAL_ERROR", "The server could not process this command")
        reply.flush()

    def _line_error(self, client: Client, raw: bytes, kind: str, now: float) -> float | None:
        """A line refused before dispatch. It costs flood tokens like any line (a float: retry
        it after that many seconds), then is answered with the line's label: 417 for a line
        or tags over the limits (and ``FAIL <verb> INPUT_TOO_LONG`` for standard-replies
        clients), ``FAIL <verb> INVALID_UTF8``, ``FAIL <verb> INVALID_CHARACTERS`` for a CR or
        NUL; a line with tags or a source and no command is ignored."""
        if self.server.flood_enabled:
            delay = self._flood_delay(client, now)
            if delay > 0:
                return delay
        self._refuse_line(client, raw, kind)
        return None

    def _refuse_line(self, client: Client, raw: bytes, kind: str) -> None:
        if kind == LineError.NO_COMMAND:
            return
        label = label_of(raw) if client.caps & C.LABELED_RESPONSE else None
        reply = ReplyBuffer(self.server, client, label)
        if kind == LineError.INPUT_TOO_LONG or kind == LineError.TAGS_TOO_LONG:
            reply.numeric(N.ERR_INPUTTOOLONG, "Input line was too long")
            if client.caps & C.STANDARD_REPLIES:
                reply.fail(command_of(raw), "INPUT_TOO_LONG", INPUT_TOO_LONG_TEXT)
        elif kind == LineError.INVALID_UTF8:
            reply.fail(command_of(raw), "INVALID_UTF8", _INVALID_UTF8)
        else:  # FORBIDDEN_CHARACTER
            reply.fail(command_of(raw), "INVALID_CHARACTERS", _FORBIDDEN_CHARACTER)
        reply.flush()

    def line_too_long(self, client: Client, raw: bytes, *, hold: bool = True) -> float | None:
        """The connection cut a line over the length limits (``raw``: the line, or the start of
        one with no end in sight). Answered like any refused line; with ``hold`` false (the rest
        of the line is being skipped, so it cannot be retried) the flood tokens are charged and
        the answer goes out at once."""
        if client.closing:
            return None
        self.lines_in += 1
        now = self.clock()
        client.last_read = now
        client.ping_sent = 0.0
        if not hold:
            if self.server.flood_enabled:
                self._flood_charge(client, now)
            self._refuse_line(client, raw, LineError.INPUT_TOO_LONG)
            return None
        return self._line_error(client, raw, LineError.INPUT_TOO_LONG, now)

    def _flood_delay(self, client: Client, now: float) -> float:
        flood = self.server.config.flood
        if flood.exempt_opers and "o" in client.modes:
            return 0.0
        tokens = client.flood_tokens + (now - client.flood_time) * flood.per_second
        if tokens > flood.burst:
            tokens = float(flood.burst)
        client.flood_time = now
        if tokens >= 1.0:
            client.flood_tokens = tokens - 1.0
            return 0.0
        client.flood_tokens = tokens
        return (1.0 - tokens) / flood.per_second

    def _flood_charge(self, client: Client, now: float) -> None:
        """Take a token for a line that cannot wait; the bucket may go below zero, and then
        the client's next lines wait until it has refilled."""
        flood = self.server.config.flood
        if flood.exempt_opers and "o" in client.modes:
            return
        tokens = client.flood_tokens + (now - client.flood_time) * flood.per_second
        client.flood_tokens = min(tokens, float(flood.burst)) - 1.0
        client.flood_time = now


def _in_client_batch(client: Client, msg: Any) -> bool:
    """A message line of an open, still valid draft/multiline batch: the batch is one message,
    so its lines pass the flood budget (max-lines bounds them; any other verb still waits)."""
    if msg.tags is None or "batch" not in msg.tags or msg.command not in ("PRIVMSG", "NOTICE", "TAGMSG"):
        return False
    batch = client.ext_state("multiline")
    return batch is not None and not batch.failed


def _redact(raw: bytes) -> bytes:
    """Never log secrets: cut the parameters of commands that carry them."""
    head = raw.split(b" ", 4)
    verb_index = 1 if raw[:1] in (b"@", b":") else 0
    if len(head) > verb_index and head[verb_index].upper() in (
        b"PASS",
        b"OPER",
        b"AUTHENTICATE",
        b"REGISTER",
        b"IDENTIFY",
        b"VERIFY",
        b"NICKSERV",
        b"NS",
    ):
        return b" ".join(head[: verb_index + 1]) + b" <redacted>"
    if len(head) > verb_index + 1 and head[verb_index].upper() == b"PRIVMSG":
        if head[verb_index + 1].lower() in (b"nickserv", b"pircan"):
            return b" ".join(head[: verb_index + 2]) + b" <redacted>"
    return raw
