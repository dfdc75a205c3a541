"""Configuration: frozen pydantic models loaded from TOML.

A config is one immutable object; REHASH builds a new one and swaps it in
whole. Every key is documented in ``conf/pircd.toml`` and
``docs/configuration.md``. Tables that are not core sections belong to
extensions, which declare them (``api.config``: ``[pircan]``) and validate them with
their own models; a table that no enabled extension declares refuses the config.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["CONFIG_ENV", "Config", "ConfigError", "find_config", "load", "parse_hostport"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def parse_hostport(text: str) -> tuple[str, int]:
    """``127.0.0.1:6667``, ``[::1]:6667`` or ``:6667`` (all interfaces)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"{text!r} is not HOST:PORT")
    host = host.strip("[]")
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"{text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"{text!r}: port out of range")
    return host, number


class ServerSection(_Section):
    name: str = "irc.pircd.local"
    network: str = "pircd"
    description: str = "pircd IRC server"
    listen: list[str] = ["127.0.0.1:6667"]
    tls_listen: list[str] = []
    tls_cert: str | None = None
    tls_key: str | None = None
    # Clients may present certificates issued by this CA (for SASL EXTERNAL);
    # the key is read only by `pircd account issue-cert`.
    tls_client_ca: str | None = None
    tls_client_ca_key: str | None = None
    db: str = "pircd.db"
    password: str | None = None
    casemapping: Literal["ascii", "rfc1459"] = "rfc1459"
    motd: str = "Welcome to pircd."
    motd_file: str | None = None
    extensions: list[str] = ["pircan"]
    default_user_modes: str = ""
    utf8only: bool = True
    # The name the built-in services (accounts, NickServ) go by in LINKS and in WHOIS NickServ,
    # as if they were a server linked to this one; unset: "services." before ``name``.
    services_name: str | None = None

    @field_validator("listen", "tls_listen")
    @classmethod
    def _check_addresses(cls, value: list[str]) -> list[str]:
        for item in value:
            parse_hostport(item)
        return value

    @field_validator("name", "services_name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and (not value or " " in value or "." not in value):
            raise ValueError("server name must contain a dot and no spaces")
        return value

    @model_validator(mode="after")
    def _check_tls(self) -> ServerSection:
        if self.tls_listen and not (self.tls_cert and self.tls_key):
            raise ValueError("tls_listen needs tls_cert and tls_key")
        if self.services_name is not None and self.services_name.lower() == self.name.lower():
            raise ValueError("services_name must differ from name")
        return self

    @property
    def services(self) -> str:
        """The services' server name: ``services_name``, or ``services.<name>``."""
        return self.services_name or "services." + self.name


class AdminSection(_Section):
    location1: str = "A pircd server"
    location2: str = "Self-hosted"
    email: str = "admin@localhost"


class LimitsSection(_Section):
    nicklen: int = Field(default=32, ge=9, le=64)
    channellen: int = Field(default=64, ge=10, le=200)
    topiclen: int = Field(default=390, ge=1, le=390)
    kicklen: int = Field(default=390, ge=1, le=390)
    awaylen: int = Field(default=390, ge=1, le=390)
    userlen: int = Field(default=18, ge=1, le=64)
    realnamelen: int = Field(default=150, ge=1, le=390)
    channels_per_client: int = Field(default=100, ge=1)
    list_entries: int = Field(default=100, ge=1, description="entries per ban/exception/invite list")
    monitor: int = Field(default=100, ge=0)
    read_markers: int = Field(default=1000, ge=1, description="MARKREAD targets one account (or guest) keeps")
    targets: int = Field(default=4, ge=1, description="targets per PRIVMSG/NOTICE/TAGMSG, KICK nicks, NAMES channels")
    modes_per_line: int = Field(default=6, ge=1)
    whowas: int = Field(default=100, ge=0)
    sendq: int = Field(
        default=262144, ge=4096, description="bytes queued for one client before it is dropped"
    )
    multiline_max_bytes: int = Field(default=4096, ge=512, le=65536, description="draft/multiline max-bytes")
    multiline_max_lines: int = Field(default=100, ge=2, le=1000, description="draft/multiline max-lines")


class TimeoutsSection(_Section):
    registration: float = Field(default=60.0, gt=0)
    ping_interval: float = Field(default=120.0, gt=0, description="idle seconds before the server sends PING")
    ping_timeout: float = Field(default=60.0, gt=0, description="seconds to answer that PING")


class FloodSection(_Section):
    enabled: bool = True
    burst: int = Field(default=16, ge=1, description="commands a client may send at once")
    per_second: float = Field(default=4.0, gt=0, description="sustained commands per second after the burst")
    exempt_opers: bool = True


class ConnectionsSection(_Section):
    max_per_ip: int = Field(default=16, ge=1)
    throttle_count: int = Field(default=32, ge=1, description="new connections per IP per window")
    throttle_window: float = Field(default=60.0, gt=0)
    exempt_loopback: bool = True
    max_clients: int = Field(default=100000, ge=1)


class LogSection(_Section):
    format: Literal["plain", "json"] = "plain"
    level: Literal["debug", "info", "warning", "error"] = "info"


class StorageSection(_Section):
    # "full": every acknowledged write survives a power loss (fsync per group commit);
    # "normal": survives a crash of the pircd process (kill -9), not of the OS; "off": tests only.
    durability: Literal["full", "normal", "off"] = "full"


class AccountsSection(_Section):
    enabled: bool = True
    require_sasl: bool = False
    require_sasl_exempt_loopback: bool = False
    nick_protection: bool = True
    registration: bool = False
    registration_before_connect: bool = True
    min_password_length: int = Field(default=8, ge=1, le=512)
    login_attempts: int = Field(
        default=5, ge=1, description="failed logins per account from one source per window"
    )
    login_ip_attempts: int = Field(default=20, ge=1, description="failed logins from one source per window")
    login_account_attempts: int = Field(
        default=10, ge=1, description="failed logins per account per window from sources new to it"
    )
    login_window: float = Field(default=60.0, gt=0)
    agents_per_owner: int = Field(default=50, ge=1, le=100000, description="agent accounts one person may own")
    password_threads: int = Field(default=1, ge=1, le=64)
    argon2_time_cost: int = Field(default=2, ge=1, le=20)
    argon2_memory_kib: int = Field(default=19456, ge=8192, le=4194304)
    argon2_parallelism: int = Field(default=1, ge=1, le=16)
    scram_iterations: int = Field(default=4096, ge=4096)
    # Connections logged in to one account may share its nick ("persons": person accounts; an agent's
    # new connection takes its nick over, so an agent has one connection at a time); always-on
    # identities keep their nick and channels while no connection is there ("agents": agent accounts).
    multiclient: Literal["off", "persons", "all"] = "persons"
    always_on: Literal["off", "agents", "all"] = "agents"
    # REGISTER with a verified email address (IRCv3 account-registration: REGISTER, then VERIFY
    # with a code sent by mail); the code goes out through email_command or email_smtp.
    email_required: bool = False
    email_code_lifetime: float = Field(default=3600.0, ge=60, le=604800, description="seconds a code stays valid")
    email_codes_per_hour: int = Field(default=5, ge=1, description="codes sent for one source address, and for one email address, per hour")
    email_from: str = "pircd@localhost"
    email_command: list[str] = []
    email_smtp: str | None = None
    email_smtp_tls: Literal["starttls", "tls", "none"] = "starttls"
    email_smtp_username: str | None = None
    email_smtp_password: str | None = None

    @field_validator("email_smtp")
    @classmethod
    def _check_smtp(cls, value: str | None) -> str | None:
        if value is not None:
            parse_hostport(value)
        return value

    @model_validator(mode="after")
    def _check_consistent(self) -> "AccountsSection":
        if self.email_required and not (self.email_command or self.email_smtp):
            raise ValueError("email_required needs email_command or email_smtp to send the codes")
        if self.email_command and self.email_smtp:
            raise ValueError("set email_command or email_smtp, not both")
        if self.require_sasl and not self.enabled:
            raise ValueError("require_sasl needs enabled = true (nobody could log in)")
        if self.login_account_attempts < self.login_attempts:
            # otherwise one source's failures would lock the account for every new source
            raise ValueError("login_account_attempts must be at least login_attempts")
        return self


class HistorySection(_Section):
    # Channel messages (and direct messages between logged-in accounts) are stored
    # and served through IRCv3 CHATHISTORY. Needs the store (server.db).
    enabled: bool = True
    direct_messages: bool = True
    retention_days: float = Field(default=0, ge=0, description="delete older history; 0 keeps everything")
    max_query: int = Field(
        default=100, ge=1, le=1000, description="lines per CHATHISTORY (ISUPPORT CHATHISTORY)"
    )
    flush_interval: float = Field(
        default=0.05, gt=0, le=10, description="seconds lines wait in memory at most"
    )
    flush_lines: int = Field(default=500, ge=1, description="buffered lines that trigger a write at once")


class ChannelsSection(_Section):
    # A channel created by a logged-in account is registered to it (owner ~, kept across restarts).
    registration: bool = True
    registered_per_account: int = Field(
        default=100, ge=1, description="registered channels one account may own; more are not registered"
    )


class MetadataSection(_Section):
    # IRCv3 draft/metadata-2 and draft/metadata-3: METADATA keys on users and channels, in memory.
    enabled: bool = True
    max_subs: int = Field(default=100, ge=1, le=1000, description="keys one client may subscribe to")
    max_keys: int = Field(default=100, ge=1, le=1000, description="keys set on one user or channel")
    max_value_bytes: int = Field(default=300, ge=1, le=300, description="bytes of one value")


class HttpSection(_Section):
    # The one HTTP listener (MCP at /mcp, and the other HTTP transports), in the same
    # process and event loop as IRC. TLS uses server.tls_cert and server.tls_key.
    enabled: bool = True
    listen: list[str] = ["127.0.0.1:6680"]
    tls_listen: list[str] = []
    # The address clients use to reach the listener (behind a proxy, or a name), for links
    # and for the Host/Origin check; None: taken from the first listener.
    public_url: str | None = None
    # Host headers accepted besides the listeners' own addresses and public_url's host
    # (a check against DNS rebinding); "*" accepts any.
    allowed_hosts: list[str] = []
    # Origin headers accepted from browsers besides the listeners' own and public_url's.
    allowed_origins: list[str] = []
    max_body_bytes: int = Field(default=1_048_576, ge=65_536, le=67_108_864, description="largest request body")
    max_connections: int = Field(default=1000, ge=1, description="HTTP connections at once")
    # Per address (an IPv4 address, an IPv6 /64) at accept, except loopback when
    # connections.exempt_loopback and the trusted proxies: connections at once (and never
    # more than half of max_connections), and new connections per connections.throttle_window.
    max_per_ip: int = Field(default=64, ge=1, description="HTTP connections at once from one address")
    throttle_count: int = Field(
        default=600, ge=1, description="new HTTP connections from one address per connections.throttle_window"
    )
    head_timeout: float = Field(default=10.0, gt=0, le=600, description="seconds for a complete request head")
    body_timeout: float = Field(default=30.0, gt=0, le=3600, description="seconds for a complete request body")
    # Reverse proxies (addresses or networks) whose Forwarded / X-Forwarded-For header names the
    # client: behind one, every client would otherwise have the proxy's address.
    trusted_proxies: list[str] = []
    # IRC over WebSocket (IRCv3): a WebSocket request for this path is an IRC connection; "" turns it off.
    websocket_path: str = "/"
    # GET /metrics (Prometheus) answers loopback clients, and the bearer tokens of these accounts
    # (`pircd token add NAME`) from anywhere else.
    metrics_accounts: list[str] = []

    @field_validator("listen", "tls_listen")
    @classmethod
    def _check_addresses(cls, value: list[str]) -> list[str]:
        for item in value:
            parse_hostport(item)
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _check_proxies(cls, value: list[str]) -> list[str]:
        import ipaddress

        for item in value:
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise ValueError(f"trusted_proxies: {item!r} is not an address or a network") from None
        return value

    @field_validator("websocket_path")
    @classmethod
    def _check_ws_path(cls, value: str) -> str:
        if value and not value.startswith("/"):
            raise ValueError('websocket_path must start with "/" (or be "" for no WebSocket)')
        return value

    @field_validator("public_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("public_url must start with http:// or https://")
        return value.rstrip("/") if value else value


class OperBlock(_Section):
    name: str
    password: str = Field(description="an argon2 hash made with `pircd hash-password`")
    hostmask: str = "*"

    @field_validator("password")
    @classmethod
    def _check_hash(cls, value: str) -> str:
        from argon2 import extract_parameters
        from argon2.exceptions import InvalidHashError

        try:
            extract_parameters(value)
        except (InvalidHashError, ValueError):
            raise ValueError("not an argon2 hash (a plain-text password never matches); "
                             "make one with `pircd hash-password`") from None
        return value


class ClusterSection(_Section):
    """Several pircd processes as one network (docs/scaling.md): this node's name, the NATS
    servers the nodes talk through, and the network's name on them. Needs PostgreSQL
    (``ircd.app.check_files``): the nodes share one database."""

    node: str = Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")  # a NATS subject token: no dots, spaces or wildcards
    nats: list[str] = Field(min_length=1)
    network: str = Field(default="pircd", pattern=r"^[A-Za-z0-9_-]{1,32}$")

    @field_validator("nats")
    @classmethod
    def _check_nats(cls, value: list[str]) -> list[str]:
        for url in value:
            if not url.startswith(("nats://", "tls://")) or not url.split("://", 1)[1]:
                raise ValueError(f"{url!r} is not a nats://HOST:PORT or tls://HOST:PORT URL")
        return value


def _core_sections() -> set[str]:
    return {"server", "admin", "limits", "timeouts", "flood", "connections", "log", "opers", "storage",
            "accounts", "channels", "history", "http", "metadata", "cluster"}


class Config(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSection = ServerSection()
    admin: AdminSection = AdminSection()
    limits: LimitsSection = LimitsSection()
    timeouts: TimeoutsSection = TimeoutsSection()
    flood: FloodSection = FloodSection()
    connections: ConnectionsSection = ConnectionsSection()
    log: LogSection = LogSection()
    storage: StorageSection = StorageSection()
    accounts: AccountsSection = AccountsSection()
    channels: ChannelsSection = ChannelsSection()
    history: HistorySection = HistorySection()
    http: HttpSection = HttpSection()
    metadata: MetadataSection = MetadataSection()
    cluster: ClusterSection | None = None  # None: one node, exactly as without clustering
    opers: list[OperBlock] = []
    extensions: dict[str, dict[str, Any]] = {}

    def extension_section(self, name: str) -> dict[str, Any]:
        return self.extensions.get(name, {})


class ConfigError(Exception):
    """A config that cannot be used; ``problems`` lists (key, message) pairs."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))
        self.problems = problems


def from_dict(data: dict[str, Any]) -> Config:
    core = {k: v for k, v in data.items() if k in _core_sections()}
    extra = {k: v for k, v in data.items() if k not in _core_sections()}
    for key, value in extra.items():
        if not isinstance(value, dict):
            raise ConfigError([(key, "unknown key (extension sections must be tables)")])
    core["extensions"] = extra
    try:
        return Config.model_validate(core)
    except ValidationError as exc:
        raise ConfigError(_problems(exc)) from None


def _problems(exc: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in err["loc"]), err["msg"]) for err in exc.errors()]


def load(path: str | Path) -> Config:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([(str(path), f"cannot read: {exc.strerror}")]) from None
    except UnicodeDecodeError as exc:  # TOML files are UTF-8 (TOML v1.0.0, "Spec")
        raise ConfigError([(str(path), f"not UTF-8 (byte {exc.start}: {exc.object[exc.start]:#04x})")]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([(str(path), f"not valid TOML: {exc}")]) from None
    return from_dict(data)


def with_overrides(config: Config, **sections: dict[str, Any]) -> Config:
    """A copy of ``config`` with some keys of some sections replaced (CLI flags)."""
    data = config.model_dump()
    for section, values in sections.items():
        data[section].update(values)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc)) from None


# The environment variable naming the config file when no --config is given.
CONFIG_ENV = "PIRCD_CONFIG"


def find_config(path: str | None) -> str | None:
    """The config file a command uses: ``path`` (``--config``), else ``$PIRCD_CONFIG``, else
    ``./pircd.toml`` when there is one; ``None``: the built-in defaults. ``serve`` and the
    commands that open the database resolve it the same way, so they find the same file."""
    if path:
        return path
    if os.environ.get(CONFIG_ENV):
        return os.environ[CONFIG_ENV]
    return "pircd.toml" if Path("pircd.toml").is_file() else None
