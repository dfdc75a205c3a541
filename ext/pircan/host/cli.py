"""``pircd host``: the operator's view and control of the hosted agents.

``ps`` reads the state the running server keeps in the database (``pircan_host``) and ``logs``
the log files, so both work with or without the server. ``start``, ``stop`` and ``restart`` are
requests the running server takes from the database within a second and answers there; with no
server answering they fail (and the request is withdrawn).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from ircd.api import (
    ConfigError,
    Conn,
    OperationalError,
    cli_fail,
    db_options,
    dialect_of,
    extension_config_sync,
    missing_table,
    open_database_sync,
    transaction,
)

from ext.pircan.host.config import HostConfig
from ext.pircan.host import store as hdb
from ext.pircan.host.logs import read_window, tail
from ext.pircan.ids import ts

__all__ = ["host"]

ANSWER_TIMEOUT_S = 30.0  # a stop waits for the grace period at most (host.stop_grace_seconds, 10 s)


@click.group("host", short_help="The agents the server runs: ps, logs, start, stop, restart.")
def host() -> None:
    """The hosted agents of [[host.agents]] (docs/host.md)."""


def _open(config_path: str | None, db: str | None) -> tuple[Conn, HostConfig, Path, object]:
    try:
        cfg = extension_config_sync(config_path, "host", HostConfig)
    except ConfigError as exc:
        cli_fail("; ".join(f"{k}: {m}" for k, m in exc.problems))
    conn, casefold = open_database_sync(config_path, db)
    if dialect_of(conn) == "postgresql":
        path = "postgresql://"  # no file to keep the logs beside: host.log_dir is set (check_log_dir)
    else:
        path = next(row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main")
    from ext.pircan.host import log_dir_for

    return conn, cfg, log_dir_for(cfg, path), casefold


def _rows(conn: Conn) -> list[hdb.Row]:
    try:
        return hdb.all_rows(conn)
    except OperationalError as exc:
        if missing_table(exc):
            return []  # the server has not run with a host yet
        raise


@host.command("ps")
@db_options
def ps(config_path: str | None, db: str | None) -> None:
    """One line per hosted agent: account, state, pid, restarts, started, last exit.

    In a cluster, also the node that runs it, or ran it last (a pid is that node's)."""
    conn, cfg, _, casefold = _open(config_path, db)
    try:
        rows = {row.account: row for row in _rows(conn)}
    finally:
        conn.close()
    if not cfg.agents:
        click.echo("no hosted agents ([[host.agents]] in the config)")
        return
    nodes = any(row.node for row in rows.values())  # a cluster's rows: a pid is the pid on that node
    node = f"{'NODE':<12} " if nodes else ""
    click.echo(f"{'ACCOUNT':<20} {node}{'STATE':<9} {'PID':>7} {'RESTARTS':>8} {'STARTED':<24} LAST EXIT")
    for spec in cfg.agents:
        name = casefold(spec.account)  # type: ignore[operator]
        row = rows.get(name)
        node = f"{(row.node if row is not None else None) or '-':<12} " if nodes else ""
        if row is None:
            click.echo(f"{name:<20} {node}{'parked':<9} {'-':>7} {0:>8} {'-':<24} -")
            continue
        click.echo(f"{name:<20} {node}{row.state:<9} {row.pid or '-':>7} {row.restarts:>8} "
                   f"{ts(row.started_at):<24} {row.last_exit or '-'}")


@host.command("logs", short_help="The last lines of a hosted agent's output; --follow for more.")
@click.argument("name")
@click.option("--lines", "-n", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--grep", metavar="REGEX", help="Only the lines matching this regular expression.")
@click.option("--follow", "-f", is_flag=True, help="Then print new output as it comes (Ctrl-C ends).")
@db_options
def logs(name: str, lines: int, grep: str | None, follow: bool, config_path: str | None, db: str | None) -> None:
    """The last lines of a hosted agent's output (stdout and stderr), optionally following it."""
    import re

    conn, cfg, directory, casefold = _open(config_path, db)
    conn.close()
    account = casefold(name)  # type: ignore[operator]
    if account not in {casefold(s.account) for s in cfg.agents}:  # type: ignore[operator]
        cli_fail(f"{name} is not a hosted agent")
    try:
        pattern = re.compile(grep) if grep else None
    except re.error as exc:
        cli_fail(f"--grep: not a regular expression: {exc}")
    window = tail(directory, account, lines, grep)
    out = sys.stdout.buffer
    out.write(window.data)
    out.flush()
    cursor, partial = window.cursor, b""
    while follow:
        try:
            time.sleep(0.25)  # a follow of a file: polled
        except KeyboardInterrupt:
            return
        window = read_window(directory, account, cursor, 1 << 20)
        cursor = window.cursor
        data = partial + window.data
        if pattern is not None:
            *complete, partial = data.split(b"\n")
            data = b"".join(line + b"\n" for line in complete if pattern.search(line.decode("utf-8", "replace")))
        out.write(data)
        out.flush()


def _request(action: str):  # type: ignore[no-untyped-def]
    @click.argument("name")
    @db_options
    def run(name: str, config_path: str | None, db: str | None) -> None:
        conn, cfg, _, casefold = _open(config_path, db)
        try:
            account = casefold(name)  # type: ignore[operator]
            if account not in {casefold(s.account) for s in cfg.agents}:  # type: ignore[operator]
                cli_fail(f"{name} is not a hosted agent")
            try:
                with transaction(conn):
                    ident = hdb.add_request(conn, account, action, int(time.time() * 1000))
            except OperationalError as exc:
                if missing_table(exc):
                    cli_fail("the server has not run with hosted agents yet: start it first")
                raise
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            while time.monotonic() < deadline:
                done, result = hdb.get_request(conn, ident)
                if done is not None:
                    if result and result.startswith("error: "):
                        cli_fail(result[7:])
                    click.echo(f"{account}: {result}")
                    return
                time.sleep(0.1)  # the server answers within a second of the request
            with transaction(conn):
                conn.execute("DELETE FROM pircan_host_requests WHERE id = ? AND done_at IS NULL", (ident,))
            cli_fail(f"no running server answered within {ANSWER_TIMEOUT_S:g} s (is it running with this database?)")
        finally:
            conn.close()

    run.__doc__ = f"{action.capitalize()} a hosted agent on the running server."
    return host.command(action)(run)


start = _request("start")
stop = _request("stop")
restart = _request("restart")
