"""Per-account limits on what one account can make the server store (issue 23.8): registered channels
(channels.registered_per_account) and read markers (limits.read_markers)."""

from __future__ import annotations

import base64

import pytest

from tests import dbs
from tests.harness import Harness, config

RM = ["draft/read-marker"]
T1 = "2020-01-01T00:00:00.000Z"
T2 = "2020-02-01T00:00:00.000Z"


def cfg(**extra):
    return config(storage={"durability": "off"}, flood={"enabled": False},
                  accounts={"argon2_time_cost": 1, "argon2_memory_kib": 8192}, **extra)


def login(h: Harness, name: str, caps=()) -> None:
    h.register(name, caps=caps)
    h.send(name, "AUTHENTICATE PLAIN")
    h.send(name, "AUTHENTICATE " + base64.b64encode(b"\0alice\0password123").decode())
    assert h.numerics(name)[-2:] == ["900", "903"]


def rows(db: str, table: str) -> int:
    return dbs.connect(db).execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "l.db")


def test_registered_channels_per_account(db):
    """Past the limit a new channel is an ordinary one (it goes with its last member) and the creator
    is told; the count survives a restart."""
    h = Harness(cfg(channels={"registered_per_account": 2}), db=db)
    try:
        h.run(h.server.accounts.create("alice", "password123"))
        login(h, "a")
        for name in ("#one", "#two"):
            h.send("a", f"JOIN {name}")
            h.send("a", f"PART {name}")
        h.take("a")
        h.send("a", "JOIN #three")
        assert h.lines("a") == [
            ":a!a@127.0.0.1 JOIN #three",
            (":irc.test WARN JOIN REGISTRATION_LIMIT #three :Channel not registered: your account already "
             "owns 2 registered channels"),
            ":irc.test 353 a = #three @a",
            ":irc.test 366 a #three :End of /NAMES list",
        ]
        h.send("a", "PART #three")
        assert h.server.state.find_channel("#three") is None
        h.settle()
    finally:
        h.close()
    assert rows(db, "channels") == 2

    h2 = Harness(cfg(channels={"registered_per_account": 2}), db=db)
    try:
        login(h2, "a")
        h2.send("a", "JOIN #four")
        assert "WARN" in h2.numerics("a")
        h2.send("a", "JOIN #one")
        assert h2.lines("a")[1] == ":irc.test 353 a = #one ~a"
    finally:
        h2.close()


def test_read_markers_per_account(db):
    h = Harness(cfg(limits={"read_markers": 2}), db=db)
    try:
        h.run(h.server.accounts.create("alice", "password123"))
        login(h, "a", caps=RM)
        h.send("a", f"MARKREAD #one timestamp={T1}")
        h.send("a", f"MARKREAD bob timestamp={T1}")
        h.send("a", f"MARKREAD #three timestamp={T1}")
        h.send("a", f"MARKREAD #one timestamp={T2}")
        h.send("a", "MARKREAD #three")
        assert h.lines("a") == [
            f":irc.test MARKREAD #one timestamp={T1}",
            f":irc.test MARKREAD bob timestamp={T1}",
            (":irc.test FAIL MARKREAD LIMIT_REACHED #three :You already have read markers for 2 targets, "
             "the most this server keeps"),
            f":irc.test MARKREAD #one timestamp={T2}",
            ":irc.test MARKREAD #three *",
        ]
        h.settle()
        assert rows(db, "read_markers") == 2
    finally:
        h.close()


def test_read_markers_of_a_connection_without_an_account(make_harness):
    h = make_harness(limits={"read_markers": 1})
    h.register("g", caps=RM)
    h.send("g", f"MARKREAD #one timestamp={T1}")
    h.send("g", f"MARKREAD #two timestamp={T1}")
    assert h.lines("g") == [
        f":irc.test MARKREAD #one timestamp={T1}",
        (":irc.test FAIL MARKREAD LIMIT_REACHED #two :You already have read markers for 1 targets, the "
         "most this server keeps"),
    ]
