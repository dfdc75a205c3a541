"""The command table: every verb, core or extension, declared once with its gate.

The gate runs before any handler: registration state, operator rights,
parameter count and a required capability. Handlers never re-check these.
A handler is a plain function (runs to completion between two awaits, so it
is atomic on the event loop) or a coroutine function (for storage); the
server runs a connection's lines strictly in order either way.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ircd.delivery.replies import ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.proto.lines import Message
    from ircd.server import Server

__all__ = ["CommandSpec", "CommandTable", "CommandContext", "command", "CORE_COMMANDS"]

Handler = Callable[["CommandContext", "Message"], "None | Awaitable[None]"]


class CommandContext:
    """What a handler is given: the server, the client, the parsed line and the
    reply buffer for the client's answer.

    The reply buffer is made on first use of ``reply``: most relayed messages
    never answer their sender, and a direct message is cheap enough that an
    unused buffer was a measurable part of it.
    """

    __slots__ = ("server", "client", "msg", "label", "detached", "_reply")

    def __init__(
        self,
        server: "Server",
        client: "Client",
        reply: ReplyBuffer | None,
        msg: "Message",
        label: str | None = None,
    ) -> None:
        self.server = server
        self.client = client
        self.msg = msg
        self.label = reply.label if reply is not None else label  # labeled-response, when the client has it
        self.detached = False
        self._reply = reply

    @property
    def reply(self) -> ReplyBuffer:
        reply = self._reply
        if reply is None:
            reply = self._reply = ReplyBuffer(self.server, self.client, self.label)
        return reply

    def detach(self) -> ReplyBuffer:
        """Keep the reply buffer open past the handler (a reply that comes later).

        The caller flushes the returned buffer itself when its answer is ready;
        the label of the command stays on it.
        """
        self.detached = True
        return self.reply

    def finish(self) -> None:
        """The handler is done: send its replies (or, for a labeled command
        that produced none, the ``ACK``)."""
        if self.detached:
            return
        reply = self._reply
        if reply is not None:
            reply.flush()
        elif self.label is not None:
            self.reply.flush()


@dataclass(frozen=True, slots=True)
class CommandSpec:
    verb: str
    handler: Handler
    min_params: int = 0
    pre_registration: bool = False  # allowed before registration completes
    oper: bool = False
    requires_cap: int = 0  # a capability bit the client must have enabled
    syntax: str = ""  # shown in 461 and HELP
    help: str = ""  # HELP text (several lines allowed)
    is_async: bool = False
    flood_cost: int = 1  # commands like PONG cost nothing
    extension: str | None = None
    # no requirement beyond registration: a registered client passes the gate at once
    open: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "open", not self.oper and not self.min_params and not self.requires_cap)


# Core handlers register themselves here at import time.
CORE_COMMANDS: list[CommandSpec] = []


def command(
    verb: str,
    *,
    min_params: int = 0,
    pre_registration: bool = False,
    oper: bool = False,
    requires_cap: int = 0,
    flood_cost: int = 1,
    aliases: tuple[str, ...] = (),
    doc: str | None = None,
) -> Callable[[Handler], Handler]:
    """Declare a core verb. The handler's docstring is its syntax line, then its help.

    A module in the compiled build (``[tool.pircd] compiled`` in pyproject.toml)
    passes that text as ``doc`` instead: compiled functions have no docstring.
    """

    def register(fn: Handler) -> Handler:
        text = inspect.cleandoc(doc or fn.__doc__ or verb)
        syntax, _, help_text = text.partition("\n")
        for name in (verb, *aliases):
            CORE_COMMANDS.append(
                CommandSpec(
                    verb=name,
                    handler=fn,
                    min_params=min_params,
                    pre_registration=pre_registration,
                    oper=oper,
                    requires_cap=requires_cap,
                    syntax=syntax.strip(),
                    help=help_text.strip(),
                    is_async=inspect.iscoroutinefunction(fn),
                    flood_cost=flood_cost,
                )
            )
        return fn

    return register


@dataclass
class CommandTable:
    specs: dict[str, CommandSpec] = field(default_factory=dict)

    def add(self, spec: CommandSpec) -> None:
        if spec.verb in self.specs:
            raise ValueError(f"command {spec.verb} registered twice")
        self.specs[spec.verb] = spec

    def get(self, verb: str) -> CommandSpec | None:
        return self.specs.get(verb)

    def verbs(self) -> list[str]:
        return sorted(self.specs)


def make_spec(verb: str, handler: Handler, **kwargs: Any) -> CommandSpec:
    doc = inspect.cleandoc(handler.__doc__ or "")
    syntax, _, help_text = doc.partition("\n")
    kwargs.setdefault("syntax", syntax.strip() or verb)
    kwargs.setdefault("help", help_text.strip())
    return CommandSpec(verb=verb, handler=handler, is_async=inspect.iscoroutinefunction(handler), **kwargs)
