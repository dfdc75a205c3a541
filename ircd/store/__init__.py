"""The core's persistence. All of the core's SQL lives in this package.

``Store`` is the interface the rest of the server uses; it hides SQLite so
that a later move to another database is a swap of this package, not a
rewrite of the server.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from ircd.store import accounts as _accounts
from ircd.store import channels as _channels
from ircd.store.accounts import Account, AccountExists, ScramKeys
from ircd.store.channels import ChannelRow
from ircd.store.db import Database, Migration
from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

__all__ = ["Store", "Account", "AccountExists", "ScramKeys", "ChannelRow"]

T = TypeVar("T")


class Store:
    def __init__(self, path: str, durability: str = "full") -> None:
        self.db = Database(path, durability)
        self.path = path

    async def open(self) -> None:
        await self.db.open()
        await self.db.migrate(CORE_TRACK, CORE_MIGRATIONS)

    async def close(self) -> None:
        await self.db.close()

    # for extensions (their own track, their own SQL) ----------------------

    async def migrate(self, track: str, migrations: Sequence[Migration]) -> int:
        return await self.db.migrate(track, migrations)

    async def read(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.db.read(fn, *args)

    async def write(self, fn: Callable[..., T], *args: Any) -> T:
        return await self.db.write(fn, *args)

    def write_nowait(self, fn: Callable[..., Any], *args: Any) -> None:
        self.db.write_nowait(fn, *args)

    async def flush(self) -> None:
        """Wait until every queued write is committed."""
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
    ) -> Account:
        return await self.db.write(
            _accounts.insert_account, name, folded, kind, owner, created_at, password_hash, scram, email
        )

    async def set_password(self, folded: str, password_hash: str, scram: ScramKeys) -> bool:
        return await self.db.write(_accounts.set_password, folded, password_hash, scram)

    # channels --------------------------------------------------------------

    async def load_channels(self) -> list[ChannelRow]:
        return await self.db.read(_channels.load_channels)

    def save_channel(self, row: ChannelRow) -> None:
        self.db.write_nowait(_channels.save_channel, row)

    def delete_channel(self, folded: str) -> None:
        self.db.write_nowait(_channels.delete_channel, folded)
