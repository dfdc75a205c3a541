"""Connection registration: PASS, NICK, USER, PING, PONG, QUIT, LUSERS, MOTD (the welcome burst
itself is ``ircd.commands.welcome``)."""

from __future__ import annotations

import hmac
import logging
import re
from typing import TYPE_CHECKING

from ircd import passwords
from ircd.accountnames import RESERVED_NICKS
from ircd.dispatch import CommandContext, command
from ircd.events import NickChanged, Registered
from ircd.proto import numerics as N
from ircd.proto.lines import Message, mask_matches, safe_param
from ircd.commands.welcome import send_lusers, send_motd, welcome
from ircd.delivery.replies import ReplyBuffer

if TYPE_CHECKING:
    from ircd.state.client import Client
    from ircd.server import Server

log = logging.getLogger("pircd")

_NICK_RE = re.compile(r"^[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}-]*$")
_USER_RE = re.compile(r"^[^\s@!:\x00-\x1f]+$")
def valid_nick(server: "Server", nick: str, folded: str | None = None) -> bool:
    """``folded``: the nick casefolded, when the caller has it already."""
    return (
        0 < len(nick) <= server.nicklen
        and _NICK_RE.match(nick) is not None
        and (server.casefold(nick) if folded is None else folded) not in RESERVED_NICKS
    )


def try_register(ctx: CommandContext) -> None:
    """Complete registration once NICK, USER and CAP END (if negotiating) are in."""
    client = ctx.client
    if client.registered or client.closing or not client.user or client.nick == "*":
        return
    if client.cap_negotiating:
        return
    server, reply = ctx.server, ctx.reply  # a reply buffer only from here: NICK before USER needs none
    if client.sasl is not None:
        # sasl-3.1: completing registration while SASL is in progress aborts it (906);
        # lines run in order, so no verification of this client is still running here
        client.sasl = None
        reply.numeric(N.ERR_SASLABORTED, "SASL authentication aborted")
    if server.password is not None and not client.password_ok:
        reply.numeric(N.ERR_PASSWDMISMATCH, "Password incorrect")
        reply.flush()
        server.disconnect(client, "Bad password")
        return
    for check in server.registration_checks:
        refusal = check(client)
        if refusal is None:
            continue
        refused_nick = client.nick
        if not refusal.disconnect:  # wait for the client to fix it (e.g. choose another nick)
            server.state.remove_nick(client)
            client.nick, client.nick_folded = "*", ""
            client.refused_nick = refused_nick
        if refusal.numeric is not None:
            reply.numeric(refusal.numeric, refused_nick, refusal.text)
        reply.flush()
        if refusal.disconnect:
            server.disconnect(client, refusal.text)
        return
    holder = server.state.nick_holder(client.nick_folded)
    if holder is not client:
        if holder is None:  # the connection whose nick it was to share has gone meanwhile
            server.state.add_nick(client)
        elif server.sessions.may_share(client, holder):
            _attach(server, client, holder, reply)
            return
        else:
            server.state.remove_nick(client)
            client.nick, client.nick_folded = "*", ""
            client.refused_nick = holder.nick
            reply.numeric(N.ERR_NICKNAMEINUSE, holder.nick, "Nickname is already in use")
            return
    client.registered = True
    client.update_prefix()
    server.state.account_attached(client)
    for mode in server.default_user_modes:
        if mode in "iwB":
            client.modes.add(mode)
    if client.tls:
        client.modes.add("Z")  # connected over TLS
    server.state.count_user(client, 1)
    server.registrations += 1
    log.info("registered id=%d nick=%s user=%s ip=%s", client.id, client.nick, client.user, client.ip)
    welcome(server, client, reply)
    server.notify_monitors(client, online=True)
    server.events.publish(Registered(client))


def _attach(server: Server, client: Client, holder: Client, reply: ReplyBuffer) -> None:
    """Registration of a connection that shares the nick of its account's identity (ircd.sessions):
    the welcome, then the identity's channels."""
    server.sessions.attach(client, holder)
    client.registered = True
    server.registrations += 1
    server.state.account_attached(client)
    log.info("registered id=%d nick=%s user=%s ip=%s (shares the nick)", client.id, client.nick, client.user,
             client.ip)
    welcome(server, client, reply)
    server.sessions.rejoin_burst(client, reply)
    server.events.publish(Registered(client))


@command(
    "PASS", min_params=1, pre_registration=True,
    doc="""PASS <password>
    Gives the server password, if the server has one. Must come before NICK and USER.""",
)
async def handle_pass(ctx: CommandContext, msg: Message) -> None:
    if ctx.client.registered:
        ctx.reply.numeric(N.ERR_ALREADYREGISTERED, "You may not reregister")
        return
    expected = ctx.server.config.server.password
    if expected is None:
        return
    given = msg.params[0]
    if expected.startswith("$argon2"):
        ctx.client.password_ok = await passwords.verify(expected, given)
    else:
        ctx.client.password_ok = hmac.compare_digest(expected.encode(), given.encode())


@command(
    "NICK", pre_registration=True,
    doc="""NICK <nickname>
    Sets your nickname, or changes it after registration.""",
)
def handle_nick(ctx: CommandContext, msg: Message) -> None:
    server, client = ctx.server, ctx.client
    if not msg.params or not msg.params[0]:
        ctx.reply.numeric(N.ERR_NONICKNAMEGIVEN, "No nickname given")
        return
    nick = msg.params[0]
    folded = server.casefold(nick)
    if not valid_nick(server, nick, folded):
        ctx.reply.numeric(N.ERR_ERRONEUSNICKNAME, safe_param(nick), "Erroneous nickname")
        return
    holder = server.state.nick_holder(folded)
    if holder is not None and holder is not client:
        if server.sessions.may_share(client, holder):  # a connection of the same account: share it
            server.sessions.share_nick(client, holder)
            try_register(ctx)
            return
        accounts = server.accounts
        if accounts is None or folded != client.account_folded:
            ctx.reply.numeric(N.ERR_NICKNAMEINUSE, nick, "Nickname is already in use")
            if not client.registered:
                client.refused_nick = nick
            return
        accounts.take_nick(client, holder)  # an account's own name is always its to take
    if nick == client.nick:
        return
    for check in server.nick_checks:
        refusal = check(client, nick, folded)
        if refusal is not None:
            code, text = refusal
            ctx.reply.numeric(code, nick, text)
            return
    client.refused_nick = None
    set_nick(ctx, nick, folded)
    if not client.registered:
        try_register(ctx)


def set_nick(ctx: CommandContext, nick: str, folded: str) -> None:
    # before registration nobody is told (no reply buffer is made for it)
    set_nick_from_server(ctx.server, ctx.client, nick, ctx.reply if ctx.client.registered else None, folded)


def set_nick_from_server(
    server: "Server", client: "Client", nick: str, reply: ReplyBuffer | None, folded: str | None = None
) -> None:
    """Change a client's nick and tell everyone who should know (the client through ``reply``,
    which only a client that is not registered yet may do without: it is told nothing)."""
    folded = folded if folded is not None else server.casefold(nick)
    old_nick, old_folded, old_prefix = client.nick, client.nick_folded, client.prefix
    if client.group is not None:
        server.sessions.become_face(client)
    server.state.remove_nick(client)
    client.nick = nick
    client.nick_folded = folded
    server.state.add_nick(client)
    if not client.registered:
        return
    client.update_prefix()
    relay = server.relay_from_prefix(old_prefix, client, "NICK", nick)
    assert reply is not None, "a registered client's nick change is answered"
    reply.relay(relay)
    peers = server.state.common_peers(client)
    if client.group is not None:  # the connections sharing the nick change with it
        server.sessions.sync(client)
        peers.update(client.group.members)
        peers.discard(client)
    server.delivery.relay(peers, relay)
    if old_folded != folded:
        server.state.remember_nick(old_nick, client, int(server.clock()))
        server.notify_monitors(client, online=False, nick_folded=old_folded, nick=old_nick)
        server.notify_monitors(client, online=True)
    server.events.publish(NickChanged(client, old_nick))


@command(
    "USER", min_params=4, pre_registration=True,
    doc="""USER <username> <mode> <unused> :<realname>
    Sets your username and real name during registration.""",
)
def handle_user(ctx: CommandContext, msg: Message) -> None:
    client, reply = ctx.client, ctx.reply
    if client.registered:
        reply.numeric(N.ERR_ALREADYREGISTERED, "You may not reregister")
        return
    username, realname = msg.params[0], msg.params[3]
    if not username or not realname:
        reply.numeric(N.ERR_NEEDMOREPARAMS, "USER", "Not enough parameters")
        return
    username = username[: ctx.server.userlen]
    if not _USER_RE.match(username):
        reply.numeric(N.ERR_INVALIDUSERNAME, username, "Your username is not valid")
        return
    client.user = username
    client.realname = realname[: ctx.server.realnamelen]
    try_register(ctx)


@command(
    "PING", pre_registration=True,
    doc="""PING <token>
    The server answers PONG with the same token.""",
)
def handle_ping(ctx: CommandContext, msg: Message) -> None:
    if not msg.params or not msg.params[0]:
        ctx.reply.numeric(N.ERR_NOORIGIN, "No origin specified")
        return
    ctx.reply.send("PONG", ctx.server.name, msg.params[0])


@command(
    "PONG", pre_registration=True, flood_cost=0,
    doc="""PONG <token>
    Answers a PING from the server.""",
)
def handle_pong(ctx: CommandContext, msg: Message) -> None:
    return None  # answering a PING needs nothing beyond the activity the line itself records


@command(
    "QUIT", pre_registration=True, flood_cost=0,
    doc="""QUIT [:<reason>]
    Leaves the server; your channels see the reason.""",
)
def handle_quit(ctx: CommandContext, msg: Message) -> None:
    reason = msg.params[0] if msg.params else ""
    text = f"Quit: {reason}" if reason else "Quit:"
    ctx.reply.flush()
    ctx.server.disconnect(ctx.client, text)


@command(
    "LUSERS",
    doc="""LUSERS
    Shows how many users, operators and channels the network has, on how many servers, and
    how many of the users are on this server.""",
)
def handle_lusers(ctx: CommandContext, msg: Message) -> None:
    send_lusers(ctx.server, ctx.reply)


@command(
    "MOTD",
    doc="""MOTD [<server>]
    Shows the message of the day.""",
)
def handle_motd(ctx: CommandContext, msg: Message) -> None:
    if refuse_other_server(ctx, msg):
        return
    send_motd(ctx.server, ctx.reply)


def refuse_other_server(ctx: CommandContext, msg: Message) -> bool:
    """Answer ERR_NOSUCHSERVER (and return True) when the optional <target> of MOTD, VERSION,
    TIME, ADMIN or INFO names another server.

    RFC 2812 3.4: the target is a server name, a mask, or a nick standing for the server that
    user is on; pircd is a network of one server, so anything matching its name or a nick
    connected here means this server.
    """
    if not msg.params or not msg.params[0]:
        return False
    server, target = ctx.server, msg.params[0]
    if mask_matches(target, server.name, server.casefold):
        return False
    user = server.state.find_nick(target)
    if user is not None and user.registered:
        return False
    ctx.reply.numeric(N.ERR_NOSUCHSERVER, target, "No such server")
    return True
