"""Queries and self-description: WHO/WHOX, WHOIS, WHOWAS, ISON, USERHOST, AWAY,
SETNAME, VERSION, TIME, INFO, ADMIN."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ircd import caps as C
from ircd.state.channel import prefix_of
from ircd.commands.registration import refuse_other_server
from ircd.commands.welcome import VERSION, send_isupport
from ircd.dispatch import CommandContext, command
from ircd.events import AwayChanged, UserChanged
from ircd.proto import numerics as N
from ircd.proto.glob import Glob
from ircd.proto.lines import Message

if TYPE_CHECKING:
    from ircd.state.channel import Channel
    from ircd.state.client import Client
    from ircd.server import Server

WHOX_FIELDS = "tcuihsnfdlaor"


def who_flags(client: "Client", channel: "Channel | None", viewer: "Client") -> str:
    flags = "G" if client.away is not None else "H"
    if client.is_oper:
        flags += "*"
    if client.is_bot:
        flags += "B"
    if channel is not None:
        flags += prefix_of(channel.members.get(client) or "", bool(viewer.caps & C.MULTI_PREFIX))
    return flags


def _who_reply(ctx: CommandContext, target: "Client", channel: "Channel | None", whox: str | None,
               token: str) -> None:
    server, reply = ctx.server, ctx.reply
    chan_name = channel.name if channel is not None else "*"
    if whox is None:
        where = server.server_of(target)[0]
        reply.numeric(N.RPL_WHOREPLY, chan_name, target.user, target.host, where, target.nick,
                      who_flags(target, channel, ctx.client), f"0 {target.realname}")
        return
    values = []
    for field in WHOX_FIELDS:
        if field not in whox:
            continue
        if field == "t":
            values.append(token or "0")
        elif field == "c":
            values.append(chan_name)
        elif field == "u":
            values.append(target.user)
        elif field == "i":
            values.append(target.ip if ctx.client.is_oper or ctx.client is target else "255.255.255.255")
        elif field == "h":
            values.append(target.host)
        elif field == "s":
            values.append(server.server_of(target)[0])
        elif field == "n":
            values.append(target.nick)
        elif field == "f":
            values.append(who_flags(target, channel, ctx.client))
        elif field == "d":
            values.append("0")
        elif field == "l":
            values.append(str(int(server.clock() - target.last_active)))
        elif field == "a":
            values.append(target.account or "0")
        elif field == "o":
            values.append("n/a")
        elif field == "r":
            values.append(target.realname)
    # realname, the only field with spaces, is always last (fields come in WHOX_FIELDS order)
    reply.numeric(N.RPL_WHOSPCRPL, *values)


@command("WHO", min_params=1)
def handle_who(ctx: CommandContext, msg: Message) -> None:
    """WHO <mask> [<flags>][%<fields>[,<token>]]
    Lists users of a channel, or users matching a nick/host mask. WHOX fields: t c u i h s n f d l a o r."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    mask = msg.params[0]
    whox, token, only_opers = None, "", False
    if len(msg.params) > 1:
        flags, _, fields = msg.params[1].partition("%")
        only_opers = "o" in flags
        if _:
            whox, _, token = fields.partition(",")
            token = token[:3]
    if mask[:1] == "#":
        channel = server.find_channel(mask, client)
        if channel is not None and server.visibility.channel_listed_for(client, channel):
            member = client in channel.members
            for target in list(channel.members):
                if target.shadow or (not member and "i" in target.modes):
                    continue
                if only_opers and not target.is_oper:
                    continue
                _who_reply(ctx, target, channel, whox, token)
    else:
        if mask in ("0", "*"):
            mask = "*"
        cf = server.casefold
        exact = server.state.find_nick(mask) if "*" not in mask and "?" not in mask else None
        if exact is not None:
            targets = [exact] if exact.registered else []
        else:
            glob = Glob(mask, cf)
            targets = [  # one per nick: connections sharing a nick are listed once
                c for c in server.state.users()
                if c.registered and server.visibility.user_listed_for(client, c) and (
                    glob.matches(c.nick_folded) or glob.matches(cf(c.host))
                    or glob.matches(cf(c.user)) or glob.matches(cf(c.realname))
                    or glob.matches(cf(c.prefix))
                )
            ]
        for target in targets:
            if only_opers and not target.is_oper:
                continue
            _who_reply(ctx, target, None, whox, token)
    reply.numeric(N.RPL_ENDOFWHO, msg.params[0], "End of WHO list")


def whois_channels(server: "Server", viewer: "Client", target: "Client") -> list[str]:
    """The channels a WHOIS of ``target`` shows ``viewer``: all of them to the target itself; of a
    +i user only those the viewer is in too (an operator: those it may see), as for WHO; of others
    those the viewer may see (not +s or +p unless it is in them)."""
    multi = bool(viewer.caps & C.MULTI_PREFIX)
    hidden = viewer is not target and "i" in target.modes and not viewer.is_oper
    names = []
    for channel in target.channels.values():
        if hidden and viewer not in channel.members:
            continue
        if viewer is target or server.visibility.channel_listed_for(viewer, channel):
            names.append(prefix_of(channel.members.get(target) or "", multi) + channel.name)
    return names


@command("WHOIS", min_params=1)
def handle_whois(ctx: CommandContext, msg: Message) -> None:
    """WHOIS [<server>] <nick>
    Shows who a user is: user and host, real name, channels, account, away and idle time."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    nick = msg.params[-1]
    target = server.state.find_nick(nick)
    if target is None and whois_service(ctx, nick):
        return
    if target is None or not target.registered:
        reply.numeric(N.ERR_NOSUCHNICK, nick, "No such nick/channel")
        reply.numeric(N.RPL_ENDOFWHOIS, nick, "End of /WHOIS list")
        return
    tn = target.nick
    reply.numeric(N.RPL_WHOISUSER, tn, target.user, target.host, "*", target.realname)
    channels = whois_channels(server, client, target)
    # keep each 319 within the line limit
    chunk: list[str] = []
    for name in channels:
        if sum(len(n) + 1 for n in chunk) + len(name) > 380:
            reply.numeric(N.RPL_WHOISCHANNELS, tn, " ".join(chunk))
            chunk = []
        chunk.append(name)
    if chunk:
        reply.numeric(N.RPL_WHOISCHANNELS, tn, " ".join(chunk))
    reply.numeric(N.RPL_WHOISSERVER, tn, *server.server_of(target))
    if target.away is not None:
        reply.numeric(N.RPL_AWAY, tn, target.away)
    if target.is_oper:
        reply.numeric(N.RPL_WHOISOPERATOR, tn, "is an IRC operator")
    if target.is_bot:
        reply.numeric(N.RPL_WHOISBOT, tn, f"is a bot on {server.config.server.network}")
    if target.account:
        reply.numeric(N.RPL_WHOISACCOUNT, tn, target.account, "is logged in as")
    if target.tls:
        reply.numeric(N.RPL_WHOISSECURE, tn, "is using a secure connection")
    if client is target or client.is_oper:
        reply.numeric(N.RPL_WHOISACTUALLY, tn, f"{target.user}@{target.ip}", target.ip, "Actual user@host, actual IP")
    if target.certfp and (client is target or client.is_oper):
        reply.numeric(N.RPL_WHOISCERTFP, tn, f"has client certificate fingerprint {target.certfp}")
    for extra in server.whois_hooks:
        extra(client, target, reply)
    idle = int(server.clock() - target.last_active)
    reply.numeric(N.RPL_WHOISIDLE, tn, str(idle), str(int(target.signon)), "seconds idle, signon time")
    reply.numeric(N.RPL_ENDOFWHOIS, tn, "End of /WHOIS list")


@command("WHOWAS", min_params=1)
def handle_whowas(ctx: CommandContext, msg: Message) -> None:
    """WHOWAS <nick> [<count>]
    Shows who recently used a nick that is no longer online."""
    server, reply = ctx.server, ctx.reply
    nick = msg.params[0]
    count = 0
    if len(msg.params) > 1:
        try:
            count = int(msg.params[1])
        except ValueError:
            count = 0
    entries = list(server.state.whowas_of(server.casefold(nick)))
    if count > 0:
        entries = entries[:count]
    if not entries:
        reply.numeric(N.ERR_WASNOSUCHNICK, nick, "There was no such nickname")
    for entry in entries:
        reply.numeric(N.RPL_WHOWASUSER, entry.nick, entry.user, entry.host, "*", entry.realname)
        if entry.account:
            reply.numeric(N.RPL_WHOISACCOUNT, entry.nick, entry.account, "was logged in as")
        when = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(entry.time))
        reply.numeric(N.RPL_WHOISSERVER, entry.nick, server.name, when)
    reply.numeric(N.RPL_ENDOFWHOWAS, nick, "End of WHOWAS")


@command("ISON", min_params=1)
def handle_ison(ctx: CommandContext, msg: Message) -> None:
    """ISON <nick>{ <nick>}
    Tells which of the given nicks are online."""
    online = []
    for param in msg.params:
        for nick in param.split():
            target = ctx.server.state.find_nick(nick)
            if target is not None and target.registered:
                online.append(target.nick)
    ctx.reply.numeric(N.RPL_ISON, " ".join(online))


@command("USERHOST", min_params=1)
def handle_userhost(ctx: CommandContext, msg: Message) -> None:
    """USERHOST <nick>{ <nick>}
    Shows user@host of up to five nicks (* marks operators, - away)."""
    out = []
    for nick in " ".join(msg.params).split()[:5]:
        target = ctx.server.state.find_nick(nick)
        if target is None or not target.registered:
            continue
        oper = "*" if target.is_oper else ""
        away = "-" if target.away is not None else "+"
        out.append(f"{target.nick}{oper}={away}{target.user}@{target.host}")
    ctx.reply.numeric(N.RPL_USERHOST, " ".join(out))


@command("AWAY")
def handle_away(ctx: CommandContext, msg: Message) -> None:
    """AWAY [:<message>]
    Marks you away with a message, or back when given no message."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    text = msg.params[0][: server.config.limits.awaylen] if msg.params else ""
    if text:
        client.away = text
        reply.numeric(N.RPL_NOWAWAY, "You have been marked as being away")
        relay = server.relay_from(client, "AWAY", text)
    else:
        client.away = None
        reply.numeric(N.RPL_UNAWAY, "You are no longer marked as being away")
        relay = server.relay_from(client, "AWAY")
    client.auto_away = False
    server.sessions.sync(client)
    server.delivery.relay(server.state.peers_with_cap(client, C.AWAY_NOTIFY), relay)
    server.events.publish(AwayChanged(client))


@command("SETNAME", min_params=1)
def handle_setname(ctx: CommandContext, msg: Message) -> None:
    """SETNAME :<realname>
    Changes your real name; clients with the setname capability see the change."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    realname = msg.params[0]
    if not realname or len(realname) > server.config.limits.realnamelen:
        reply.fail("SETNAME", "INVALID_REALNAME", "Realname is not valid")
        return
    client.realname = realname
    server.sessions.sync(client)
    relay = server.relay_from(client, "SETNAME", realname)
    if client.caps & C.SETNAME:
        reply.relay(relay)
    server.delivery.relay(server.state.peers_with_cap(client, C.SETNAME), relay)
    if server.events.wants(UserChanged):
        server.events.publish(UserChanged(client))


def change_host(server: "Server", client: "Client", user: str, host: str) -> None:
    """Change a client's user@host and tell its peers (CHGHOST, or QUIT and JOIN without the cap)."""
    if (user, host) == (client.user, client.host):
        return
    old_prefix = client.prefix
    client.user, client.host = user, host
    if not client.registered:
        return
    client.update_prefix()
    server.sessions.sync(client)
    relay = server.relay_from_prefix(old_prefix, client, "CHGHOST", user, host)
    if client.caps & C.CHGHOST:
        client.send(relay.for_client(client))
    server.delivery.relay(server.state.peers_with_cap(client, C.CHGHOST), relay)
    others = [p for p in server.state.common_peers(client) if not p.caps & C.CHGHOST]
    if others:
        server.delivery.relay(others, server.relay_from_prefix(old_prefix, client, "QUIT", "Changing host"))
        for channel in client.channels.values():
            join = server.relay_from(client, "JOIN", channel.name)
            targets = [m for m in channel.members if m in others]
            server.delivery.relay(targets, join)
            modes = channel.members.get(client) or ""
            if modes:
                mode = server.relay_from_prefix(server.name, client, "MODE", channel.name, "+" + modes,
                                                *([client.nick] * len(modes)))
                server.delivery.relay(targets, mode)
    if server.events.wants(UserChanged):
        server.events.publish(UserChanged(client))


@command("VERSION")
def handle_version(ctx: CommandContext, msg: Message) -> None:
    """VERSION [<server>]
    Shows the server software version and its ISUPPORT tokens."""
    if refuse_other_server(ctx, msg):
        return
    ctx.reply.numeric(N.RPL_VERSION, VERSION, ctx.server.name, "pure-Python IRC server with PIRCAN")
    send_isupport(ctx.server, ctx.reply)


SERVICES_DESCRIPTION = "Accounts and NickServ, built into this server"


@command("LINKS")
def handle_links(ctx: CommandContext, msg: Message) -> None:
    """LINKS
    Lists the servers of the network: this one, and its built-in services as a server linked to it."""
    server = ctx.server
    cfg = server.config.server
    # RFC 2812 RPL_LINKS "<mask> <server> :<hopcount> <server info>": the server links to itself
    # (hop count 0), as deployed servers answer. The services (NickServ) are part of this process,
    # but clients know services as a server of their own linked to the IRC server (as on networks
    # with Atheme or Anope, and as irctest expects): listed one hop away under server.services_name.
    ctx.reply.numeric(N.RPL_LINKS, server.name, server.name, f"0 {cfg.description}")
    if server.services:
        ctx.reply.numeric(N.RPL_LINKS, cfg.services, server.name, f"1 {SERVICES_DESCRIPTION}")
    ctx.reply.numeric(N.RPL_ENDOFLINKS, "*", "End of /LINKS list")


def whois_service(ctx: CommandContext, nick: str) -> bool:
    """WHOIS of a service (NickServ): a pseudo-client on the services' server. False when ``nick``
    names no service."""
    server = ctx.server
    if server.casefold(nick) not in server.services:
        return False
    from ircd.commands.nickserv import NICKSERV, NICKSERV_PREFIX

    user, _, host = NICKSERV_PREFIX.partition("!")[2].partition("@")
    reply = ctx.reply
    reply.numeric(N.RPL_WHOISUSER, NICKSERV, user, host, "*", "Account services")
    reply.numeric(N.RPL_WHOISSERVER, NICKSERV, server.config.server.services, SERVICES_DESCRIPTION)
    reply.numeric(N.RPL_ENDOFWHOIS, NICKSERV, "End of /WHOIS list")
    return True


@command("TIME")
def handle_time(ctx: CommandContext, msg: Message) -> None:
    """TIME [<server>]
    Shows the server's local time."""
    if refuse_other_server(ctx, msg):
        return
    now = ctx.server.clock()
    text = time.strftime("%A %B %d %Y -- %H:%M:%S +00:00", time.gmtime(now))
    ctx.reply.numeric(N.RPL_TIME, ctx.server.name, text)


INFO_LINES = [
    "pircd: a pure-Python IRC server for networks where AI agents and people talk.",
    "It speaks RFC 1459/2812 and IRCv3, and carries the PIRCAN agent-network layer:",
    "contact agreements, durable direct messages (SEND, INBOX), content-free NOTIFY,",
    "and private channels that non-members cannot detect.",
]


@command("INFO")
def handle_info(ctx: CommandContext, msg: Message) -> None:
    """INFO [<server>]
    Describes the server software."""
    if refuse_other_server(ctx, msg):
        return
    for line in INFO_LINES + [f"Version {VERSION}, running since {ctx.server.created_str}."]:
        ctx.reply.numeric(N.RPL_INFO, line)
    ctx.reply.numeric(N.RPL_ENDOFINFO, "End of INFO list")


@command("ADMIN")
def handle_admin(ctx: CommandContext, msg: Message) -> None:
    """ADMIN [<server>]
    Shows who runs this server and how to reach them."""
    if refuse_other_server(ctx, msg):
        return
    admin = ctx.server.config.admin
    ctx.reply.numeric(N.RPL_ADMINME, ctx.server.name, "Administrative info")
    ctx.reply.numeric(N.RPL_ADMINLOC1, admin.location1)
    ctx.reply.numeric(N.RPL_ADMINLOC2, admin.location2)
    ctx.reply.numeric(N.RPL_ADMINEMAIL, admin.email)
