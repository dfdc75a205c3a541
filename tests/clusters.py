"""Nodes of a cluster for the tests (docs/scaling.md): a NATS server and a PostgreSQL database of
the test's own, on free ports, and pircd nodes on them, with the helpers to read what their
clients get. Used by every ``tests/test_cluster*.py``."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from ircd.proto.lines import parse_line
from tests import dbs
from tests.live import IRCClient
from tests.natsd import NatsServer
from tests.proc import ServerProcess, write_config

_tokens = itertools.count(1)

OPER = ("root", "root-pw-5521")  # the operator every node of these tests knows


@functools.cache
def _oper_hash() -> str:
    from ircd.passwords import hash_sync

    return hash_sync(OPER[1])


@pytest.fixture
def nats() -> Iterator[list[NatsServer]]:
    """The NATS server of a test (a list: a test that restarts it puts the new one in)."""
    servers = [NatsServer()]
    yield servers
    servers[-1].stop()


def start_node(tmp_path: Path, url: str, nats_url: str, name: str, *args: str,
               **sections: dict[str, Any]) -> ServerProcess:
    """The node ``name`` (server ``<name>.test``) on the database ``url``; ``args``: more ``serve``
    options (``--no-http`` unless given); ``sections``: more config tables (``pircan`` is merged
    into the tests' default, guests may join channels)."""
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    pircan = {"guests_may_join": True, **sections.pop("pircan", {})}  # users without accounts in #c
    config = write_config(directory, server={"name": f"{name}.test", "db": url, **sections.pop("server", {})},
                          cluster={"node": name, "nats": [nats_url]}, pircan=pircan, **sections)
    with config.open("a") as fh:
        fh.write(f'[[opers]]\nname = "{OPER[0]}"\npassword = "{_oper_hash()}"\nhostmask = "*"\n')
    return ServerProcess(config, *(args or ("--no-http",)))


def cluster_of(tmp_path: Path, nats_url: str, names: Sequence[str], *args: str,
               **sections: dict[str, Any]) -> tuple[str, list[ServerProcess]]:
    """A database of the test's own and the nodes ``names`` on it, started one after the other
    (each has said hello, and every earlier node has it as a peer, when the next starts)."""
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))
    started: list[ServerProcess] = []
    try:
        for name in names:
            started.append(start_node(tmp_path, url, nats_url, name, *args, **sections))
    except BaseException:
        for node in started:
            node.terminate()
        raise
    return url, started


@pytest.fixture
def nodes(tmp_path: Path, nats: list[NatsServer]) -> Iterator[tuple[str, ServerProcess, ServerProcess]]:
    """NATS, a database of its own, and the nodes a.test and b.test on them."""
    url, started = cluster_of(tmp_path, nats[0].url, ("a", "b"))
    try:
        yield url, started[0], started[1]
    finally:
        for node in started:
            node.terminate()


def until(client: IRCClient, command: str, token: str | None = None) -> list[str]:
    """The raw lines received up to the first ``command`` line (with ``token`` last, if given)."""
    out = []
    while True:
        line = client.read_line()
        if line is None:
            raise ConnectionError(f"closed before {command}; got {out!r}")
        out.append(line)
        msg = parse_line(line.encode())
        if msg is not None and msg.command == command and (token is None or msg.params[-1] == token):
            return out


def bare(line: str) -> str:
    """A line without its tags (server-time)."""
    return line.split(" ", 1)[1] if line.startswith("@") else line


def relayed(sender: IRCClient, line: str, to: IRCClient) -> str:
    """What ``to`` gets (without tags) when ``sender`` sends ``line``."""
    sender.send(line)
    return bare(until(to, line.split(" ", 1)[0])[-1])


def lines(client: IRCClient) -> list[str]:
    """The raw lines up to the PONG of a fresh token (the PONG left out)."""
    token = f"c{next(_tokens)}"
    client.send(f"PING {token}")
    return until(client, "PONG", token)[:-1]


def names(client: IRCClient, channel: str = "#c") -> str:
    """The first line of NAMES (its 353)."""
    client.send(f"NAMES {channel}")
    return bare(lines(client)[0])
