"""Login throttling end to end: wrong passwords slow down the guessing source only.

Real sockets, a server on 127.0.0.1 port 0 with a SQLite file. Other client addresses come from
binding the client socket to 127.0.0.2 and 127.0.0.3 (the whole 127/8 is loopback on Linux). No
sleeps: every step reads until the reply it expects.
"""

from __future__ import annotations

import asyncio
import base64
import re

import pytest

from tests.harness import config
from tests.live import IRCClient, LiveServer

WINDOW = 600
RIGHT = "right password"


@pytest.fixture
def srv(tmp_path):
    server = LiveServer(
        config(
            server={"listen": ["127.0.0.1:0"], "extensions": []},
            storage={"durability": "off"},
            accounts={"login_attempts": 3, "login_ip_attempts": 5, "login_window": WINDOW,
                      "argon2_time_cost": 1, "argon2_memory_kib": 8192},
            connections={"exempt_loopback": True},
        ),
        db=str(tmp_path / "throttle.db"),
    ).start()
    for name in ("alice", "bob", "carol"):
        coro = server.server.accounts.create(name, RIGHT)
        asyncio.run_coroutine_threadsafe(coro, server.loop).result(30)
    yield server
    server.stop()


@pytest.fixture
def connect(srv):
    made: list[IRCClient] = []

    def make(nick: str, source: str = "127.0.0.1") -> IRCClient:
        client = IRCClient(srv.port, source=source)
        made.append(client)
        client.send("CAP LS 302")
        client.send("CAP REQ :sasl")
        client.send(f"NICK {nick}")
        client.send(f"USER {nick} 0 * :{nick}")
        client.sync()
        return client

    yield make
    for client in made:
        client.close()


def attempt(client: IRCClient, account: str, password: str) -> str:
    """One SASL PLAIN exchange; the final numeric line (903 or 904) as received."""
    client.send("AUTHENTICATE PLAIN")
    assert [m.params for m in client.read_until(lambda m: m.command == "AUTHENTICATE")] == [["+"]]
    client.send("AUTHENTICATE " + base64.b64encode(f"\0{account}\0{password}".encode()).decode())
    while True:
        line = client.read_line()
        assert line is not None, "connection closed"
        if re.match(r"^:irc\.test 90[34] ", line):
            return line


def throttled(line: str, nick: str) -> bool:
    """The refusal names the wait, which is the window less the time since the counted failure."""
    found = re.fullmatch(
        rf":irc\.test 904 {nick} :SASL authentication failed: Too many failed attempts; try again in (\d+) seconds",
        line,
    )
    return found is not None and WINDOW - 30 <= int(found.group(1)) <= WINDOW


def test_wrong_passwords_slow_only_the_guessing_source(srv, connect):
    """accounts: 'attempts are counted per source and per account before the check, so guessing gets
    slow for the guesser, not the owner.'"""
    invalid = ":irc.test 904 {} :SASL authentication failed: Invalid account name or password"
    guesser = connect("guesser")
    for _ in range(3):
        assert attempt(guesser, "alice", "guess") == invalid.format("guesser")
    # the guesser's address is now refused on alice, even with the right password...
    assert throttled(attempt(guesser, "alice", RIGHT), "guesser")
    # ...but the owner, from another address, is not
    owner = connect("owner", source="127.0.0.2")
    assert attempt(owner, "alice", RIGHT) == ":irc.test 903 owner :SASL authentication successful"
    # bob logs in from the guesser's own address: three failures are under the per-IP limit of five
    neighbour = connect("neighbour")
    assert attempt(neighbour, "bob", RIGHT) == ":irc.test 903 neighbour :SASL authentication successful"
    # two more guesses at a name that does not exist reach the per-IP limit...
    for _ in range(2):
        assert attempt(guesser, "nosuchname", "guess") == invalid.format("guesser")
    late = connect("late")
    assert throttled(attempt(late, "carol", RIGHT), "late")
    # ...which holds back 127.0.0.1 only, for accounts that never logged in from it: carol still logs
    # in from 127.0.0.2, and bob, who logged in from 127.0.0.1 before, from there too
    other_ip = connect("otherip", source="127.0.0.2")
    assert attempt(other_ip, "carol", RIGHT) == ":irc.test 903 otherip :SASL authentication successful"
    known = connect("known")
    assert attempt(known, "bob", RIGHT) == ":irc.test 903 known :SASL authentication successful"


def test_simultaneous_guesses_from_many_connections_are_all_counted(srv, connect):
    """issue 23.2: twelve connections from one address each send one guess at the same moment; only
    accounts.login_attempts (3) of them are checked, the others are refused unchecked."""
    clients = [connect(f"p{i}", source="127.0.0.3") for i in range(12)]
    for client in clients:
        client.send("AUTHENTICATE PLAIN")
    for client in clients:
        assert [m.params for m in client.read_until(lambda m: m.command == "AUTHENTICATE")] == [["+"]]
    for i, client in enumerate(clients):
        client.send("AUTHENTICATE " + base64.b64encode(f"\0alice\0guess{i}".encode()).decode())
    answers = []
    for i, client in enumerate(clients):
        line = client.read_until(lambda m: m.command in ("903", "904"))[-1].params[-1]
        answers.append(line)
    assert sorted(answers) == ["SASL authentication failed: Invalid account name or password"] * 3 + [
        f"SASL authentication failed: Too many failed attempts; try again in {WINDOW} seconds"
    ] * 9
