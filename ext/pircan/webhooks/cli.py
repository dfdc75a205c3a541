"""``pircd webhook``: the operator's view of webhooks, through the same rules and transactions as
WEBHOOK on IRC (audited with the actor ``operator``). The running server picks changes up within
``pircan.sweep_interval_ms`` (a minute by default)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ext.pircan.config import PircanConfig
from ext.pircan.ids import hexid, ts
from ext.pircan.service import webhooks as service
from ext.pircan.service.refusals import Refused
from ext.pircan.webhooks import payload, rules, store
from ext.pircan.webhooks.sender import DestinationError, Policy, Sender, check_url, signed_headers
from ircd.api import (
    ConfigError,
    Conn,
    OperationalError,
    cli_fail,
    db_options,
    extension_config_sync,
    get_account_sync,
    missing_table,
    open_database_sync,
    transaction,
)
from ircd.proto.msgid import EPOCH_MS, SEQ_BITS

__all__ = ["webhook"]

T = TypeVar("T")
ACTOR = "operator"
BY = " through the command line"

_db_options = db_options
_fail = cli_fail


def _new_id() -> int:
    """An id of this process: the current millisecond, and a random sequence in the upper half,
    which the server (counting up from 0 within a millisecond) never reaches."""
    ms = int(time.time() * 1000) - EPOCH_MS
    return (ms << SEQ_BITS) | (1 << (SEQ_BITS - 1)) | secrets.randbelow(1 << (SEQ_BITS - 1))


def _now() -> int:
    return int(time.time() * 1000)


def _open(config_path: str | None, db: str | None, name: str) -> tuple[Conn, str]:
    conn, casefold = open_database_sync(config_path, db)
    account = casefold(name)
    if get_account_sync(conn, account) is None:
        conn.close()
        _fail(f"no such account: {name}")
    return conn, account


def _run(conn: Conn, fn: Callable[..., T], *args: Any) -> T:
    """``fn(conn, *args)`` in one transaction; a missing table means the server never ran PIRCAN."""
    try:
        with transaction(conn):
            return fn(conn, *args)
    except OperationalError as exc:
        if missing_table(exc):
            _fail("this database has no webhook tables yet: start the server once (with PIRCAN) first")
        raise
    except Refused as exc:
        _fail(f"{exc.code}: {exc.text}" + (f" ({', '.join(exc.context)})" if exc.context else ""))
    finally:
        conn.close()


def _config(config_path: str | None) -> PircanConfig:
    try:
        return extension_config_sync(config_path, "pircan", PircanConfig)
    except ConfigError as exc:
        _fail(f"invalid configuration: {exc}")


@click.group("webhook", short_help="Show and manage the webhooks of PIRCAN accounts.")
def webhook() -> None:
    """Webhooks deliver every event of an account to its URL (docs/webhooks.md)."""


@webhook.command("set", short_help="Set an account's webhook URL.")
@click.argument("account")
@click.argument("url")
@_db_options
def set_(account: str, url: str, config_path: str | None, db: str | None) -> None:
    """Set ACCOUNT's webhook URL (a new webhook's secret is printed once)."""
    cfg = _config(config_path)
    try:
        asyncio.run(check_url(url, rules.networks(cfg.webhook_allowed_networks)))
    except DestinationError as exc:
        _fail(f"{exc.code}: {exc.text}")
    conn, folded = _open(config_path, db, account)
    endpoint, created = _run(conn, service.set_txn, folded, url, rules.new_secret(), _now(), ACTOR, _new_id(), BY)
    click.echo(f"webhook of {endpoint.account}: {endpoint.url}")
    if created:
        click.echo("secret (shown once; store it now):")
        click.echo(endpoint.secret)
    else:
        click.echo("its secret is unchanged (pircd webhook rotate makes a new one)")


@webhook.command("show", short_help="Print an account's webhook.")
@click.argument("account")
@_db_options
def show(account: str, config_path: str | None, db: str | None) -> None:
    """Print ACCOUNT's webhook (never its secret)."""
    conn, folded = _open(config_path, db, account)
    endpoint, pending, dead = _run(conn, store.endpoint_counts, folded)
    if endpoint is None:
        _fail(f"{folded} has no webhook")
    state = "active" if endpoint.enabled else f"disabled ({endpoint.disabled_reason} at {ts(endpoint.disabled_at)})"
    click.echo(f"{endpoint.account} {endpoint.url} {state} pending={pending} dead={dead} "
               f"last_success={ts(endpoint.last_success_at)} last_error={endpoint.last_error or '*'}")


@webhook.command("clear", short_help="Remove an account's webhook.")
@click.argument("account")
@_db_options
def clear(account: str, config_path: str | None, db: str | None) -> None:
    """Remove ACCOUNT's webhook; its pending deliveries are dropped."""
    conn, folded = _open(config_path, db, account)
    dropped = _run(conn, service.clear_txn, folded, _now(), ACTOR, _new_id(), BY)
    if dropped is None:
        _fail(f"{folded} has no webhook")
    click.echo(f"removed the webhook of {folded} ({dropped} pending deliver{'y' if dropped == 1 else 'ies'} dropped)")


@webhook.command("rotate", short_help="Give an account's webhook a new secret.")
@click.argument("account")
@_db_options
def rotate(account: str, config_path: str | None, db: str | None) -> None:
    """A new secret for ACCOUNT's webhook, printed once (the old one also signs for 24 hours)."""
    conn, folded = _open(config_path, db, account)
    secret = rules.new_secret()
    if not _run(conn, service.rotate_txn, folded, secret, _now(), ACTOR, _new_id(), BY):
        _fail(f"{folded} has no webhook")
    click.echo(f"new secret of {folded}'s webhook (shown once; the old one also signs for 24 hours):")
    click.echo(secret)


@webhook.command("test", short_help="Send a signed test event to an account's webhook.")
@click.argument("account")
@_db_options
def test(account: str, config_path: str | None, db: str | None) -> None:
    """Send a signed test event to ACCOUNT's webhook from this process; exit 1 unless it answers 2xx."""
    cfg = _config(config_path)
    conn, folded = _open(config_path, db, account)
    endpoint = _run(conn, store.get_endpoint, folded)
    if endpoint is None:
        _fail(f"{folded} has no webhook")
    policy = Policy.from_config(cfg)

    async def send() -> Any:
        sender = Sender(lambda: policy, max_idle=1)
        delivery = f"test-{hexid(_new_id())}"
        body = payload.test_body(delivery, endpoint, _now())
        try:
            return await sender.post(endpoint.url, body, signed_headers(endpoint, delivery, "test", body, time.time()))
        finally:
            await sender.aclose()

    outcome = asyncio.run(send())
    if not outcome.ok:
        _fail(f"{endpoint.url}: {outcome.error} ({outcome.elapsed_ms} ms)")
    click.echo(f"{endpoint.url}: HTTP {outcome.status} in {outcome.elapsed_ms} ms")


@webhook.command("dead", short_help="Print an account's dead letters.")
@click.argument("account")
@click.option("--limit", type=click.IntRange(1, service.DEAD_MAX), default=50, show_default=True)
@_db_options
def dead(account: str, limit: int, config_path: str | None, db: str | None) -> None:
    """Print ACCOUNT's newest dead letters, oldest first: delivery, event, type, died, tries, reason, last error."""
    conn, folded = _open(config_path, db, account)
    letters = _run(conn, store.dead_letters, folded, limit)
    if not letters:
        click.echo("no dead letters")
    for d in letters:
        click.echo(f"{hexid(d.id)} {hexid(d.event_id)} {d.kind} {ts(d.died_at)} {d.tries} {d.reason} "
                   f"{d.last_error or '*'}")


@webhook.command("replay", short_help="Queue an account's dead letters again.")
@click.argument("account")
@click.argument("delivery_ids", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every dead letter of the account.")
@_db_options
def replay(account: str, delivery_ids: tuple[str, ...], every: bool, config_path: str | None,
           db: str | None) -> None:
    """Queue ACCOUNT's dead letters DELIVERY_IDS (or --all) again, with their delivery ids and bodies."""
    if every == bool(delivery_ids):
        _fail("give delivery ids, or --all")
    try:
        ids = service.parse_delivery_ids("ALL" if every else list(delivery_ids))
    except Refused as exc:
        _fail(f"{exc.code}: {exc.text} ({', '.join(exc.context)})")
    conn, folded = _open(config_path, db, account)
    count = _run(conn, service.replay_txn, folded, ids, _now(), ACTOR, _new_id(), BY)
    click.echo(f"queued {count} dead letter{'' if count == 1 else 's'} of {folded} again")
