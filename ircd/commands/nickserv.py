"""NickServ: IDENTIFY, REGISTER, VERIFY, LOGOUT and INFO for clients that cannot do SASL, as a
pseudo-client (``PRIVMSG NickServ``) and as the ``NICKSERV``/``NS`` verb."""

from __future__ import annotations

from ircd.accountnames import InvalidAccountName
from ircd.commands.account import verify_registration
from ircd.dispatch import CommandContext, command
from ircd.proto.lines import Message
from ircd.store import AccountExists

__all__ = ["NICKSERV", "NICKSERV_PREFIX", "nickserv"]

NICKSERV = "NickServ"
NICKSERV_PREFIX = "NickServ!NickServ@services.pircd"


def nickserv_notice(ctx: CommandContext, text: str) -> None:
    ctx.reply.send("NOTICE", ctx.client.nick, text, source=NICKSERV_PREFIX)


NICKSERV_HELP = [
    "NickServ lets clients without SASL log in and register.",
    "IDENTIFY [<account>] <password>   log in (SASL is better: your client may support it)",
    "REGISTER <password> [<email>]     create an account named after your nick (if enabled)",
    "VERIFY <account> <code>           finish a registration with the code sent to your email",
    "LOGOUT                            log out",
    "INFO [<account>]                  show an account's kind and owner",
]


async def nickserv(ctx: CommandContext, text: str) -> None:
    """Handle one line addressed to NickServ."""
    server, client = ctx.server, ctx.client
    accounts = server.accounts
    words = text.split()
    verb = words[0].upper() if words else "HELP"
    args = words[1:]
    if accounts is None or not server.config.accounts.enabled:
        nickserv_notice(ctx, "Accounts are not enabled on this server.")
        return
    if verb == "IDENTIFY":
        if not args:
            nickserv_notice(ctx, "Syntax: IDENTIFY [<account>] <password>")
            return
        if client.account is not None:
            nickserv_notice(ctx, f"You are already logged in as {client.account}.")
            return
        name, password = (args[0], args[1]) if len(args) > 1 else (client.nick, args[0])
        result = await accounts.check_password(client.ip, name, password, "NickServ")
        if client.closing:
            return
        if isinstance(result, str):
            nickserv_notice(ctx, result)
            return
        accounts.login(client, result, ctx.reply)
        nickserv_notice(ctx, f"You are now logged in as {result.name}.")
    elif verb == "REGISTER":
        if not server.config.accounts.registration:
            nickserv_notice(ctx, "Account registration is disabled on this server.")
            return
        if not args:
            nickserv_notice(ctx, "Syntax: REGISTER <password> [<email>]")
            return
        if client.account is not None:
            nickserv_notice(ctx, f"You are already logged in as {client.account}.")
            return
        if len(args[0]) < server.config.accounts.min_password_length:
            nickserv_notice(ctx, "That password is too short.")
            return
        if client.nick_folded in accounts.names:
            nickserv_notice(ctx, f"The account {client.nick} already exists.")
            return
        if server.config.accounts.email_required:
            if len(args) < 2:
                nickserv_notice(ctx, "This server needs an email address: REGISTER <password> <email>")
                return
            code, text = await accounts.start_verification(client, client.nick, args[1], args[0])
            if client.closing:
                return
            if code:
                nickserv_notice(ctx, f"Not registered: {text}.")
            else:
                nickserv_notice(ctx, f"A code was sent to {text}: send VERIFY {client.nick} <code> to finish.")
            return
        try:
            account = await accounts.create(client.nick, args[0])
        except AccountExists:
            nickserv_notice(ctx, f"The account {client.nick} already exists.")
            return
        except InvalidAccountName:
            nickserv_notice(ctx, f"{client.nick} cannot be an account name.")
            return
        if client.closing:
            return
        accounts.login(client, account, ctx.reply)
        nickserv_notice(ctx, f"Account {account.name} created; you are logged in.")
    elif verb == "VERIFY":
        if len(args) < 2:
            nickserv_notice(ctx, "Syntax: VERIFY <account> <code>")
            return
        if client.account is not None:
            nickserv_notice(ctx, f"You are already logged in as {client.account}.")
            return
        verified = await verify_registration(ctx, args[0], args[1])
        if client.closing:
            return
        if isinstance(verified, tuple):
            nickserv_notice(ctx, f"Not verified: {verified[1]}.")
            return
        accounts.login(client, verified, ctx.reply)
        nickserv_notice(ctx, f"Account {verified.name} created; you are logged in.")
    elif verb == "LOGOUT":
        if client.account is None:
            nickserv_notice(ctx, "You are not logged in.")
        elif client.account_kind == "agent":
            nickserv_notice(ctx, "Agents cannot log out; disconnect instead.")
        elif client.group is not None:
            nickserv_notice(ctx, "Other connections share your nick; disconnect them first, or disconnect instead.")
        else:
            accounts.logout(client, ctx.reply)
            nickserv_notice(ctx, "You are now logged out.")
    elif verb == "INFO":
        name = args[0] if args else (client.account or client.nick)
        found = await accounts.store.get_account(server.casefold(name))
        if found is None:
            nickserv_notice(ctx, f"No account named {name}.")
        else:
            owner = f", owned by {found.owner}" if found.owner else ""
            nickserv_notice(ctx, f"{found.name}: {found.kind}{owner}.")
    else:
        for line in NICKSERV_HELP:
            nickserv_notice(ctx, line)


@command("NICKSERV", min_params=1, aliases=("NS",))
async def handle_nickserv(ctx: CommandContext, msg: Message) -> None:
    """NICKSERV <command> [<args>...]
    Talks to NickServ: IDENTIFY, REGISTER, LOGOUT, INFO, HELP."""
    await nickserv(ctx, " ".join(msg.params))
