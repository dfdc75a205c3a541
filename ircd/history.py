"""Message history: channel (and direct) messages stored without blocking the sender.

Invariant: nothing on a message's path awaits the store. A listener turns
each ChannelMessage / DirectMessage / TopicChanged event into a row tuple and
appends it to an in-memory buffer; the buffer goes to the store's group
commit (``write_nowait``) when it holds ``history.flush_lines`` rows or
``history.flush_interval`` seconds after its first row, whichever is first,
and whenever the store is flushed or closed (``Store.before_flush``), so a
shutdown loses nothing. Rows handed over but not yet committed are counted;
a query made meanwhile runs inside the writer's next transaction (after the
inserts), so CHATHISTORY always sees what was sent before it.

What is stored: channel PRIVMSG and NOTICE; TAGMSG unless it carries nothing
but typing notifications (reactions and replies are history, "is typing" is
not); TOPIC changes (served only to draft/event-playback clients, like
TAGMSG); direct messages when at least one side is logged in (only an account
can read history back) and ``history.direct_messages`` is on. STATUSMSG
(``@#chan``) lines are not stored: history would show them to every member.

A direct-message conversation is keyed by its two parties, each either
``a:<account>`` (logged in) or ``n:<nick>`` (not), so a nick that later
registers an account does not inherit the conversations of whoever used the
nick before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from ircd.events import ChannelMessage, ChannelRenamed, DirectMessage, TopicChanged
from ircd.proto.timestamps import first_id_at

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.config import HistorySection
    from ircd.delivery.replies import Relay
    from ircd.server import Server
    from ircd.store import Store
    from ircd.timers import TimerHandle

__all__ = ["PLAIN_COMMANDS", "History"]

log = logging.getLogger("pircd")
T = TypeVar("T")

# what a client without draft/event-playback gets back (IRCv3 chathistory)
PLAIN_COMMANDS = ("PRIVMSG", "NOTICE")
_EPHEMERAL_TAGS = frozenset(("+typing", "+draft/typing", "bot"))
_PRUNE_EVERY = 3600.0


def party(client: Client) -> str:
    """One side of a direct-message conversation."""
    if client.account_folded is not None:
        return "a:" + client.account_folded
    return "n:" + client.nick_folded


def conversation_key(one: str, other: str) -> str:
    return " ".join(sorted((one, other)))


class History:
    def __init__(self, server: Server, store: Store) -> None:
        self.server = server
        self.store = store
        self._rows: list[tuple] = []
        self._conversations: list[tuple[str, str, str, int]] = []
        self._timer: TimerHandle | None = None
        self._prune_timer: TimerHandle | None = None
        self._in_flight = 0  # batches handed to the store, not yet committed
        self.stored = 0  # rows handed to the store since start (tests, benchmarks)
        if server.config.history.enabled:
            server.events.subscribe(ChannelMessage, self._channel_message)
            server.events.subscribe(DirectMessage, self._direct_message)
            server.events.subscribe(TopicChanged, self._topic)
            server.events.subscribe(ChannelRenamed, self._renamed)
        store.before_flush.append(self.flush)

    @property
    def cfg(self) -> HistorySection:
        return self.server.config.history

    # start and stop ---------------------------------------------------------

    async def start(self) -> None:
        """Never hand out a msgid at or below a stored one (one b-tree descent, no scan)."""
        newest = await self.store.newest_history_id()
        if newest is not None:
            self.server.ids.observe(newest)
        self._schedule_prune(0.0)

    async def stop(self) -> None:
        for timer in (self._timer, self._prune_timer):
            if timer is not None:
                timer.cancel()
        self._prune_timer = None
        self.flush()

    # writing ------------------------------------------------------------------

    def _add(self, row: tuple, conversations: Sequence[tuple[str, str, str, int]] = ()) -> None:
        self._rows.append(row)
        if conversations:
            self._conversations.extend(conversations)
        if len(self._rows) >= self.cfg.flush_lines:
            self.flush()
        elif self._timer is None:
            self._timer = self.server.timers.call_later(self.cfg.flush_interval, self.flush)

    def flush(self) -> None:
        """Hand the buffered rows to the store's group commit (never waits)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._rows:
            return
        batch, conversations = self._rows, self._conversations
        self._rows, self._conversations = [], []
        future = self.store.insert_history_nowait(batch, conversations)
        if future is None:
            log.error("history: store closed, %d lines not stored", len(batch))
            return
        self.stored += len(batch)
        self._in_flight += 1
        future.add_done_callback(self._committed)

    def _committed(self, _future: Any) -> None:
        self._in_flight -= 1

    @staticmethod
    def _row(key: str, relay: Relay, text: str, tags: dict[str, str] | None, lines: Any = None) -> tuple:
        return (
            int(relay.msgid or "0", 16),
            key,
            relay.time,
            relay.command,
            relay.source,
            relay.account,
            relay.params[0],
            text,
            json.dumps(tags, separators=(",", ":")) if tags else None,
            json.dumps(lines, separators=(",", ":")) if lines else None,
        )

    @staticmethod
    def _keep(command: str, tags: dict[str, str] | None) -> bool:
        if command != "TAGMSG":
            return True
        return bool(tags) and any(key not in _EPHEMERAL_TAGS for key in tags)  # type: ignore[union-attr]

    def _channel_message(self, event: ChannelMessage) -> None:
        relay = event.relay
        if relay is None or not relay.msgid or not self._keep(event.command, event.tags):
            return
        self._add(self._row(event.channel.folded, relay, event.text, event.tags, event.lines))

    def _direct_message(self, event: DirectMessage) -> None:
        relay = event.relay
        sender, target = event.client, event.target
        if sender.account_folded is None and target.account_folded is None:
            return  # nobody could ever read it back (tested first: most cheaply)
        if relay is None or not relay.msgid or not self.cfg.direct_messages:
            return
        if not self._keep(event.command, event.tags):
            return
        key = conversation_key(party(sender), party(target))
        row = self._row(key, relay, event.text, event.tags, event.lines)
        conversations = []
        if event.command != "TAGMSG":
            if sender.account_folded is not None:
                conversations.append((sender.account_folded, key, target.nick, row[0]))
            if target.account_folded is not None and target.account_folded != sender.account_folded:
                conversations.append((target.account_folded, key, sender.nick, row[0]))
        self._add(row, conversations)

    def _topic(self, event: TopicChanged) -> None:
        relay = event.relay
        if relay is None or not relay.msgid:
            return
        self._add(self._row(event.channel.folded, relay, relay.params[-1], None))

    def _renamed(self, event: ChannelRenamed) -> None:
        """The channel's history goes with it (after the rows still buffered under the old name)."""
        if event.old_folded == event.channel.folded:
            return
        from ircd.store import history as rows

        self.flush()
        self.store.write_nowait(rows.retarget, event.old_folded, event.channel.folded, event.channel.name)

    # reading ------------------------------------------------------------------

    async def read(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a query of ``ircd.store.history``, seeing every line sent so far."""
        def call(conn: Any) -> T:
            return fn(conn, *args, **kwargs)

        self.flush()
        if self._in_flight:
            # runs in the writer's next transaction, after the queued inserts
            return await self.store.write(call)
        return await self.store.read(call)

    def direct_key(self, client: Client, name: str) -> tuple[str, str] | None:
        """The conversation key of ``client`` (logged in) and the nick ``name``, and the name to show
        (``name`` as the client wrote it, as clients match the batch to the buffer they asked for)."""
        if client.account_folded is None or not self.cfg.direct_messages:
            return None
        return conversation_key(party(client), self._peer(name)), name

    def conversation_with(self, client: Client, name: str) -> str | None:
        """The key of the direct-message conversation between ``client`` (logged in or not) and
        the nick ``name`` (REDACT), or None when such messages are not stored."""
        if not self.cfg.direct_messages:
            return None
        return conversation_key(party(client), self._peer(name))

    def _peer(self, name: str) -> str:
        """The party a direct message to the nick ``name`` is stored under: its holder's, or the
        account (``a:``) or nick (``n:``) of that name when no one registered holds it."""
        server = self.server
        other = server.state.find_nick(name)
        if other is not None and other.registered:
            return party(other)
        folded = server.casefold(name)
        known = server.accounts is not None and folded in server.accounts.names
        return ("a:" if known else "n:") + folded

    async def redact(self, target: str, ident: int) -> bool:
        """Remove a stored message (after the rows still buffered); False when it is not stored."""
        from ircd.store import history as rows

        self.flush()
        return await self.store.write(rows.redact, target, ident)

    # retention ------------------------------------------------------------------

    def _schedule_prune(self, delay: float) -> None:
        if self.cfg.retention_days > 0 or delay == 0.0:
            self._prune_timer = self.server.timers.call_later(delay, self._prune_due)

    def _prune_due(self) -> None:
        self._prune_timer = None
        days = self.cfg.retention_days
        if days > 0:
            self.flush()  # buffered rows go first, so old ones among them are pruned too
            cutoff_ms = int((self.server.clock() - days * 86400) * 1000)
            self.server.spawn(self._prune(first_id_at(cutoff_ms)))
        self._schedule_prune(_PRUNE_EVERY)

    async def _prune(self, before_id: int) -> None:
        deleted = await self.store.prune_history(before_id)
        if deleted:
            log.info("history pruned lines=%d", deleted)
