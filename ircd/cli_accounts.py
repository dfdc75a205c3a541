"""``pircd account ...`` and ``pircd agent ...``: manage accounts in the server's database.

These work on the same database the server uses (its SQLite file or its PostgreSQL
database), also while it runs: each command is one short transaction, and the running
server notices the change (SQLite's data_version; on PostgreSQL the commit's notification)
within a second. They find the configuration, and so the database, the way ``pircd serve``
does (``config.find_config``), say on standard error which database they use, and on SQLite
only the ``add`` commands may create the file.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from typing import NoReturn

import click

from ircd.store.writes import Conn
from ircd.accountnames import valid_account_name
from ircd.cli_config import CONFIG_HELP, fail_config
from ircd.config import CONFIG_ENV, Config, ConfigError, find_config, load
from ircd.proto.casemap import get_casefold
from ircd.store import accounts as rows
from ircd.store.db import connect_sync, describe, migrate, transaction
from ircd.store.dialect import is_url
from ircd.store.errors import CANNOT_OPEN, DatabaseError, IntegrityError, StoreOpenError
from ircd.store.migrate import version
from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK


class Ctx:
    def __init__(self, config: Config, db: str, named: bool = True) -> None:
        """``named``: the database was named by ``--db`` or a configuration file, not a default."""
        self.config = config
        self.db = db
        self.named = named
        self.casefold = get_casefold(config.server.casemapping)
        self._announced = False

    def connect(self, create: bool = False) -> Conn:
        """The server's database with the core migrations applied. On SQLite only ``create``
        (the commands that add accounts) may make a new file, and only one that was named
        (``--db`` or a configuration file): ``./pircd.db`` by default alone is not made next
        to a server that runs elsewhere. A PostgreSQL database exists already (its operator
        made it); pircd's tables are made in it by whichever command comes first."""
        where = describe(self.db)
        url = is_url(self.db)
        new = not url and not os.path.exists(self.db)
        if new and not (create and self.named):
            _fail(f"no database at {where}: give the server's --config (or set {CONFIG_ENV}) or --db")
        try:
            conn = connect_sync(self.db, self.config.storage.durability)
        except StoreOpenError as exc:  # names the database (without its password) and the problem
            _fail(str(exc))
        except DatabaseError as exc:
            _fail(f"cannot open database {where}: {exc}")
        try:
            new = new or (url and version(conn, CORE_TRACK) == 0)
            migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
        except CANNOT_OPEN as exc:  # NewerSchema: made by a newer pircd
            conn.close()
            _fail(f"cannot open database {where}: {exc}")
        if not self._announced:
            self._announced = True
            click.echo(f"using database {where}" + (f" (new {'database' if url else 'file'})" if new else ""),
                       err=True)
        return conn


def open_context(config_path: str | None, db: str | None) -> Ctx:
    config_path = find_config(config_path)
    try:
        config = load(config_path) if config_path else Config()
    except ConfigError as exc:
        fail_config(exc)
    from ircd import passwords

    accounts = config.accounts
    passwords.configure(accounts.argon2_time_cost, accounts.argon2_memory_kib, accounts.argon2_parallelism)
    return Ctx(config, db or config.server.db, named=bool(db or config_path))


db_options = [
    click.option("--config", "config_path", type=click.Path(dir_okay=False), help=CONFIG_HELP),
    click.option("--db", metavar="PATH|URL",
                 help="The SQLite file or postgresql:// URL (default: server.db of the configuration)."),
]


def with_db(fn):
    for option in reversed(db_options):
        fn = option(fn)
    return fn


def _credentials(password: str, iterations: int) -> tuple[str, rows.ScramKeys]:
    from ircd.passwords import hash_sync
    from ircd.sasl.scram import derive_keys

    return hash_sync(password), derive_keys(password, None, iterations)


def read_password(password_stdin: bool, generate: bool, stdin_flag: str = "--password-stdin") -> tuple[str, bool]:
    """The password and whether it was generated (and must be printed once). Without a terminal
    to ask on (a script, a pipe), one line names ``stdin_flag``, the option for scripts."""
    if generate:
        return secrets.token_urlsafe(18), True
    if password_stdin:
        try:
            password = sys.stdin.readline().rstrip("\r\n")
        except UnicodeDecodeError:
            _fail("the password on standard input is not UTF-8")
    else:
        if not sys.stdin.isatty():
            _fail(f"no terminal to ask for the password on: in a script, give it on standard input "
                  f"with {stdin_flag}", 2)
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    if not password:
        click.echo("error: empty password", err=True)
        sys.exit(1)
    return password, False


def _fail(message: str, code: int = 1) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def check_name(ctx: Ctx, name: str) -> None:
    if not valid_account_name(name, ctx.config.limits.nicklen):
        _fail(f"{name!r} is not a valid account name (nick rules, at most {ctx.config.limits.nicklen} characters)")


def create_account(ctx: Ctx, name: str, kind: str, owner: str | None, password: str) -> rows.Account:
    check_name(ctx, name)
    folded = ctx.casefold(name)
    owner_folded = ctx.casefold(owner) if owner else None
    if kind == "agent" and owner_folded is None:
        _fail("an agent needs --owner")
    if kind == "person" and owner_folded is not None:
        _fail("only agents have owners")
    hashed, keys = _credentials(password, ctx.config.accounts.scram_iterations)
    conn = ctx.connect(create=True)
    try:
        with transaction(conn):
            if owner_folded is not None:
                owner_row = rows.get_account(conn, owner_folded)
                if owner_row is None:
                    _fail(f"no account named {owner!r}")
                if owner_row.kind != "person":  # type: ignore[union-attr]
                    _fail("an agent's owner must be a person account")
            account = rows.insert_account(
                conn, name, folded, kind, owner_folded, int(time.time() * 1000), hashed, keys,
                max_agents=ctx.config.accounts.agents_per_owner,
            )
    except rows.AccountExists:
        _fail(f"account {name!r} already exists")
    except rows.TooManyAgents as exc:
        _fail(f"{exc.owner} already owns {exc.limit} agent{'s' if exc.limit != 1 else ''} (accounts.agents_per_owner)")
    finally:
        conn.close()
    return account


@click.group("account")
def account_group() -> None:
    """Create, list and change accounts."""


@account_group.command("add", short_help="Create an account.")
@click.argument("name")
@click.option("--kind", type=click.Choice(["person", "agent"]), default="person", show_default=True)
@click.option("--owner", help="The owning person account (agents only).")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--generate", is_flag=True, help="Generate a password and print it once.")
@with_db
def account_add(name: str, kind: str, owner: str | None, password_stdin: bool, generate: bool,
                config_path: str | None, db: str | None) -> None:
    """Create an account; without --password-stdin or --generate, ask for its password twice."""
    if password_stdin and generate:
        _fail("choose one of --password-stdin and --generate", 2)
    if kind == "agent" and not owner:  # before asking for a password
        _fail("an agent needs --owner")
    if kind == "person" and owner:
        _fail("only agents have owners")
    ctx = open_context(config_path, db)
    check_name(ctx, name)
    ctx.connect(create=True).close()  # the database opens, before asking for a password
    password, generated = read_password(password_stdin, generate)
    account = create_account(ctx, name, kind, owner, password)
    click.echo(f"created {account.kind} account {account.name}" + (f" owned by {account.owner}" if account.owner else ""))
    if generated:
        click.echo(f"password: {password}")


@account_group.command("list")
@click.option("--owner", help="Only the agents of this owner.")
@with_db
def account_list(owner: str | None, config_path: str | None, db: str | None) -> None:
    """List accounts: name, kind, owner, created, state."""
    ctx = open_context(config_path, db)
    conn = ctx.connect()
    try:
        accounts = rows.list_accounts(conn, ctx.casefold(owner) if owner else None)
    finally:
        conn.close()
    if not accounts:
        click.echo("no accounts")
        return
    click.echo(f"{'NAME':<24} {'KIND':<7} {'OWNER':<24} {'CREATED':<20} STATE")
    for a in accounts:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(a.created_at / 1000))
        state = "suspended" if a.suspended else "active"
        click.echo(f"{a.name:<24} {a.kind:<7} {a.owner or '-':<24} {created:<20} {state}")


@account_group.command("passwd", short_help="Set an account's password.")
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the new password from standard input.")
@click.option("--generate", is_flag=True, help="Generate a password and print it once.")
@with_db
def account_passwd(name: str, password_stdin: bool, generate: bool, config_path: str | None, db: str | None) -> None:
    """Set an account's password; without --password-stdin or --generate, ask for it twice."""
    if password_stdin and generate:
        _fail("choose one of --password-stdin and --generate", 2)
    ctx = open_context(config_path, db)
    ctx.connect().close()  # the database opens, before asking for a password
    password, generated = read_password(password_stdin, generate)
    hashed, keys = _credentials(password, ctx.config.accounts.scram_iterations)
    conn = ctx.connect()
    try:
        with transaction(conn):
            changed = rows.set_password(conn, ctx.casefold(name), hashed, keys)
    finally:
        conn.close()
    if not changed:
        _fail(f"no account named {name!r}")
    click.echo(f"password of {name} changed")
    if generated:
        click.echo(f"password: {password}")


def _set_suspended(name: str, value: bool, config_path: str | None, db: str | None) -> None:
    ctx = open_context(config_path, db)
    conn = ctx.connect()
    try:
        with transaction(conn):
            changed = rows.set_suspended(conn, ctx.casefold(name), value)
    finally:
        conn.close()
    if not changed:
        _fail(f"no account named {name!r}")
    click.echo(f"{name} {'suspended' if value else 'unsuspended'}")


@account_group.command("suspend", short_help="Suspend an account (no logins, its connections close).")
@click.argument("name")
@with_db
def account_suspend(name: str, config_path: str | None, db: str | None) -> None:
    """Suspend an account: it cannot log in, and its connections are closed."""
    _set_suspended(name, True, config_path, db)


@account_group.command("unsuspend")
@click.argument("name")
@with_db
def account_unsuspend(name: str, config_path: str | None, db: str | None) -> None:
    """Let a suspended account log in again."""
    _set_suspended(name, False, config_path, db)


@account_group.command("del")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@with_db
def account_del(name: str, yes: bool, config_path: str | None, db: str | None) -> None:
    """Delete an account (and the agents it owns)."""
    ctx = open_context(config_path, db)
    if not yes:
        click.confirm(f"Delete account {name} and any agents it owns?", abort=True)
    conn = ctx.connect()
    try:
        with transaction(conn):
            deleted = rows.delete_account(conn, ctx.casefold(name))
    finally:
        conn.close()
    if not deleted:
        _fail(f"no account named {name!r}")
    click.echo(f"deleted {name}")


@account_group.command("certfp", short_help="Add, remove or list certificate fingerprints (SASL EXTERNAL).")
@click.argument("name")
@click.argument("action", type=click.Choice(["add", "del", "list"]))
@click.argument("fingerprint", required=False)
@with_db
def account_certfp(name: str, action: str, fingerprint: str | None, config_path: str | None, db: str | None) -> None:
    """Add, remove or list NAME's TLS client certificate fingerprints for SASL EXTERNAL:
    add FINGERPRINT, del FINGERPRINT, or list. A fingerprint is the certificate's SHA-256
    in hex (64 digits, colons allowed)."""
    ctx = open_context(config_path, db)
    folded = ctx.casefold(name)
    conn = ctx.connect()
    try:
        if rows.get_account(conn, folded) is None:
            _fail(f"no account named {name!r}")
        if action == "list":
            for fp in rows.certfps(conn, folded):
                click.echo(fp)
            return
        if not fingerprint:
            _fail("give the fingerprint", 2)
        fp = fingerprint.replace(":", "").lower()
        if len(fp) != 64 or any(c not in "0123456789abcdef" for c in fp):
            _fail("a fingerprint is 64 hex digits (SHA-256)", 2)
        with transaction(conn):
            if action == "add":
                try:
                    rows.add_certfp(conn, folded, fp)
                except IntegrityError:
                    _fail("that fingerprint is already registered")
            elif not rows.remove_certfp(conn, folded, fp):
                _fail("no such fingerprint on that account")
    finally:
        conn.close()
    click.echo(f"{action} {fp} for {name}")


@click.group("agent")
def agent_group() -> None:
    """Create and list agent accounts."""


@agent_group.command("add")
@click.argument("name")
@click.option("--owner", required=True, help="The owning person account.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input instead.")
@with_db
def agent_add(name: str, owner: str, password_stdin: bool, config_path: str | None, db: str | None) -> None:
    """Create an agent owned by OWNER. Its password is generated and printed once, or read
    from standard input with --password-stdin (for provisioning scripts)."""
    ctx = open_context(config_path, db)
    check_name(ctx, name)
    ctx.connect(create=True).close()
    password, generated = read_password(password_stdin, generate=not password_stdin)
    account = create_account(ctx, name, "agent", owner, password)
    click.echo(f"created agent {account.name} owned by {account.owner}")
    if generated:
        click.echo(f"password: {password}")


@agent_group.command("list")
@click.option("--owner", help="Only this owner's agents.")
@with_db
def agent_list(owner: str | None, config_path: str | None, db: str | None) -> None:
    """List agents and their owners."""
    ctx = open_context(config_path, db)
    conn = ctx.connect()
    try:
        agents = [a for a in rows.list_accounts(conn, ctx.casefold(owner) if owner else None) if a.is_agent]
    finally:
        conn.close()
    for a in agents:
        click.echo(f"{a.name} owner={a.owner}{' suspended' if a.suspended else ''}")
    if not agents:
        click.echo("no agents")


@account_group.command("issue-cert", short_help="Issue a client certificate for SASL EXTERNAL.")
@click.argument("name")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=".", show_default=True,
              help="Directory for NAME.pem and NAME.key.")
@with_db
def account_issue_cert(name: str, out_dir: str, config_path: str | None, db: str | None) -> None:
    """Issue a TLS client certificate for NAME from server.tls_client_ca and register its
    fingerprint, so the account can log in with SASL EXTERNAL."""
    from pathlib import Path

    from ircd.tlsgen import issue_client_cert

    ctx = open_context(config_path, db)
    server = ctx.config.server
    if not server.tls_client_ca or not server.tls_client_ca_key:
        _fail("server.tls_client_ca and server.tls_client_ca_key must be set (pircd init makes them)")
    folded = ctx.casefold(name)
    conn = ctx.connect()
    try:
        if rows.get_account(conn, folded) is None:
            _fail(f"no account named {name!r}")
        out = Path(out_dir)
        cert, key = out / f"{name}.pem", out / f"{name}.key"
        try:
            out.mkdir(parents=True, exist_ok=True)
            fp = issue_client_cert(Path(server.tls_client_ca), Path(server.tls_client_ca_key), name, cert, key)  # type: ignore[arg-type]
        except OSError as exc:
            _fail(f"cannot issue the certificate: {exc.filename}: {exc.strerror}")
        except ValueError as exc:  # not a PEM certificate or key
            _fail(f"cannot use the client CA ({server.tls_client_ca}, {server.tls_client_ca_key}): {exc}")
        with transaction(conn):
            rows.add_certfp(conn, folded, fp)
    finally:
        conn.close()
    click.echo(f"wrote {cert} and {key}")
    click.echo(f"fingerprint {fp} registered for {name}")
