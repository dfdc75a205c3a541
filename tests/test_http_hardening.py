"""The HTTP listener under an anonymous client's abuse: deadlines on request heads and bodies,
per-address and total connection limits at accept, the descriptors HTTP takes from IRC's share.

Live servers bind port 0; deadlines are set to fractions of a second so that a test waits for the
server's own timer, whose firing it observes as the answer and the close.
"""

from __future__ import annotations

import socket
import time

import pytest

from ircd.net import listener as listener_module
from tests.harness import config
from tests.live import LiveServer


def _server(tmp_path, setup=None, **http) -> LiveServer:
    return LiveServer(config(server={"listen": ["127.0.0.1:0"], "extensions": ["pircan"]},
                             connections={"exempt_loopback": False}, http=http),
                      setup=setup, db=str(tmp_path / "pircd.db")).start()


def _until_closed(sock: socket.socket, limit: float = 10.0) -> bytes:
    """Everything the server sends until it closes the connection."""
    sock.settimeout(limit)
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def _get(host: str, port: int, source: str = "127.0.0.1") -> bytes:
    with socket.create_connection((host, port), timeout=10, source_address=(source, 0)) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        return _until_closed(sock)


def _released(server: LiveServer, condition) -> None:
    """Return once ``condition()`` holds for the HTTP gate, checked as the gate releases connections
    (the server sees a close only after the client made it)."""
    server.until(server.server.http.gate, "release", condition)


def _echo_route(server) -> None:
    """/echo reads its whole body and answers with its length."""
    class Echo:  # an ASGI app (a plain function would be a request-response endpoint)
        async def __call__(self, scope, receive, send):
            size = 0
            while True:
                message = await receive()
                size += len(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body = str(size).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

    server.http.routes.append(("/echo", Echo()))


@pytest.fixture
def slow(tmp_path):
    server = _server(tmp_path, _echo_route, head_timeout=0.3, body_timeout=0.5)
    yield server
    server.stop()


def test_a_connection_that_sends_nothing_or_half_a_head_gets_408_at_the_deadline(slow):
    host, port = slow.server.http.addresses[0]
    for sent in (b"", b"GET /healthz HTTP/1.1\r\n"):
        with socket.create_connection((host, port)) as sock:
            start = time.monotonic()
            sock.sendall(sent)
            answer = _until_closed(sock)
            elapsed = time.monotonic() - start
        assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
        assert answer.endswith(b"The request head took too long\n")
        assert 0.25 <= elapsed < 5, elapsed
    _released(slow, lambda: not slow.server.http.gate.open)


def test_a_kept_alive_connection_has_the_same_head_deadline(slow):
    host, port = slow.server.http.addresses[0]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        first = b""
        while not first.endswith(b"ok\n"):
            first += sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: ")  # half of a second head
        assert _until_closed(sock).startswith(b"HTTP/1.1 408 Request Timeout\r\n")


def test_a_body_that_never_comes_gets_408_at_the_body_deadline(slow):
    host, port = slow.server.http.addresses[0]
    head = f"POST /echo HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 1000000\r\n\r\n".encode()
    with socket.create_connection((host, port)) as sock:
        start = time.monotonic()
        sock.sendall(head + b"x")
        answer = _until_closed(sock)
        elapsed = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer
    assert answer.endswith(b"The request body took too long\n")
    assert 0.45 <= elapsed < 5, elapsed
    # a body that comes in time is read whole
    with socket.create_connection((host, port)) as sock:
        sock.sendall(head.replace(b"1000000", b"5") + b"hello")
        answer = b""
        while not answer.endswith(b"\r\n\r\n5"):
            answer += sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_body_left_unread_after_the_answer_does_not_hold_the_connection(slow):
    """/mcp answers 401 without reading the body; the rest of the body is still held to the deadline."""
    host, port = slow.server.http.addresses[0]
    with socket.create_connection((host, port)) as sock:
        sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: 1000000\r\n\r\nx".encode())
        answer = _until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 401 Unauthorized\r\n")
    assert b"408" not in answer  # one answer only


def test_per_address_connections_at_once_and_per_window(tmp_path):
    server = _server(tmp_path, max_per_ip=3, throttle_count=6)
    try:
        host, port = server.server.http.addresses[0]
        held = [socket.create_connection((host, port)) for _ in range(3)]
        with socket.create_connection((host, port)) as fourth:
            answer = _until_closed(fourth)
        assert answer.startswith(b"HTTP/1.1 429 Too Many Requests\r\n"), answer
        assert b"\r\nretry-after: 5\r\n" in answer
        assert answer.endswith(b"Too many HTTP connections from your address\n")
        # another address is served meanwhile
        assert _get(host, port, source="127.0.0.2").startswith(b"HTTP/1.1 200 OK\r\n")
        for sock in held:
            sock.close()
        _released(server, lambda: "127.0.0.1" not in server.server.http.gate.per_source)
        # 3 held, the refused one not counted: 3 more new ones are served, then the window is full
        for _ in range(3):
            assert _get(host, port).startswith(b"HTTP/1.1 200 OK\r\n")
        answer = _get(host, port)
        assert answer.startswith(b"HTTP/1.1 429 Too Many Requests\r\n"), answer
        assert b"Too many new HTTP connections from your address; retry in " in answer
    finally:
        server.stop()


def test_one_address_gets_at_most_half_of_the_connections_and_a_full_listener_answers_503(tmp_path):
    server = _server(tmp_path, max_connections=4, max_per_ip=100)
    try:
        host, port = server.server.http.addresses[0]
        held = [socket.create_connection((host, port)) for _ in range(2)]
        assert _get(host, port).startswith(b"HTTP/1.1 429 Too Many Requests\r\n")  # half of 4
        held += [socket.create_connection((host, port), source_address=("127.0.0.2", 0)) for _ in range(2)]
        answer = _get(host, port, source="127.0.0.3")
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer
        assert b"\r\nretry-after: 5\r\n" in answer
        for sock in held:
            sock.close()
        _released(server, lambda: not server.server.http.gate.open and not server.server.http.gate.per_source)
        assert _get(host, port).startswith(b"HTTP/1.1 200 OK\r\n")
    finally:
        server.stop()


def test_http_connections_are_kept_out_of_the_irc_share_of_descriptors(monkeypatch):
    import resource

    cfg = config(http={"max_connections": 200}, connections={"max_clients": 100000})
    from ircd.server import Server

    server = Server(cfg)
    monkeypatch.setattr(listener_module, "_open_files", lambda: 36)
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (1024, 1024))
    monkeypatch.setattr(resource, "setrlimit", lambda kind, limits: None)
    listener_module.limit_clients(server)
    assert server.admission.max_clients == 1024 - 36 - listener_module.FD_RESERVE - 200
    assert server.http.fd_cap == 200
    server = Server(config(http={"max_connections": 1000}, connections={"max_clients": 100000}))
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (160, 160))
    listener_module.limit_clients(server)  # too few for both: HTTP keeps a small share
    assert (server.http.fd_cap, server.admission.max_clients) == (16, 160 - 36 - listener_module.FD_RESERVE - 16)
    monkeypatch.setattr(resource, "getrlimit", lambda kind: (1024, 1024))
    cfg = config(http={"enabled": False}, connections={"max_clients": 100000})
    server = Server(cfg)
    listener_module.limit_clients(server)
    assert server.admission.max_clients == 1024 - 36 - listener_module.FD_RESERVE


def test_a_websocket_connection_holds_its_place_until_it_closes(slow):
    """The head deadline stops at the upgrade (an IRC client over WebSocket has its own
    registration deadline); the gate counts the connection until the WebSocket closes."""
    from websockets.sync.client import connect

    host, port = slow.server.http.addresses[0]
    gate = slow.server.http.gate
    with connect(f"ws://{host}:{port}/", subprotocols=["text.ircv3.net"], open_timeout=10) as ws:
        ws.send("NICK wsuser")
        ws.send("USER u 0 * :u")
        time.sleep(0.5)  # longer than the head deadline: the condition under test
        ws.send("PING :tok")
        while True:
            line = ws.recv(timeout=10)
            if "PONG" in line and "tok" in line:
                break
        assert len(gate.open) == 1
    _released(slow, lambda: not gate.open)


def test_the_client_address_behind_trusted_proxies():
    from ircd.net.addresses import networks
    from ircd.net.http import client_address

    trusted = networks(["127.0.0.1", "10.0.0.0/8"])
    xff = [(b"x-forwarded-for", b"6.6.6.6, 203.0.113.7, 10.1.2.3")]
    assert client_address("127.0.0.1", xff, trusted) == "203.0.113.7"  # 6.6.6.6 is the client's own word
    assert client_address("192.0.2.9", xff, trusted) == "192.0.2.9"  # not a proxy: headers ignored
    assert client_address("127.0.0.1", xff, []) == "127.0.0.1"
    forwarded = [(b"forwarded", b'for=198.51.100.4;proto=https, for="[2001:db8::17]:4711"')]
    assert client_address("127.0.0.1", forwarded, trusted) == "2001:db8::17"
    assert client_address("127.0.0.1", [(b"forwarded", b"for=198.51.100.4:555")], trusted) == "198.51.100.4"
    assert client_address("127.0.0.1", [], trusted) == "127.0.0.1"
    assert client_address("127.0.0.1", [(b"x-forwarded-for", b"10.0.0.1")], trusted) == "10.0.0.1"
