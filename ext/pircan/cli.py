"""``pircd audit``: the PIRCAN audit trail for operators."""

from __future__ import annotations

import time

import click

from ircd.api import (
    Conn,
    IntegrityError,
    OperationalError,
    db_options,
    missing_table,
    open_database_sync,
    transaction,
)

from ext.pircan import store
from ext.pircan.ids import hexid, ts


@click.command("audit", short_help="Print the PIRCAN audit trail.")
@click.option("--account", help="Only entries where this account acted or was acted on.")
@click.option("--limit", type=click.IntRange(1, 100000), default=100, show_default=True)
@db_options
@click.option("--prune-refusals", "prune_days", type=click.FloatRange(min=0, min_open=True), metavar="DAYS",
              help="Instead of printing: delete the rows of refusals by a limit older than DAYS days "
                   "(decisions, messages and every other row stay).")
def audit(account: str | None, limit: int, config_path: str | None, db: str | None,
          prune_days: float | None) -> None:
    """Print the PIRCAN audit trail (oldest first): id, time, actor, action, subject, detail."""
    conn, casefold = open_database_sync(config_path, db)
    if prune_days is not None:
        try:
            deleted = _prune_refusals(conn, int((time.time() - prune_days * 86400) * 1000))
        finally:
            conn.close()
        click.echo(f"deleted {deleted} refusal row{'s' if deleted != 1 else ''} older than {prune_days:g} days")
        return
    try:
        try:
            entries = store.all_audit(conn, casefold(account) if account else None, limit)
        except OperationalError as exc:  # the PIRCAN tables do not exist before the server first ran
            if not missing_table(exc):
                raise
            entries = []
    finally:
        conn.close()
    if not entries:
        click.echo("no audit entries")
        return
    for e in entries:
        click.echo(f"{hexid(e.id)} {ts(e.at)} {e.actor} {e.action} {e.subject} {e.detail}")


def _prune_refusals(conn: Conn, before_ms: int) -> int:
    try:
        with transaction(conn):
            return int(conn.execute(
                "DELETE FROM pircan_audit WHERE action IN ('refused', 'refused.summary') AND at < ?", (before_ms,)
            ).rowcount)
    except OperationalError as exc:
        if missing_table(exc):
            return 0
        raise
    except IntegrityError:
        raise click.ClickException("this database's audit table is from an older pircd: start the server "
                                   "once to upgrade it, then prune") from None


def commands() -> list[click.Command]:
    from ext.pircan.a2a.cli import a2a
    from ext.pircan.host.cli import host
    from ext.pircan.webhooks.cli import webhook

    return [audit, a2a, webhook, host]
