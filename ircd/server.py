"""Server: the composition root. It holds the config, the network's state
(``state``: ``ircd.state``), local delivery (``delivery``: ``ircd.delivery``),
the command table and the extensions' hooks, and ties them together.

The network layer calls four things: ``connect`` when a socket is accepted,
``intake.handle_line`` for each received line (``ircd.commands.intake``),
``disconnect`` when a socket goes away and ``tick`` once a second. Everything
else is reached from command handlers. No I/O happens here: output goes to
client outboxes, and the delivery layer writes them out (``flush_all``) once
per event-loop pass.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ircd.admission import Admission
from ircd.caps import CapRegistry
from ircd.commands.intake import Intake
from ircd.config import Config
from ircd.delivery.outbox import Delivery
from ircd.delivery.replies import Relay, ReplyBuffer
from ircd.dispatch import CORE_COMMANDS, CommandContext, CommandTable
from ircd.events import ChannelDestroyed, EventBus, Quit
from ircd.http import HttpRoutes
from ircd.metrics import Metrics, core_metrics
from ircd.proto import numerics as N
from ircd.proto.casemap import get_casefold
from ircd.proto.lines import format_line
from ircd.proto.msgid import EPOCH_MS, SEQ_BITS, IdGenerator, format_id
from ircd.proto.timestamps import format_ms
from ircd.state import LocalState
from ircd.state.channel import Channel
from ircd.state.client import Client, Conn
from ircd.store.errors import StoreUnavailable
from ircd.timers import Timers
from ircd.visibility import Visibility

if TYPE_CHECKING:
    from ircd.accounts import AccountService, Refusal
    from ircd.commands.welcome import WelcomeTemplates
    from ircd.history import History
    from ircd.store import Store

__all__ = ["Server"]

_SWEEP_EVERY = 60.0  # seconds between sweeps of records that only matter inside a window

log = logging.getLogger("pircd")


class Server:
    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.config = config
        self.casefold = get_casefold(config.server.casemapping)
        # the network: nicks, channels, accounts logged in, MONITOR, WHOWAS, LUSERS counts. Its one
        # implementation (a cluster node wraps it, ircd.state.cluster), named as such: in the compiled
        # build a call through the NetworkState interface is a method looked up by name, a call on
        # LocalState a direct one, and every command makes several
        self.state: LocalState = LocalState(self.casefold, config.limits.whowas)
        # this process's connections' outboxes: writes, fan-out, the SendQ
        self.delivery = Delivery(config.limits.sendq)
        self.delivery.on_dropped = self._forget_dropped
        self.caps = CapRegistry()
        self.commands = CommandTable()
        self.events = EventBus()
        self.visibility = Visibility()
        self.ids = IdGenerator(clock)
        # message_stamp, bound once: every direct message hands it to its Relay
        self.stamp: Callable[[], tuple[str, str]] = self.message_stamp
        self.timers = Timers(clock)
        # how background coroutines run: a task on the serving loop (set by ircd.net);
        # the test harness runs them to completion in place
        self.spawner: Callable[[Awaitable[Any]], Any] | None = None
        self.clients: set[Client] = set()  # this process's connections
        # a node of a cluster: what acts on users of other nodes (ircd.cluster.replica.Replica)
        self.remote_users: Any = None
        # extensions' messages between nodes: kind -> handler(node it came from, data)
        self.cluster_handlers: dict[str, Callable[[str, dict[str, Any]], None]] = {}
        # a node joined (True: it has this node's state now) or was given up (False)
        self.cluster_peer_hooks: list[Callable[[str, bool], None]] = []
        self.admission = Admission(config, clock, self.clients.__len__)
        self.isupport_extra: dict[str, str | None] = {}
        self.extensions: list[Any] = []
        self.store: "Store | None" = None
        self.accounts: "AccountService | None" = None
        self.tokens: Any = None  # ircd.tokens.TokenService, with the store
        from ircd.logins import LoginThrottle

        self.logins = LoginThrottle()  # password checks per source and target (SASL, NickServ, OPER)
        self.created_at = clock()
        self.created_str = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.created_at))
        self.max_clients_seen = 0
        self.max_local_seen = 0  # of this node's users (the same as max_clients_seen without a cluster)
        self.registrations = 0  # for /metrics (ircd/metrics.py reads it at scrape time)
        self._client_seq = 0
        self._time_ms = -1
        self._time_str = ""
        self._next_sweep = 0.0
        # ircd.net.connection.Arrivals, when the network layer serves: new connections' turns
        self.arrivals: Any = None
        self.on_startup: list[Callable[[], Awaitable[None]]] = []
        self.tick_hooks: list[Callable[[], None]] = []
        self.sweep_hooks: list[Callable[[float], None]] = []  # once a minute, with the clock's time
        self.on_shutdown: list[Callable[[], Awaitable[None]]] = []
        # after every listener is bound, the IRC and HTTP addresses known (extensions' on_ready)
        self.on_ready: list[Callable[[], None]] = []
        self.plain_addresses: list[tuple[str, int]] = []  # the bound plain IRC listeners (host, port)
        # Hooks for accounts and extensions: a registration check returns an
        # ircd.accounts.Refusal (answer, maybe disconnect) or None; a nick
        # check returns (numeric, text) to refuse a nick, or None.
        self.registration_checks: list[Callable[[Client], "Refusal | None"]] = []
        self.nick_checks: list[Callable[[Client, str, str], tuple[str, str] | None]] = []
        self.cap_change_hooks: list[Callable[[Client, int, int], None]] = []
        # join/invite checks return (numeric, text) to refuse; invite hooks observe.
        self.join_checks: list[Callable[[Client, str, Channel | None], tuple[str, str] | None]] = []
        self.invite_checks: list[Callable[[Client, Client, Channel], tuple[str, str] | None]] = []
        self.invite_hooks: list[Callable[[Client, Client, Channel], None]] = []
        # called when a JOIN creates a channel, before anyone is told (initial modes)
        self.channel_create_hooks: list[Callable[[Client, Channel], None]] = []
        # message checks see (ctx, target client or None, channel or None) and
        # return True when they refused the message (having replied themselves).
        self.config_path: str | None = None
        self.reload_config: Callable[[], None] | None = None
        self.help_topics: dict[str, list[str]] = {}
        # pseudo-clients (NickServ): folded nick -> coroutine function(ctx, text)
        self.services: dict[str, Callable[[CommandContext, str], Awaitable[None]]] = {}
        self.help_topics_footer: list[str] = []
        self.help_notes: dict[str, list[str]] = {}
        # (account, channel) -> True: the account is in the channel without a connection in it
        self.member_checks: list[Callable[[str, Channel], bool]] = []
        self.http = HttpRoutes()  # verb -> lines an extension adds to its HELP
        self.metrics = Metrics()  # the core's collector first, then extensions' (api.metrics_collector)
        self.metrics.collectors.append(core_metrics(self))
        self.whois_hooks: list[Callable[[Client, Client, ReplyBuffer], None]] = []
        # after a JOIN's own line and before its NAMES reply (MARKREAD on join)
        self.join_hooks: list[Callable[[Client, Channel, ReplyBuffer], None]] = []
        # in the registration burst after ISUPPORT (the metadata batch)
        self.welcome_hooks: list[Callable[[Client, ReplyBuffer], None]] = []
        # read-only METADATA keys of a user, from extensions (api.metadata_keys)
        self.metadata_providers: list[Callable[[Client], dict[str, str]]] = []
        self.history: "History | None" = None  # set by ircd.app.attach_store
        from ircd.readmarkers import ReadMarkers

        self.read_markers = ReadMarkers(self)
        from ircd.sessions import SessionManager

        self.sessions = SessionManager(self)  # connections sharing a nick; always-on identities
        # channel flag modes added by extensions: letter -> check(client, channel, adding)
        # returning a refusal text or None
        self.channel_flags: dict[str, Callable[[Client, Channel, bool], str | None]] = {}
        self.message_checks: list[Callable[[CommandContext, Client | None, Channel | None], bool]] = []
        self._apply_config(config)
        # functions, not modules, are imported here: with ircd.commands.metadata compiled as well, the
        # compiled build's ``from ircd import commands`` here gave None
        from ircd.commands import load as load_commands
        from ircd.commands.metadata import install as install_metadata

        load_commands()
        for spec in CORE_COMMANDS:
            self.commands.add(spec)
        install_metadata(self)
        self.intake = Intake(self)  # received lines: parsing, flood control, the command gate

    # configuration -------------------------------------------------------

    def _apply_config(self, config: Config) -> None:
        self.config = config
        self.name = config.server.name
        self.delivery.set_sendq(config.limits.sendq)
        self.admission.configure(config)
        # read for every received line: plain attributes, not lookups through the config models
        self.utf8only = config.server.utf8only
        self.flood_enabled = config.flood.enabled
        self.state.whowas_limit = config.limits.whowas
        # read for every connection, registration or JOIN: an attribute of a config model is read
        # through pydantic's __getattr__ hook, several times the cost of a plain attribute
        limits = config.limits
        self.nicklen = limits.nicklen
        self.userlen = limits.userlen
        self.realnamelen = limits.realnamelen
        self.channellen = limits.channellen
        self.channels_per_client = limits.channels_per_client
        self.flood_burst = float(config.flood.burst)
        self.password: str | None = config.server.password
        self.default_user_modes: str = config.server.default_user_modes
        self.motd = _read_motd(config)
        self._isupport_cache: list[str] | None = None
        self._isupport_lines: list[list[str]] | None = None
        # the welcome burst formatted once (ircd.commands.welcome.WelcomeTemplates)
        self.welcome_templates: "WelcomeTemplates | None" = None

    def rehash(self, config: Config) -> None:
        """Swap in a new config (REHASH, SIGHUP). Keys that clients or the database
        already depend on cannot change while the server runs."""
        for section, key in (("server", "casemapping"), ("server", "name"), ("server", "db")):
            old, new = getattr(getattr(self.config, section), key), getattr(getattr(config, section), key)
            if old != new:
                raise ValueError(f"{section}.{key} cannot change while the server runs (restart instead)")
        if config.cluster != self.config.cluster:  # the node's links are made at start-up
            raise ValueError("cluster cannot change while the server runs (restart instead)")
        from ircd.commands.cap import announce_cap_changes, cap_snapshot

        before = cap_snapshot(self)
        self._apply_config(config)
        announce_cap_changes(self, before)
        from ircd.events import Rehashed

        self.events.publish(Rehashed(config))

    def now(self) -> float:
        return self.clock()

    def sweep(self, now: float) -> None:
        """Once a minute (the tick calls this every second): forget the records that only
        matter inside a window, here and in ``sweep_hooks`` (the login throttle)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_EVERY
        self.admission.prune_throttle(now)
        for hook in self.sweep_hooks:
            hook(now)

    def next_client_id(self) -> int:
        self._client_seq += 1
        return self._client_seq

    def isupport_tokens(self) -> list[str]:
        if self._isupport_cache is None:
            from ircd.commands.welcome import build_isupport

            self._isupport_cache = build_isupport(self)
        return self._isupport_cache

    def isupport_lines(self) -> list[list[str]]:
        """The tokens grouped into 005 lines (sent at every registration: built once)."""
        if self._isupport_lines is None:
            from ircd.proto.isupport import split_tokens

            self._isupport_lines = split_tokens(self.isupport_tokens())
        return self._isupport_lines

    def invalidate_isupport(self) -> None:
        self._isupport_cache = None
        self._isupport_lines = None
        self.welcome_templates = None

    # connections ---------------------------------------------------------

    def reserve(self, ip: str, *, tls: bool = False) -> bytes | None:
        """A connection was accepted: ``Admission.reserve`` (the ERROR line when refused)."""
        return self.admission.reserve(ip, tls=tls)

    def release(self, ip: str) -> None:
        self.admission.release(ip)

    def connect(
        self, conn: Conn, ip: str, *, tls: bool = False, port: int = 0, reserved: bool = False
    ) -> Client | None:
        """A new connection. Returns None (after telling it why) when limits refuse it.
        ``reserved``: its place was taken when it was accepted (``reserve``)."""
        refused = self.admission.admit(ip, reserved=reserved)
        if refused is not None:
            conn.write(refused)
            conn.close()
            return None
        client = self.new_client(conn, ip, tls=tls, port=port)
        self.clients.add(client)
        log.info("connect id=%d ip=%s tls=%s", client.id, ip, tls)
        return client

    def new_client(self, conn: Conn, ip: str, *, tls: bool = False, port: int = 0) -> Client:
        """A ``Client`` whose output goes through this server's delivery layer."""
        return Client(
            self.delivery, conn, ip, self.next_client_id(), self.clock(), self.flood_burst,
            tls=tls, port=port,
        )

    def handle_line(self, client: Client, raw: bytes) -> None | float | Awaitable[None]:
        """``Intake.handle_line`` (the network layer calls the intake itself)."""
        return self.intake.handle_line(client, raw)

    def flush_all(self) -> None:
        """Write every outbox that has lines (``Delivery.flush_all``)."""
        self.delivery.flush_all()

    def _forget_dropped(self, client: Client) -> None:
        self.forget(client, "SendQ exceeded")

    # output --------------------------------------------------------------

    def send_numeric(self, client: Client, code: str, *params: str) -> None:
        """A numeric outside any command (timers, other clients' actions)."""
        reply = ReplyBuffer(self, client)
        reply.numeric(code, *params)
        reply.flush()

    def new_msgid(self) -> str:
        return self.ids.next()

    def message_stamp(self) -> tuple[str, str]:
        """A new msgid and the server-time of the very millisecond it was made: one clock
        reading for both, so a ``timestamp=`` reference (CHATHISTORY) names exactly the
        ids of that millisecond."""
        ident = self.ids.next_int()
        ms = (ident >> SEQ_BITS) + EPOCH_MS  # id_time_ms, inlined: this runs for every message
        if ms != self._time_ms:
            self._time_ms = ms
            self._time_str = format_ms(ms)
        return format_id(ident), self._time_str

    def relay_from(self, client: Client, command: str, *params: str, msgid: bool = False) -> Relay:
        return self.relay_from_prefix(client.prefix, client, command, *params, msgid=msgid)

    def relay_from_prefix(
        self, prefix: str, client: Client, command: str, *params: str, msgid: bool = False
    ) -> Relay:
        ident, time = self.message_stamp() if msgid else (None, self.server_time())
        return Relay(prefix, command, list(params), time=time, msgid=ident, account=client.account)

    # channels ------------------------------------------------------------

    def find_channel(self, name: str, viewer: Client | None = None) -> Channel | None:
        """The channel by name, or None when it does not exist for ``viewer``."""
        channel = self.state.channel(self.casefold(name))
        if channel is None or viewer is None:
            return channel
        if viewer in channel.members or self.visibility.channel_exists_for(viewer, channel):
            return channel
        return None

    def drop_channel_if_empty(self, channel: Channel) -> None:
        if not channel.members and channel.owner_account is None:
            if self.state.remove_channel(channel):
                if self.events.wants(ChannelDestroyed):
                    self.events.publish(ChannelDestroyed(channel))

    # monitor -------------------------------------------------------------

    def notify_monitors(
        self, client: Client, online: bool, nick_folded: str | None = None, nick: str | None = None
    ) -> None:
        """Tell MONITOR watchers that a nick came online (730) or went offline (731)."""
        watchers = self.state.watchers(nick_folded or client.nick_folded)
        if not watchers:
            return
        code, param = (N.RPL_MONONLINE, client.prefix) if online else (N.RPL_MONOFFLINE, nick or client.nick)
        for watcher in watchers:
            if watcher is not client:
                self.send_numeric(watcher, code, param)

    def spawn(self, coro: Awaitable[Any]) -> Any:
        """Run a coroutine in the background (its exceptions are logged)."""
        if self.spawner is not None:
            return self.spawner(_logged(coro))
        import asyncio

        return asyncio.get_running_loop().create_task(_logged(coro))

    # leaving -------------------------------------------------------------

    def disconnect(self, client: Client, reason: str, *, quit_message: str | None = None) -> None:
        """Close a client: ERROR to it, QUIT to its peers, and forget it.

        ``reason`` goes into the ERROR line; ``quit_message`` (default: the
        reason) is what channel peers see.
        """
        if client.detached:  # an always-on identity without a connection (KILL, account gone)
            self.sessions.drop(client, quit_message if quit_message is not None else reason)
            return
        if client.closing:
            return
        if self.remote_users is not None and client not in self.clients:  # a user of another node
            self.remote_users.disconnect(client, reason, quit_message)
            return
        self.delivery.close(client, format_line("ERROR", [f"Closing link: {client.host} ({reason})"]))
        self.forget(client, quit_message if quit_message is not None else reason)

    def server_of(self, client: Client) -> tuple[str, str]:
        """The name and description of the server ``client`` is on (WHOIS): this one, or on a
        node of a cluster the node holding its connection."""
        if self.remote_users is not None and not self.is_here(client):
            found: tuple[str, str] | None = self.remote_users.server_of(client)
            if found is not None:
                return found
        return self.name, self.config.server.description

    def is_here(self, client: Client) -> bool:
        """Whether ``client`` is this process's (a connection, or an always-on identity), rather
        than a user of another node of a cluster (``ircd.cluster``)."""
        return self.remote_users is None or client in self.clients or client.detached

    def connection_lost(self, client: Client) -> None:
        """The socket closed under us (peer hung up, reset)."""
        if client.closing:
            return
        client.closing = True
        self.forget(client, "Connection closed")

    def forget(self, client: Client, quit_message: str) -> None:
        if client not in self.clients:
            return
        self.clients.discard(client)
        self.admission.left(client.ip)
        state = self.state
        kept = False
        if client.registered:
            state.account_detached(client, client.account_folded)
            # another connection shares its nick, or it is always-on: the identity stays
            kept = (client.group is not None or client.account_folded is not None) and self.sessions.keep(client)
        if client.registered and not kept:
            state.count_user(client, -1)
            peers = state.common_peers(client)
            if peers:
                self.delivery.relay(peers, self.relay_from(client, "QUIT", quit_message))
            for channel in list(client.channels.values()):
                channel.remove_member(client)
                self.drop_channel_if_empty(channel)
            state.remember(client, int(self.clock()))
            self.notify_monitors(client, online=False)
        # an unregistered client may hold a nick too (NICK before USER)
        if not kept:
            state.remove_nick(client)
        if client.monitoring:
            state.unwatch_all(client, client.monitoring)
        log.info("disconnect id=%d nick=%s reason=%r", client.id, client.nick, quit_message)
        self.events.publish(Quit(client, quit_message))
        self.delivery.flush_all()

    # timers --------------------------------------------------------------

    def tick(self) -> None:
        """Once a second: registration and ping timeouts; once a minute, the throttle sweep."""
        now = self.clock()
        timeouts = self.config.timeouts
        expired: list[tuple[Client, str]] = []
        ping = format_line("PING", [self.name])
        for client in self.clients:
            if client.closing:
                continue
            if not client.registered:
                if now - client.signon > timeouts.registration:
                    expired.append((client, "Registration timed out"))
                continue
            if client.ping_sent:
                if now - client.ping_sent > timeouts.ping_timeout:
                    secs = int(now - client.last_read)
                    expired.append((client, f"Ping timeout: {secs} seconds"))
            elif now - client.last_read > timeouts.ping_interval:
                client.ping_sent = now
                client.send(ping)
        for client, reason in expired:
            self.disconnect(client, reason)
        self.sweep(now)
        for hook in self.tick_hooks:
            hook()
        self.delivery.flush_all()

    def shutdown_clients(self, reason: str) -> None:
        for client in list(self.clients):
            self.disconnect(client, reason)
        self.delivery.flush_all()

    def server_time(self) -> str:
        """The current time in server-time format (formatted at most once per millisecond)."""
        ms = int(self.clock() * 1000)  # truncated like the msgid's milliseconds
        if ms != self._time_ms:
            self._time_ms = ms
            self._time_str = format_ms(ms)
        return self._time_str


def _read_motd(config: Config) -> list[str] | None:
    cfg = config.server
    if cfg.motd_file:
        try:
            with open(cfg.motd_file, encoding="utf-8") as fh:
                return fh.read().splitlines()
        except OSError as exc:
            log.warning("cannot read server.motd_file %s: %s", cfg.motd_file, exc.strerror)
            return None
    return cfg.motd.splitlines() if cfg.motd else None


async def _logged(coro: Awaitable[Any]) -> Any:
    try:
        return await coro
    except StoreUnavailable:  # the database went away (said once by the store); the next run retries
        return None
    except Exception:
        log.exception("background task failed")
        return None
