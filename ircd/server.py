"""ServerState: the registries, the config and the extensions, driven by lines.

The network layer calls four things: ``connect`` when a socket is accepted,
``handle_line`` for each received line, ``disconnect`` when a socket goes
away and ``tick`` once a second. Everything else is reached from command
handlers. No I/O happens here: output goes to client outboxes, and the
network layer writes them out (``flush_all``) once per event-loop pass.

``handle_line`` returns None when the line is done, a float when flood
control wants the line retried after that many seconds, or an awaitable when
an async handler is still running; the caller must not feed that connection
another line until the awaitable is done, so a connection's lines are always
handled in order.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Final, Iterable

from ircd import caps as C
from ircd.caps import CapRegistry
from ircd.channel import Channel
from ircd.client import Client, Conn
from ircd.config import Config
from ircd.dispatch import CORE_COMMANDS, CommandContext, CommandSpec, CommandTable
from ircd.events import EventBus, Quit
from ircd.http import HttpRoutes
from ircd.metrics import Metrics, core_metrics
from ircd.proto import numerics as N
from ircd.proto.casemap import get_casefold
from ircd.proto.lines import (
    MAX_CLIENT_TAGS,
    LineError,
    Message,
    command_of,
    format_line,
    label_of,
    parse_line,
)
from ircd.proto.msgid import EPOCH_MS, SEQ_BITS, IdGenerator, format_id
from ircd.proto.timestamps import format_ms
from ircd.registry import Registry
from ircd.replies import Relay, ReplyBuffer
from ircd.store.errors import UNAVAILABLE_TEXT, StoreUnavailable
from ircd.timers import Timers, forget_idle
from ircd.visibility import Visibility

if TYPE_CHECKING:
    from ircd.accounts import AccountService, Refusal
    from ircd.history import History
    from ircd.store import Store

__all__ = ["Server"]

_ACTIVITY: Final = frozenset(("PRIVMSG", "NOTICE", "TAGMSG"))  # what counts as activity (WHOIS idle time)
_INVALID_UTF8 = "Message rejected, your message contained invalid UTF-8"
_FORBIDDEN_CHARACTER = "Message rejected, your message contained a CR or NUL character"
INPUT_TOO_LONG_TEXT = ("Input line was too long: at most 512 bytes with its CR LF, and 4094 bytes of client tags; "
                       "split the text into shorter lines")
_SWEEP_EVERY = 60.0  # seconds between sweeps of records that only matter inside a window
WRITE_AT = 65536  # the largest write high-water mark (asyncio's and uvloop's default)
_FULL_LOG_EVERY = 60.0  # seconds between two "Server is full" log lines

log = logging.getLogger("pircd")


@functools.lru_cache(maxsize=4096)  # asked at every connection, mostly for the same few addresses
def _is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return ip in ("", "unix")


class Server:
    def __init__(self, config: Config, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.config = config
        self.casefold = get_casefold(config.server.casemapping)
        self.registry = Registry(self.casefold, config.limits.whowas)
        self.caps = CapRegistry()
        self.commands = CommandTable()
        self._specs = self.commands.specs  # the verb -> spec dict, looked up for every line
        self.events = EventBus()
        self.visibility = Visibility()
        self.ids = IdGenerator(clock)
        # message_stamp, bound once: every direct message hands it to its Relay
        self.stamp: Callable[[], tuple[str, str]] = self.message_stamp
        self.timers = Timers(clock)
        # how background coroutines run: a task on the serving loop (set by ircd.net);
        # the test harness runs them to completion in place
        self.spawner: Callable[[Awaitable[Any]], Any] | None = None
        self.clients: set[Client] = set()
        self.monitors: dict[str, set[Client]] = {}
        # registered connections per logged-in account (folded): who is "visible"
        self.by_account: dict[str, set[Client]] = {}
        self.ip_counts: dict[str, int] = {}
        # connections accepted but not yet clients (a TLS handshake, mostly): per IP, and in
        # all. They count against max_per_ip and max_clients like clients do (see reserve).
        self.handshakes: dict[str, int] = {}
        self.handshaking = 0
        # the most clients the process's open-file limit allows (set by ircd.net at start-up)
        self.fd_client_cap: int | None = None
        self._full_since = 0.0  # "Server is full" is logged once per _FULL_LOG_EVERY
        self._full_refused = 0
        self.throttle: dict[str, deque[float]] = {}
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
        self.registered_count = 0  # registered clients, and those of them with +i (for LUSERS)
        self.invisible_count = 0
        self.oper_count = 0
        # counters for /metrics (ircd/metrics.py reads them at scrape time): plain ints, so the
        # per-line path pays one addition
        self.lines_in = 0
        self.lines_out = 0
        self.registrations = 0
        self.accepted = 0
        self.refused: dict[str, int] = {}  # connections refused at accept, by reason
        self.sendq_drops = 0
        self._client_seq = 0
        self._dirty: list[Client] = []
        self._dropped: list[Client] = []  # SendQ overflows waiting to be forgotten
        self._time_ms = -1
        self._time_str = ""
        self._flush_pending = False
        self._next_sweep = 0.0
        self.schedule: Callable[[Callable[[], None]], Any] = lambda fn: None
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
        from ircd import commands
        from ircd.commands import metadata

        commands.load()
        for spec in CORE_COMMANDS:
            self.commands.add(spec)
        metadata.install(self)

    # configuration -------------------------------------------------------

    def _apply_config(self, config: Config) -> None:
        self.config = config
        self.name = config.server.name
        self.sendq_limit = config.limits.sendq
        # An outbox past this goes to the socket before the end of the pass, and it is each
        # connection's write high-water mark: past it the client's next lines wait (see
        # Connection). A quarter of the SendQ: the transport holds at most about twice this
        # plus one reply before the pause takes effect, so a client that reads is not
        # closed for what it asked for, short of a single reply of about half the SendQ.
        self.write_at = min(self.sendq_limit // 4, WRITE_AT)
        # read for every received line: plain attributes, not lookups through the config models
        self.utf8only = config.server.utf8only
        self.flood_enabled = config.flood.enabled
        self.registry.whowas_limit = config.limits.whowas
        self.max_clients = config.connections.max_clients
        if self.fd_client_cap is not None and self.fd_client_cap < self.max_clients:
            self.max_clients = self.fd_client_cap
        self.motd = _read_motd(config)
        self._isupport_cache: list[str] | None = None
        self._isupport_lines: list[list[str]] | None = None
        # the welcome burst formatted once (ircd.commands.registration.WelcomeTemplates)
        self.welcome_templates: Any = None

    def rehash(self, config: Config) -> None:
        """Swap in a new config (REHASH, SIGHUP). Keys that clients or the database
        already depend on cannot change while the server runs."""
        for section, key in (("server", "casemapping"), ("server", "name"), ("server", "db")):
            old, new = getattr(getattr(self.config, section), key), getattr(getattr(config, section), key)
            if old != new:
                raise ValueError(f"{section}.{key} cannot change while the server runs (restart instead)")
        before = self._cap_snapshot()
        self._apply_config(config)
        self._announce_cap_changes(before)
        from ircd.events import Rehashed

        self.events.publish(Rehashed(config))

    def _cap_snapshot(self) -> dict[str, tuple[int, str]]:
        """Offered capabilities: name -> (bit, CAP LS 302 token)."""
        offered = self.caps.offered(self)
        tokens = self.caps.ls_tokens(self, 302)
        return {cap.name: (cap.bit, token) for cap, token in zip(offered, tokens)}

    def _announce_cap_changes(self, before: dict[str, tuple[int, str]]) -> None:
        """IRCv3 cap-notify: CAP DEL for capabilities no longer offered (they are also
        switched off), CAP NEW for new ones and for ones whose value changed."""
        after = self._cap_snapshot()
        removed = [name for name in before if name not in after]
        added = [name for name in after if before.get(name) != after[name]]
        if not removed and not added:
            return
        removed_bits = 0
        for name in removed:
            removed_bits |= before[name][0]
        for client in self.clients:
            if client.closing or not client.caps & C.CAP_NOTIFY:
                continue
            client.set_caps(client.caps & ~removed_bits)
            reply = ReplyBuffer(self, client)
            head = f":{self.name} CAP {client.nick}"
            for chunk in C.line_chunks(removed, head + " DEL", continued=False) if removed else ():
                reply.send("CAP", client.nick, "DEL", chunk)
            tokens = [after[n][1] if client.cap_version >= 302 else n for n in added]
            for chunk in C.line_chunks(tokens, head + " NEW", continued=False) if tokens else ():
                reply.send("CAP", client.nick, "NEW", chunk)
            reply.flush()

    def now(self) -> float:
        return self.clock()

    def sweep(self, now: float) -> None:
        """Once a minute (the tick calls this every second): forget the records that only
        matter inside a window, here and in ``sweep_hooks`` (the login throttle)."""
        if now < self._next_sweep:
            return
        self._next_sweep = now + _SWEEP_EVERY
        self.prune_throttle(now)
        for hook in self.sweep_hooks:
            hook(now)

    def prune_throttle(self, now: float) -> int:
        """Forget the IPs with no connection inside the throttle window (the
        record of every address that ever connected would otherwise stay);
        returns how many were dropped."""
        return forget_idle(self.throttle, now - self.config.connections.throttle_window)

    def next_client_id(self) -> int:
        self._client_seq += 1
        return self._client_seq

    def isupport_tokens(self) -> list[str]:
        if self._isupport_cache is None:
            from ircd.commands.registration import build_isupport

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

    def cap_clients(self, most: int) -> int:
        """The open-file limit lets the process serve at most ``most`` clients: ``max_clients``
        stays at or below it, across rehashes too. Returns the limit now in force."""
        self.fd_client_cap = max(1, most)
        self.max_clients = min(self.config.connections.max_clients, self.fd_client_cap)
        return self.max_clients

    def _refusal(self, ip: str) -> str | None:
        """Why a new connection from ``ip`` is refused, or None. Connections accepted and not
        yet clients (TLS handshakes) count like clients (``reserve``)."""
        limits = self.config.connections
        if len(self.clients) + self.handshaking >= self.max_clients:
            return "Server is full"
        if limits.exempt_loopback and _is_loopback(ip):
            return None
        if self.ip_counts.get(ip, 0) + self.handshakes.get(ip, 0) >= limits.max_per_ip:
            return "Too many connections from your IP address"
        now = self.now()
        times = self.throttle.setdefault(ip, deque())
        while times and times[0] <= now - limits.throttle_window:
            times.popleft()
        if len(times) >= limits.throttle_count:
            return "Too many connections too quickly; try again later"
        times.append(now)
        return None

    def _log_refusal(self, ip: str, refusal: str, when: str = "") -> None:
        self.refused[refusal] = self.refused.get(refusal, 0) + 1
        if refusal != "Server is full":
            log.info("connection refused ip=%s reason=%r%s", ip, refusal, when)
            return
        # a full server refuses every new connection: say so once per interval, with a count
        now = self.clock()
        self._full_refused += 1
        if now - self._full_since >= _FULL_LOG_EVERY:
            log.warning(
                "connection refused ip=%s reason=%r (%d refused since the last such line; %d connections, "
                "limit %d)",
                ip, refusal, self._full_refused, len(self.clients) + self.handshaking, self.max_clients,
            )
            self._full_since = now
            self._full_refused = 0

    def reserve(self, ip: str, *, tls: bool = False) -> bytes | None:
        """A connection was accepted from ``ip``: check the limits now, and hold its place until
        ``connect(..., reserved=True)`` or ``release``. For a TLS connection this is before its
        handshake, whose cost the limits bound. Returns the ``ERROR`` line when refused (the
        caller sends it on a plain connection and closes the socket: a TLS one cannot be told
        anything before its handshake), else None."""
        refusal = self._refusal(ip)
        if refusal is not None:
            self._log_refusal(ip, refusal, " (before the TLS handshake)" if tls else "")
            return format_line("ERROR", [f"Closing link: {ip} ({refusal})"])
        self.handshakes[ip] = self.handshakes.get(ip, 0) + 1
        self.handshaking += 1
        return None

    def release(self, ip: str) -> None:
        """A reserved connection became a client, or went away before (a failed or abandoned
        TLS handshake)."""
        count = self.handshakes.get(ip, 0) - 1
        if count > 0:
            self.handshakes[ip] = count
        else:
            self.handshakes.pop(ip, None)
        self.handshaking = max(0, self.handshaking - 1)

    def connect(
        self, conn: Conn, ip: str, *, tls: bool = False, port: int = 0, reserved: bool = False
    ) -> Client | None:
        """A new connection. Returns None (after telling it why) when limits refuse it.
        ``reserved``: its place was taken when it was accepted (``reserve``)."""
        if reserved:
            self.release(ip)  # the place held since the accept becomes the client's
        else:
            refusal = self._refusal(ip)
            if refusal is not None:
                self._log_refusal(ip, refusal)
                conn.write(format_line("ERROR", [f"Closing link: {ip} ({refusal})"]))
                conn.close()
                return None
        client = Client(self, conn, ip, tls=tls, port=port)
        self.clients.add(client)
        self.accepted += 1
        self.ip_counts[ip] = self.ip_counts.get(ip, 0) + 1
        log.info("connect id=%d ip=%s tls=%s", client.id, ip, tls)
        return client

    def handle_line(self, client: Client, raw: bytes) -> None | float | Awaitable[None]:
        if client.closing:
            return None
        self.lines_in += 1
        now = self.clock()
        client.last_read = now
        client.ping_sent = 0.0
        try:
            msg = parse_line(raw, utf8only=self.utf8only, max_tag_data=MAX_CLIENT_TAGS)
        except LineError as exc:
            return self._line_error(client, raw, exc.kind, now)
        if msg is None:
            return None
        command = msg.command
        spec = self._specs.get(command)
        if self.flood_enabled and (spec is None or spec.flood_cost):  # an unknown verb costs too
            delay = self._flood_delay(client, now)
            if delay > 0 and not _in_client_batch(client, msg):
                return delay
        tags = msg.tags
        label = tags.get("label") if tags is not None and client.caps & C.LABELED_RESPONSE else None
        if spec is None or not (client.registered and spec.open):
            if self._refused(spec, client, msg, label):
                return None
            assert spec is not None  # an unknown verb is always refused
        if command in _ACTIVITY and client.registered:
            client.last_active = now
        ctx = CommandContext(self, client, None, msg, label)
        try:
            result = spec.handler(ctx, msg)
        except Exception:
            self._handler_failed(ctx, raw)
            return None
        if result is not None:  # a coroutine: async handler, or a sync one that went async
            return self._finish_async(ctx, result, raw)  # type: ignore[arg-type]
        ctx.finish()
        return None

    def _refused(self, spec: CommandSpec | None, client: Client, msg: Message, label: str | None) -> bool:
        """The command gate: answer and return True when ``client`` may not run ``msg`` now.

        ``handle_line`` comes here only for an unknown verb, or when the client is
        not registered yet or the verb has a requirement (``CommandSpec.open``)."""
        params: tuple[str, ...]
        if spec is None:
            code, params = N.ERR_UNKNOWNCOMMAND, (msg.command, "Unknown command")
        elif not client.registered and not spec.pre_registration:
            code, params = N.ERR_NOTREGISTERED, ("You have not registered",)
        elif spec.oper and not client.is_oper:
            code, params = N.ERR_NOPRIVILEGES, ("Permission Denied- You're not an IRC operator",)
        elif len(msg.params) < spec.min_params:
            code, params = N.ERR_NEEDMOREPARAMS, (msg.command, "Not enough parameters")
        elif spec.requires_cap and not client.caps & spec.requires_cap:
            reply = ReplyBuffer(self, client, label)
            reply.fail(msg.command, "NEED_CAPABILITY", "This command needs a capability you have not enabled")
            reply.flush()
            return True
        else:
            return False  # the usual case: no reply buffer is made
        reply = ReplyBuffer(self, client, label)
        reply.numeric(code, *params)
        reply.flush()
        return True

    async def _finish_async(self, ctx: CommandContext, coro: Awaitable[None], raw: bytes) -> None:
        try:
            await coro
        except Exception:
            self._handler_failed(ctx, raw)
            return
        ctx.finish()
        self.flush_all()

    def _handler_failed(self, ctx: CommandContext, raw: bytes) -> None:
        reply = ReplyBuffer(self, ctx.client, ctx.label)
        if isinstance(sys.exc_info()[1], StoreUnavailable):  # said once by the store, not per command
            reply.fail(ctx.msg.command, "TEMPORARILY_UNAVAILABLE", UNAVAILABLE_TEXT)
        else:
            log.exception("handler error id=%d line=%r", ctx.client.id, _redact(raw))
            reply.fail(ctx.msg.command, "INTERNAL_ERROR", "The server could not process this command")
        reply.flush()

    def _reply_now(self, client: Client, code: str, *params: str) -> None:
        reply = ReplyBuffer(self, client)
        reply.numeric(code, *params)
        reply.flush()

    def _line_error(self, client: Client, raw: bytes, kind: str, now: float) -> float | None:
        """A line refused before dispatch. It costs flood tokens like any line (a float: retry
        it after that many seconds), then is answered with the line's label: 417 for a line
        or tags over the limits (and ``FAIL <verb> INPUT_TOO_LONG`` for standard-replies
        clients), ``FAIL <verb> INVALID_UTF8``, ``FAIL <verb> INVALID_CHARACTERS`` for a CR or
        NUL; a line with tags or a source and no command is ignored."""
        if self.flood_enabled:
            delay = self._flood_delay(client, now)
            if delay > 0:
                return delay
        self._refuse_line(client, raw, kind)
        return None

    def _refuse_line(self, client: Client, raw: bytes, kind: str) -> None:
        if kind == LineError.NO_COMMAND:
            return
        label = label_of(raw) if client.caps & C.LABELED_RESPONSE else None
        reply = ReplyBuffer(self, client, label)
        if kind == LineError.INPUT_TOO_LONG or kind == LineError.TAGS_TOO_LONG:
            reply.numeric(N.ERR_INPUTTOOLONG, "Input line was too long")
            if client.caps & C.STANDARD_REPLIES:
                reply.fail(command_of(raw), "INPUT_TOO_LONG", INPUT_TOO_LONG_TEXT)
        elif kind == LineError.INVALID_UTF8:
            reply.fail(command_of(raw), "INVALID_UTF8", _INVALID_UTF8)
        else:  # FORBIDDEN_CHARACTER
            reply.fail(command_of(raw), "INVALID_CHARACTERS", _FORBIDDEN_CHARACTER)
        reply.flush()

    def line_too_long(self, client: Client, raw: bytes, *, hold: bool = True) -> float | None:
        """The connection cut a line over the length limits (``raw``: the line, or the start of
        one with no end in sight). Answered like any refused line; with ``hold`` false (the rest
        of the line is being skipped, so it cannot be retried) the flood tokens are charged and
        the answer goes out at once."""
        if client.closing:
            return None
        self.lines_in += 1
        now = self.clock()
        client.last_read = now
        client.ping_sent = 0.0
        if not hold:
            if self.flood_enabled:
                self._flood_charge(client, now)
            self._refuse_line(client, raw, LineError.INPUT_TOO_LONG)
            return None
        return self._line_error(client, raw, LineError.INPUT_TOO_LONG, now)

    def _flood_delay(self, client: Client, now: float) -> float:
        flood = self.config.flood
        if flood.exempt_opers and "o" in client.modes:
            return 0.0
        tokens = client.flood_tokens + (now - client.flood_time) * flood.per_second
        if tokens > flood.burst:
            tokens = float(flood.burst)
        client.flood_time = now
        if tokens >= 1.0:
            client.flood_tokens = tokens - 1.0
            return 0.0
        client.flood_tokens = tokens
        return (1.0 - tokens) / flood.per_second

    def _flood_charge(self, client: Client, now: float) -> None:
        """Take a token for a line that cannot wait; the bucket may go below zero, and then
        the client's next lines wait until it has refilled."""
        flood = self.config.flood
        if flood.exempt_opers and "o" in client.modes:
            return
        tokens = client.flood_tokens + (now - client.flood_time) * flood.per_second
        client.flood_tokens = min(tokens, float(flood.burst)) - 1.0
        client.flood_time = now

    # output --------------------------------------------------------------

    def mark_dirty(self, client: Client) -> None:
        self._dirty.append(client)
        if not self._flush_pending:
            self._flush_pending = True
            self.schedule(self.flush_all)

    def flush_all(self) -> None:
        self._flush_pending = False
        dirty = self._dirty
        if dirty:
            self._dirty = []
            for client in dirty:  # every recipient of a fan-out, once per pass of up to 128 lines
                client.dirty = False
                if client.outbuf:
                    self.write_out(client)
        if self._dropped:
            dropped, self._dropped = self._dropped, []
            for client in dropped:
                self.forget(client, "SendQ exceeded")

    def write_out(self, client: Client) -> None:
        """Hand ``client``'s outbox to its socket.

        ``flush_all`` does this at the end of a pass, and a send does it at once
        when the outbox passes ``write_at`` (one large reply, many commands in one
        read). The SendQ bounds what the client has not taken: a client that reads
        takes the bytes from the socket (the kernel's buffer holds them meanwhile);
        what the socket could not take waits in the connection's buffer, and past
        the limit the client is closed. Safe in the middle of a fan-out loop.
        """
        out = client.outbuf
        if not out:
            return
        # an entry is one line, but for replies and batches (Client.send_lines): counting the line
        # ends of the bytes instead made a fan-out's delivered line cost half as much again
        lines = len(out)
        extra = client.extra_lines
        if extra:
            lines += extra
            client.extra_lines = 0
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()  # the list is kept for the next lines
        client.outlen = 0
        if client.closing:
            return
        conn = client.conn
        conn.write(data)
        self.lines_out += lines
        # Below the high-water mark (write_at <= sendq / 4) the SendQ cannot be exceeded,
        # so the socket is asked for its buffer size only past it.
        if conn.output_full and conn.buffered() > self.sendq_limit:
            self.sendq_exceeded(client)

    def sendq_exceeded(self, client: Client) -> None:
        """Close a client that does not read: its socket holds more than the SendQ.

        This runs inside a send, often in the middle of a fan-out loop over a
        channel's members or the client set, so the client is only closed here
        (no more output, ERROR written); removing it from channels and telling
        its peers waits for the next ``flush_all``.
        """
        if client.closing:
            return
        log.info("sendq exceeded id=%d nick=%s", client.id, client.nick)
        client.closing = True
        self.sendq_drops += 1
        self.lines_out += 1
        try:
            client.conn.write(format_line("ERROR", [f"Closing link: {client.host} (SendQ exceeded)"]))
            client.conn.close()
        except Exception:  # the socket may already be gone
            pass
        self._dropped.append(client)
        if not self._flush_pending:
            self._flush_pending = True
            self.schedule(self.flush_all)

    def send_numeric(self, client: Client, code: str, *params: str) -> None:
        """A numeric outside any command (timers, other clients' actions)."""
        self._reply_now(client, code, *params)

    def relay(self, recipients: Iterable[Client], relay: Relay, exclude: Client | None = None) -> None:
        """Append one formatted line to each recipient's outbox.

        This is the inner loop of every fan-out, so ``Client.send`` is inlined:
        per recipient, one list append of the shared line, the byte count, the
        dirty mark and the SendQ check.
        """
        body = relay.body
        body_len = len(body)
        limit = self.write_at
        dirty = self._dirty
        for client in recipients:
            if client is exclude or client.closing:
                continue
            if client.tag_profile:
                data = relay.for_client(client)
                pending = client.outlen + len(data)
            else:
                data = body
                pending = client.outlen + body_len
            client.outbuf.append(data)
            client.outlen = pending
            if not client.dirty:
                client.dirty = True
                dirty.append(client)
            if pending > limit:
                self.write_out(client)  # safe mid-loop: leaving channels waits for flush_all
        if dirty and not self._flush_pending:
            self._flush_pending = True
            self.schedule(self.flush_all)

    def common_peers(self, client: Client) -> set[Client]:
        """Everyone sharing at least one channel with ``client`` (not the client)."""
        peers: set[Client] = set()
        for channel in client.channels.values():
            peers.update(channel.members)
        peers.discard(client)
        return peers

    def peers_with_cap(self, client: Client, bit: int) -> set[Client]:
        """Who hears about a change to ``client`` that capability ``bit`` announces
        (AWAY, ACCOUNT, CHGHOST, SETNAME): channel peers with the capability, plus
        MONITOR watchers that have it and extended-monitor (IRCv3 extended-monitor).
        A set, so a watcher that also shares a channel gets the line once."""
        peers = {p for p in self.common_peers(client) if p.caps & bit}
        watchers = self.monitors.get(client.nick_folded)
        if watchers:
            want = bit | C.EXTENDED_MONITOR
            peers.update(w for w in watchers if w.caps & want == want and w is not client)
        return peers

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
        channel = self.registry.channels.get(self.casefold(name))
        if channel is None or viewer is None:
            return channel
        if viewer in channel.members or self.visibility.channel_exists_for(viewer, channel):
            return channel
        return None

    def create_channel(self, name: str) -> Channel:
        channel = Channel(name, self.casefold(name), int(self.clock()))
        self.registry.channels[channel.folded] = channel
        return channel

    def drop_channel_if_empty(self, channel: Channel) -> None:
        if not channel.members and channel.owner_account is None:
            from ircd.events import ChannelDestroyed

            if self.registry.channels.get(channel.folded) is channel:
                del self.registry.channels[channel.folded]
                if self.events.wants(ChannelDestroyed):
                    self.events.publish(ChannelDestroyed(channel))

    # monitor -------------------------------------------------------------

    def notify_monitors(
        self, client: Client, online: bool, nick_folded: str | None = None, nick: str | None = None
    ) -> None:
        """Tell MONITOR watchers that a nick came online (730) or went offline (731)."""
        watchers = self.monitors.get(nick_folded or client.nick_folded)
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

    # accounts ------------------------------------------------------------

    def account_attached(self, client: Client) -> None:
        """A registered client is now logged in to ``client.account_folded``."""
        if client.account_folded is not None and client.registered:
            self.by_account.setdefault(client.account_folded, set()).add(client)

    def account_detached(self, client: Client, folded: str | None) -> None:
        if folded is None:
            return
        clients = self.by_account.get(folded)
        if clients is not None:
            clients.discard(client)
            if not clients:
                del self.by_account[folded]

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
        self.lines_out += len(client.outbuf) + client.extra_lines + 1
        data = client.take_output() + format_line("ERROR", [f"Closing link: {client.host} ({reason})"])
        client.closing = True
        try:
            client.conn.write(data)
            client.conn.close()
        except Exception:  # the socket may already be gone
            pass
        self.forget(client, quit_message if quit_message is not None else reason)

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
        count = self.ip_counts.get(client.ip, 1) - 1
        if count > 0:
            self.ip_counts[client.ip] = count
        else:
            self.ip_counts.pop(client.ip, None)
        kept = False
        if client.registered:
            self.account_detached(client, client.account_folded)
            # another connection shares its nick, or it is always-on: the identity stays
            kept = (client.group is not None or client.account_folded is not None) and self.sessions.keep(client)
        if client.registered and not kept:
            self.registered_count -= 1
            if "i" in client.modes:
                self.invisible_count -= 1
            peers = self.common_peers(client)
            if peers:
                self.relay(peers, self.relay_from(client, "QUIT", quit_message))
            for channel in list(client.channels.values()):
                channel.remove_member(client)
                self.drop_channel_if_empty(channel)
            self.registry.remember(client, int(self.clock()))
            self.notify_monitors(client, online=False)
            if "o" in client.modes:
                self.oper_count -= 1
        # an unregistered client may hold a nick too (NICK before USER)
        if not kept:
            self.registry.remove_nick(client)
        if client.monitoring:
            for folded in client.monitoring:
                watchers = self.monitors.get(folded)
                if watchers is not None:
                    watchers.discard(client)
                    if not watchers:
                        del self.monitors[folded]
        log.info("disconnect id=%d nick=%s reason=%r", client.id, client.nick, quit_message)
        self.events.publish(Quit(client, quit_message))
        self.flush_all()

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
        self.flush_all()

    def shutdown_clients(self, reason: str) -> None:
        for client in list(self.clients):
            self.disconnect(client, reason)
        self.flush_all()

    def server_time(self) -> str:
        """The current time in server-time format (formatted at most once per millisecond)."""
        ms = int(self.clock() * 1000)  # truncated like the msgid's milliseconds
        if ms != self._time_ms:
            self._time_ms = ms
            self._time_str = format_ms(ms)
        return self._time_str


def _in_client_batch(client: Client, msg: Any) -> bool:
    """A message line of an open, still valid draft/multiline batch: the batch is one message,
    so its lines pass the flood budget (max-lines bounds them; any other verb still waits)."""
    if msg.tags is None or "batch" not in msg.tags or msg.command not in ("PRIVMSG", "NOTICE", "TAGMSG"):
        return False
    batch = client.ext_state("multiline")
    return batch is not None and not batch.failed


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


def _redact(raw: bytes) -> bytes:
    """Never log secrets: cut the parameters of commands that carry them."""
    head = raw.split(b" ", 4)
    verb_index = 1 if raw[:1] in (b"@", b":") else 0
    if len(head) > verb_index and head[verb_index].upper() in (
        b"PASS",
        b"OPER",
        b"AUTHENTICATE",
        b"REGISTER",
        b"IDENTIFY",
        b"VERIFY",
        b"NICKSERV",
        b"NS",
    ):
        return b" ".join(head[: verb_index + 1]) + b" <redacted>"
    if len(head) > verb_index + 1 and head[verb_index].upper() == b"PRIVMSG":
        if head[verb_index + 1].lower() in (b"nickserv", b"pircan"):
            return b" ".join(head[: verb_index + 2]) + b" <redacted>"
    return raw
