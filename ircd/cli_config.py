"""What every command that reads a configuration shares: the ``--config`` option's help and how
a configuration that is not valid ends a command (exit status 2, one line per problem).

Apart from ``ircd.cli_accounts`` so that ``pircd serve`` can use them without importing the
account commands."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

from ircd.config import CONFIG_ENV, ConfigError

__all__ = ["CONFIG_HELP", "fail_config"]

CONFIG_HELP = f"The configuration file (default: ${CONFIG_ENV}, else ./pircd.toml when present, else none)."


def fail_config(exc: ConfigError) -> NoReturn:
    click.echo("configuration is not valid:", err=True)
    for key, message in exc.problems:
        click.echo(f"  {key}: {message}", err=True)
    sys.exit(2)
