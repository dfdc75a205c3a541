"""Bearer tokens: how accounts authenticate on the HTTP transports (MCP, A2A).

``pircd token add`` (or ``TOKEN ADD`` over IRC) makes a token and shows it
once; only a hash is stored (``ircd/store/tokens.py``). An account manages
its own tokens, and an owner those of its agents. Every HTTP request is
checked against the database, so a revoked token is refused at the next
request wherever it was revoked; transports also register the tokens their
open sessions use, and hear through ``revoked_hooks`` when one goes (also
when another process revoked it: the once-a-second tick checks them).
Checks are counted per source in the server's login throttle (``ircd/logins.py``),
with failed SASL logins and OPER attempts, and a source past the limit is refused
before any check. A token is never locked out by others' failures: the id in the
token finds its row, and nothing is counted per account.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ircd.accounts import login_limits
from ircd.logins import source_of
from ircd.store import tokens as rows
from ircd.store.errors import IntegrityError

T = TypeVar("T")

if TYPE_CHECKING:
    from ircd.server import Server
    from ircd.store import Store

__all__ = ["TokenService", "TokenIdentity", "TokenRefused", "valid_label"]

log = logging.getLogger("pircd")


@dataclass(frozen=True, slots=True)
class TokenIdentity:
    token_id: int
    account: str  # folded
    kind: str  # person or agent
    name: str  # the token's label


class TokenRefused(Exception):
    """``code``: NO_SUCH_ACCOUNT, NOT_ALLOWED, INVALID_NAME, TOKEN_EXISTS, NO_SUCH_TOKEN."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def valid_label(name: str) -> bool:
    return 0 < len(name) <= rows.LABEL_MAX and name.isascii() and all(c.isalnum() or c in "-_." for c in name)


class TokenService:
    def __init__(self, server: "Server", store: "Store") -> None:
        self.server = server
        self.store = store
        self.in_use: dict[int, int] = {}  # token id -> open sessions using it
        self.revoked_hooks: list[Callable[[set[int]], None]] = []
        self._checking = False
        server.tick_hooks.append(self._tick)

    async def start(self) -> None:
        await self.store.migrate(rows.TRACK, rows.MIGRATIONS)

    # managing -------------------------------------------------------------------------

    async def _may_manage(self, actor: str | None, account: str) -> Any:
        row = await self.store.get_account(account)
        if row is None:
            raise TokenRefused("NO_SUCH_ACCOUNT", "No such account")
        if actor is not None and actor != account and row.owner != actor:
            raise TokenRefused("NOT_ALLOWED", "You manage your own tokens and your agents' tokens")
        return row

    async def create(self, actor: str | None, account: str, name: str | None = None) -> tuple[rows.TokenRow, str]:
        """A new token for ``account`` (``actor`` None: the operator); (its row, the token text)."""
        account = self.server.casefold(account)
        await self._may_manage(actor, account)
        ident, secret, text = rows.make_token()
        label = name if name is not None else f"token-{ident & 0xFFFFFF:06x}"
        if not valid_label(label):
            raise TokenRefused("INVALID_NAME", "Token names are 1-64 letters, digits, '-', '_' or '.'")
        now = int(self.server.clock() * 1000)
        try:
            row = await self.store.write(rows.insert, ident, account, label, secret, now, actor or "operator")
        except IntegrityError:
            raise TokenRefused("TOKEN_EXISTS", f"{account} already has a token named {label}") from None
        log.info("token created account=%s name=%s by=%s", account, label, actor or "operator")
        return row, text

    async def list(self, actor: str | None, account: str) -> list[rows.TokenRow]:
        account = self.server.casefold(account)
        await self._may_manage(actor, account)
        return await self.store.read(rows.list_for, account)

    async def revoke(self, actor: str | None, account: str, name: str | None = None) -> int:
        """Revoke the account's token of that name (all of them for None); how many. Effective at once."""
        account = self.server.casefold(account)
        await self._may_manage(actor, account)
        ids = await self.store.write(rows.revoke, account, name)
        if name is not None and not ids:
            raise TokenRefused("NO_SUCH_TOKEN", f"{account} has no token named {name}")
        log.info("token revoked account=%s name=%s count=%d by=%s", account, name or "*", len(ids),
                 actor or "operator")
        self._revoked(set(ids))
        return len(ids)

    # checking -----------------------------------------------------------------------

    def retry_after(self, ip: str) -> float:
        """Seconds before ``ip`` may try a token again (0: now)."""
        server = self.server
        return server.logins.source_wait(source_of(ip), server.clock(), login_limits(server.config.accounts))

    async def verify(self, text: str, ip: str) -> TokenIdentity | None:
        """The identity a token names, or None (counted against ``ip``). Callers check
        ``retry_after(ip)`` first and refuse without checking while it is not 0."""
        row = await self.counted(ip, lambda: self._lookup(text))
        if row is None:
            return None
        accounts = self.server.accounts
        kind = accounts.names.get(row.account, "agent") if accounts is not None else "agent"
        self.store.write_nowait(rows.touch, [row.id], int(self.server.clock() * 1000))
        return TokenIdentity(row.id, row.account, kind, row.name)

    async def _lookup(self, text: str) -> Any:
        parsed = rows.split_token(text)
        return await self.store.read(rows.lookup, *parsed) if parsed is not None else None

    async def counted(self, ip: str, check: Callable[[], Awaitable[T | None]]) -> T | None:
        """Run a credential check counted like a token check from ``ip`` (the attempt is taken
        before it, so simultaneous ones count too): None, without checking, when ``ip`` has no
        attempt left; a None result is a failure."""
        server, logins = self.server, self.server.logins
        attempt = logins.begin(source_of(ip), None, server.clock(), login_limits(server.config.accounts))
        if isinstance(attempt, float):
            return None
        result = await check()
        if result is None:
            logins.failed(attempt)
        else:
            logins.succeeded(attempt)
        return result

    # sessions that use a token ---------------------------------------------------------

    def hold(self, token_id: int) -> None:
        self.in_use[token_id] = self.in_use.get(token_id, 0) + 1

    def release(self, token_id: int) -> None:
        count = self.in_use.get(token_id, 0) - 1
        if count > 0:
            self.in_use[token_id] = count
        else:
            self.in_use.pop(token_id, None)

    def _revoked(self, ids: set[int]) -> None:
        gone = {i for i in ids if i in self.in_use}
        if gone:
            for hook in self.revoked_hooks:
                hook(gone)

    def _tick(self) -> None:
        """Once a second: tokens in use that another process revoked (or whose account went)."""
        if self.in_use and not self._checking:
            self._checking = True
            self.server.spawn(self._check_in_use())

    async def _check_in_use(self) -> None:
        try:
            ids = list(self.in_use)
            valid = await self.store.read(rows.valid_ids, ids)
            self._revoked({i for i in ids if i not in valid})
        finally:
            self._checking = False
