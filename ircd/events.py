"""Events published after a state change has happened.

Listeners (extensions, the history writer) subscribe by event type. Events
describe what happened; a listener reacts to them and never changes them (all
are frozen dataclasses except the events of every connection and every message,
plain classes: a frozen dataclass's ``__init__`` sets each field through
``object.__setattr__``, several times the cost of a plain attribute; see below).
Publishing is synchronous and in order; a listener that needs I/O starts it
itself. Hot paths ask ``wants(EventType)`` first so that no event object is
built when nobody listens.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

# Imported at run time, not only for type checking: in the compiled build
# (docs/compiled.md) these dataclasses' fields are typed with the native classes,
# which must exist before this module's classes are built.
from ircd.state.channel import Channel
from ircd.state.client import Client
from ircd.delivery.replies import Relay

__all__ = [
    "EventBus",
    "Registered",
    "Quit",
    "NickChanged",
    "Joined",
    "Parted",
    "Kicked",
    "ChannelMessage",
    "DirectMessage",
    "TopicChanged",
    "ChannelModeChanged",
    "LoggedIn",
    "LoggedOut",
    "AwayChanged",
    "UserModeChanged",
    "UserChanged",
    "ChannelDestroyed",
    "ChannelRenamed",
    "Rehashed",
]

log = logging.getLogger("pircd.events")


class Registered:
    """A connection completed its registration (one for every connection: a plain class)."""

    __slots__ = ("client",)

    def __init__(self, client: Client) -> None:
        self.client = client


class Quit:
    """A registered or unregistered client left (one for every connection: a plain class)."""

    __slots__ = ("client", "reason")

    def __init__(self, client: Client, reason: str) -> None:
        self.client = client
        self.reason = reason


@dataclass(frozen=True, slots=True)
class NickChanged:
    client: "Client"
    old_nick: str


class Joined:
    """A client joined a channel (``created``: the JOIN made it; one for every JOIN: a plain class)."""

    __slots__ = ("client", "channel", "created")

    def __init__(self, client: Client, channel: Channel, created: bool) -> None:
        self.client = client
        self.channel = channel
        self.created = created


@dataclass(frozen=True, slots=True)
class Parted:
    client: "Client"
    channel: "Channel"
    reason: str


@dataclass(frozen=True, slots=True)
class Kicked:
    client: "Client"
    channel: "Channel"
    target: "Client"
    reason: str


# The two message events are made for every relayed message, so they are plain
# classes with a written-out __init__: a frozen dataclass sets each field through
# object.__setattr__, which cost a direct message more than the rest of its event,
# and in the compiled build a dataclass's generated __init__ stays interpreted
# Python. Listeners treat every event as read-only all the same.


class ChannelMessage:
    """A PRIVMSG/NOTICE/TAGMSG delivered to a channel.

    ``relay`` is the line as it went out (source, target parameter, msgid and
    the exact server-time tag); ``lines`` holds a draft/multiline message's
    lines as (text, concat) pairs, ``text`` being their combination."""

    __slots__ = ("client", "channel", "command", "text", "msgid", "time", "tags", "relay", "lines")

    def __init__(
        self,
        client: Client,
        channel: Channel,
        command: str,
        text: str,
        msgid: str,
        time: float,
        tags: dict[str, str] | None,
        relay: Relay | None = None,
        lines: tuple[tuple[str, bool], ...] | None = None,
    ) -> None:
        self.client = client
        self.channel = channel
        self.command = command
        self.text = text
        self.msgid = msgid
        self.time = time
        self.tags = tags
        self.relay = relay
        self.lines = lines


class DirectMessage:
    """A PRIVMSG/NOTICE/TAGMSG delivered to one client (``relay`` and ``lines`` as for ChannelMessage).

    ``msgid`` may be None when ``relay`` is given: the relay's msgid is then made
    when a listener first reads ``msgid`` (a direct message's id is made only when
    something needs it, see ``Relay``)."""

    __slots__ = ("client", "target", "command", "text", "_msgid", "time", "tags", "relay", "lines")

    def __init__(
        self,
        client: Client,
        target: Client,
        command: str,
        text: str,
        msgid: str | None,
        time: float,
        tags: dict[str, str] | None,
        relay: Relay | None = None,
        lines: tuple[tuple[str, bool], ...] | None = None,
    ) -> None:
        if msgid is None and relay is None:
            raise ValueError("DirectMessage needs a msgid or a relay")
        self.client = client
        self.target = target
        self.command = command
        self.text = text
        self._msgid = msgid
        self.time = time
        self.tags = tags
        self.relay = relay
        self.lines = lines

    @property
    def msgid(self) -> str:
        if self._msgid is None and self.relay is not None:
            self._msgid = self.relay.msgid
        return self._msgid or ""


@dataclass(frozen=True, slots=True)
class TopicChanged:
    client: "Client | None"
    channel: "Channel"
    relay: "Relay | None" = None  # the TOPIC line as relayed (msgid, server-time), when a client set it


@dataclass(frozen=True, slots=True)
class ChannelModeChanged:
    client: "Client | None"
    channel: "Channel"
    modes: str
    params: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ChannelDestroyed:
    channel: "Channel"


@dataclass(frozen=True, slots=True)
class ChannelRenamed:
    """RENAME (draft/channel-rename): ``channel`` already has its new name."""

    client: Client
    channel: Channel
    old_name: str
    old_folded: str
    reason: str


@dataclass(frozen=True, slots=True)
class LoggedIn:
    client: "Client"
    account: str


@dataclass(frozen=True, slots=True)
class LoggedOut:
    client: "Client"
    account: str


@dataclass(frozen=True, slots=True)
class AwayChanged:
    client: "Client"


@dataclass(frozen=True, slots=True)
class UserChanged:
    """A registered client's user, host or real name changed (CHGHOST, SETNAME)."""

    client: "Client"


@dataclass(frozen=True, slots=True)
class UserModeChanged:
    """A registered client's user modes changed (MODE, OPER); ``client.modes`` holds the new ones."""

    client: "Client"


@dataclass(frozen=True, slots=True)
class Rehashed:
    config: Any


class EventBus:
    def __init__(self) -> None:
        self._listeners: dict[type, list[Callable[[Any], None]]] = defaultdict(list)

    def subscribe(self, event_type: type, listener: Callable[[Any], None]) -> None:
        self._listeners[event_type].append(listener)

    def wants(self, event_type: type) -> bool:
        return bool(self._listeners.get(event_type))

    def publish(self, event: object) -> None:
        listeners = self._listeners.get(type(event))
        if not listeners:
            return
        for listener in listeners:
            try:
                listener(event)
            except Exception:
                log.exception("event listener failed for %s", type(event).__name__)
