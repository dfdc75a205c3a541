"""Registration and ping timeouts over real sockets, with small configured timeouts.

The tests read until the server's ERROR (or the close), never sleep: the server's once-a-second tick
decides when, the socket timeout of the test client bounds how long we wait.
"""

from __future__ import annotations

import re
import threading

from ircd.proto.lines import Message


def test_registration_timeout(live, client_factory):
    """A connection that does not complete registration in timeouts.registration seconds is closed with
    ERROR."""
    srv = live(timeouts={"registration": 1.0})
    slow = client_factory(srv.port)
    slow.send("NICK sloth")  # never sends USER
    lines = slow.read_all_until_close()
    assert lines == ["ERROR :Closing link: 127.0.0.1 (Registration timed out)"]
    # the nick is free again
    other = client_factory(srv.port)
    assert other.register("sloth")[0].command == "001"


def test_ping_timeout(live, client_factory):
    """Ping timeout: an idle client gets PING after ping_interval, and ``ERROR :... (Ping timeout: N
    seconds)`` when it does not answer within ping_timeout; its channel peers see the QUIT."""
    srv = live(timeouts={"ping_interval": 1.0, "ping_timeout": 1.0})
    idle = client_factory(srv.port)
    awake = client_factory(srv.port)
    idle.register("idle")
    awake.register("awake")
    idle.send("JOIN #a")
    idle.sync()
    awake.send("JOIN #a")
    awake.sync()
    # the awake client answers every PING (in a thread, while we wait on the idle one)
    seen: list[Message] = []

    def answer_pings() -> None:
        while True:
            msg = awake.read_until(lambda m: m.command in ("PING", "QUIT"))[-1]
            seen.append(msg)
            if msg.command == "QUIT":
                return
            awake.send(f"PONG :{msg.params[-1]}")

    responder = threading.Thread(target=answer_pings, daemon=True)
    responder.start()
    lines = idle.read_all_until_close()
    assert lines[:2] == [":awake!awake@127.0.0.1 JOIN #a", "PING irc.test"]
    assert re.fullmatch(r"ERROR :Closing link: 127\.0\.0\.1 \(Ping timeout: \d+ seconds\)", lines[-1]), lines
    assert len(lines) == 3
    responder.join(10)
    assert not responder.is_alive()
    quit_msg = seen[-1]
    assert quit_msg.source == "idle!idle@127.0.0.1"
    assert re.fullmatch(r"Ping timeout: \d+ seconds", quit_msg.params[0])
    # the client that answered its PINGs is still connected
    awake.send("PRIVMSG awake :still here")
    assert [m.params for m in awake.sync() if m.command == "PRIVMSG"] == [["awake", "still here"]]
