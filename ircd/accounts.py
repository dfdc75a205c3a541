"""Accounts on a running server: login, logout, nick ownership, throttling.

The SQL lives in ``ircd.store``; this module holds the rules:

* A login sets the client's account, answers 900, tells peers with
  account-notify, and gives agents user mode +B.
* An agent's nick is its account name. A registered person's account name
  is protected as a nick (``accounts.nick_protection``). A logged-in client
  can always take its account's name as nick: an older connection of the
  same agent is closed, anyone else holding it is renamed.
* ``accounts.require_sasl`` refuses registration without a login.
* Every password check goes through ``check_password`` (SCRAM, which checks
  a proof rather than a password, through ``begin_login``/``end_login``):
  attempts are counted per source and per account before the check
  (``ircd.logins``), so guessing gets slow for the guesser, not the owner.

Account names are cached in memory for nick checks and refreshed whenever
another process (the ``pircd account`` CLI) changes the database.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

import anyio

from ircd import caps as C
from ircd import passwords
from ircd.accountnames import InvalidAccountName, account_name_problem, valid_account_name
from ircd.commands.registration import set_nick_from_server
from ircd.events import LoggedIn, LoggedOut
from ircd.logins import KNOWN_PER_TARGET, Attempt, login_limits, source_of, throttled_text
from ircd.proto import numerics as N
from ircd.delivery.replies import ReplyBuffer
from ircd.sasl.scram import derive_keys
from ircd.store import Account, AccountExists, ScramKeys
from ircd.store.errors import StoreUnavailable

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.config import AccountsSection
    from ircd.server import Server
    from ircd.store import Store

__all__ = ["AccountService", "InvalidAccountName", "Refusal", "account_name_problem", "valid_account_name"]

log = logging.getLogger("pircd")
# (accounts config, to, subject, body) -> None when sent, else the reason for the log
SendMail = Callable[["AccountsSection", str, str, str], Awaitable["str | None"]]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why registration cannot complete: a numeric to answer, and whether to disconnect."""

    text: str
    numeric: str | None = None
    disconnect: bool = True


def _is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


class AccountService:
    def __init__(self, server: "Server", store: "Store", send_mail: SendMail | None = None) -> None:
        self.server = server
        self.store = store
        # how a verification code goes out (ircd.net.mail.send_mail, given by ircd.app): the
        # transport is handed down, so that accounts never import the network layer
        self.send_mail = send_mail
        self.names: dict[str, str] = {}  # folded account name -> kind
        self.scram_secret = secrets.token_bytes(32)
        self._data_version: int | None = None
        # awaited after each refresh of the cache (at start-up, and when another process changed
        # accounts): extensions reconcile what they keep per account (a deleted account's state)
        self.changed_hooks: list[Callable[[], Awaitable[None]]] = []
        self._sources_loaded = False
        self._dummy_hash: str | None = None
        server.registration_checks.append(self.registration_check)
        server.nick_checks.append(self.nick_check)
        from ircd.verification import Verifications

        self.verifications = Verifications()  # REGISTER waiting for its email code
        server.sweep_hooks.append(self.verifications.sweep)

    @property
    def cfg(self) -> AccountsSection:
        return self.server.config.accounts

    # cache -----------------------------------------------------------------

    async def refresh(self) -> None:
        # the version read before the list: a change committed after it is seen by the next poll
        self._data_version = await self._read_data_version()
        accounts = await self.store.list_accounts()
        self.names = {a.folded: a.kind for a in accounts}
        if not self._sources_loaded:
            self._sources_loaded = True
            for account, source in await self.store.load_login_sources():
                self.server.logins.remember("a:" + account, source)
        suspended = {a.folded for a in accounts if a.suspended}
        for ghost_account in list(self.server.sessions.ghosts):
            if ghost_account not in self.names or ghost_account in suspended:
                self.server.sessions.drop_account(ghost_account, "Account suspended" if ghost_account in suspended
                                                  else "Account deleted")
        for client in list(self.server.clients):
            folded = client.account_folded
            if folded is not None and (folded not in self.names or folded in suspended):
                reason = "Account suspended" if folded in suspended else "Account deleted"
                self.server.sessions.end(client, reason)  # not left always-on
        for hook in self.changed_hooks:
            await hook()

    async def poll_external_changes(self) -> None:
        """Refresh the cache when another process committed to the database."""
        try:
            if await self._read_data_version() != self._data_version:
                await self.refresh()
        except StoreUnavailable:  # the database went away (the store said so): the next poll tries again
            pass

    async def _read_data_version(self) -> int:
        return await self.store.data_version()

    # passwords -------------------------------------------------------------

    async def make_credentials(self, password: str) -> tuple[str, ScramKeys]:
        hashed = await passwords.hash_password(password)
        keys = await anyio.to_thread.run_sync(derive_keys, password, None, self.cfg.scram_iterations)
        return hashed, keys

    def begin_login(self, ip: str, folded: str) -> Attempt | str:
        """Count a login attempt on an account before its check; the refusal text when the
        source or the account is over its limit. End it with ``end_login``."""
        server = self.server
        attempt = server.logins.begin(source_of(ip), "a:" + folded, server.clock(), login_limits(self.cfg))
        if isinstance(attempt, float):
            log.warning("login throttled account=%s ip=%s", folded, ip)
            return throttled_text(attempt)
        return attempt

    def end_login(self, attempt: Attempt, ok: bool, ip: str, mechanism: str) -> None:
        logins = self.server.logins
        folded = (attempt.target or "a:")[2:]  # an account's attempt always has its target
        if not ok:
            logins.failed(attempt)
            log.warning("login failed account=%s ip=%s mechanism=%s", folded, ip, mechanism)
            return
        logins.succeeded(attempt)
        if folded in self.names:
            now_ms = int(self.server.clock() * 1000)
            self.store.note_login_source(folded, attempt.source, now_ms, KNOWN_PER_TARGET)

    async def check_password(self, ip: str, name: str, password: str, mechanism: str) -> Account | str:
        """The account if ``password`` is right, else the reason for the refusal.

        The one way to check an account's password (SASL PLAIN, NickServ IDENTIFY, and any
        later sign-in over another protocol): it applies the login throttle, and an unknown
        name costs the same argon2 work as a known one. ``ip`` is the client's address."""
        folded = self.server.casefold(name)
        attempt = self.begin_login(ip, folded)
        if isinstance(attempt, str):
            return attempt
        account = await self.store.get_account(folded)
        hashed = account.password_hash if account is not None else None
        ok = await passwords.verify(hashed or await self._unknown_hash(), password) and hashed is not None
        self.end_login(attempt, ok, ip, mechanism)
        if not ok or account is None:
            return "Invalid account name or password"
        if account.suspended:
            log.warning("login refused (suspended) account=%s ip=%s", folded, ip)
            return "Account suspended"
        return account

    async def _unknown_hash(self) -> str:
        """A hash of a random password with the current parameters, checked for unknown names."""
        if self._dummy_hash is None:
            self._dummy_hash = await passwords.hash_password(secrets.token_urlsafe(18))
        return self._dummy_hash

    # login -----------------------------------------------------------------

    def login(self, client: "Client", account: Account, reply: "ReplyBuffer") -> None:
        server = self.server
        client.account = account.name
        client.account_folded = account.folded
        client.account_kind = account.kind
        if not client.registered and self._wants_account_nick(client):
            self.claim_nick(client)
        mask = client.prefix if client.registered else f"{client.nick}!{client.user or '*'}@{client.host}"
        reply.numeric(N.RPL_LOGGEDIN, mask, account.name, f"You are now logged in as {account.name}")
        log.info("login id=%d account=%s kind=%s", client.id, account.name, account.kind)
        if client.registered:
            server.state.account_attached(client)
            if account.is_agent:
                self.claim_nick(client, reply)
                if "B" not in client.modes:
                    client.modes.add("B")
                    reply.send("MODE", client.nick, "+B", source=client.nick)
            peers = server.state.peers_with_cap(client, C.ACCOUNT_NOTIFY)
            server.delivery.relay(peers, server.relay_from(client, "ACCOUNT", account.name))
            server.events.publish(LoggedIn(client, account.name))

    def _wants_account_nick(self, client: Client) -> bool:
        """Before registration: an agent always takes its account name; a person when the
        server refused that very nick to it (someone held it) before it logged in."""
        if client.account_kind == "agent":
            return True
        refused = client.refused_nick
        if client.nick != "*" or refused is None:
            return False
        return self.server.casefold(refused) == client.account_folded

    def logout(self, client: "Client", reply: "ReplyBuffer | None") -> None:
        account = client.account
        if account is None:
            return
        self.server.state.account_detached(client, client.account_folded)
        client.account = client.account_folded = client.account_kind = None
        if reply is not None:
            reply.numeric(N.RPL_LOGGEDOUT, client.prefix, "You are now logged out")
        server = self.server
        peers = server.state.peers_with_cap(client, C.ACCOUNT_NOTIFY)
        server.delivery.relay(peers, server.relay_from(client, "ACCOUNT", "*"))
        server.events.publish(LoggedOut(client, account))

    # nick ownership ----------------------------------------------------------

    def claim_nick(self, client: Client, reply: ReplyBuffer | None = None) -> None:
        """Give a logged-in client its account name as nick, taking it from whoever holds it."""
        folded = client.account_folded
        if folded is None or client.account is None or client.nick_folded == folded:
            return
        holder = self.server.state.nick_holder(folded)
        if holder is not None and holder is not client:
            sessions = self.server.sessions
            if sessions.may_share(client, holder):  # another connection of the account
                sessions.share_nick(client, holder)
                return
            self.take_nick(client, holder)
            if holder.detached:  # an always-on agent's older connection: its identity stays
                if sessions.may_share(client, holder):
                    sessions.share_nick(client, holder)  # the new connection takes its place
                    return
                sessions.drop(holder, "Nick taken over by a new connection of its account")
        own = reply if reply is not None else ReplyBuffer(self.server, client)
        set_nick_from_server(self.server, client, client.account, own, folded)
        if reply is None:
            own.flush()

    def take_nick(self, claimant: Client, holder: Client) -> None:
        """``claimant``, logged in, takes its account's name from ``holder``. An older
        connection of the same agent is closed (an agent has one connection at a time);
        anyone else loses the nick: a registered client is renamed to a guest nick, one still
        registering gets 433 and chooses another. A user of another node of a cluster is renamed
        (or closed) by its node, and the nick is the claimant's here at once."""
        server = self.server
        nick = holder.nick
        if holder.account_folded == claimant.account_folded and (claimant.account_kind == "agent" or holder.detached):
            # an older connection of the agent, or the account's always-on identity: it ends
            server.disconnect(holder, "Nick taken over by a new connection of its account")
            return
        if not server.is_here(holder):
            server.remote_users.rename(holder, claimant)
            return
        log.info("nick taken id=%d nick=%s by=%d account=%s", holder.id, nick, claimant.id, claimant.account)
        self.give_up_nick(holder, f"The nick {nick} belongs to the account {claimant.account}, which has logged in",
                          "Nick taken over by its account")

    def give_up_nick(self, holder: Client, why: str, reason: str) -> None:
        """``holder`` (of this node) loses its nick: renamed to a guest nick and told ``why``, or
        433 if still registering, or closed with ``reason`` when no guest nick is free."""
        server = self.server
        nick = holder.nick
        reply = ReplyBuffer(server, holder)
        if not holder.registered:
            server.state.remove_nick(holder)
            holder.nick, holder.nick_folded = "*", ""
            holder.refused_nick = nick
            reply.numeric(N.ERR_NICKNAMEINUSE, nick, "Nickname is already in use")
            reply.flush()
            return
        guest = self._guest_nick(holder)
        if guest is None:
            server.disconnect(holder, reason)
            return
        set_nick_from_server(server, holder, guest, reply)
        reply.send("NOTICE", guest, f"{why}; you are now {guest}")
        reply.flush()

    def _guest_nick(self, client: Client) -> str | None:
        """A free nick that no account owns: Guest<connection id>, or Guest<random digits>."""
        server = self.server
        maxlen = server.config.limits.nicklen
        number = client.id
        for _ in range(100):
            nick = f"Guest{number}"
            folded = server.casefold(nick)
            if len(nick) <= maxlen and server.state.nick_holder(folded) is None and folded not in self.names:
                return nick
            number = secrets.randbelow(10 ** (maxlen - len("Guest")))
        return None

    # registration and nick checks -----------------------------------------

    def registration_check(self, client: "Client") -> Refusal | None:
        cfg = self.cfg
        if client.account is None:
            if cfg.require_sasl and not (cfg.require_sasl_exempt_loopback and _is_loopback(client.ip)):
                return Refusal("You must log in with SASL to use this server")
            owner_kind = self.names.get(client.nick_folded) if cfg.nick_protection else None
            if owner_kind is not None or self.names.get(client.nick_folded) == "agent":
                return Refusal(
                    "Nickname is reserved by a different account", numeric=N.ERR_NICKNAMEINUSE, disconnect=False
                )
            return None
        if client.account_kind == "agent":
            client.modes.add("B")
            self.claim_nick(client)  # the client chose another nick after logging in
        return None

    def nick_check(self, client: "Client", nick: str, folded: str) -> tuple[str, str] | None:
        if client.account_kind == "agent" and client.registered and folded != client.account_folded:
            return N.ERR_ERRONEUSNICKNAME, "An agent's nick is its account name"
        kind = self.names.get(folded)
        if kind is None or folded == client.account_folded or not client.registered:
            return None
        if kind == "agent" or self.cfg.nick_protection:
            return N.ERR_NICKNAMEINUSE, "Nickname is reserved by a different account"
        return None

    # creation ---------------------------------------------------------------

    async def create(self, name: str, password: str, *, kind: str = "person", owner: str | None = None,
                     email: str | None = None) -> Account:
        """Create an account (hashes off the event loop); raises InvalidAccountName, AccountExists or
        TooManyAgents (an agent whose owner has ``accounts.agents_per_owner`` already)."""
        problem = account_name_problem(name, self.server.config.limits.nicklen)
        if problem is not None:
            raise InvalidAccountName(f"{name!r} is {problem}")
        hashed, keys = await self.make_credentials(password)
        return await self.create_hashed(name, hashed, keys, kind=kind, owner=owner, email=email)

    async def create_hashed(self, name: str, hashed: str, keys: ScramKeys, *, kind: str = "person",
                            owner: str | None = None, email: str | None = None) -> Account:
        """Create an account from a password's hashes (made earlier by ``make_credentials``: a
        registration that waited for its email code); raises AccountExists."""
        folded = self.server.casefold(name)
        account = await self.store.create_account(
            name, folded, kind, owner, int(self.server.clock() * 1000), hashed, keys, email,
            max_agents=self.cfg.agents_per_owner,
        )
        self.names[folded] = kind
        log.info("account created name=%s kind=%s owner=%s", name, kind, owner)
        return account

    async def start_verification(self, client: Client, name: str, email: str, password: str) -> tuple[str, str]:
        """REGISTER with ``accounts.email_required``: send a code to ``email`` and keep the
        registration until VERIFY. Returns ("", <address>) when the code went out, else a FAIL
        code of account-registration and its text."""
        from ircd.verification import Pending, new_code, valid_email

        server, cfg = self.server, self.cfg
        if not valid_email(email):
            return "INVALID_EMAIL", "A valid email address is needed to register on this server"
        source = source_of(client.ip)
        if not self.verifications.reserve(source, email, server.clock(), cfg.email_codes_per_hour):
            log.warning("verification code refused (too many) account=%s ip=%s", name, client.ip)
            return "TEMPORARILY_UNAVAILABLE", "Too many verification codes sent lately; try again later"
        hashed, keys = await self.make_credentials(password)
        folded = server.casefold(name)
        if folded in self.names:
            return "ACCOUNT_EXISTS", "That account already exists"
        code = new_code()
        minutes = int(cfg.email_code_lifetime // 60)
        network = server.config.server.network
        body = (
            f"To finish creating the account {name} on the IRC network {network}, send this "
            f"command from the client you registered with:\n\n    VERIFY {name} {code}\n\n"
            f"(in most clients: /quote VERIFY {name} {code}, or /msg NickServ VERIFY {name} {code}).\n"
            f"The code is valid for {minutes} minutes. If you did not ask for this account, "
            "ignore this message.\n"
        )
        failed = (
            "no way to send mail" if self.send_mail is None
            else await self.send_mail(cfg, email, f"Your code for the account {name} on {network}", body)
        )
        if failed is not None:
            log.warning("verification code not sent account=%s: %s", name, failed)
            return "TEMPORARILY_UNAVAILABLE", "The verification code could not be sent; try again later"
        now = server.clock()
        self.verifications.add(Pending(name, folded, email, hashed, keys, code, now + cfg.email_code_lifetime, source))
        log.info("verification code sent account=%s ip=%s", name, client.ip)
        return "", email


__all__ += ["AccountExists"]
