"""IRC over WebSocket (IRCv3 "WebSocket support") on the HTTP listener, with real sockets.

The client is the ``websockets`` library's synchronous client; tests synchronise
with PING/PONG like the TCP live tests.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from ircd.net.websocket import choose_subprotocol

_tokens = itertools.count(1)


class WebClient:
    def __init__(self, url: str, subprotocols: list[str] | None, **kwargs) -> None:
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(connect(url, subprotocols=subprotocols, open_timeout=10, **kwargs))
        self.binary = self.ws.subprotocol == "binary.ircv3.net"

    def send(self, line: str | bytes) -> None:
        if self.binary and isinstance(line, str):
            line = line.encode()
        self.ws.send(line)

    def recv(self) -> str | bytes:
        return self.ws.recv(timeout=10)

    def sync(self) -> list[str | bytes]:
        """Every message up to the PONG of a fresh token (the PONG excluded)."""
        token = f"ws{next(_tokens)}"
        self.send(f"PING {token}")
        out = []
        while True:
            data = self.recv()
            text = data.decode() if isinstance(data, bytes) else data
            if text.endswith((f"PONG irc.test {token}", f"PONG irc.test :{token}")):
                return out
            out.append(data)

    def register(self, nick: str) -> None:
        self.send(f"NICK {nick}")
        self.send(f"USER {nick} 0 * :{nick}")
        while True:
            data = self.recv()
            text = data.decode() if isinstance(data, bytes) else data
            if " 376 " in text or " 422 " in text:
                return

    def close(self) -> None:
        self._stack.close()


@pytest.fixture
def ws_server(live):
    server = live(server={"motd": ""})
    ws_url = server.http_url.replace("http://", "ws://")
    clients: list[WebClient] = []

    def client(subprotocols=("binary.ircv3.net",), path="/", **kwargs) -> WebClient:
        c = WebClient(ws_url + path, list(subprotocols) if subprotocols is not None else None, **kwargs)
        clients.append(c)
        return c

    yield server, client
    for c in clients:
        c.close()


def test_choose_subprotocol():
    """WebSocket support: "The server MUST accept any subprotocol it supports, respecting the
    client's order of preference"."""
    assert choose_subprotocol(["binary.ircv3.net", "text.ircv3.net"]) == "binary.ircv3.net"
    assert choose_subprotocol(["x", "text.ircv3.net", "binary.ircv3.net"]) == "text.ircv3.net"
    assert choose_subprotocol(["chat"]) is None


@pytest.mark.parametrize("offered,expected", [
    (["binary.ircv3.net"], "binary.ircv3.net"),
    (["text.ircv3.net"], "text.ircv3.net"),
    (["text.ircv3.net", "binary.ircv3.net"], "text.ircv3.net"),
    (None, None),
])
def test_websocket_client_talks_to_tcp_client(ws_server, client_factory, offered, expected):
    """WebSocket support: "each message MUST consist of a single IRC line, except that servers
    and clients MUST NOT include trailing \\r or \\n characters in the message"; binary.ircv3.net
    exchanges binary messages and text.ircv3.net text messages."""
    server, ws_client = ws_server
    tcp = client_factory(server.port)
    tcp.register("tcp")
    web = ws_client(offered)
    assert web.ws.subprotocol == expected
    web.register("web")
    tcp.send("PRIVMSG web :hello over the web")
    [line] = web.sync()
    assert isinstance(line, bytes if expected == "binary.ircv3.net" else str)
    text = line.decode() if isinstance(line, bytes) else line
    assert text == ":tcp!tcp@127.0.0.1 PRIVMSG web :hello over the web"
    web.send("PRIVMSG tcp :and back\r\n")  # a trailing CR LF is tolerated
    web.send("JOIN #w")
    web.sync()
    assert [m.command for m in tcp.sync()] == ["PRIVMSG"]
    client = next(c for c in server.server.clients if c.nick == "web")
    assert client.ip == "127.0.0.1" and client.registered


def test_websocket_text_is_always_utf8(ws_server, client_factory):
    """WebSocket support: "Servers MUST NOT relay non-UTF-8 content to clients using text
    messages ... Servers MAY replace non-UTF-8 bytes with the UTF-8 encoding of the Unicode
    replacement character"."""
    server, ws_client = ws_server
    web = ws_client(["text.ircv3.net"])
    web.register("web")
    conn = next(c for c in server.server.clients if c.nick == "web").conn
    server.call(lambda: conn.write(b":x PRIVMSG web :caf\xe9\r\n"))
    assert web.sync() == [":x PRIVMSG web :caf\ufffd"]


def test_websocket_line_limits_and_quit(ws_server):
    """The connection's own limits apply unchanged: a message part past 510 bytes gets 417; QUIT
    ends with ERROR and a closed WebSocket."""
    _server, ws_client = ws_server
    web = ws_client()
    web.register("web")
    web.send("PRIVMSG web :" + "x" * 600)
    [line] = web.sync()
    assert line.decode().endswith("417 web :Input line was too long")
    web.send("QUIT :bye")
    assert web.recv().decode().startswith("ERROR :Closing link")
    with pytest.raises(ConnectionClosed):
        web.recv()


@pytest.mark.parametrize("inside", ["\n", "\r\n"])
def test_a_websocket_message_with_a_line_break_inside_is_one_refused_line(ws_server, client_factory, inside):
    """One message is one line (IRCv3 WebSocket): a LF or CR LF inside it does not run a second
    command, the message is refused whole like a line with a CR in it. A trailing CR LF is still
    dropped."""
    server, ws_client = ws_server
    victim = client_factory(server.port)
    victim.register("victim")
    web = ws_client()
    web.register("web")
    web.send("CAP REQ :standard-replies")
    web.sync()
    web.send(f"PRIVMSG victim :hello{inside}PRIVMSG victim :forged")
    assert [line.decode() for line in web.sync()] == [
        ":irc.test FAIL PRIVMSG INVALID_CHARACTERS :Message rejected, your message contained a CR or NUL character"
    ]
    web.send("PRIVMSG victim :fine\r\n")
    web.sync()
    assert [m.params[-1] for m in victim.sync() if m.command == "PRIVMSG"] == ["fine"]


def test_websocket_path_and_origin(live):
    """Only http.websocket_path is IRC; a browser page from a foreign Origin is refused (the
    HTTP listener's check against cross-site use)."""
    server = live(http={"websocket_path": "/irc"})
    base = server.http_url.replace("http://", "ws://")
    with pytest.raises(InvalidStatus), connect(base + "/", subprotocols=["text.ircv3.net"], open_timeout=10):
        pass
    with connect(base + "/irc", subprotocols=["text.ircv3.net"], open_timeout=10) as ws:
        ws.send("PING x")
        assert ws.recv(timeout=10) == ":irc.test PONG irc.test x"
    with (
        pytest.raises((InvalidStatus, ConnectionClosed)),
        connect(base + "/irc", origin="http://evil.example", open_timeout=10) as ws,
    ):
        ws.send("PING x")
        ws.recv(timeout=10)


def test_websocket_off(live):
    server = live(http={"websocket_path": ""})
    with pytest.raises(InvalidStatus), connect(server.http_url.replace("http://", "ws://") + "/", open_timeout=10):
        pass


def test_websocket_over_tls(live, tmp_path):
    """wss:// on the HTTP listener's TLS port: the client is marked TLS (user mode Z) like a TLS
    socket."""
    from ircd.tlsgen import write_self_signed

    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    write_self_signed(cert, key, "127.0.0.1")
    server = live(server={"tls_cert": str(cert), "tls_key": str(key)},
                  http={"listen": [], "tls_listen": ["127.0.0.1:0"]})
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    host, port = server.server.http.addresses[0]
    web = WebClient(f"wss://{host}:{port}/", ["binary.ircv3.net"], ssl=ctx)
    try:
        web.register("sec")
        client = next(c for c in server.server.clients if c.nick == "sec")
        assert client.tls and "Z" in client.modes
    finally:
        web.close()



def test_websocket_client_that_does_not_read_hits_the_sendq(live, client_factory):
    """A WebSocket client that stops reading is closed at the SendQ like a TCP one (ERROR, then
    gone), and the sender is not held up."""
    server = live(limits={"sendq": 8192}, flood={"enabled": False})
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window fills sooner
    sock.connect(server.server.http.addresses[0])
    web = WebClient(server.http_url.replace("http://", "ws://") + "/", ["text.ircv3.net"], max_queue=1, sock=sock,
                    close_timeout=1)
    try:
        web.register("sleepy")
        web.send("JOIN #flood")
        web.sync()
        tcp = client_factory(server.port)
        tcp.register("loud")
        tcp.send("JOIN #flood")
        tcp.sync()
        line = "PRIVMSG #flood :" + "x" * 400
        gone = False
        for _ in range(200):  # bounded: at most 200 rounds of 100 lines (8 MB)
            tcp.send("\r\n".join([line] * 100))
            tcp.sync()
            if not server.call(lambda: any(c.nick == "sleepy" for c in server.server.clients)):
                gone = True
                break
        assert gone
    finally:
        web.close()
