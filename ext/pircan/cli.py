"""``pircd audit``: the PIRCAN audit trail for operators."""

from __future__ import annotations

import click

from ircd.api import open_database_sync

from ext.pircan import store
from ext.pircan.ids import hexid, ts


@click.command("audit", short_help="Print the PIRCAN audit trail.")
@click.option("--account", help="Only entries where this account acted or was acted on.")
@click.option("--limit", type=click.IntRange(1, 100000), default=100, show_default=True)
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="The configuration file (default: $PIRCD_CONFIG, else ./pircd.toml when present, else none).")
@click.option("--db", metavar="PATH", help="The SQLite file (default: server.db of the configuration).")
def audit(account: str | None, limit: int, config_path: str | None, db: str | None) -> None:
    """Print the PIRCAN audit trail (oldest first): id, time, actor, action, subject, detail."""
    conn, casefold = open_database_sync(config_path, db)
    try:
        try:
            entries = store.all_audit(conn, casefold(account) if account else None, limit)
        except Exception as exc:  # the PIRCAN tables do not exist before the server first ran
            if "no such table" in str(exc):
                entries = []
            else:
                raise
    finally:
        conn.close()
    if not entries:
        click.echo("no audit entries")
        return
    for e in entries:
        click.echo(f"{hexid(e.id)} {ts(e.at)} {e.actor} {e.action} {e.subject} {e.detail}")


def commands() -> list[click.Command]:
    return [audit]
