"""The ``pircd`` command line: serve, init, check-config, hash-password (backup and restore in
``cli_backup``).

Every error a user can cause (bad input, a file that cannot be read, a
database that cannot be opened) ends a command with a message on standard
error and a non-zero exit status, never a traceback: 1 for an error, 2 for a
configuration that is not valid or a usage error.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

import click

from ircd import __version__, build
from ircd.cli_config import CONFIG_HELP, fail_config
from ircd.config import CONFIG_ENV, Config, ConfigError, find_config, load, with_overrides
from ircd.store.errors import DatabaseError, StoreUnavailable

log = logging.getLogger("pircd")


def _load_config(path: str | None) -> Config:
    if path is None:
        return Config()
    return load(path)


_fail_config = fail_config


class _Main(click.Group):
    """Errors from the environment (a file that cannot be read or written, a database that is
    locked or damaged) end any command with one line rather than a traceback.

    The commands of this module are there from the start; the others (accounts, tokens, history,
    backup, the extensions' commands) are added when one of them, or the list of all, is asked
    for: ``serve`` does not keep their modules in memory for the server's lifetime."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and _register_groups():
            command = super().get_command(ctx, cmd_name)
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        _register_groups()
        return super().list_commands(ctx)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DatabaseError as exc:
            click.echo(f"error: database: {exc}", err=True)
            sys.exit(1)
        except StoreUnavailable as exc:  # PostgreSQL went away in the middle of the command
            click.echo(f"error: database: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # output closed early (| head): click's own handling
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"error: {where}{exc.strerror or exc}", err=True)
            sys.exit(1)


@click.group(cls=_Main, epilog=f"""\b
Which configuration a command uses (serve and the commands that open the
database alike): --config FILE; else the file named by ${CONFIG_ENV}; else
./pircd.toml when there is one; else the built-in defaults. --db replaces
the file's server.db (a SQLite file, or a postgresql:// URL). The database
commands say on standard error which database they use.""")
@click.version_option(__version__, prog_name="pircd", message=f"%(prog)s, version %(version)s ({build()} build)")
def main() -> None:
    """pircd: an IRC server for networks where AI agents and people talk."""


def build_config(config_path: str | None, listen: tuple[str, ...], tls_listen: tuple[str, ...],
                 db: str | None, name: str | None, http_listen: tuple[str, ...] = (),
                 no_http: bool = False) -> Config:
    config = _load_config(config_path)
    http: dict[str, object] = {}
    if http_listen:
        http["listen"] = list(http_listen)
    if no_http:
        http["enabled"] = False
    if http:
        config = with_overrides(config, http=http)
    overrides: dict[str, object] = {}
    if listen:
        overrides["listen"] = list(listen)
    if tls_listen:
        overrides["tls_listen"] = list(tls_listen)
    if db:
        overrides["db"] = db
    if name:
        overrides["name"] = name
    if overrides:
        config = with_overrides(config, server=overrides)
    return config


@main.command(short_help="Run the server in the foreground.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help=CONFIG_HELP)
@click.option("--listen", multiple=True, metavar="HOST:PORT", help="Plain listener (repeatable).")
@click.option("--tls-listen", multiple=True, metavar="HOST:PORT", help="TLS listener (repeatable).")
@click.option("--db", metavar="PATH|URL", help="SQLite database file or postgresql:// URL.")
@click.option("--name", metavar="SERVERNAME", help="Server name, e.g. irc.example.org.")
@click.option("--http-listen", multiple=True, metavar="HOST:PORT",
              help="HTTP listener (MCP, A2A, portal, WebSocket; repeatable), instead of http.listen.")
@click.option("--no-http", is_flag=True, help="No HTTP listener (http.enabled = false).")
@click.option("--no-uvloop", is_flag=True, help="Use the plain asyncio event loop even if uvloop is installed.")
@click.option("--log-format", type=click.Choice(["plain", "json"]),
              help="Log lines as text or as one JSON object each, instead of log.format.")
def serve(config_path: str | None, listen: tuple[str, ...], tls_listen: tuple[str, ...], db: str | None,
          name: str | None, http_listen: tuple[str, ...], no_http: bool, no_uvloop: bool,
          log_format: str | None) -> None:
    """Run the server in the foreground until SIGTERM or SIGINT (SIGHUP reloads the
    configuration). Without a configuration file: plain IRC on 127.0.0.1:6667 and the
    database ./pircd.db, HTTP on 127.0.0.1:6680. A second server on one machine needs its
    own ports for both: --listen and --http-listen (or --no-http)."""
    from ircd.app import build_server, check_files
    from ircd.log import setup_logging
    from ircd.net.runner import StartupError
    from ircd.net.runner import serve as run

    if http_listen and no_http:
        click.echo("error: --http-listen and --no-http exclude each other", err=True)
        sys.exit(2)
    config_path = find_config(config_path)
    try:
        config = build_config(config_path, listen, tls_listen, db, name, http_listen, no_http)
        check_files(config)
    except ConfigError as exc:
        _fail_config(exc)
        return
    setup_logging(log_format or config.log.format, config.log.level)
    if config_path:
        log.info("using config %s", os.path.abspath(config_path))
    else:
        log.info("no config file: the built-in defaults")

    def reload() -> Config:
        return build_config(config_path, listen, tls_listen, db, name, http_listen, no_http)

    try:
        server = build_server(config, config_path=config_path, reload=reload if config_path else None)
    except ConfigError as exc:
        _fail_config(exc)
        return
    try:
        run(server, use_uvloop=not no_uvloop)
    except StartupError as exc:
        click.echo(f"pircd: {exc}", err=True)
        sys.exit(1)


@main.command("check-config", short_help="Check a configuration file, key by key.")
@click.argument("path", type=click.Path(dir_okay=False))
def check_config(path: str) -> None:
    """Check a configuration file as serve would, and say what is wrong, key by key: the core
    sections, the extensions and their sections, then the files it names (TLS certificate, key
    and client CA, the database's directory). Exit status 0: valid; 2: not valid."""
    from ircd.app import check_extensions, check_files

    try:
        config = load(path)
        check_extensions(config)
        check_files(config)
    except ConfigError as exc:
        _fail_config(exc)
        return
    click.echo(f"{path}: configuration is valid")


@main.command(short_help="Write a config and TLS files into a directory.")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--name", default="irc.pircd.local", show_default=True, help="Server name.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
def init(directory: str, name: str, force: bool) -> None:
    """Write a commented pircd.toml, a self-signed TLS certificate and a client CA into
    DIRECTORY (created if needed), with the database DIRECTORY/pircd.db."""
    from ircd.tlsgen import write_client_ca, write_self_signed

    if not re.fullmatch(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+", name):
        click.echo(f"error: {name!r} is not a server name (letters, digits, '-' and at least one dot)", err=True)
        sys.exit(2)
    target = Path(directory)
    target.mkdir(mode=0o700, parents=True, exist_ok=True)
    config_file = target / "pircd.toml"
    cert, key = target / "tls" / "cert.pem", target / "tls" / "key.pem"
    for path in (config_file, cert, key):
        if path.exists() and not force:
            click.echo(f"{path} exists; use --force to overwrite", err=True)
            sys.exit(1)
    template = (Path(__file__).parent / "data" / "pircd.toml").read_text(encoding="utf-8")
    template = template.replace('name = "irc.pircd.local"', f'name = "{name}"', 1)
    template = template.replace('tls_listen = []', 'tls_listen = ["127.0.0.1:6697"]', 1)
    template = template.replace('# tls_cert = "tls/cert.pem"', f'tls_cert = "{cert.resolve()}"', 1)
    template = template.replace('# tls_key = "tls/key.pem"', f'tls_key = "{key.resolve()}"', 1)
    ca, ca_key = target / "tls" / "client-ca.pem", target / "tls" / "client-ca.key"
    template = template.replace('# tls_client_ca = "tls/client-ca.pem"', f'tls_client_ca = "{ca.resolve()}"', 1)
    template = template.replace('# tls_client_ca_key = "tls/client-ca.key"', f'tls_client_ca_key = "{ca_key.resolve()}"', 1)
    template = template.replace('db = "pircd.db"', f'db = "{(target / "pircd.db").resolve()}"', 1)
    # 0600 like the database: the file can hold SMTP and operator secrets (fchmod: also when
    # --force overwrites a file that others could read)
    fd = os.open(config_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fd, 0o600)
        fh.write(template)
    write_self_signed(cert, key, name)
    write_client_ca(ca, ca_key, name)
    click.echo(f"wrote {config_file}")
    click.echo(f"wrote {cert} and {key} (self-signed for {name})")
    click.echo(f"wrote {ca} and {ca_key} (issues client certificates: pircd account issue-cert NAME)")
    click.echo(f"start with: pircd serve --config {config_file}")
    click.echo(f"the account, agent, history and audit commands take the same --config, or: "
               f"export {CONFIG_ENV}={config_file.resolve()}")


@main.command("hash-password", short_help="Print an argon2id hash of a password.")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the password from standard input.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="Use the argon2 parameters of this config's [accounts] section.")
def hash_password(from_stdin: bool, config_path: str | None) -> None:
    """Print an argon2id hash for an [[opers]] block or server.password."""
    from ircd.passwords import configure, hash_sync

    if config_path:
        try:
            accounts = load(config_path).accounts
        except ConfigError as exc:
            _fail_config(exc)
            return
        configure(accounts.argon2_time_cost, accounts.argon2_memory_kib, accounts.argon2_parallelism)

    from ircd.cli_accounts import read_password

    password, _ = read_password(from_stdin, generate=False, stdin_flag="--stdin")
    click.echo(hash_sync(password))


_registered = False


def _register_groups() -> bool:
    """Add the other modules' commands to ``main``, once; False when they were there already."""
    global _registered
    if _registered:
        return False
    _registered = True
    import importlib
    import pkgutil

    from ircd.cli_accounts import account_group, agent_group
    from ircd.cli_backup import backup, restore
    from ircd.cli_history import history_group
    from ircd.cli_store import migrate_store
    from ircd.cli_tokens import token_group

    main.add_command(token_group)
    main.add_command(account_group)
    main.add_command(agent_group)
    main.add_command(history_group)
    main.add_command(backup)
    main.add_command(restore)
    main.add_command(migrate_store)
    # an extension may bring commands of its own (ext/<name>/cli.py: commands() -> click commands);
    # like load_extensions, this reaches ext only by name (tests/test_ext_boundary.py)
    ext = importlib.import_module("ext")
    for module in pkgutil.iter_modules(ext.__path__):
        try:
            cli_module = importlib.import_module(f"ext.{module.name}.cli")
        except ModuleNotFoundError:
            continue
        for cmd in cli_module.commands():
            main.add_command(cmd)
    return True


if __name__ == "__main__":
    main()
