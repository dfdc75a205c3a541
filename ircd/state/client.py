"""One connected client: its identity, its capabilities and its outbox.

pircd keeps one object per connection; several connections may be logged in to
the same account, which is what PIRCAN's "visible" means, and may share one nick
(``ircd.sessions``: each stays a Client of its own, with its own capabilities).

Output is appended to ``outbuf`` and written by the network layer once per
event-loop pass (write coalescing): a channel message to 1,000 members is 1,000
list appends, not 1,000 system calls. The outbox is a list of the very line
objects a fan-out formatted once, joined at write time: one copy per byte,
where a growing bytearray copied each byte about eight times as it grew.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ircd.caps import TAG_PROFILE

if TYPE_CHECKING:
    from ircd.state.channel import Channel

__all__ = ["Client", "Conn", "Outlet", "Sessions"]


class Conn(Protocol):
    """What a client needs from its connection (``ircd.net`` or a test double)."""

    # True while the socket holds more unsent bytes than its high-water mark
    # (``Delivery.write_at``, at most a quarter of the SendQ); set during ``write``.
    output_full: bool

    def write(self, data: bytes | bytearray) -> None: ...
    def buffered(self) -> int: ...
    def close(self) -> None: ...


class Outlet(Protocol):
    """Where a client's queued output goes: the delivery layer (``ircd.delivery.Delivery``),
    reached through this interface so that the network's state never imports it."""

    write_at: int

    def mark_dirty(self, client: Client) -> None: ...
    def write_out(self, client: Client) -> None: ...


class Sessions:
    """The connections sharing one nick (``ircd.sessions``); ``face`` is the one the
    state holds."""

    __slots__ = ("face", "members")

    def __init__(self, face: Client) -> None:
        self.face = face
        self.members: list[Client] = [face]


class Client:
    __slots__ = (
        "outlet",
        "conn",
        "id",
        "nick",
        "nick_folded",
        "user",
        "realname",
        "host",
        "ip",
        "prefix",
        "account",
        "account_folded",
        "account_kind",
        "modes",
        "channels",
        "caps",
        "tag_profile",
        "cap_version",
        "cap_negotiating",
        "registered",
        "password_ok",
        "away",
        "signon",
        "last_active",
        "last_read",
        "ping_sent",
        "outbuf",
        "outlen",
        "extra_lines",
        "dirty",
        "closing",
        "monitoring",
        "tls",
        "certfp",
        "oper_name",
        "flood_tokens",
        "flood_time",
        "batch_seq",
        "ext",
        "sasl",
        "port",
        "refused_nick",
        "group",
        "shadow",
        "detached",
        "auto_away",
    )

    def __init__(
        self,
        outlet: Outlet,
        conn: Conn,
        ip: str,
        ident: int,
        now: float,
        flood_burst: float,
        *,
        tls: bool = False,
        port: int = 0,
    ) -> None:
        self.outlet = outlet
        self.conn = conn
        self.id = ident
        self.nick = "*"
        self.nick_folded = ""
        self.user = ""
        self.realname = ""
        self.ip = ip
        self.host = ip if ":" not in ip or ip[0] != ":" else "0" + ip
        self.prefix = "*"
        self.account: str | None = None
        self.account_folded: str | None = None
        self.account_kind: str | None = None
        self.modes: set[str] = set()
        self.channels: dict[str, "Channel"] = {}
        self.caps = 0  # enabled capability bits; change them with set_caps
        self.tag_profile = 0  # caps & TAG_PROFILE: which tags relayed lines carry for this client
        self.cap_version = 0
        self.cap_negotiating = False
        self.registered = False
        self.password_ok = False
        self.away: str | None = None
        self.signon = now
        self.last_active = now
        self.last_read = now
        self.ping_sent = 0.0
        self.outbuf: list[bytes] = []
        self.outlen = 0  # bytes in outbuf
        self.extra_lines = 0  # lines in outbuf beyond one per entry (send_lines), for /metrics
        self.dirty = False
        self.closing = False
        self.monitoring: set[str] | None = None
        self.tls = tls
        self.certfp: str | None = None
        self.oper_name: str | None = None
        self.flood_tokens = flood_burst
        self.flood_time = now
        self.batch_seq = 0
        self.ext: dict[str, Any] | None = None
        self.sasl: Any = None
        self.port = port
        # before registration: the last nick a NICK asked for and was refused (taken or
        # reserved), so REGISTER can say that name is not available rather than "no nick"
        self.refused_nick: str | None = None
        # several connections sharing one nick (ircd.sessions): the group, and whether this one
        # is not the one that holds the nick (NAMES, WHO and counts leave shadows out)
        self.group: Sessions | None = None
        self.shadow = False
        # an always-on identity whose last connection went: in its channels, with no connection
        self.detached = False
        self.auto_away = False  # away because it was detached (cleared when a connection comes back)

    def __repr__(self) -> str:
        return f"<Client {self.id} {self.nick}>"

    # identity -----------------------------------------------------------

    def update_prefix(self) -> None:
        self.prefix = f"{self.nick}!{self.user}@{self.host}"

    def has_cap(self, bit: int) -> bool:
        return bool(self.caps & bit)

    @property
    def is_oper(self) -> bool:
        return "o" in self.modes

    @property
    def is_bot(self) -> bool:
        return "B" in self.modes

    def ext_state(self, name: str) -> Any:
        return None if self.ext is None else self.ext.get(name)

    def set_ext_state(self, name: str, value: Any) -> None:
        if self.ext is None:
            self.ext = {}
        if value is None:
            self.ext.pop(name, None)
        else:
            self.ext[name] = value

    def next_batch_id(self) -> str:
        self.batch_seq += 1
        return "%x%d" % (self.id, self.batch_seq)

    # output --------------------------------------------------------------

    def set_caps(self, caps: int) -> None:
        self.caps = caps
        self.tag_profile = caps & TAG_PROFILE

    def send(self, data: bytes) -> None:
        """Queue bytes for this client; past ``Delivery.write_at`` they go to the socket at
        once (``Delivery.write_out``), and a client that does not read them is disconnected."""
        if self.closing:
            return
        self.outbuf.append(data)
        self.outlen += len(data)
        outlet = self.outlet
        if not self.dirty:
            self.dirty = True
            outlet.mark_dirty(self)
        if self.outlen > outlet.write_at:
            outlet.write_out(self)

    def send_lines(self, data: bytes, lines: int) -> None:
        """Queue ``lines`` lines joined into one outbox entry (a reply, a batch): the entry is
        written as one, and counted as that many lines (``Delivery.lines_out``)."""
        if self.closing:
            return
        self.extra_lines += lines - 1
        self.send(data)

    def take_output(self) -> bytes:
        """Everything queued, as one bytes object; the outbox is empty afterwards."""
        data = b"".join(self.outbuf)
        self.outbuf = []
        self.outlen = 0
        self.extra_lines = 0
        return data
