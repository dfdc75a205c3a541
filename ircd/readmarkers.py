"""Read markers (IRCv3 draft/read-marker): the last read time per user and target.

For a logged-in client the markers belong to its account: they are loaded
from the store when the account comes online (the first connection logs in),
kept in memory while any of its connections is there, shared by all of them,
and written through the store's group commit on every change. A client that
is not logged in keeps markers for its connection only.

A marker only moves forward, and never past the present (the spec's "clamp
it between the last read timestamp and the current time"). An account (or a
connection without one) keeps markers for at most ``limits.read_markers``
targets; a marker for a further target is refused, since MARKREAD names any
target and nothing else would bound what one client can store.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ircd import caps as C
from ircd.events import LoggedIn, LoggedOut, Quit, Registered
from ircd.delivery.replies import ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client
    from ircd.server import Server

__all__ = ["CAP_NAME", "ReadMarkers"]

log = logging.getLogger("pircd")
CAP_NAME = "draft/read-marker"
_LOCAL = "read_markers"  # client.ext key: markers of a client that is not logged in


def shown(time: str | None) -> str:
    """The MARKREAD parameter for a stored time (``*`` for none)."""
    return "timestamp=" + time if time else "*"


class ReadMarkers:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.by_account: dict[str, dict[str, str]] = {}  # loaded accounts: target (folded) -> time
        self._loads: dict[str, Any] = {}  # account -> its loading task
        self._waiting: dict[str, list[tuple[Client, str]]] = {}  # MARKREAD owed on join, until loaded
        server.events.subscribe(Registered, self._online)
        server.events.subscribe(LoggedIn, self._online)
        server.events.subscribe(LoggedOut, self._offline)
        server.events.subscribe(Quit, self._offline)
        server.join_hooks.append(self._joined)

    # loading ------------------------------------------------------------------

    def _online(self, event: Registered | LoggedIn) -> None:
        account = event.client.account_folded
        if account is not None:
            self.load(account)

    def load(self, account: str) -> Any:
        """Start loading an account's markers (if needed); returns an awaitable, or None when loaded."""
        if account in self.by_account:
            return None
        task = self._loads.get(account)
        if task is None:
            if self.server.store is None:
                self.by_account[account] = {}
                return None
            task = self.server.spawn(self._load(account))
            if account in self.by_account:  # done already (the test harness runs it in place)
                return None
            self._loads[account] = task
        return task

    async def _load(self, account: str) -> None:
        try:
            loaded = await self.server.store.load_read_markers(account)  # type: ignore[union-attr]
        finally:
            self._loads.pop(account, None)
        markers = self.by_account.setdefault(account, {})
        for target, time in loaded.items():  # a set made while loading wins if newer
            if time > markers.get(target, ""):
                markers[target] = time
        for client, name in self._waiting.pop(account, ()):
            if not client.closing and client.account_folded == account:
                self._send(client, name, markers.get(self.server.casefold(name)))
        self.server.flush_all()

    def _offline(self, event: Quit | LoggedOut) -> None:
        account = event.client.account_folded if isinstance(event, Quit) else self.server.casefold(event.account)
        if account is not None:
            self.account_gone(account)

    def account_gone(self, account: str) -> None:
        """A connection or the always-on identity of ``account`` ended: its markers are forgotten
        unless a connection of the account is there, or its always-on identity stays."""
        if not self.server.state.account_online(account) and account not in self.server.sessions.ghosts:
            self.by_account.pop(account, None)

    # reading and setting ----------------------------------------------------------

    def _markers(self, client: Client) -> dict[str, str] | None:
        """The client's markers, or None while its account's are still loading."""
        if client.account_folded is not None:
            return self.by_account.get(client.account_folded)
        markers = client.ext_state(_LOCAL)
        if markers is None:
            markers = {}
            client.set_ext_state(_LOCAL, markers)
        return markers

    def get(self, client: Client, target: str) -> str | None:
        markers = self._markers(client)
        return None if markers is None else markers.get(self.server.casefold(target))

    def set(self, client: Client, target: str, time: str) -> tuple[str | None, bool]:
        """Move the marker forward to ``time``; returns (the marker now, whether it changed).
        The marker is None when it is a new target past ``limits.read_markers``."""
        folded = self.server.casefold(target)
        markers = self._markers(client)
        if markers is None:  # still loading: keep it, the load merges
            markers = self.by_account.setdefault(client.account_folded, {})  # type: ignore[arg-type]
        current = markers.get(folded)
        if current is None and len(markers) >= self.server.config.limits.read_markers:
            return None, False
        if current is not None and time <= current:
            return current, False
        markers[folded] = time
        if client.account_folded is not None and self.server.store is not None:
            self.server.store.save_read_marker(client.account_folded, folded, time)
        return time, True

    def announce(self, client: Client, target: str, time: str) -> None:
        """Tell the account's other connections that have the capability."""
        if client.account_folded is None:
            return
        for other in self.server.state.account_clients(client.account_folded):
            if other is not client and other.caps & C.READ_MARKER:
                self._send(other, target, time)

    def _send(self, client: Client, target: str, time: str | None) -> None:
        reply = ReplyBuffer(self.server, client)
        reply.send("MARKREAD", target, shown(time))
        reply.flush()

    # MARKREAD on join ---------------------------------------------------------

    def _joined(self, client: Client, channel: Channel, reply: ReplyBuffer) -> None:
        """IRCv3 read-marker: after JOIN, "the server MUST send a MARKREAD command for that
        channel ... before the RPL_ENDOFNAMES reply"."""
        if not client.caps & C.READ_MARKER:
            return
        markers = self._markers(client)
        if markers is None:  # the account's markers are on their way: answer when they come
            self._waiting.setdefault(client.account_folded, []).append((client, channel.name))  # type: ignore[arg-type]
            return
        reply.send("MARKREAD", channel.name, shown(markers.get(channel.folded)))

    async def wait_loaded(self, client: Client) -> None:
        if client.account_folded is not None:
            pending = self.load(client.account_folded)
            if pending is not None:
                await pending
