"""Accounts over IRC: AUTHENTICATE (SASL) and REGISTER/VERIFY (draft/account-registration); the
NickServ service for clients that cannot do SASL is ``ircd.commands.nickserv``."""

from __future__ import annotations

import base64
import binascii
import logging
from typing import TYPE_CHECKING

from ircd.accountnames import InvalidAccountName, valid_account_name
from ircd.logins import login_limits, throttled_text
from ircd.caps import Capability
from ircd.commands.registration import try_register
from ircd.dispatch import CommandContext, command
from ircd.logins import source_of
from ircd.proto import numerics as N
from ircd.proto.lines import Message
from ircd.sasl import CHUNK, MAX_PAYLOAD, MECHANISMS, SaslState, split_payload
from ircd.sasl.scram import ScramError, ScramServer, fake_keys
from ircd.store import Account, AccountExists
from ircd.store.tokens import PREFIX as TOKEN_PREFIX
from ircd.tokens import TokenThrottled

if TYPE_CHECKING:
    from ircd.server import Server

log = logging.getLogger("pircd")

REGISTER_CAP = "draft/account-registration"


def _accounts_on(server: "Server") -> bool:
    return server.accounts is not None and server.config.accounts.enabled


def _mechanisms(server: "Server") -> list[str]:
    return list(MECHANISMS)


def _register_cap_value(server: "Server") -> str | None:
    cfg = server.config.accounts
    keys = (["before-connect"] if cfg.registration_before_connect else []) + (
        ["email-required"] if cfg.email_required else []
    )
    return ",".join(keys) or None


SASL_CAP = Capability("sasl", value=lambda s: ",".join(_mechanisms(s)), available=_accounts_on)
ACCOUNT_REGISTRATION_CAP = Capability(
    REGISTER_CAP,
    value=_register_cap_value,
    available=lambda s: _accounts_on(s) and s.config.accounts.registration,
)


def install_caps(server: "Server") -> None:
    server.caps.add(SASL_CAP)
    server.caps.add(ACCOUNT_REGISTRATION_CAP)


# AUTHENTICATE -----------------------------------------------------------------


def _sasl_fail(ctx: CommandContext, text: str = "SASL authentication failed") -> None:
    ctx.client.sasl = None
    ctx.reply.numeric(N.ERR_SASLFAIL, text)


@command("AUTHENTICATE", min_params=1, pre_registration=True)
async def handle_authenticate(ctx: CommandContext, msg: Message) -> None:
    """AUTHENTICATE <mechanism> | <base64 data> | + | *
    Logs in with SASL (PLAIN, SCRAM-SHA-256, EXTERNAL): name a mechanism, then send base64
    data in chunks of 400 bytes (+ for an empty chunk), or * to abort."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    accounts = server.accounts
    arg = msg.params[0]
    if accounts is None or not server.config.accounts.enabled:
        reply.numeric(N.ERR_SASLFAIL, "SASL authentication is not available")
        return
    state: SaslState | None = client.sasl
    if arg == "*":
        if state is None and client.account is None:
            reply.numeric(N.ERR_SASLABORTED, "SASL authentication aborted")
            return
        client.sasl = None
        reply.numeric(N.ERR_SASLABORTED, "SASL authentication aborted")
        return
    if client.account is not None:
        reply.numeric(N.ERR_SASLALREADY, "You have already authenticated using SASL")
        return
    if state is None:
        mechanism = arg.upper()
        if mechanism not in _mechanisms(server):
            reply.numeric(N.RPL_SASLMECHS, ",".join(_mechanisms(server)), "are available SASL mechanisms")
            _sasl_fail(ctx)
            return
        if mechanism == "EXTERNAL" and not client.certfp:
            _sasl_fail(ctx, "SASL EXTERNAL needs a TLS client certificate")
            return
        client.sasl = SaslState(mechanism)
        reply.send("AUTHENTICATE", "+")
        return
    if len(arg) > CHUNK:
        client.sasl = None
        reply.numeric(N.ERR_SASLTOOLONG, "SASL message too long")
        return
    if arg != "+":
        state.buffer += arg
    if len(state.buffer) > MAX_PAYLOAD:
        _sasl_fail(ctx, "SASL message too long")
        return
    if len(arg) == CHUNK:
        return  # more follows
    data, state.buffer = state.buffer, ""
    try:
        payload = base64.b64decode(data, validate=True) if data else b""
    except (binascii.Error, ValueError):
        _sasl_fail(ctx, "SASL authentication failed: invalid base64")
        return
    step = _STEPS[state.mechanism]
    await step(ctx, state, payload)
    if client.account is not None and not client.registered:
        try_register(ctx)


async def _plain(ctx: CommandContext, state: SaslState, payload: bytes) -> None:
    parts = payload.split(b"\x00")
    if len(parts) != 3:
        _sasl_fail(ctx)
        return
    try:
        authzid, authcid, password = (p.decode("utf-8") for p in parts)
    except UnicodeDecodeError:
        _sasl_fail(ctx)
        return
    if authzid and ctx.server.casefold(authzid) != ctx.server.casefold(authcid):
        _sasl_fail(ctx, "SASL authentication failed: authorization identity must match")
        return
    assert ctx.server.accounts is not None
    if password.startswith(TOKEN_PREFIX) and ctx.server.tokens is not None:
        _finish(ctx, await _plain_token(ctx, authcid, password))
        return
    result = await ctx.server.accounts.check_password(ctx.client.ip, authcid, password, "PLAIN")
    _finish(ctx, result)


async def _plain_token(ctx: CommandContext, authcid: str, token: str) -> Account | str:
    """A bearer token of the account as its PLAIN password (a hosted agent's ``PIRCAN_TOKEN``):
    checked and counted like a token on HTTP, so a wrong one costs the source an attempt."""
    server = ctx.server
    assert server.tokens is not None and server.store is not None
    identity = await server.tokens.verify(token, ctx.client.ip)
    if isinstance(identity, TokenThrottled):
        log.warning("login throttled account=%s ip=%s mechanism=PLAIN (token)", server.casefold(authcid), ctx.client.ip)
        return throttled_text(identity.retry_after)
    if identity is None or identity.account != server.casefold(authcid):
        log.warning("login failed account=%s ip=%s mechanism=PLAIN (token)", server.casefold(authcid), ctx.client.ip)
        return "Invalid account name or password"
    account = await server.store.get_account(identity.account)
    if account is None:
        return "Invalid account name or password"
    if account.suspended:
        return "Account suspended"
    return account


def _finish(ctx: CommandContext, result: Account | str) -> None:
    client = ctx.client
    if client.closing:
        return
    if isinstance(result, str):
        _sasl_fail(ctx, f"SASL authentication failed: {result}")
        return
    client.sasl = None
    assert ctx.server.accounts is not None
    ctx.server.accounts.login(client, result, ctx.reply)
    ctx.reply.numeric(N.RPL_SASLSUCCESS, "SASL authentication successful")


async def _external(ctx: CommandContext, state: SaslState, payload: bytes) -> None:
    server, client = ctx.server, ctx.client
    assert server.accounts is not None and client.certfp
    account = await server.store.get_account_by_certfp(client.certfp)  # type: ignore[union-attr]
    authzid = payload.decode("utf-8", "replace")
    if account is None or (authzid and server.casefold(authzid) != account.folded):
        log.warning("login failed certfp=%s ip=%s mechanism=EXTERNAL", client.certfp, client.ip)
        _sasl_fail(ctx)
        return
    if account.suspended:
        _sasl_fail(ctx, "SASL authentication failed: Account suspended")
        return
    _finish(ctx, account)


async def _scram(ctx: CommandContext, state: SaslState, payload: bytes) -> None:
    server, client = ctx.server, ctx.client
    accounts = server.accounts
    assert accounts is not None
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        _sasl_fail(ctx)
        return
    if state.step == 0:
        scram = ScramServer()
        try:
            name = scram.first(text)
        except ScramError:
            _sasl_fail(ctx)
            return
        folded = server.casefold(name)
        attempt = accounts.begin_login(client.ip, folded)  # counted now: the proof is checked later
        if isinstance(attempt, str):
            _sasl_fail(ctx, f"SASL authentication failed: {attempt}")
            return
        state.attempt = attempt
        account = await accounts.store.get_account(folded)
        keys = account.scram if account is not None else None
        state.account = account if keys is not None else None
        if keys is None:
            keys = fake_keys(folded, accounts.scram_secret)
        state.scram = scram
        state.step = 1
        _send_authenticate(ctx, scram.server_first_message(keys.salt, keys.iterations))
        return
    if state.step == 1:
        assert state.scram is not None and state.attempt is not None
        account = state.account
        final: str | None = None
        if account is not None and account.scram is not None:  # else step 0 answered with fake keys
            try:
                final = state.scram.final(text, account.scram)
            except ScramError:
                pass
        accounts.end_login(state.attempt, final is not None, client.ip, "SCRAM-SHA-256")
        if final is None or account is None:
            _sasl_fail(ctx)
            return
        if account.suspended:
            _sasl_fail(ctx, "SASL authentication failed: Account suspended")
            return
        state.step = 2
        _send_authenticate(ctx, final)
        return
    # step 2: the client acknowledged the server's signature with "+"
    if payload:
        _sasl_fail(ctx)
        return
    assert state.account is not None  # step 1 goes on only with an account
    _finish(ctx, state.account)


def _send_authenticate(ctx: CommandContext, message: str) -> None:
    for chunk in split_payload(base64.b64encode(message.encode()).decode()):
        ctx.reply.send("AUTHENTICATE", chunk)


_STEPS = {"PLAIN": _plain, "EXTERNAL": _external, "SCRAM-SHA-256": _scram}


# REGISTER / VERIFY --------------------------------------------------------------


@command("REGISTER", min_params=3, pre_registration=True)
async def handle_register(ctx: CommandContext, msg: Message) -> None:
    """REGISTER <account> {<email> | *} <password>
    Creates an account named after your nick (<account> may be * for your nick) and logs you in.
    Only when the server allows registration (draft/account-registration)."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    accounts = server.accounts
    cfg = server.config.accounts
    name, _email, password = msg.params[0], msg.params[1], msg.params[2]
    if accounts is None or not cfg.enabled or not cfg.registration:
        reply.fail("REGISTER", "DISABLED", name, "Account registration is disabled on this server")
        return
    if not client.registered and not cfg.registration_before_connect:
        reply.fail("REGISTER", "COMPLETE_CONNECTION_REQUIRED", name,
                   "Finish connecting before you register an account")
        return
    if client.account is not None:
        reply.fail("REGISTER", "ALREADY_AUTHENTICATED", client.account, "You are already logged in")
        return
    if client.nick == "*":
        refused = client.refused_nick
        if refused is not None and (name == "*" or server.casefold(name) == server.casefold(refused)):
            # the client did send NICK, for a name someone else holds: not available as an account
            reply.fail("REGISTER", "ACCOUNT_EXISTS", refused, "That name is in use; choose another nick")
        else:
            reply.fail("REGISTER", "NEED_NICK", "*", "Choose a nick first; your account is named after it")
        return
    if name == "*":
        name = client.nick
    if server.casefold(name) != client.nick_folded:
        reply.fail("REGISTER", "ACCOUNT_NAME_MUST_BE_NICK", name, "The account name must be your current nick")
        return
    if not valid_account_name(name, server.config.limits.nicklen):
        reply.fail("REGISTER", "BAD_ACCOUNT_NAME", name, "That account name is not allowed")
        return
    if len(password) < cfg.min_password_length:
        reply.fail("REGISTER", "WEAK_PASSWORD", name,
                   f"Passwords must be at least {cfg.min_password_length} characters long")
        return
    if server.casefold(name) in accounts.names:
        reply.fail("REGISTER", "ACCOUNT_EXISTS", name, "That account already exists")
        return
    if cfg.email_required:
        code, text = await accounts.start_verification(client, name, _email, password)
        if client.closing:
            return
        if code:
            reply.fail("REGISTER", code, name, text)
        else:
            reply.send("REGISTER", "VERIFICATION_REQUIRED", name,
                       f"A code was sent to {text}: send VERIFY {name} <code> to finish")
        return
    try:
        account = await accounts.create(name, password, email=None if _email == "*" else _email)
    except AccountExists:
        reply.fail("REGISTER", "ACCOUNT_EXISTS", name, "That account already exists")
        return
    except InvalidAccountName:
        reply.fail("REGISTER", "BAD_ACCOUNT_NAME", name, "That account name is not allowed")
        return
    if client.closing:
        return
    reply.send("REGISTER", "SUCCESS", account.name, "Account created")
    if client.account is None:
        accounts.login(client, account, reply)


@command("VERIFY", min_params=2, pre_registration=True)
async def handle_verify(ctx: CommandContext, msg: Message) -> None:
    """VERIFY <account> <code>
    Completes an account registration that needed a code sent by mail (when the server requires
    an email address), and logs you in."""
    server, client, reply = ctx.server, ctx.client, ctx.reply
    name, code = msg.params[0], msg.params[1]
    cfg = server.config.accounts
    if not client.registered and not cfg.registration_before_connect:
        reply.fail("VERIFY", "COMPLETE_CONNECTION_REQUIRED", name, "Finish connecting before you verify an account")
        return
    if client.account is not None:
        reply.fail("VERIFY", "ALREADY_AUTHENTICATED", client.account, "You are already logged in")
        return
    result = await verify_registration(ctx, name, code)
    if client.closing:
        return
    if isinstance(result, tuple):
        reply.fail("VERIFY", result[0], name, result[1])
        return
    reply.send("VERIFY", "SUCCESS", result.name, "Account created")
    if client.account is None:
        assert server.accounts is not None
        server.accounts.login(client, result, reply)


async def verify_registration(ctx: CommandContext, name: str, code: str) -> Account | tuple[str, str]:
    """The account a right code creates, or a FAIL code and its text (VERIFY and NickServ VERIFY)."""
    server = ctx.server
    accounts = server.accounts
    if accounts is None or not server.config.accounts.enabled or not server.config.accounts.registration:
        return "INVALID_CODE", "There is no registration waiting for a code"
    folded = server.casefold(name)
    source = source_of(ctx.client.ip)
    # a guess counts in the login throttle, per source first, like a password (ircd/logins.py)
    attempt = server.logins.begin(source, "v:" + folded, server.clock(), login_limits(server.config.accounts))
    if isinstance(attempt, float):
        return "TEMPORARILY_UNAVAILABLE", "Too many wrong codes lately; try again later"
    pending = accounts.verifications.take(folded, code, server.clock(), source)
    if pending is None:
        server.logins.failed(attempt)
        return "INVALID_CODE", "That code is not valid for this account, or no longer"
    server.logins.succeeded(attempt)
    try:
        return await accounts.create_hashed(pending.name, pending.password_hash, pending.keys, email=pending.email)
    except AccountExists:
        return "ACCOUNT_EXISTS", "That account already exists"
