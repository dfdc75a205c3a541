"""``pircd history ...``: stored message history in the server's database.

These work on the same SQLite file as the server, also while it runs. A
prune deletes in chunks of a few thousand lines, one short transaction each,
so the running server (which writes history in batches) never waits on it
for long.
"""

from __future__ import annotations

import math
import time

import click

from ircd.cli_accounts import _fail, open_context, with_db
from ircd.proto.timestamps import first_id_at
from ircd.store import history as rows
from ircd.store.db import transaction

_CHUNK = 5000


@click.group("history", short_help="Count or prune stored message history.")
def history_group() -> None:
    """Stored channel and direct-message history (served by CHATHISTORY)."""


@history_group.command("prune")
@click.option("--older-than", "days", type=click.FloatRange(min=0), metavar="DAYS",
              help="Delete lines older than DAYS days (default: history.retention_days of the config).")
@click.option("--channel", metavar="NAME", help="Only this channel's history.")
@with_db
def history_prune(days: float | None, channel: str | None, config_path: str | None, db: str | None) -> None:
    """Delete old history lines (the server may keep running)."""
    if days is not None and not math.isfinite(days):
        _fail("--older-than takes a number of days", 2)
    ctx = open_context(config_path, db)
    if days is None:
        days = ctx.config.history.retention_days
        if not days:
            _fail("give --older-than DAYS (history.retention_days is 0: keep everything)")
    if channel is not None and channel[:1] != "#":
        _fail(f"{channel!r} is not a channel name")
    before = first_id_at(int((time.time() - days * 86400) * 1000))
    target = ctx.casefold(channel) if channel else None
    conn = ctx.connect()
    total = 0
    try:
        while True:
            with transaction(conn):
                deleted = rows.prune(conn, before, target, _CHUNK)
            total += deleted
            if deleted < _CHUNK:
                break
    finally:
        conn.close()
    where = f" of {channel}" if channel else ""
    click.echo(f"deleted {total} history lines{where} older than {days:g} days")


@history_group.command("count")
@click.option("--channel", metavar="NAME", help="Only this channel's history.")
@with_db
def history_count(channel: str | None, config_path: str | None, db: str | None) -> None:
    """Print how many history lines are stored."""
    ctx = open_context(config_path, db)
    conn = ctx.connect()
    try:
        click.echo(rows.count(conn, ctx.casefold(channel) if channel else None))
    finally:
        conn.close()
