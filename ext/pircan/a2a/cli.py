"""``pircd a2a``: the keys that sign intro tokens for direct A2A.

``pircd a2a keys`` lists them; ``pircd a2a rotate-key`` makes a new signing key. The old one stops
signing at once and stays published (``/.well-known/jwks.json``) until the last token it signed has
expired, so no token in use stops verifying; ``--drop-old`` stops publishing every old key at once
(after a leak: the tokens they signed fail from then on). The running server notices at its next
intro token: it reads the signing key from the database each time.
"""

from __future__ import annotations

import secrets
import time

import click

from ext.pircan.a2a import keys
from ext.pircan.a2a import store as astore
from ext.pircan.ids import ts
from ircd.api import Conn, cli_fail, db_options, open_database_sync, transaction

__all__ = ["a2a"]

@click.group("a2a", short_help="The keys of intro tokens for direct A2A.")
def a2a() -> None:
    """The Ed25519 keys the network signs intro tokens with (direct A2A, docs/a2a.md)."""


def _open(config_path: str | None, db: str | None) -> Conn:
    conn, _ = open_database_sync(config_path, db)
    version = conn.execute("SELECT version FROM schema_versions WHERE track = ?", (astore.TRACK,)).fetchone()
    if version is None:
        conn.close()
        cli_fail("this database has no A2A keys yet: start the server once (it makes the first)")
    return conn


def _show(key: astore.SigningKey, now: int) -> str:
    if key.retired_at is None:
        status = "signing"
    elif key.published(now):
        status = f"retired {ts(key.retired_at)}, published until {ts(key.signed_until)}"
    else:
        status = f"retired {ts(key.retired_at)}, no longer published"
    return f"{key.kid} created {ts(key.created_at)} {status}"


@a2a.command("keys", short_help="List the keys that sign intro tokens.")
@db_options
def list_keys(config_path: str | None, db: str | None) -> None:
    """List the keys, oldest first: the signing one, and the retired ones with how long they stay published."""
    conn = _open(config_path, db)
    try:
        found = astore.all_keys(conn)
    finally:
        conn.close()
    now = int(time.time() * 1000)
    for key in found:
        click.echo(_show(key, now))


@a2a.command("rotate-key", short_help="Make a new key for signing intro tokens.")
@click.option("--drop-old", is_flag=True, help="Stop publishing the old keys at once: tokens they signed fail.")
@db_options
def rotate_key(drop_old: bool, config_path: str | None, db: str | None) -> None:
    """Make a new signing key; the old one is published until the tokens it signed have expired."""
    conn = _open(config_path, db)
    now = int(time.time() * 1000)
    kid = secrets.token_hex(8)  # opaque (RFC 7517); the server's own are ids, these random
    try:
        with transaction(conn):
            astore.insert_key(conn, kid, keys.new_private_key(), now)
            dropped = astore.retire_keys(conn, now) if drop_old else 0
        found = astore.all_keys(conn)
    finally:
        conn.close()
    click.echo(f"new signing key {kid}" + (f"; {dropped} old key(s) no longer published" if drop_old else ""))
    for key in found:
        click.echo(_show(key, now))
