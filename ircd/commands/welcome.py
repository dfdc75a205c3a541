"""The welcome burst (001-005, LUSERS, the MOTD) and ISUPPORT.

Registration sends the burst for every connection, so its fixed text is formatted once per
configuration (``WelcomeTemplates``): a registration only fills in the values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ircd import __version__
from ircd.delivery.replies import ReplyBuffer
from ircd.proto import numerics as N
from ircd.proto.isupport import format_token
from ircd.proto.lines import format_line
from ircd.state.channel import CHANNEL_TYPES, PREFIX_CHARS, PREFIX_MODES

if TYPE_CHECKING:
    from ircd.server import Server
    from ircd.state.client import Client

__all__ = ["CHANNEL_MODES", "USER_MODES", "VERSION", "build_isupport", "lusers_counts", "send_isupport",
           "send_lusers", "send_motd", "welcome", "welcome_templates"]

USER_MODES = "BiowZ"
CHANNEL_MODES = "CbeIiklmnoqstv"
CHANNEL_MODES_WITH_PARAM = "beIkloqv"
VERSION = f"pircd-{__version__}"


def build_isupport(server: "Server") -> list[str]:
    cfg = server.config
    lim = cfg.limits
    prefix = "(" + PREFIX_MODES + ")" + "".join(PREFIX_CHARS[m] for m in PREFIX_MODES)
    targmax = (
        f"PRIVMSG:{lim.targets},NOTICE:{lim.targets},TAGMSG:{lim.targets},JOIN:,PART:,"
        f"KICK:{lim.targets},NAMES:{lim.targets},WHOIS:1,LIST:,MONITOR:,ISON:,USERHOST:5"
    )
    tokens: dict[str, str | int | None] = {
        "AWAYLEN": lim.awaylen,
        "BOT": "B",
        "CASEMAPPING": cfg.server.casemapping,
        "CHANLIMIT": f"#:{lim.channels_per_client}",
        "CHANMODES": "beI,k,l,Cimnst" + "".join(sorted(server.channel_flags)),
        "CHANNELLEN": lim.channellen,
        "CHANTYPES": CHANNEL_TYPES,
        "ELIST": "CMNTU",
        "EXCEPTS": "e",
        "HOSTLEN": 64,
        "INVEX": "I",
        "KICKLEN": lim.kicklen,
        "MAXLIST": f"b:{lim.list_entries},e:{lim.list_entries},I:{lim.list_entries}",  # each list its own
        # no prefix: a:<account> matches a logged-in account in b/e/I lists, m:<mask> in b mutes
        "EXTBAN": ",am",
        "ACCOUNTEXTBAN": "a",  # IRCv3 account-extban: the EXTBAN name that matches accounts
        "MAXTARGETS": lim.targets,
        "MODES": lim.modes_per_line,
        "MONITOR": lim.monitor,
        "NETWORK": cfg.server.network,
        "NICKLEN": lim.nicklen,
        "PREFIX": prefix,
        "STATUSMSG": "".join(PREFIX_CHARS[m] for m in PREFIX_MODES),
        "TARGMAX": targmax,
        "TOPICLEN": lim.topiclen,
        "USERLEN": lim.userlen,
        "WHOX": None,
    }
    if cfg.server.utf8only:
        tokens["UTF8ONLY"] = None
    tokens.update(server.isupport_extra)
    return [format_token(name, tokens[name]) for name in sorted(tokens)]


def send_isupport(server: "Server", reply: ReplyBuffer) -> None:
    for group in server.isupport_lines():
        reply.numeric(N.RPL_ISUPPORT, *group, "are supported by this server")


class Lusers:
    """What LUSERS shows one client. A plain class: in the compiled build it is made without a
    Python frame, where a named tuple's ``__new__`` is a Python function (one per registration)."""

    __slots__ = ("users", "invisible", "opers", "unknown", "channels", "most", "servers", "local", "most_local")

    def __init__(self, users: int, invisible: int, opers: int, unknown: int, channels: int, most: int,
                 servers: int, local: int, most_local: int) -> None:
        self.users = users  # on the network (every node's)
        self.invisible = invisible
        self.opers = opers
        self.unknown = unknown  # connections not registered (yet)
        self.channels = channels
        self.most = most  # most users seen on the network at once
        self.servers = servers  # the nodes of the network up, this one too (1 without a cluster)
        self.local = local  # this node's users
        self.most_local = most_local


def lusers_counts(server: "Server", viewer: "Client") -> Lusers:
    """The LUSERS numbers as ``viewer`` is shown them."""
    # running counts: LUSERS is part of every registration, so it must not walk all clients
    state = server.state
    total = state.registered_count
    local = total - state.remote_count
    # registered connections: the users, less always-on ones without a connection and users of
    # other nodes of a cluster, plus the connections that share a user's nick (ircd.sessions)
    sessions = server.sessions
    connected = local - len(sessions.ghosts) + sessions.shadows
    unknown = len(server.clients) - connected
    server.max_clients_seen = max(server.max_clients_seen, total)
    server.max_local_seen = max(server.max_local_seen, local)
    servers = 1 if server.remote_users is None else server.remote_users.nodes_up()
    return Lusers(total, state.invisible_count, state.oper_count, unknown, _channels_formed_for(server, viewer),
                  server.max_clients_seen, servers, local, server.max_local_seen)


def _channels_formed_for(server: Server, viewer: Client) -> int:
    """The channels with members or an owner, less those hidden from ``viewer`` (PIRCAN private
    channels): only the channels the visibility filters name are asked about, unless a filter
    names none (then every channel is)."""
    state, exists = server.state, server.visibility.channel_exists_for
    candidates = server.visibility.may_hide()
    if candidates is None:
        return sum(1 for ch in state.all_channels() if (ch.members or ch.owner_account) and exists(viewer, ch))
    hidden = 0
    for ch in candidates:
        # a filter's list may hold a channel the state has let go since: it is not counted anyway
        if (ch.members or ch.owner_account) and state.channel(ch.folded) is ch and not exists(viewer, ch):
            hidden += 1
    return state.channels_formed() - hidden


def send_lusers(server: "Server", reply: ReplyBuffer) -> None:
    n = lusers_counts(server, reply.client)
    reply.numeric(
        N.RPL_LUSERCLIENT,
        f"There are {n.users - n.invisible} users and {n.invisible} invisible on {n.servers} servers",
    )
    reply.numeric(N.RPL_LUSEROP, str(n.opers), "IRC Operators online")
    reply.numeric(N.RPL_LUSERUNKNOWN, str(n.unknown), "unknown connection(s)")
    reply.numeric(N.RPL_LUSERCHANNELS, str(n.channels), "channels formed")
    reply.numeric(N.RPL_LUSERME, f"I have {n.local} clients and {n.servers - 1} servers")
    local, top = str(n.local), str(n.most_local)
    reply.numeric(N.RPL_LOCALUSERS, local, top, f"Current local users {local}, max {top}")
    users, top = str(n.users), str(n.most)
    reply.numeric(N.RPL_GLOBALUSERS, users, top, f"Current global users {users}, max {top}")


def motd_lines(server: "Server") -> list[str] | None:
    """The MOTD, read when the config was (re)loaded: no file I/O on the event loop."""
    return server.motd


def send_motd(server: "Server", reply: ReplyBuffer) -> None:
    lines = motd_lines(server)
    if not lines:
        reply.numeric(N.ERR_NOMOTD, "MOTD File is missing")
        return
    reply.numeric(N.RPL_MOTDSTART, f"- {server.name} Message of the day - ")
    for line in lines:
        reply.numeric(N.RPL_MOTD, f"- {line}")
    reply.numeric(N.RPL_ENDOFMOTD, "End of /MOTD command")


def welcome(server: Server, client: Client, reply: ReplyBuffer) -> None:
    """The welcome burst of a connection that just registered: 001-005, the extensions' lines,
    LUSERS, the MOTD and the user modes."""
    templates = server.welcome_templates
    if templates is None:
        templates = server.welcome_templates = welcome_templates(server)
    nick = client.nick.encode("utf-8", "replace")
    if templates.intro is None or templates.closing is None:  # text the templates cannot hold
        _welcome_lines(server, client, reply)
        return
    # the burst's fixed text was formatted once (welcome_templates): here only the values go in
    intro = templates.intro
    reply.preformatted(intro.fmt % (nick, client.prefix.encode("utf-8", "replace")) + nick.join(intro.tail),
                       intro.count)
    for hook in server.welcome_hooks:
        hook(client, reply)
    n = lusers_counts(server, client)
    closing = templates.closing
    reply.preformatted(
        closing.fmt % (nick, n.users - n.invisible, n.invisible, n.servers, nick, n.opers, nick, n.unknown, nick,
                       n.channels, nick, n.local, n.servers - 1, nick, n.local, n.most_local, n.local, n.most_local,
                       nick, n.users, n.most, n.users, n.most) + nick.join(closing.tail),
        closing.count,
    )
    if client.modes:
        reply.send("MODE", client.nick, "+" + "".join(sorted(client.modes)), source=client.nick)


def _welcome_lines(server: Server, client: Client, reply: ReplyBuffer) -> None:
    """The welcome burst line by line (what the templates hold, formatted for one client)."""
    cfg = server.config
    reply.numeric(N.RPL_WELCOME, f"Welcome to the {cfg.server.network} IRC Network {client.prefix}")
    for code, params in _intro(server):
        reply.numeric(code, *params)
    for hook in server.welcome_hooks:
        hook(client, reply)
    send_lusers(server, reply)
    send_motd(server, reply)
    if client.modes:
        reply.send("MODE", client.nick, "+" + "".join(sorted(client.modes)), source=client.nick)


def _intro(server: Server) -> list[tuple[str, list[str]]]:
    """The burst's lines after 001 up to the hooks: 002-004, then ISUPPORT."""
    chan_modes = CHANNEL_MODES + "".join(sorted(server.channel_flags))
    lines = [
        (N.RPL_YOURHOST, [f"Your host is {server.name}, running version {VERSION}"]),
        (N.RPL_CREATED, [f"This server was created {server.created_str}"]),
        (N.RPL_MYINFO, [server.name, VERSION, USER_MODES, chan_modes, CHANNEL_MODES_WITH_PARAM]),
    ]
    lines.extend((N.RPL_ISUPPORT, [*group, "are supported by this server"]) for group in server.isupport_lines())
    return lines


def _motd(server: Server) -> list[tuple[str, list[str]]]:
    lines = motd_lines(server)
    if not lines:
        return [(N.ERR_NOMOTD, ["MOTD File is missing"])]
    return [
        (N.RPL_MOTDSTART, [f"- {server.name} Message of the day - "]),
        *((N.RPL_MOTD, [f"- {line}"]) for line in lines),
        (N.RPL_ENDOFMOTD, ["End of /MOTD command"]),
    ]


# Placeholders in the templates' text: a value given as bytes (a nick, a prefix), and a number.
_TEXT: Final = "\x00"
_NUMBER: Final = "\x01"


class Template:
    """Lines formatted once by ``format_line``: ``fmt`` up to its last value other than the nick, with
    ``%s`` and ``%d`` where the values go, then ``tail``, the rest cut where the nick goes. The same
    bytes as formatting each line with its values, for the cost of one ``%`` and one ``join``:
    ``fmt % values + nick.join(tail)`` (a nick put in by ``%`` cost several times more)."""

    __slots__ = ("fmt", "tail", "count")

    def __init__(self, fmt: bytes, tail: list[bytes], count: int) -> None:
        self.fmt = fmt
        self.tail = tail
        self.count = count


def make_template(server: Server, lines: list[tuple[str, list[str]]], values: int, head: int) -> Template | None:
    """A template of numerics to the client (``_TEXT`` for its nick, then the params, in which
    ``values`` placeholders in all, the nicks counted, stand for the values; the ``head`` first go
    in with ``%``, every later one must be the nick); None when the text itself holds a placeholder
    character or a line break (the lines are then formatted one by one)."""
    data = b"".join(format_line(code, [_TEXT, *params], server.name) for code, params in lines)
    if data.count(b"\x00") + data.count(b"\x01") != values:
        return None
    if data.count(b"\n") != len(lines) or data.count(b"\r") != len(lines):  # CR LF ends each line, and only there
        return None
    cut = -1  # where the head ends: just after its last placeholder
    for _ in range(head):
        cut = min(i for i in (data.find(b"\x00", cut + 1), data.find(b"\x01", cut + 1)) if i >= 0)
    tail = data[cut + 1 :]
    if b"\x01" in tail:
        return None
    fmt = data[: cut + 1].replace(b"%", b"%%").replace(b"\x00", b"%s").replace(b"\x01", b"%d")
    return Template(fmt, tail.split(b"\x00"), len(lines))


class WelcomeTemplates:
    """The welcome burst, formatted once per configuration (``Server.welcome_templates``, dropped when
    the configuration or ISUPPORT changes): ``intro`` is 001-005, ``closing`` LUSERS and the MOTD."""

    __slots__ = ("intro", "closing")

    def __init__(self, intro: Template | None, closing: Template | None) -> None:
        self.intro = intro
        self.closing = closing


def welcome_templates(server: Server) -> WelcomeTemplates:
    n = _NUMBER
    welcome = (N.RPL_WELCOME, [f"Welcome to the {server.config.server.network} IRC Network {_TEXT}"])
    lusers = [
        (N.RPL_LUSERCLIENT, [f"There are {n} users and {n} invisible on {n} servers"]),
        (N.RPL_LUSEROP, [n, "IRC Operators online"]),
        (N.RPL_LUSERUNKNOWN, [n, "unknown connection(s)"]),
        (N.RPL_LUSERCHANNELS, [n, "channels formed"]),
        (N.RPL_LUSERME, [f"I have {n} clients and {n} servers"]),
        (N.RPL_LOCALUSERS, [n, n, f"Current local users {n}, max {n}"]),
        (N.RPL_GLOBALUSERS, [n, n, f"Current global users {n}, max {n}"]),
    ]
    intro = [welcome, *_intro(server)]
    closing = lusers + _motd(server)
    return WelcomeTemplates(
        make_template(server, intro, len(intro) + 1, 2),  # 001 has the prefix too
        # the numbers of LUSERS and its nicks, then the MOTD's nicks
        make_template(server, closing, 23 + len(closing) - len(lusers), 23),
    )
