"""Operator commands: OPER, KILL, REHASH, WALLOPS."""

from __future__ import annotations

import logging

from ircd import passwords
from ircd.logins import login_limits, throttled_text
from ircd.config import OperBlock
from ircd.dispatch import CommandContext, command
from ircd.events import UserModeChanged
from ircd.logins import source_of
from ircd.proto import numerics as N
from ircd.proto.lines import Message, mask_matches

log = logging.getLogger("pircd")


@command("OPER", min_params=2)
async def handle_oper(ctx: CommandContext, msg: Message) -> None:
    """OPER <name> <password>
    Makes you an IRC operator if the name and password match an [[opers]] block."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    name, password = msg.params[0], msg.params[1]
    opers = server.config.opers
    allowed = [o for o in opers if _host_allowed(ctx, o)]
    if not allowed:
        # RFC 2812 ERR_NOOPERHOST: no block accepts this host at all, whatever was sent
        reply.numeric(N.ERR_NOOPERHOST, "No O-lines for your host")
        return
    limits = login_limits(server.config.accounts)
    attempt = server.logins.begin(source_of(client.ip), "o:" + name, server.clock(), limits)
    if isinstance(attempt, float):
        log.warning("oper throttled id=%d nick=%s name=%s ip=%s", client.id, client.nick, name, client.ip)
        reply.numeric(N.ERR_PASSWDMISMATCH, throttled_text(attempt))
        return
    block = next((o for o in opers if o.name == name), None)
    # An unknown name is checked against a real block's hash (every block has an argon2 hash),
    # so it costs the same time; a block for another host is checked too, and answered like a
    # wrong password.
    hashed = block.password if block is not None else allowed[0].password
    ok = await passwords.verify(hashed, password) and block is not None and block in allowed
    if ok:
        server.logins.succeeded(attempt)
    else:
        server.logins.failed(attempt)
    if client.closing:
        return
    if not ok or block is None:
        log.warning("oper failed id=%d nick=%s name=%s ip=%s", client.id, client.nick, name, client.ip)
        reply.numeric(N.ERR_PASSWDMISMATCH, "Password incorrect")
        return
    if "o" not in client.modes:
        client.modes.add("o")
        server.state.oper_count += 1
        if server.events.wants(UserModeChanged):
            server.events.publish(UserModeChanged(client))
    client.oper_name = name
    log.info("oper id=%d nick=%s name=%s", client.id, client.nick, name)
    reply.numeric(N.RPL_YOUREOPER, "You are now an IRC operator")
    reply.send("MODE", client.nick, "+o", source=client.nick)


def _host_allowed(ctx: CommandContext, block: OperBlock) -> bool:
    server, client = ctx.server, ctx.client
    return mask_matches(block.hostmask, client.prefix, server.casefold) or mask_matches(
        block.hostmask, f"{client.nick}!{client.user}@{client.ip}", server.casefold
    )


@command("KILL", min_params=2, oper=True)
def handle_kill(ctx: CommandContext, msg: Message) -> None:
    """KILL <nick> :<reason>
    Disconnects a user (operators only)."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    target = server.state.find_nick(msg.params[0])
    if target is None or not target.registered:
        reply.numeric(N.ERR_NOSUCHNICK, msg.params[0], "No such nick/channel")
        return
    reason = msg.params[1]
    log.info("kill by=%s target=%s reason=%r", client.nick, target.nick, reason)
    text = f"Killed ({client.nick} ({reason}))"
    reply.flush()
    server.sessions.end(target, text)  # every connection sharing the nick; an always-on identity ends too


@command("REHASH", oper=True)
def handle_rehash(ctx: CommandContext, msg: Message) -> None:
    """REHASH
    Reloads the configuration file (operators only)."""
    server, reply = ctx.server, ctx.reply
    if server.reload_config is None:
        reply.fail("REHASH", "NO_CONFIG_FILE", "This server was started without a configuration file")
        return
    path = server.config_path or "pircd.toml"
    try:
        server.reload_config()
    except Exception as exc:  # ConfigError and OSError alike: report, keep the old config
        log.warning("rehash failed: %s", exc)
        reply.fail("REHASH", "CONFIG_ERROR", f"Configuration not reloaded: {exc}")
        return
    log.info("rehash by=%s", ctx.client.nick)
    reply.numeric(N.RPL_REHASHING, path, "Rehashing")


@command("WALLOPS", min_params=1, oper=True)
def handle_wallops(ctx: CommandContext, msg: Message) -> None:
    """WALLOPS :<text>
    Sends a message to every user with user mode +w (operators only)."""
    server = ctx.server
    relay = server.relay_from(ctx.client, "WALLOPS", msg.params[0])
    server.delivery.relay([c for c in server.clients if c.registered and "w" in c.modes], relay)
