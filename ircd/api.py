"""The extension API: the only ``ircd`` module (with ``ircd.proto``) that ``ext/`` imports.

An extension is a package ``ext.<name>`` with ``setup(api: ExtensionAPI)``.
Everything it may do is a method here: declare verbs and capabilities, add
visibility filters and checks, subscribe to events, advertise ISUPPORT
tokens, read its config section, reach the database, and deliver lines to
accounts. Clients and channels it receives are the server's own objects;
extensions treat them as read-only and change state only through this API.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from ircd import caps as _caps
from ircd.accounts import Refusal
from ircd.caps import Capability
from ircd.state.channel import Channel
from ircd.state.client import Client
from ircd.config import ConfigError
from ircd.dispatch import CommandContext, make_spec
from ircd.metrics import CALL_BOUNDS, MetricsOut, Timings, TimingsByLabel
from ircd.events import (
    AwayChanged,
    ChannelDestroyed,
    ChannelMessage,
    ChannelModeChanged,
    DirectMessage,
    Joined,
    Kicked,
    LoggedIn,
    LoggedOut,
    NickChanged,
    Parted,
    Quit,
    Registered,
    Rehashed,
    TopicChanged,
)
from ircd.log import CountedLog
from ircd.logins import source_of
from ircd.proto.lines import Message, format_line
from ircd.delivery.replies import Relay, ReplyBuffer
from ircd.store import AccountExists, Batched, TooManyAgents
from ircd.store.dialect import PerDialect, dialect_of, postgres_ddl, table_exists
from ircd.store.errors import (
    DatabaseError,
    IntegrityError,
    OperationalError,
    UNAVAILABLE_TEXT,
    StoreUnavailable,
    missing_table,
    unique_violation,
)
from ircd.store.writes import Conn, insert_rows, padded_in, padded_rows, transaction
from ircd.tokens import TokenRefused, TokenThrottled

if TYPE_CHECKING:
    from ircd.server import Server

__all__ = [
    "ExtensionAPI",
    "IdentityElsewhere",
    "load_extensions",
    "extension_schema_tracks",
    "open_database_sync",
    "extension_config_sync",
    "get_account_sync",
    "account_kinds_sync",
    "Capability",
    "CommandContext",
    "ReplyBuffer",
    "Relay",
    "Message",
    "Client",
    "Channel",
    "ConfigError",
    "AccountExists",
    "TooManyAgents",
    "Refusal",
    "TokenRefused",
    "TokenThrottled",
    "CountedLog",
    "Batched",
    "insert_rows",
    "padded_in",
    "padded_rows",
    # the database, either of them (ircd.store.dialect, ircd.store.errors)
    "Conn",
    "transaction",
    "dialect_of",
    "table_exists",
    "PerDialect",
    "postgres_ddl",
    "DatabaseError",
    "IntegrityError",
    "OperationalError",
    "StoreUnavailable",
    "UNAVAILABLE_TEXT",
    "missing_table",
    "unique_violation",
    "caps",
    "MetricsOut",
    "Timings",
    "TimingsByLabel",
    "CALL_BOUNDS",
    # events
    "AwayChanged",
    "ChannelDestroyed",
    "ChannelMessage",
    "ChannelModeChanged",
    "DirectMessage",
    "Joined",
    "Kicked",
    "LoggedIn",
    "LoggedOut",
    "NickChanged",
    "Parted",
    "Quit",
    "Registered",
    "Rehashed",
    "TopicChanged",
]

caps = _caps
log = logging.getLogger("pircd")
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")


class IdentityElsewhere(Exception):
    """The account's identity is a user of another node of a cluster (``args[0]``: the name of
    the server it is on): what acts as that user runs on that node."""


class ExtensionAPI:
    def __init__(self, server: "Server", name: str) -> None:
        self._server = server
        self.name = name
        self.log = logging.getLogger(f"pircd.{name}")
        # the config tables this extension reads (``config``); any other table refuses the config
        self.sections: set[str] = set()

    # declarations ------------------------------------------------------

    def command(
        self,
        verb: str,
        handler: Callable[[CommandContext, Message], "None | Awaitable[None]"],
        *,
        min_params: int = 0,
        pre_registration: bool = False,
        requires_cap: Capability | None = None,
        oper: bool = False,
        syntax: str | None = None,
        help: str | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "min_params": min_params,
            "pre_registration": pre_registration,
            "oper": oper,
            "requires_cap": requires_cap.bit if requires_cap is not None else 0,
            "extension": self.name,
        }
        if syntax is not None:
            kwargs["syntax"] = syntax
        if help is not None:
            kwargs["help"] = help
        self._server.commands.add(make_spec(verb.upper(), handler, **kwargs))

    def capability(self, cap: Capability) -> Capability:
        return self._server.caps.add(cap)

    def isupport(self, token: str, value: str | int | None = None) -> None:
        self._server.isupport_extra[token] = None if value is None else str(value)
        self._server.invalidate_isupport()

    def help_topic(self, topic: str, lines: list[str]) -> None:
        self._server.help_topics[topic.upper()] = lines

    def help_note(self, verb: str, lines: list[str]) -> None:
        """Lines added at the end of ``HELP <verb>`` (how this extension changes a core verb)."""
        self._server.help_notes.setdefault(verb.upper(), []).extend(lines)

    def help_footer(self, line: str) -> None:
        self._server.help_topics_footer.append(line)

    def subscribe(self, event_type: type, listener: Callable[[Any], None]) -> None:
        self._server.events.subscribe(event_type, listener)

    def visibility_filter(
        self, fn: Callable[[Client, Channel], bool], may_hide: Callable[[], Iterable[Channel]] | None = None
    ) -> None:
        """``fn(viewer, channel)`` False hides the channel's existence from the viewer. ``may_hide()``
        returns every channel ``fn`` might hide from someone, as things are now (more will do, none may
        be missing): LUSERS, part of every registration, then asks ``fn`` about those alone; without
        it, about every channel."""
        self._server.visibility.add_filter(fn, may_hide)

    def channel_index_hook(self, added: Callable[[Channel], None], removed: Callable[[Channel], None]) -> None:
        """``added(channel)`` for every channel the server holds now and every one it takes later
        (created, restored at start-up, sent by a cluster node; renamed, under its new name);
        ``removed(channel)`` for every one it lets go (destroyed; renamed, under its old name)."""
        state = self._server.state
        state.channel_added.append(added)
        state.channel_removed.append(removed)
        for channel in list(state.all_channels()):
            added(channel)

    def join_check(self, fn: Callable[[Client, str, Channel | None], tuple[str, str] | None]) -> None:
        self._server.join_checks.append(fn)

    def invite_check(self, fn: Callable[[Client, Client, Channel], tuple[str, str] | None]) -> None:
        self._server.invite_checks.append(fn)

    def channel_create_hook(self, fn: Callable[[Client, Channel], None]) -> None:
        """``fn(creator, channel)`` right after a JOIN created a channel, before the JOIN is sent."""
        self._server.channel_create_hooks.append(fn)

    def invite_hook(self, fn: Callable[[Client, Client, Channel], None]) -> None:
        self._server.invite_hooks.append(fn)

    def channel_flag(self, letter: str, check: Callable[[Client, Channel, bool], str | None]) -> None:
        """A channel flag mode (CHANMODES type D). ``check(client, channel, adding)`` returns a
        refusal text (answered with 482) or None; channel operators pass the usual gate first."""
        self._server.channel_flags[letter] = check
        self._server.invalidate_isupport()

    def message_check(self, fn: Callable[[CommandContext, Client | None, Channel | None], bool]) -> None:
        self._server.message_checks.append(fn)

    def nick_check(self, fn: Callable[[Client, str, str], tuple[str, str] | None]) -> None:
        self._server.nick_checks.append(fn)

    def registration_check(self, fn: Callable[[Client], Refusal | None]) -> None:
        """``fn(client)`` runs when a client would complete registration: a ``Refusal`` stops it
        (its numeric, if any, is sent; ``disconnect=False`` waits for another nick), None lets it go on."""
        self._server.registration_checks.append(fn)

    def whois_hook(self, fn: Callable[[Client, Client, ReplyBuffer], None]) -> None:
        self._server.whois_hooks.append(fn)

    def metadata_keys(self, fn: Callable[[Client], dict[str, str]]) -> None:
        """Read-only METADATA keys of a user: ``fn(client)`` returns ``{key: value}`` (asked on each
        METADATA GET/LIST/SYNC, JOIN sync, WHOIS and registration burst; keep it cheap). Keys are
        ``a-z0-9_./-``; an extension's own keys carry its prefix (``pircan/kind``). Clients cannot
        set or clear them. See docs/commands.md, METADATA."""
        self._server.metadata_providers.append(fn)

    # HTTP ----------------------------------------------------------------

    def http_enabled(self) -> bool:
        """Whether the server has an HTTP listener (``[http] enabled`` and an address to listen on):
        without one, an extension need not load its HTTP transports."""
        cfg = self._server.config.http
        return cfg.enabled and bool(cfg.listen or cfg.tls_listen)

    def http_route(self, path: str, app: Any) -> None:
        """Serve the ASGI ``app`` at exactly ``path`` on the HTTP listener (``[http]``)."""
        self._server.http.routes.append((path, app))

    def http_mount(self, prefix: str, app: Any) -> None:
        """Serve the ASGI ``app`` under ``prefix`` (it sees the rest of the path)."""
        self._server.http.mounts.append((prefix, app))

    def http_on_stop(self, fn: Callable[[], None]) -> None:
        """``fn()`` when the HTTP listener starts to stop, before it waits for open responses:
        long-lived ones (event streams) end there instead of holding the shutdown up."""
        self._server.http.stop_hooks.append(fn)

    def http_lifespan(self, factory: Callable[[], Any]) -> None:
        """An async context manager factory entered before the HTTP listener serves and left after
        it stopped (an ASGI app's own lifespan is not run when it is mounted)."""
        self._server.http.lifespans.append(factory)

    def http_allowed_hosts_and_origins(self) -> tuple[list[str], list[str]]:
        """The Host and Origin values the listener accepts (known once it listens)."""
        return list(self._server.http.allowed_hosts), list(self._server.http.allowed_origins)

    def metrics_collector(self, fn: Callable[[MetricsOut], None]) -> None:
        """``fn(out)`` at each scrape of ``/metrics``: it adds this extension's families to ``out``
        (``out.counter``, ``out.gauge``, ``out.histogram``), read from counters the extension keeps
        as plain numbers (``Timings`` for durations), never updated per scrape. Name them
        ``pircd_<area>_...`` and list them in docs/operations.md."""
        self._server.metrics.collectors.append(fn)

    @property
    def http_base_url(self) -> str:
        """The URL clients reach the HTTP listener at (``http.public_url``, or the first listener)."""
        return self._server.http.base_url

    # accounts on HTTP: bearer tokens --------------------------------------

    async def verify_token(self, token: str, ip: str) -> Any:
        """The ``ircd.tokens.TokenIdentity`` (token_id, account, kind, name) a bearer token names;
        None when it names none (a failure, counted per credential, then per ``ip``); or
        ``TokenThrottled`` (retry_after, reason) when too many failures hold it back."""
        tokens = self._server.tokens
        return None if tokens is None else await tokens.verify(token, ip)

    async def counted_check(self, ip: str, check: Callable[[], Awaitable[T | None]]) -> T | TokenThrottled | None:
        """Run another credential check (an intro token, say) whose failure counts like a token
        naming nothing from ``ip``: its result, None for a failure, ``TokenThrottled`` for a
        failure from an address past its limit."""
        tokens = self._server.tokens
        return None if tokens is None else await tokens.counted(ip, check)

    def client_source(self, ip: str) -> str:
        """What an address counts as in per-address limits: an IPv4 address itself, an IPv6 /64."""
        return source_of(ip)

    def http_exempt(self, ip: str) -> bool:
        """Whether an HTTP client address is held to no per-address limit: loopback (with
        ``connections.exempt_loopback``) and the trusted proxies themselves, as at accept."""
        gate = self._server.http.gate
        return gate is not None and gate.exempt(ip)

    async def create_token(self, actor: str | None, account_folded: str, name: str | None = None) -> tuple[Any, str]:
        """A new bearer token for the account (``actor``: itself or its owner): (its
        ``ircd.store.tokens.TokenRow``, the token text, shown once; ``actor`` None: the operator,
        e.g. the agent host). Raises ``TokenRefused``."""
        return await self._tokens().create(actor, account_folded, name)

    async def list_tokens(self, actor: str | None, account_folded: str) -> list[Any]:
        """The account's ``TokenRow``s (``actor``: itself or its owner). Raises ``TokenRefused``."""
        return await self._tokens().list(actor, account_folded)

    async def revoke_token(self, actor: str | None, account_folded: str, name: str | None = None) -> int:
        """Revoke the account's token of that name (every one for None): refused from the next
        request on, and sessions holding it hear at once. How many. Raises ``TokenRefused``."""
        return await self._tokens().revoke(actor, account_folded, name)

    def _tokens(self) -> Any:
        tokens = self._server.tokens
        if tokens is None:
            raise TokenRefused("NO_SUCH_ACCOUNT", "This server has no account store")
        return tokens

    def hold_token(self, token_id: int) -> None:
        """A request or session uses this token: ``on_token_revoked`` hears if it is revoked."""
        if self._server.tokens is not None:
            self._server.tokens.hold(token_id)

    def release_token(self, token_id: int) -> None:
        if self._server.tokens is not None:
            self._server.tokens.release(token_id)

    def on_token_revoked(self, fn: Callable[[set[int]], None]) -> None:
        """``fn(ids)`` when held tokens are revoked (here, or by another process within a second)."""
        if self._server.tokens is not None:
            self._server.tokens.revoked_hooks.append(fn)

    # channels seen as an account (for transports without a connection) ------

    def member_check(self, fn: Callable[[str, Channel], bool]) -> None:
        """``fn(account, channel)`` True: the account is in the channel though no connection of it is."""
        self._server.member_checks.append(fn)

    def account_channels(self, account_folded: str) -> list[Any]:
        """``ircd.accountops.ChannelInfo`` of every channel the account may see, by name."""
        from ircd import accountops

        return accountops.visible_channels(self._server, account_folded)

    def account_find_channel(self, account_folded: str, name: str) -> Channel | None:
        """The channel if it exists for the account; None exactly as for a name nobody uses."""
        from ircd import accountops

        return accountops.find_channel(self._server, account_folded, name)

    def account_in_channel(self, account_folded: str, channel: Channel) -> bool:
        from ircd import accountops

        return accountops.is_member(self._server, account_folded, channel)

    def account_post(self, account_folded: str, display: str, channel: Channel, text: str,
                     command: str = "PRIVMSG") -> Relay | str:
        """Relay ``text`` to the channel as the account and store it (the caller checked membership).
        Returns a str, the reason, when the channel's modes, bans or mutes keep the account from
        speaking (the rules of a PRIVMSG: nothing is sent)."""
        from ircd import accountops

        try:
            return accountops.post(self._server, account_folded, display, channel, command, text)
        except accountops.CannotSend as exc:
            return str(exc)

    async def account_command(self, account_folded: str, name: str, verb: str,
                              params: list[str]) -> list[tuple[str, list[str]]] | None:
        """Run a channel command (JOIN, PART, TOPIC, INVITE, ...) as the account, with every rule
        it has over IRC: through its connection, or its always-on identity (made when it has
        none, so its memberships show in NAMES and WHO and last until it leaves). The lines the
        command answered, as (command, params), numerics without the nick; None when the account
        can have no identity (another client holds its nick, or always-on is off for it).
        ``IdentityElsewhere`` when its identity is a user of another node of a cluster: a
        command runs where the user is."""
        from ircd import accountops

        server = self._server
        holder = server.state.nick_holder(account_folded)
        if holder is not None and not server.is_here(holder):
            raise IdentityElsewhere(server.server_of(holder)[0])
        return await accountops.run_as(self._server, account_folded, name, verb, params)

    async def channel_history(self, channel: Channel, limit: int, before_id: int | None = None) -> list[Any]:
        """``ircd.store.HistoryRow`` of the channel's stored messages, newest ``limit`` before ``before_id``."""
        from ircd import accountops

        return await accountops.history(self._server, channel, limit, before_id)

    def on_startup(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._server.on_startup.append(fn)

    def on_shutdown(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._server.on_shutdown.append(fn)

    def on_ready(self, fn: Callable[[], None]) -> None:
        """``fn()`` once every listener is bound (``irc_address`` and ``http_base_url`` known)."""
        self._server.on_ready.append(fn)

    @property
    def irc_address(self) -> str | None:
        """``host:port`` of the first plain IRC listener once bound (None: none, or not yet)."""
        addresses = self._server.plain_addresses
        if not addresses:
            return None
        host, port = addresses[0]
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def config(self, model: type[M], section: str | None = None) -> M:
        """A config table of this extension, validated by ``model``: ``[<name>]``, or ``[<section>]``
        for a table of its own name. Calling it in ``setup`` declares the table: a table that no
        loaded extension declares there refuses the config (``serve``, ``check-config``, REHASH)."""
        table = section or self.name
        self.sections.add(table)
        data = self._server.config.extension_section(table)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            problems = [
                (".".join([table, *map(str, err["loc"])]), err["msg"]) for err in exc.errors()
            ]
            raise ConfigError(problems) from None

    # state ---------------------------------------------------------------

    @property
    def server_name(self) -> str:
        return self._server.name

    @property
    def database_path(self) -> str:
        """The database file the server uses (or would use: ``server.db``)."""
        store = self._server.store
        return str(store.path) if store is not None else self._server.config.server.db

    @property
    def database(self) -> Any:
        """The shared store (``ircd.store.Store``); None when the server runs without one."""
        return self._server.store

    def now(self) -> float:
        return self._server.clock()

    def server_time(self) -> str:
        return self._server.server_time()

    def new_id(self) -> int:
        return self._server.ids.next_int()

    def observe_id(self, ident: int) -> None:
        """An id already stored (found at start-up): new ids will be greater, even if the clock went back."""
        self._server.ids.observe(ident)

    def casefold(self, name: str) -> str:
        return self._server.casefold(name)

    def find_nick(self, nick: str) -> Client | None:
        return self._server.state.find_nick(nick)

    def find_channel(self, name: str) -> Channel | None:
        return self._server.state.find_channel(name)

    def channels(self) -> Iterable[Channel]:
        return self._server.state.all_channels()

    def clients_for_account(self, account_folded: str) -> list[Client]:
        """The registered connections logged in to an account (empty: the account is not visible)."""
        return list(self._server.state.account_clients(account_folded))

    def local_clients_for_account(self, account_folded: str) -> list[Client]:
        """The account's connections held by this process: on a node of a cluster, without
        the other nodes' users (which those nodes serve); alone, ``clients_for_account``."""
        server = self._server
        clients = server.state.account_clients(account_folded)
        if server.remote_users is None:
            return list(clients)
        return [c for c in clients if server.is_here(c)]

    # several nodes (docs/scaling.md) -------------------------------------

    @property
    def node(self) -> str | None:
        """This node's name in a cluster; None for a server on its own."""
        cluster = self._server.config.cluster
        return None if cluster is None else cluster.node

    def is_here(self, client: Client) -> bool:
        """``client`` is this process's, not a user of another node of a cluster."""
        return self._server.is_here(client)

    def on_node_message(self, kind: str, handler: Callable[[str, dict[str, Any]], None]) -> None:
        """``handler(node, data)`` gets what other nodes ``publish`` under ``kind`` (one
        extension per kind; never called without a cluster)."""
        handlers = self._server.cluster_handlers
        if kind in handlers:
            raise ValueError(f"node message kind {kind!r} is taken")
        handlers[kind] = handler

    def on_node_change(self, handler: Callable[[str, bool], None]) -> None:
        """``handler(node, up)``: a node joined the network (it has this node's users; tell
        it what it should know) or was given up (its clients are gone)."""
        self._server.cluster_peer_hooks.append(handler)

    def publish(self, kind: str, data: dict[str, Any], node: str | None = None) -> None:
        """Tell the other nodes (``node``: that one only). JSON-serialisable data; in order
        with this node's other changes and lines; nothing without a cluster."""
        replica = self._server.remote_users
        if replica is not None:
            replica.publish_ext(kind, data, node)

    def is_visible(self, account_folded: str) -> bool:
        return self._server.state.account_online(account_folded)

    def account_kind(self, account_folded: str) -> str | None:
        """'person', 'agent', or None when no such account exists (from the server's cache)."""
        accounts = self._server.accounts
        return None if accounts is None else accounts.names.get(account_folded)

    async def get_account(self, account_folded: str) -> Any:
        """The account row (name, folded, kind, owner, created_at, suspended), or None."""
        store = self._server.store
        return None if store is None else await store.get_account(account_folded)

    def on_accounts_changed(self, fn: Callable[[], Awaitable[None]]) -> None:
        """``await fn()`` after the server re-read its accounts (at start-up, after another process such
        as ``pircd account del`` changed them, and after ``delete_account``)."""
        if self._server.accounts is not None:
            self._server.accounts.changed_hooks.append(fn)

    async def delete_account(self, account_folded: str) -> bool:
        """Delete an account (and the agents it owns), close its connections, and tell every
        ``on_accounts_changed`` listener; False when there was no such account."""
        from ircd.store import accounts as rows

        store, accounts = self._server.store, self._server.accounts
        if store is None or accounts is None:
            return False
        deleted = await store.write(rows.delete_account, account_folded)
        await accounts.refresh()
        return bool(deleted)

    async def check_password(self, ip: str, name: str, password: str, mechanism: str) -> Any:
        """The account row when ``password`` is the account's, else the refusal text for people.
        The same check as SASL PLAIN and NickServ (``AccountService.check_password``): the same
        argon2 verification and the same login throttle, counted against ``ip``; ``mechanism``
        names the way in for the log (``portal``)."""
        accounts = self._server.accounts
        if accounts is None:
            return "Invalid account name or password"
        return await accounts.check_password(ip, name, password, mechanism)

    @property
    def registration_open(self) -> str | None:
        """How a client without an account makes one in-band: ``"open"`` (REGISTER / NickServ
        REGISTER), ``"email"`` (the same, with an email address to verify), or None when only the
        operator makes accounts (``accounts.registration`` off)."""
        accounts = self._server.config.accounts
        if not (accounts.enabled and accounts.registration):
            return None
        return "email" if accounts.email_required else "open"

    @property
    def min_password_length(self) -> int:
        """The shortest password a person may choose (``accounts.min_password_length``)."""
        return self._server.config.accounts.min_password_length

    async def set_password(self, account_folded: str, password: str) -> bool:
        """Set an account's password: the argon2 hash and the SCRAM keys derived as for
        ``pircd account passwd``, off the event loop; False when there is no such account."""
        accounts, store = self._server.accounts, self._server.store
        if accounts is None or store is None:
            return False
        hashed, keys = await accounts.make_credentials(password)
        return await store.set_password(account_folded, hashed, keys)

    async def set_suspended(self, account_folded: str, suspended: bool) -> bool:
        """Suspend an account (it cannot log in, its connections close, its tokens are refused)
        or let it back in, as ``pircd account suspend`` does; False when there is no such account."""
        from ircd.store import accounts as rows

        store, accounts = self._server.store, self._server.accounts
        if store is None or accounts is None:
            return False
        changed = await store.write(rows.set_suspended, account_folded, suspended)
        await accounts.refresh()  # closes a suspended account's connections; listeners hear
        return bool(changed)

    async def forget_channel(self, folded: str) -> None:
        """Delete what is stored of a channel: its registration and its history (the channel itself
        lives on while clients are in it)."""
        store = self._server.store
        if store is None:
            return
        store.delete_channel(folded)
        await store.prune_history((1 << 63) - 1, folded)

    async def list_accounts(self, owner: str | None = None) -> list[Any]:
        store = self._server.store
        return [] if store is None else await store.list_accounts(owner)

    async def create_account(self, name: str, password: str, *, kind: str, owner: str | None) -> Any:
        """Create an account (raises ``AccountExists``)."""
        accounts = self._server.accounts
        if accounts is None:
            raise RuntimeError("accounts are not enabled")
        account = await accounts.create(name, password, kind=kind, owner=owner)
        await accounts.refresh()  # on_accounts_changed listeners see it at once
        return account

    def valid_account_name(self, name: str) -> bool:
        from ircd.accountnames import valid_account_name

        return valid_account_name(name, self._server.config.limits.nicklen)

    def spawn(self, coro: Awaitable[Any]) -> Any:
        """Run a coroutine in the background; failures are logged."""
        return self._server.spawn(coro)

    def call_later(self, delay: float, fn: Callable[[], None]) -> Any:
        """Run ``fn`` after ``delay`` seconds on the event loop; returns a handle with cancel()."""
        return self._server.timers.call_later(delay, fn)

    def reply_buffer(self, client: Client, label: str | None = None) -> ReplyBuffer:
        return ReplyBuffer(self._server, client, label)

    # output --------------------------------------------------------------

    def send(self, client: Client, command: str, *params: str, source: str | None = None,
             tags: dict[str, str] | None = None) -> None:
        """One line to one client, stamped per its capabilities."""
        reply = ReplyBuffer(self._server, client)
        reply.send(command, *params, source=source, tags=tags)
        reply.flush()

    def deliver(self, account_or_nick: str, command: str, *params: str, source: str | None = None) -> int:
        """Send a line to every connection of an account (or to a nick); returns how many got it."""
        folded = self._server.casefold(account_or_nick)
        targets = self.clients_for_account(folded)
        if not targets:
            client = self._server.state.nick_holder(folded)
            targets = [client] if client is not None and client.registered and not client.closing else []
        for client in targets:
            self.send(client, command, *params, source=source)
        return len(targets)

    def flush(self) -> None:
        self._server.flush_all()

    def format_line(self, command: str, *params: str, source: str | None = None) -> bytes:
        return format_line(command, params, source)


def db_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """For an extension's CLI commands: the ``--config`` and ``--db`` options of pircd's own
    database commands (passed as ``config_path`` and ``db``; see ``open_database_sync``)."""
    from ircd.cli_accounts import with_db

    return with_db(fn)  # type: ignore[no-any-return]


def cli_fail(message: str) -> NoReturn:
    """For an extension's CLI commands: ``error: <message>`` on standard error and exit 1, as every
    pircd command fails."""
    from ircd.cli_accounts import _fail

    _fail(message)


def open_database_sync(config_path: str | None, db: str | None) -> tuple[Any, Callable[[str], str]]:
    """For an extension's CLI commands: a plain sqlite3 connection to the server's database
    (core migrations applied) and the server's casefold."""
    from ircd.cli_accounts import open_context

    ctx = open_context(config_path, db)
    return ctx.connect(), ctx.casefold


def extension_config_sync(config_path: str | None, name: str, model: type[M]) -> M:
    """For an extension's CLI commands: its section (``[<name>]``) of the configuration the server
    would use (``--config``, ``$PIRCD_CONFIG`` or ./pircd.toml; the defaults without one), validated."""
    from ircd.cli_accounts import open_context

    data = open_context(config_path, None).config.extension_section(name)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([(".".join([name, *map(str, e["loc"])]), e["msg"]) for e in exc.errors()]) from None


def get_account_sync(conn: Any, folded: str) -> Any:
    """For an extension's CLI commands: the account row (name, folded, kind, owner, ...) or None."""
    from ircd.store.accounts import get_account

    return get_account(conn, folded)


def account_kinds_sync(database: str) -> dict[str, str] | None:
    """For an extension's configuration checks, before the server starts: folded account name ->
    kind, read from the database (a SQLite file read-only, or PostgreSQL); None when there is no
    database, or no accounts table, or it cannot be read now (the server checks again at start-up)."""
    import os
    import sqlite3

    from ircd.store.db import connect_sync
    from ircd.store.dialect import is_url
    from ircd.store.errors import CANNOT_OPEN

    try:
        if is_url(database):
            conn: Any = connect_sync(database)
        elif os.path.isfile(database):
            conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        else:
            return None
    except CANNOT_OPEN:
        return None
    try:
        if not table_exists(conn, "accounts"):
            return None
        return dict(conn.execute("SELECT folded, kind FROM accounts").fetchall())
    except CANNOT_OPEN:
        return None
    finally:
        conn.close()


def extension_schema_tracks(names: list[str]) -> dict[str, int]:
    """The schema tracks of the named extensions that have tables (``ext.<name>.schema_tracks()``),
    with their newest versions, without setting the extensions up (for ``pircd restore``)."""
    tracks: dict[str, int] = {}
    for name in names:
        module = importlib.import_module(f"ext.{name}")
        tracks.update(getattr(module, "schema_tracks", dict)())
    return tracks


def extension_schema_migrations() -> dict[str, list[Any]]:
    """The schema tracks of every extension under ``ext/`` that has tables, with their steps
    (``ext.<name>.schema_migrations()``), without setting the extensions up (for ``pircd
    migrate-store``, which copies whatever tracks a database holds)."""
    import pkgutil

    ext = importlib.import_module("ext")
    tracks: dict[str, list[Any]] = {}
    for found in pkgutil.iter_modules(ext.__path__):
        module = importlib.import_module(f"ext.{found.name}")
        tracks.update(getattr(module, "schema_migrations", dict)())
    return tracks


def load_extensions(server: "Server") -> list[ExtensionAPI]:
    apis = []
    for name in server.config.server.extensions:
        module = importlib.import_module(f"ext.{name}")
        api = ExtensionAPI(server, name)
        module.setup(api)
        server.extensions.append(module)
        apis.append(api)
        log.info("extension loaded name=%s", name)
    declared = set().union(*(api.sections for api in apis))
    unknown = sorted(set(server.config.extensions) - declared)
    if unknown:
        raise ConfigError([(table, "unknown table (no enabled extension reads it)") for table in unknown])
    return apis
