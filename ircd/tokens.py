"""Bearer tokens: how accounts authenticate on the HTTP transports (MCP, A2A).

``pircd token add`` (or ``TOKEN ADD`` over IRC) makes a token and shows it
once; only a hash is stored (``ircd/store/tokens.py``). An account manages
its own tokens, and an owner those of its agents. Every HTTP request is
checked against the database, so a revoked token is refused at the next
request wherever it was revoked; transports also register the tokens their
open sessions use, and hear through ``revoked_hooks`` when one goes (also
when another process revoked it: the once-a-second tick checks them).

Failed checks are throttled per credential before per address, in the server's login
throttle (``ircd/logins.py``), over ``accounts.login_window``:

* a token names its row by the id in its text: a wrong secret for a real id counts
  against that id, per address (``login_attempts``) and from addresses that never used
  it successfully (``login_account_attempts``), so guessing one token's secret locks that
  token for the guesser (and for new addresses once many guess), never the others;
* a token that names no token (malformed, unknown or revoked id) counts against its
  address (``login_ip_attempts``); past it such tokens get a refusal instead of a check
  (a malformed one without even a database read), while real tokens from the address
  still work: one bad client behind a shared address does not lock out the others;
* wrong secrets of real ids also count against the address, at ``WRONG_SECRET_FACTOR``
  times that limit; past it the address may present only ids it used successfully.

Only finished failures count: a secret has 256 random bits, so simultaneous checks cannot
guess it, and counting checks in flight refused valid tokens of agents sharing an address.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from ircd.logins import login_limits
from ircd.logins import LoginLimits, source_of
from ircd.store import tokens as rows
from ircd.store.errors import IntegrityError

T = TypeVar("T")

if TYPE_CHECKING:
    from ircd.server import Server
    from ircd.store import Store

__all__ = ["TokenService", "TokenIdentity", "TokenRefused", "TokenThrottled", "valid_label",
           "WRONG_SECRET_FACTOR"]

log = logging.getLogger("pircd")

WRONG_SECRET_FACTOR = 5  # an address's wrong secrets of real token ids, in units of login_ip_attempts
TOUCH_EVERY = 60.0  # seconds: a token's "last used" is written at most this often
VALID_KEPT = 10_000  # valid tokens remembered at most (then forgotten all at once, and read again)


@dataclass(frozen=True, slots=True)
class TokenIdentity:
    token_id: int
    account: str  # folded
    kind: str  # person or agent
    name: str  # the token's label


@dataclass(frozen=True, slots=True)
class TokenThrottled:
    """A token refused without a verdict: too many failures of this credential (``credential``)
    or of tokens naming nothing from this address (``address``); retry in ``retry_after`` seconds."""

    retry_after: float
    reason: str


class TokenRefused(Exception):
    """``code``: NO_SUCH_ACCOUNT, NOT_ALLOWED, INVALID_NAME, TOKEN_EXISTS, NO_SUCH_TOKEN."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


def valid_label(name: str) -> bool:
    return 0 < len(name) <= rows.LABEL_MAX and name.isascii() and all(c.isalnum() or c in "-_." for c in name)


def _credential_checks(source: str, target: str, known: bool, limits: LoginLimits) -> list[tuple[str, int]]:
    """The limits a real token id (``target``) is held to from ``source``: its failures there and,
    unless ``source`` used it successfully before, its failures from such sources and the source's
    wrong secrets of any id."""
    pair = [(f"tp:{source} {target}", limits.per_pair)]
    if known:
        return pair
    return [*pair, ("tk:" + target, limits.per_target),
            ("tw:" + source, limits.per_source * WRONG_SECRET_FACTOR)]


class TokenService:
    def __init__(self, server: "Server", store: "Store") -> None:
        self.server = server
        self.store = store
        self.in_use: dict[int, int] = {}  # token id -> open sessions using it
        self.revoked_hooks: list[Callable[[set[int]], None]] = []
        self._checking = False
        self._touched: dict[int, float] = {}  # token id -> when its last_used_at was last written
        self._valid: dict[tuple[int, bytes], TokenIdentity] = {}  # (id, hash of the secret) -> identity
        self._forgotten = 0  # counts the times _valid lost entries: a read that overlapped one is not kept
        self._limits_of = server.config.accounts  # the section _limits_made was made from
        self._limits_made = login_limits(self._limits_of)
        server.tick_hooks.append(self._tick)
        if server.accounts is not None:
            server.accounts.changed_hooks.append(self._accounts_changed)

    async def _accounts_changed(self) -> None:
        self._valid.clear()  # suspended, deleted, changed kind, or another process revoked tokens
        self._forgotten += 1

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

    def _limits(self) -> LoginLimits:
        """``[accounts]``'s login limits, made again only when the configuration was (REHASH)."""
        cfg = self.server.config.accounts
        if cfg is not self._limits_of:
            self._limits_of, self._limits_made = cfg, login_limits(cfg)
        return self._limits_made

    async def verify(self, text: str, ip: str) -> TokenIdentity | TokenThrottled | None:
        """The identity a token names; None when it names none (a failure, counted); or
        ``TokenThrottled`` when its credential, or its address for tokens naming nothing, is
        past its limit (see the module's notes)."""
        logins, limits, now, source = self.server.logins, self._limits(), self.server.clock(), source_of(ip)
        parsed = rows.split_token(text)
        if parsed is None:
            return self._names_nothing(source, now, limits)
        ident = parsed[0]
        target = f"k:{ident:x}"
        known = logins.is_known(target, source)
        checks = _credential_checks(source, target, known, limits)
        wait = logins.wait_for(checks, now, limits.window)
        if wait > 0:
            return TokenThrottled(wait, "credential")
        cached = (ident, rows.secret_hash(parsed[1]))
        identity = self._valid.get(cached)
        if identity is None:
            forgotten = self._forgotten
            row, exists = await self.store.read(rows.find, *parsed)
            now = self.server.clock()
            if row is None:
                if not exists:
                    return self._names_nothing(source, now, limits)
                logins.count([key for key, _ in checks], now)
                return None
            accounts = self.server.accounts
            kind = accounts.names.get(row.account, "agent") if accounts is not None else "agent"
            identity = TokenIdentity(row.id, row.account, kind, row.name)
            if forgotten == self._forgotten:  # not revoked while it was read
                if len(self._valid) >= VALID_KEPT:
                    self._valid.clear()
                self._valid[cached] = identity
        logins.forget(checks[0][0])  # the pair's failures
        logins.remember(target, source)
        if now - self._touched.get(ident, -TOUCH_EVERY) >= TOUCH_EVERY:  # not a write per request
            self._touched[ident] = now
            self.store.write_nowait(rows.touch, [ident], int(now * 1000))
        return identity

    def _names_nothing(self, source: str, now: float, limits: LoginLimits) -> TokenThrottled | None:
        """A credential that names nothing: a failure of its address, or (past the limit) a refusal."""
        key = "tn:" + source
        wait = self.server.logins.wait_for([(key, limits.per_source)], now, limits.window)
        if wait > 0:
            return TokenThrottled(wait, "address")
        self.server.logins.count([key], now)
        return None

    async def counted(self, ip: str, check: Callable[[], Awaitable[T | None]]) -> T | TokenThrottled | None:
        """Run another credential check (an intro token) whose failure counts as a token naming
        nothing from ``ip``: its result; None for a failure; ``TokenThrottled`` for a failure
        from an address past its limit. A valid credential passes whatever the address did."""
        result = await check()
        if result is not None:
            return result
        return self._names_nothing(source_of(ip), self.server.clock(), self._limits())

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
        for ident in ids:
            self._touched.pop(ident, None)
        if ids:
            self._forgotten += 1
            for key in [k for k, identity in self._valid.items() if identity.token_id in ids]:
                del self._valid[key]
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
