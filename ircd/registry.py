"""Nick and channel indexes, keyed by the folded name, plus WHOWAS history."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ircd.channel import Channel
    from ircd.client import Client

__all__ = ["Registry", "WhowasEntry"]


@dataclass(frozen=True, slots=True)
class WhowasEntry:
    nick: str
    user: str
    host: str
    realname: str
    account: str | None
    time: int


class Registry:
    def __init__(self, casefold: Callable[[str], str], whowas_limit: int) -> None:
        self.casefold = casefold
        self.nicks: dict[str, "Client"] = {}
        self.channels: dict[str, "Channel"] = {}
        self.whowas: dict[str, deque[WhowasEntry]] = {}
        self._whowas_order: deque[str] = deque()
        self.whowas_limit = whowas_limit

    def find_nick(self, nick: str) -> "Client | None":
        return self.nicks.get(self.casefold(nick))

    def find_channel(self, name: str) -> "Channel | None":
        return self.channels.get(self.casefold(name))

    def add_nick(self, client: "Client") -> None:
        self.nicks[client.nick_folded] = client

    def remove_nick(self, client: "Client") -> None:
        if self.nicks.get(client.nick_folded) is client:
            del self.nicks[client.nick_folded]

    def remember(self, client: "Client", now: int) -> None:
        """Keep a WHOWAS entry for a client that is going away."""
        if client.registered:
            self.remember_nick(client.nick, client, now)

    def remember_nick(self, nick: str, client: "Client", now: int) -> None:
        """Keep a WHOWAS entry for ``nick`` (the client's current or former nick)."""
        if self.whowas_limit <= 0:
            return
        folded = self.casefold(nick)
        entry = WhowasEntry(nick, client.user, client.host, client.realname, client.account, now)
        entries = self.whowas.setdefault(folded, deque(maxlen=10))
        entries.appendleft(entry)
        self._whowas_order.append(folded)
        while len(self._whowas_order) > self.whowas_limit:
            old = self._whowas_order.popleft()
            bucket = self.whowas.get(old)
            if bucket:
                bucket.pop()
                if not bucket:
                    del self.whowas[old]
