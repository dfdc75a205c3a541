"""IRCv3 draft/read-marker: MARKREAD get and set, per account (persisted, shared by its connections) or per
connection without an account, and MARKREAD on JOIN."""

from __future__ import annotations

import pytest

from tests.harness import Harness, config
from tests.test_history import login

RM = ["draft/read-marker"]
T1 = "2019-01-04T14:33:26.123Z"
T2 = "2019-06-01T12:00:00.000Z"


@pytest.fixture
def rh(tmp_path):
    harness = Harness(config(storage={"durability": "off"}, flood={"enabled": False}), db=str(tmp_path / "m.db"))
    yield harness
    harness.close()


def test_get_without_a_marker(h):
    """read-marker: "If there is no known last message read timestamp, the timestamp parameter is a literal *";
    the target need not exist (nothing about it is looked up)."""
    h.register("alice", caps=RM)
    h.send("alice", "MARKREAD #nosuchtarget")
    assert h.lines("alice") == [":irc.test MARKREAD #nosuchtarget *"]


def test_set_get_and_never_backwards(h):
    """"The server MUST reply to a successful MARKREAD client set command using a MARKREAD server command";
    "If the provided timestamp is older than the server's stored value, the server MUST reply to the client with
    a MARKREAD command carrying the server's stored value"."""
    h.register("alice", caps=RM)
    h.send("alice", f"MARKREAD #test timestamp={T2}")
    h.send("alice", f"MARKREAD #TEST timestamp={T1}")
    h.send("alice", "MARKREAD #Test")
    h.send("alice", "MARKREAD bob")
    assert h.lines("alice") == [
        f":irc.test MARKREAD #test timestamp={T2}",
        f":irc.test MARKREAD #TEST timestamp={T2}",
        f":irc.test MARKREAD #Test timestamp={T2}",
        ":irc.test MARKREAD bob *",
    ]


def test_future_is_clamped_to_now(h):
    """read-marker: servers "can clamp it between the last read timestamp and the current time"."""
    h.register("alice", caps=RM)
    h.send("alice", "MARKREAD #test timestamp=2099-01-01T00:00:00.000Z")
    assert h.lines("alice") == [":irc.test MARKREAD #test timestamp=2027-01-15T08:00:00.000Z"]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("MARKREAD", "FAIL MARKREAD NEED_MORE_PARAMS :Missing parameters"),
        ("MARKREAD #test *", "FAIL MARKREAD INVALID_PARAMS * :Invalid timestamp"),
        ("MARKREAD :#a b", "FAIL MARKREAD INVALID_PARAMS #a_b :Invalid target"),
        ("MARKREAD ::x", "FAIL MARKREAD INVALID_PARAMS *:x :Invalid target"),
        ("MARKREAD #test timestamp=not-a-timestamp", "FAIL MARKREAD INVALID_PARAMS timestamp=not-a-timestamp :Invalid timestamp"),
        (f"MARKREAD #test {T1}", f"FAIL MARKREAD INVALID_PARAMS {T1} :Invalid timestamp"),
    ],
)
def test_errors(h, line, expected):
    """"If the server receives a MARKREAD command with missing parameters, the NEED_MORE_PARAMS error code MUST be
    returned"; "If the selectors were invalid, the INVALID_PARAMS error code SHOULD be returned"; a client set
    "MUST NOT be a literal *"."""
    h.register("alice", caps=RM)
    h.send("alice", line)
    assert h.lines("alice") == [f":irc.test {expected}"]


def test_markread_on_join_before_end_of_names(h):
    """"after the server sends a server JOIN command to the client for a corresponding channel, the server MUST
    send a MARKREAD command for that channel. The command MUST be sent before the RPL_ENDOFNAMES reply"."""
    h.register("alice", caps=RM)
    h.register("bob")
    h.send("alice", f"MARKREAD #test timestamp={T1}")
    h.take("alice")
    h.send("alice", "JOIN #test")
    h.send("bob", "JOIN #test")
    assert h.lines("alice") == [
        ":alice!alice@127.0.0.1 JOIN #test",
        f":irc.test MARKREAD #test timestamp={T1}",
        ":irc.test 353 alice = #test @alice",
        ":irc.test 366 alice #test :End of /NAMES list",
        ":bob!bob@127.0.0.1 JOIN #test",
    ]
    assert "MARKREAD" not in " ".join(h.lines("bob"))  # only with the capability


def test_without_an_account_markers_belong_to_the_connection(h):
    h.register("alice", caps=RM)
    h.send("alice", f"MARKREAD #test timestamp={T1}")
    h.take("alice")
    h.disconnect("alice")
    h.register("alice2", nick="alice", caps=RM)
    h.send("alice2", "MARKREAD #test")
    assert h.lines("alice2") == [":irc.test MARKREAD #test *"]


def test_account_markers_are_shared_and_announced(rh):
    """"after the last read timestamp of a target changes, the server SHOULD send a MARKREAD command for that
    target to all the clients of the user" (those with the capability)."""
    login(rh, "alys", RM)
    login(rh, "s2", RM, account="alys")
    login(rh, "s3", account="alys")  # without the capability
    rh.send("alys", f"MARKREAD #test timestamp={T1}")
    assert rh.lines("alys") == [f":irc.test MARKREAD #test timestamp={T1}"]
    assert rh.lines("s2") == [f":irc.test MARKREAD #test timestamp={T1}"]
    assert rh.lines("s3") == []
    rh.send("s2", f"MARKREAD #test timestamp={T1}")  # no change: nobody else is told
    assert rh.lines("s2") == [f":irc.test MARKREAD #test timestamp={T1}"]
    assert rh.lines("alys") == []


def test_account_markers_survive_reconnect_and_restart(tmp_path):
    db = str(tmp_path / "p.db")
    cfg = config(storage={"durability": "off"}, flood={"enabled": False})
    h = Harness(cfg, db=db)
    login(h, "alys", RM)
    h.send("alys", f"MARKREAD #test timestamp={T1}")
    h.send("alys", f"MARKREAD bob timestamp={T2}")
    h.take("alys")
    h.disconnect("alys")  # the account goes offline: its markers leave memory
    assert "alys" not in h.server.read_markers.by_account
    login(h, "alys", RM)
    h.send("alys", "MARKREAD #test")
    assert h.lines("alys") == [f":irc.test MARKREAD #test timestamp={T1}"]
    h.close()
    h = Harness(cfg, db=db)
    try:
        login(h, "alys", RM)
        h.send("alys", "MARKREAD BOB")
        h.send("alys", "JOIN #test")
        assert h.lines("alys")[:3] == [
            f":irc.test MARKREAD BOB timestamp={T2}",
            ":alys!alys@127.0.0.1 JOIN #test",
            f":irc.test MARKREAD #test timestamp={T1}",
        ]
    finally:
        h.close()
