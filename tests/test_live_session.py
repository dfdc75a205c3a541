"""Live sessions: labeled-response round trips, clean shutdown, a flood that does not delay others."""

from __future__ import annotations

import socket

A = "alice!alice@127.0.0.1"


def test_labeled_response_round_trips(live, client_factory):
    """IRCv3 labeled-response: every labeled command gets exactly one labeled answer (ACK, a labeled line or
    a labeled batch), even when the commands are pipelined in one write."""
    srv = live()
    alice = client_factory(srv.port)
    bob = client_factory(srv.port)
    alice.register("alice", caps=["labeled-response", "batch", "echo-message"])
    bob.register("bob")
    alice.sock.sendall(
        b"@label=r1 PING one\r\n"
        b"@label=r2 PONG whatever\r\n"
        b"@label=r3 JOIN #room\r\n"
        b"@label=r4 PRIVMSG bob :hi bob\r\n"
        b"@label=r5 WHOIS nobody\r\n"
    )
    got = alice.sync()
    by_label: dict[str, list] = {}
    current = None
    batches: dict[str, str] = {}
    for m in got:
        tags = m.tags or {}
        if m.command == "BATCH" and m.params[0].startswith("+"):
            batches[m.params[0][1:]] = tags["label"]
            by_label.setdefault(tags["label"], []).append(m)
            continue
        if "label" in tags:
            current = tags["label"]
        elif "batch" in tags:
            current = batches[tags["batch"]]
        elif m.command == "BATCH":
            current = batches[m.params[0][1:]]
        by_label.setdefault(current, []).append(m)
    assert sorted(by_label) == ["r1", "r2", "r3", "r4", "r5"]
    assert [(m.command, m.params) for m in by_label["r1"]] == [("PONG", ["irc.test", "one"])]
    assert [m.command for m in by_label["r2"]] == ["ACK"]
    assert [m.command for m in by_label["r3"]] == ["BATCH", "JOIN", "353", "366", "BATCH"]
    assert by_label["r3"][0].params[1] == "labeled-response"
    assert [(m.source, m.command, m.params) for m in by_label["r4"]] == [(A, "PRIVMSG", ["bob", "hi bob"])]
    assert [m.command for m in by_label["r5"]] == ["BATCH", "401", "318", "BATCH"]
    # the order of the answers is the order of the commands
    order = []
    for m in got:
        label = (m.tags or {}).get("label")
        if label:
            order.append(label)
    assert order == ["r1", "r2", "r3", "r4", "r5"]
    assert [(m.command, m.params) for m in bob.sync()] == [("PRIVMSG", ["bob", "hi bob"])]


def test_clean_shutdown_sends_error_to_everyone(live, client_factory):
    """Stopping the server (what SIGTERM does) sends every client ERROR and closes its connection."""
    srv = live()
    alice = client_factory(srv.port)
    bob = client_factory(srv.port)
    alice.register("alice")
    bob.register("bob")
    for c in (alice, bob):
        c.send("JOIN #a")
        c.sync()
    alice.sync()
    unregistered = client_factory(srv.port)
    unregistered.send("NICK halfway")
    assert unregistered.sync() == []  # accepted and known to the server
    srv.stop()
    for c in (alice, bob):
        rest = c.read_all_until_close()
        assert rest[-1] == "ERROR :Closing link: 127.0.0.1 (Server shutting down)"
        # the peer's QUIT may come first; nothing else does
        assert all(" QUIT " in ln for ln in rest[:-1]), rest
    assert unregistered.read_all_until_close() == ["ERROR :Closing link: 127.0.0.1 (Server shutting down)"]
    # the port no longer accepts connections
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", srv.port)) != 0


def test_flood_does_not_delay_another_client(live, client_factory):
    """Flood control holds back only the flooding session: another client's PING is answered at once while
    the flooder's backlog is still being worked off (and the flooder's lines all run, in order)."""
    srv = live(flood={"burst": 5, "per_second": 25})
    flooder = client_factory(srv.port)
    other = client_factory(srv.port)
    flooder.register("flooder")
    other.register("other")
    count = 60  # about 2.2 seconds of budget at 25 per second after a burst of 5
    flooder.sock.sendall(b"".join(f"PING f{i}\r\n".encode() for i in range(count)))
    other.send("PING quick")
    assert [(m.command, m.params) for m in other.read_until(lambda m: m.command == "PONG")] == [
        ("PONG", ["irc.test", "quick"])
    ]
    # at this moment most of the flood is still queued: read what the flooder has so far without blocking
    flooder.sock.setblocking(False)
    try:
        early = flooder.sock.recv(1 << 20)
    except BlockingIOError:
        early = b""
    finally:
        flooder.sock.setblocking(True)
    flooder.buf += early
    assert early.count(b"PONG") < count
    tokens = [m.params[-1] for m in flooder.read_until(lambda m: m.params[-1] == f"f{count - 1}")]
    assert tokens == [f"f{i}" for i in range(count)]
