"""SendQ over real sockets: a client that never reads is dropped; the sender and the channel carry on."""

from __future__ import annotations

import socket

A = "alice!alice@127.0.0.1"


def small_window_socket(port: int) -> socket.socket:
    """A client socket with a 4 KiB receive buffer: the kernel's buffers fill quickly when it
    does not read."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def test_reader_that_stops_reading_is_dropped(live, client_factory):
    """SendQ: "a reader that stops reading is disconnected with ERROR :SendQ exceeded and never stalls the
    sender or the channel.\""""
    srv = live(limits={"sendq": 65536}, flood={"enabled": False})
    slow = small_window_socket(srv.port)  # it never reads
    try:
        slow.sendall(b"NICK slow\r\nUSER slow 0 * :Slow\r\nJOIN #flood\r\n")
        flooder = client_factory(srv.port)
        third = client_factory(srv.port)
        flooder.register("alice")
        third.register("carol")
        for c in (flooder, third):
            c.send("JOIN #flood")
            c.sync()
        flooder.sync()
        text = "x" * 400
        sent = 0
        quit_seen = None
        while quit_seen is None:
            assert sent < 100_000, "the slow reader was never dropped"
            # batches well under the SendQ, so a client that reads keeps up
            batch = b"".join(f"PRIVMSG #flood :{sent + i} {text}\r\n".encode() for i in range(50))
            flooder.sock.sendall(batch)
            sent += 50
            last = f"{sent - 1} {text}"
            # the third client keeps reading and sees every message, in order, and maybe the QUIT
            got = third.read_until(lambda m: m.command == "PRIVMSG" and m.params[1] == last)
            numbers = [int(m.params[1].split()[0]) for m in got if m.command == "PRIVMSG"]
            assert numbers == list(range(sent - 50, sent))
            quits = [m for m in got if m.command == "QUIT"]
            if quits:
                quit_seen = quits[0]
        assert (quit_seen.source, quit_seen.params) == ("slow!slow@127.0.0.1", ["SendQ exceeded"])
        # the flooder is fine and was never stalled; it saw the slow reader leave
        assert [(m.source, m.command) for m in flooder.sync()] == [("slow!slow@127.0.0.1", "QUIT")]
        flooder.send("PRIVMSG #flood :after")
        flooder.sync()
        assert [(m.command, m.params) for m in third.sync()] == [("PRIVMSG", ["#flood", "after"])]
        # the slow client finds, once it reads, the ERROR at the end of what it was sent
        data = b""
        while True:
            chunk = slow.recv(65536)
            if not chunk:
                break
            data += chunk
        assert data.endswith(b"ERROR :Closing link: 127.0.0.1 (SendQ exceeded)\r\n")
    finally:
        slow.close()


def test_reader_that_asks_for_more_than_the_sendq_gets_it_all(live):
    """A client that pipelines more replies than the SendQ and reads them only afterwards is not
    dropped: past the write high-water mark its next lines wait until it reads."""
    srv = live(limits={"sendq": 8192}, flood={"enabled": False})
    sock = small_window_socket(srv.port)
    try:
        token = "y" * 300
        # about 47 KB of PINGs, under the 64 KiB the server buffers before it stops reading,
        # so this sendall completes while nothing is read; about 50 KB of PONGs come back
        sock.sendall(b"NICK piper\r\nUSER p 0 * :P\r\n" + b"".join(
            f"PING :{i:03d}{token}\r\n".encode() for i in range(150)
        ))
        data = b""
        last = f" PONG irc.test 149{token}\r\n".encode()
        while not data.endswith(last):
            chunk = sock.recv(65536)
            assert chunk, data[-300:]
            data += chunk
        pongs = [line for line in data.split(b"\r\n") if b" PONG " in line]
        assert pongs == [f":irc.test PONG irc.test {i:03d}{token}".encode() for i in range(150)]
        assert b"ERROR" not in data
    finally:
        sock.close()
