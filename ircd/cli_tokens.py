"""``pircd token ...``: bearer tokens for the HTTP transports (MCP), managed by the operator.

Like the account commands, these work on the server's database, also while
it runs; a token revoked here is refused at its next request (the server
also ends the MCP sessions that use it within a second).
"""

from __future__ import annotations

import time

import click

from ircd.store.writes import Conn
from ircd.cli_accounts import _fail, open_context, with_db
from ircd.store import accounts as account_rows
from ircd.store import tokens as rows
from ircd.store.db import migrate, transaction
from ircd.store.errors import IntegrityError
from ircd.tokens import valid_label

__all__ = ["token_group"]


def _connect(config_path: str | None, db: str | None) -> tuple[Conn, object]:
    ctx = open_context(config_path, db)
    conn = ctx.connect()
    migrate(conn, rows.TRACK, rows.MIGRATIONS)
    return conn, ctx


def _ms(value: int | None) -> str:
    if value is None:
        return "never"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(value / 1000))


@click.group("token")
def token_group() -> None:
    """Bearer tokens for the HTTP transports (MCP at /mcp): add, list, revoke."""


@token_group.command("add")
@click.argument("account")
@click.option("--name", "label", help="A label for the token (default: token-<6 hex digits>).")
@with_db
def token_add(account: str, label: str | None, config_path: str | None, db: str | None) -> None:
    """Make a token for ACCOUNT and print it once (only its hash is stored)."""
    conn, ctx = _connect(config_path, db)
    try:
        folded = ctx.casefold(account)  # type: ignore[attr-defined]
        if account_rows.get_account(conn, folded) is None:
            _fail(f"no account named {account!r}")
        ident, secret, text = rows.make_token()
        label = label if label is not None else f"token-{ident & 0xFFFFFF:06x}"
        if not valid_label(label):
            _fail("token names are 1-64 letters, digits, '-', '_' or '.'")
        try:
            with transaction(conn):
                rows.insert(conn, ident, folded, label, secret, int(time.time() * 1000), "operator")
        except IntegrityError:
            _fail(f"{folded} already has a token named {label!r} (revoke it first, or choose another --name)")
    finally:
        conn.close()
    click.echo(f"token {label} for {folded} (shown once; store it now):")
    click.echo(text)


@token_group.command("list")
@click.argument("account")
@with_db
def token_list(account: str, config_path: str | None, db: str | None) -> None:
    """List ACCOUNT's tokens (names and dates; never the tokens themselves)."""
    conn, ctx = _connect(config_path, db)
    try:
        folded = ctx.casefold(account)  # type: ignore[attr-defined]
        if account_rows.get_account(conn, folded) is None:
            _fail(f"no account named {account!r}")
        tokens = rows.list_for(conn, folded)
    finally:
        conn.close()
    if not tokens:
        click.echo(f"{folded} has no tokens")
    for t in tokens:
        click.echo(f"{t.name}  created {_ms(t.created_at)} by {t.created_by}  last used {_ms(t.last_used_at)}")


@token_group.command("revoke")
@click.argument("account")
@click.option("--name", "label", help="The token to revoke (default: every token of ACCOUNT).")
@with_db
def token_revoke(account: str, label: str | None, config_path: str | None, db: str | None) -> None:
    """Revoke ACCOUNT's token named --name, or all of ACCOUNT's tokens."""
    conn, ctx = _connect(config_path, db)
    try:
        folded = ctx.casefold(account)  # type: ignore[attr-defined]
        if account_rows.get_account(conn, folded) is None:
            _fail(f"no account named {account!r}")
        with transaction(conn):
            ids = rows.revoke(conn, folded, label)
    finally:
        conn.close()
    if label is not None and not ids:
        _fail(f"{folded} has no token named {label!r}")
    click.echo(f"revoked {len(ids)} token{'s' if len(ids) != 1 else ''} of {folded}")
