"""The core's persistence. All of the core's SQL lives in this package.

``Store`` is the interface the rest of the server uses; it hides which database
``server.db`` names (a SQLite file or PostgreSQL: ``ircd.store.db``), so the rest of
the server, and several pircd processes sharing one PostgreSQL database, see the same.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Sequence, TypeVar

from ircd.store import accounts as _accounts
from ircd.store import channels as _channels
from ircd.store import history as _history
from ircd.store.accounts import Account, AccountExists, ScramKeys, TooManyAgents
from ircd.store.channels import ChannelRow
from ircd.store.history import Conversation, HistoryRow
from ircd.store.db import Batched, Database, Migration
from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

__all__ = ["Store", "Batched", "Account", "AccountExists", "TooManyAgents", "ScramKeys", "ChannelRow", "HistoryRow", "Conversation"]

T = TypeVar("T")


class Store:
    def __init__(self, path: str, durability: str = "full") -> None:
        self.db = Database(path, durability)
        self.path = path
        # writers that buffer in memory (the history writer) hand their rows to the
        # group commit here, so flush() and close() see everything
        self.before_flush: list[Callable[[], None]] = []
        # write_batched(batched, item): a write that joins the other items queued for the same
        # Batched function (the database's own method: no frame of its own on the SEND path)
        self.write_batched: Callable[[Batched, Any], asyncio.Future[Any]] = self.db.write_batched

    async def open(self) -> None:
        await self.db.open()
        await self.db.migrate(CORE_TRACK, CORE_MIGRATIONS)

    async def close(self) -> None:
        for hook in self.before_flush:
            hook()
        await self.db.close()

    # for extensions (their own track, their own SQL) ----------------------

    async def migrate(self, track: str, migrations: Sequence[Migration]) -> int:
        return await self.db.migrate(track, migrations)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.db.read(fn, *args)

    def write(self, fn: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
        """Await it: done once the write is committed."""
        return self.db.write(fn, *args)

    def write_nowait(self, fn: Callable[..., Any], *args: Any) -> "asyncio.Future[Any] | None":
        return self.db.write_nowait(fn, *args)

    async def data_version(self) -> int:
        """Changes when another process commits to the database (see Database.data_version)."""
        return await self.db.data_version()

    async def flush(self) -> None:
        """Wait until every queued write is committed, buffered ones (history) included."""
        for hook in self.before_flush:
            hook()
        await self.db.flush()

    # accounts --------------------------------------------------------------

    async def get_account(self, folded: str) -> Account | None:
        return await self.db.read(_accounts.get_account, folded)

    async def get_account_by_certfp(self, fingerprint: str) -> Account | None:
        return await self.db.read(_accounts.get_account_by_certfp, fingerprint)

    async def list_accounts(self, owner: str | None = None) -> list[Account]:
        return await self.db.read(_accounts.list_accounts, owner)

    async def create_account(
        self,
        name: str,
        folded: str,
        kind: str,
        owner: str | None,
        created_at: int,
        password_hash: str | None,
        scram: ScramKeys | None,
        email: str | None = None,
        max_agents: int | None = None,
    ) -> Account:
        return await self.db.write(
            _accounts.insert_account, name, folded, kind, owner, created_at, password_hash, scram, email, max_agents
        )

    async def set_password(self, folded: str, password_hash: str, scram: ScramKeys) -> bool:
        return await self.db.write(_accounts.set_password, folded, password_hash, scram)

    async def load_login_sources(self) -> list[tuple[str, str]]:
        return await self.db.read(_accounts.load_login_sources)

    def note_login_source(self, account: str, source: str, at: int, keep: int) -> None:
        """Remember where an account logged in from (nobody waits for the write)."""
        self.db.write_nowait(_accounts.note_login_source, account, source, at, keep)

    # channels --------------------------------------------------------------

    async def load_channels(self) -> list[ChannelRow]:
        return await self.db.read(_channels.load_channels)

    def save_channel(self, row: ChannelRow) -> None:
        self.db.write_nowait(_channels.save_channel, row)

    def delete_channel(self, folded: str) -> None:
        self.db.write_nowait(_channels.delete_channel, folded)

    # history and read markers (SQL in ircd.store.history) --------------------

    def insert_history_nowait(
        self, rows: Sequence[tuple], conversations: Sequence[tuple[str, str, str, int]]
    ) -> "asyncio.Future[Any] | None":
        """Queue history rows for the next group commit; nobody waits for it."""
        return self.db.write_nowait(_history.insert, rows, conversations)

    async def newest_history_id(self) -> int | None:
        return await self.db.read(_history.newest_id)

    async def prune_history(self, before_id: int, target: str | None = None, chunk: int = 5000) -> int:
        """Delete history older than ``before_id``, one group-committed chunk at a time."""
        total = 0
        while True:
            deleted = await self.db.write(_history.prune, before_id, target, chunk)
            total += deleted
            if deleted < chunk:
                return total

    async def load_read_markers(self, account: str) -> dict[str, str]:
        return await self.db.read(_history.load_markers, account)

    def save_read_marker(self, account: str, target: str, time: str) -> None:
        self.db.write_nowait(_history.save_marker, account, target, time)
