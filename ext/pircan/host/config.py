"""The ``[host]`` config section: the agents the server may run (``[[host.agents]]``).

Commands come from this file only, never over the network. ``check`` finds what pydantic cannot
see alone (a duplicate account, an account that is not an agent) and names the key, so that
``check-config`` and ``serve`` refuse the same file with the same line.
"""

from __future__ import annotations

import os
import re
import shutil
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ircd.api import account_kinds_sync

__all__ = ["AgentSpec", "HostConfig", "Ready", "ResourceLimits", "check_accounts", "check_duplicates", "LOG_MAX_BYTES"]

LOG_MAX_BYTES = 25 * 1024 * 1024  # the current log of one agent; one rotated file besides


class Ready(BaseModel):
    """When a started process counts as ready: a line of its output matches ``log`` and/or
    ``port`` accepts a TCP connection on ``host`` (both, when both are given)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    log: str | None = None
    port: int | None = Field(None, ge=1, le=65535)
    host: str = "127.0.0.1"
    timeout: float = Field(30.0, gt=0, le=3600)

    @field_validator("log")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return value


class ResourceLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_mb: int | None = Field(None, ge=16, le=1 << 22)  # RLIMIT_AS
    open_files: int | None = Field(None, ge=16, le=1 << 20)  # RLIMIT_NOFILE


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    account: str = Field(min_length=1)
    command: list[str] = Field(min_length=1)  # argv, no shell
    start: Literal["on-demand", "always"] = "on-demand"
    restart: Literal["no", "on-failure", "always"] = "on-failure"
    ready: Ready | None = None
    idle_stop_minutes: float | None = Field(None, gt=0, le=10_080)
    cwd: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    limits: ResourceLimits = Field(default_factory=lambda: ResourceLimits.model_validate({}))
    user: str | None = None  # only when the server runs as root

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        program = value[0]
        if "/" in program:
            if not (os.path.isfile(program) and os.access(program, os.X_OK)):
                raise ValueError(f"{program!r} is not an executable file")
        elif shutil.which(program) is None:
            raise ValueError(f"{program!r} is not found on PATH")
        return value

    @field_validator("cwd")
    @classmethod
    def _cwd(cls, value: str | None) -> str | None:
        if value is not None and not os.path.isdir(value):
            raise ValueError(f"{value!r} is not a directory")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not key or "=" in key or "\0" in key or key.startswith("PIRCAN_"):
                raise ValueError(f"{key!r} cannot be set (PIRCAN_* are the host's own)")
        return value

    @model_validator(mode="after")
    def _user(self) -> "AgentSpec":
        if self.user is not None:
            import pwd

            try:
                pwd.getpwnam(self.user)
            except KeyError:
                raise ValueError(f"user: no such user {self.user!r}") from None
        return self


class HostConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    agents: list[AgentSpec] = Field(default_factory=list)
    # Seconds between SIGTERM and SIGKILL when a hosted process is stopped (and at shutdown).
    stop_grace_seconds: float = Field(10.0, gt=0, le=300)
    # Where the logs go (one directory per server); default: pircd-host/ beside the database.
    log_dir: str | None = None
    # Bytes of the current log of one agent before it is rotated (one rotated file is kept).
    log_max_bytes: int = Field(LOG_MAX_BYTES, ge=4096, le=1 << 34)
    # Failed starts in a row (each restarted with a backoff doubling from 1 s up to 30 s) before the
    # agent is left in the failed state; a run of ``stable_seconds`` counts as a success.
    max_failures: int = Field(5, ge=1, le=100)
    stable_seconds: float = Field(60.0, gt=0, le=86_400)
    # In a cluster: how long a node's hold on a hosted agent lasts unrenewed (it renews it every
    # third of this); another node starts the agent within this and a third of it after its node died.
    lease_seconds: float = Field(15.0, ge=1, le=600)


def check_duplicates(cfg: HostConfig, casefold: Callable[[str], str]) -> list[tuple[str, str]]:
    seen: dict[str, int] = {}
    problems = []
    for i, spec in enumerate(cfg.agents):
        folded = casefold(spec.account)
        if folded in seen:
            problems.append((f"host.agents.{i}.account",
                             f"{spec.account!r} is hosted twice (also host.agents.{seen[folded]})"))
        seen.setdefault(folded, i)
    if os.geteuid() != 0:
        for i, spec in enumerate(cfg.agents):
            if spec.user is not None:
                problems.append((f"host.agents.{i}.user", "only a server running as root can run an agent as a user"))
    return problems


def check_accounts(cfg: HostConfig, kind_of: Callable[[str], str | None], casefold: Callable[[str], str]
                   ) -> list[tuple[str, str]]:
    """Every hosted account is an agent (``kind_of(folded)``: 'agent', 'person' or None)."""
    problems = []
    for i, spec in enumerate(cfg.agents):
        kind = kind_of(casefold(spec.account))
        if kind != "agent":
            what = "no such account" if kind is None else "a person, not an agent"
            problems.append((f"host.agents.{i}.account", f"{spec.account!r}: {what} (pircd agent add)"))
    return problems


def kinds_from_database(database: str) -> Callable[[str], str | None] | None:
    """Account kinds read from the server's database before it starts (None: no database yet)."""
    kinds = account_kinds_sync(database)
    return None if kinds is None else kinds.get
