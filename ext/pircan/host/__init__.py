"""The agent host: the server runs the agents its config lists (``[[host.agents]]``), starts a
parked one when a message, task or contact request arrives for it, restarts by policy, and keeps
their logs (docs/host.md).

``config.py`` is the section and its checks; ``supervisor.py`` the processes (PIRCAN's waker);
``logs.py`` the captured output with cursors; ``store.py`` the rows the CLI reads and the
operator's requests; ``service.py`` the owner operations every transport calls; ``lease.py`` which
node of a cluster runs each agent.
"""

from __future__ import annotations

import os
from pathlib import Path

from ircd.api import ConfigError

from ext.pircan.host.config import HostConfig, check_accounts, check_duplicates, kinds_from_database
from ext.pircan.host.supervisor import Host
from ext.pircan.state import Pircan

__all__ = ["Host", "HostConfig", "install", "log_dir_for"]


def _on_postgresql(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def log_dir_for(cfg: HostConfig, database: str) -> Path:
    """``host.log_dir``; unset: ``pircd-host/`` beside the SQLite file (on PostgreSQL there is no
    file to be beside: ``check_log_dir`` asks for the key when agents are hosted)."""
    if cfg.log_dir:
        return Path(cfg.log_dir)
    if _on_postgresql(database):
        return Path("pircd-host").absolute()
    return Path(os.path.dirname(os.path.abspath(database))) / "pircd-host"


def check_log_dir(cfg: HostConfig, database: str) -> list[tuple[str, str]]:
    if cfg.agents and not cfg.log_dir and _on_postgresql(database):
        return [("host.log_dir", "needed with hosted agents when server.db is a PostgreSQL database "
                                 "(unset, the logs go beside a SQLite file)")]
    return []


def install(state: Pircan) -> Host:
    """Read ``[host]`` and refuse a bad entry with a line naming its key (``check-config`` and
    ``serve`` alike); the host is PIRCAN's waker, started after PIRCAN's tables, stopped first."""
    api = state.api
    cfg = api.config(HostConfig, section="host")
    problems = check_duplicates(cfg, api.casefold) + check_log_dir(cfg, api.database_path)
    kinds = kinds_from_database(api.database_path) if cfg.agents else None
    if kinds is not None:
        problems += check_accounts(cfg, kinds, api.casefold)
    if problems:
        raise ConfigError(problems)
    host = Host(state, cfg, log_dir_for(cfg, api.database_path))
    state.host = host
    _verb(state)
    if not cfg.agents:
        return host
    state.wakers.append(host)
    state.event_hooks.append(host.event_seen)
    state.sweep_hooks.append(host.sweep)
    if host.leases is not None:  # a node of a cluster: events for the agents it runs, from the others
        from ext.pircan.host.lease import SEEN, WAKE

        api.on_node_message(WAKE, host.leases.on_wake)
        api.on_node_message(SEEN, host.leases.on_seen)

    async def start() -> None:
        problems = check_accounts(cfg, api.account_kind, api.casefold)
        if problems:
            raise RuntimeError("; ".join(f"{key}: {text}" for key, text in problems))
        await host.start()

    async def stop() -> None:
        await host.stop()

    api.on_startup(start)
    api.on_ready(host.ready_to_run)
    api.on_shutdown(stop)
    return host


def _verb(state: Pircan) -> None:
    from ext.pircan.irc import help as help_text
    from ext.pircan.irc.host import handle_host

    async def verb(ctx, msg):  # type: ignore[no-untyped-def]
        await handle_host(state, ctx, msg)

    syntax, _, rest = help_text.HOST.partition("\n")
    state.api.command("HOST", verb, syntax=syntax, help=rest)
    state.api.help_footer("  HELP HOST (the agents this server runs for you: state, logs, start and stop)")
