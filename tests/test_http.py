"""The HTTP listener and bearer tokens: the listener's own answers, a taken port, TOKEN over IRC,
and an MCP send that survives kill -9 of the server.

Live servers bind port 0 for IRC and HTTP; the kill -9 test runs pircd as a process of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ircd.net.asgi import Front
from ircd.store import tokens as token_rows
from tests import dbs
from tests.harness import config
from tests.live import LiveServer
from tests.proc import ServerProcess, cli, write_config
from tests.test_pircan import P, S


# the listener ---------------------------------------------------------------------------------


@pytest.fixture
def live_http(tmp_path):
    server = LiveServer(config(server={"listen": ["127.0.0.1:0"], "extensions": ["pircan"]},
                               http={"max_body_bytes": 65536}),
                        db=str(tmp_path / "pircd.db")).start()
    yield server
    server.stop()


def test_health_host_check_and_body_limit(live_http):
    async def scenario() -> None:
        async with httpx2.AsyncClient() as http:
            r = await http.get(live_http.http_url + "/healthz")
            assert (r.status_code, r.text) == (200, "ok\n")
            r = await http.get(live_http.http_url + "/healthz", headers={"Host": "localhost:1"})
            assert r.status_code == 403
            r = await http.get(live_http.http_url + "/healthz",
                               headers={"Host": f"localhost:{live_http.http_url.rsplit(':', 1)[1]}"})
            assert r.status_code == 200  # loopback names are accepted for a loopback listener
            r = await http.post(live_http.http_url + "/mcp", content=b"x" * 65537)
            assert r.status_code == 413
            r = await http.get(live_http.http_url + "/nothing-here")
            assert r.status_code == 404

    asyncio.run(scenario())


def test_a_chunked_body_over_the_limit_gets_413(live_http, caplog):
    """A body without Content-Length is counted as it arrives; past the limit the client gets 413
    (it got 500: the refusal was an exception raised into the application) and nothing is logged
    as an application error."""
    host, port = live_http.server.http.addresses[0]
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(f"POST /portal/signin HTTP/1.1\r\nHost: {host}:{port}\r\nTransfer-Encoding: chunked\r\n"
                     "Content-Type: application/x-www-form-urlencoded\r\n\r\n".encode())
        chunk = b"x" * 30000
        with contextlib.suppress(OSError):  # the server may close before the last chunk
            for _ in range(3):
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        answer = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(4096):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 "), answer
    assert answer.endswith(b"\r\n\r\nRequest body too large\n")
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


class _Hosts:
    def host_allowed(self, host: str) -> bool:
        return True

    def origin_allowed(self, origin: str) -> bool:
        return True


@pytest.mark.parametrize(("pieces", "read"), [([40000, 40000, 5000], 3), ([70000, 2 << 20, 5], 2),
                                              ([2 << 20, 5], 1)])
def test_a_chunked_body_over_the_limit_is_read_to_its_end_before_the_413(pieces, read):
    """Up to 1 MiB, the rest of a chunked body past the limit is read before the 413 and the close
    that follows it (it was answered at once: the bytes still coming made the kernel reset the
    connection, and the client lost the answer; CI saw it as a read error); past 1 MiB, no further."""
    events: list[str] = []
    messages = [{"type": "http.request", "body": b"x" * n, "more_body": i < len(pieces) - 1}
                for i, n in enumerate(pieces)]

    async def receive() -> dict:
        message = messages.pop(0)
        events.append(f"read {len(message['body'])}")
        return message

    async def send(message: dict) -> None:
        events.append(f"{message['type']} {message.get('status', '')}".strip())

    async def app(scope, receive, send) -> None:
        while (await receive())["type"] == "http.request":
            pass
        events.append("app heard the disconnect")

    front = Front(app, _Hosts(), 65536, [])
    scope = {"type": "http", "path": "/", "headers": [(b"host", b"h"), (b"transfer-encoding", b"chunked")]}
    asyncio.run(front(scope, receive, send))
    assert events == [*(f"read {n}" for n in pieces[:read]), "http.response.start 413", "http.response.body",
                      "app heard the disconnect"]


def _routes(server) -> None:
    """Exact routes of ASGI apps, as an extension registers them (``ExtensionAPI.http_route``)."""
    from starlette.exceptions import HTTPException

    from ircd.store.errors import StoreUnavailable

    async def echo(scope, receive, send) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen = {k: type(scope[k]).__name__ for k in ("app", "router", "route", "endpoint") if k in scope}
        text = f"{scope['method']} {len(body)} {sorted(seen.items())} {scope.get('path_params')}".encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": text})

    async def failing(scope, receive, send) -> None:
        raise {"/boom": RuntimeError("boom"), "/gone": StoreUnavailable("away"),
               "/teapot": HTTPException(418, "short and stout")}[scope["path"]]

    class App:  # an ASGI app (a plain function would be a request handler, for GET)
        def __init__(self, fn) -> None:
            self.fn = fn

        async def __call__(self, scope, receive, send) -> None:
            await self.fn(scope, receive, send)

    server.http.routes += [("/echo", App(echo)), *((path, App(failing)) for path in ("/boom", "/gone", "/teapot"))]


async def _chunks(count: int):
    """A body of ``count`` chunks of 40,000 bytes, sent without a Content-Length."""
    for _ in range(count):
        yield b"x" * 40000


def test_exact_routes_answer_as_through_starlettes_router(tmp_path):
    """An exact path of an ASGI app is served past Starlette's router, with what the router gave it:
    its scope keys, every method, a trailing-slash redirect, 503 while the database is away, a
    Starlette HTTPException rendered, any other exception 500; and the body limit holds for it."""
    server = LiveServer(config(server={"listen": ["127.0.0.1:0"]}, http={"max_body_bytes": 65536}),
                        setup=_routes).start()
    try:
        async def scenario() -> None:
            url = server.http_url
            async with httpx2.AsyncClient() as http:
                r = await http.put(url + "/echo", content=b"abc")
                assert (r.status_code, r.text) == (200, "PUT 3 [('app', 'Starlette'), ('endpoint', 'Unavailable'), "
                                                        "('route', 'Route'), ('router', 'Router')] {}")
                r = await http.get(url + "/echo/", follow_redirects=False)
                assert (r.status_code, r.headers["location"]) == (307, url + "/echo")
                r = await http.get(url + "/boom")
                assert (r.status_code, r.text) == (500, "Internal Server Error")
                r = await http.get(url + "/gone")
                assert (r.status_code, r.headers["retry-after"]) == (503, "1")
                assert r.text == "Service Unavailable: the database is unavailable; try again in a moment\n"
                r = await http.get(url + "/teapot")
                assert (r.status_code, r.text) == (418, "short and stout")
                r = await http.post(url + "/echo", content=_chunks(2))
                assert (r.status_code, r.text) == (413, "Request body too large\n")
                r = await http.post(url + "/echo", content=_chunks(1))
                assert (r.status_code, r.text[:11]) == (200, "POST 40000 ")

        asyncio.run(scenario())
    finally:
        server.stop()


def _response(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\r\n\r\nok\n"):
        chunk = sock.recv(4096)
        if not chunk:
            return data  # closed by the server
        data += chunk
    return data


def test_an_idle_connection_outlives_the_clients_pool(live_http):
    """The server keeps an idle keep-alive connection open for longer than httpx (the MCP SDK's HTTP
    client) keeps it in its pool: otherwise a request sent as the server closes the connection fails
    with a read error in the client (uvicorn's default was 5 s, the same as httpx's)."""
    host, port = live_http.server.http.addresses[0]
    request = f"GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        assert _response(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        time.sleep(httpx2.Limits().keepalive_expiry + 0.5)  # idle: the condition under test
        sock.sendall(request)
        again = _response(sock)
        assert again.startswith(b"HTTP/1.1 200 OK\r\n") and again.endswith(b"\r\n\r\nok\n")


def test_a_taken_http_port_stops_start_up_with_one_line(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        path = write_config(tmp_path, http={"listen": [f"127.0.0.1:{port}"]})
        result = subprocess.run([sys.executable, "-m", "ircd", "serve", "--config", str(path), "--no-uvloop"],
                                capture_output=True, text=True, timeout=60)
    finally:
        taken.close()
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == f"pircd: cannot listen: 127.0.0.1:{port} (http): Address already in use"
    assert "Traceback" not in result.stderr


def test_http_can_be_off(tmp_path):
    server = LiveServer(config(server={"listen": ["127.0.0.1:0"]}, http={"enabled": False})).start()
    try:
        assert server.server.http.addresses == []
    finally:
        server.stop()


# tokens -------------------------------------------------------------------------------------


@pytest.fixture
def p(tmp_path):
    harness = P(tmp_path)
    harness.account("olive", kind="person")
    harness.account("paul", kind="person")
    harness.account("alice")
    harness.account("dave", owner="paul")
    yield harness
    harness.close()


def test_token_add_list_revoke_over_irc(p):
    p.login("olive")
    out = p.cmd("olive", "TOKEN ADD alice laptop")
    assert len(out) == 1
    parts = out[0].split(" ")
    assert parts[:5] == [S, "TOKEN", "olive", "CREATED", "alice"] and parts[5] == "laptop"
    token = parts[6]
    assert " ".join(parts[7:]) == ":Store this token now: it is not shown again"
    rows = p.rows("SELECT account, name, created_by, length(secret_hash) FROM account_tokens")
    assert rows == [("alice", "laptop", "olive", 32)]
    assert token.split("_", 2)[2] not in str(p.rows("SELECT * FROM account_tokens"))  # only a hash is kept
    listed = p.cmd("olive", "TOKEN LIST alice")
    assert listed[0].startswith(f"{S} TOKEN olive TOKEN alice laptop ") and listed[0].endswith(" *")
    assert listed[1:] == [f"{S} TOKEN olive END alice"]
    assert p.cmd("olive", "TOKEN REVOKE alice nope") == [
        f"{S} FAIL TOKEN NO_SUCH_TOKEN nope :alice has no token named nope"
    ]
    assert p.cmd("olive", "TOKEN REVOKE alice") == [f"{S} TOKEN olive REVOKED alice 1"]
    assert p.rows("SELECT COUNT(*) FROM account_tokens") == [(0,)]


def test_token_refusals(p):
    p.login("olive")
    p.login("alice")
    p.plain("guest")
    assert p.cmd("guest", "TOKEN LIST") == [
        f"{S} FAIL TOKEN ACCOUNT_REQUIRED :You must be logged in to an account to manage tokens"
    ]
    assert p.cmd("olive", "TOKEN ADD dave") == [
        f"{S} FAIL TOKEN NOT_ALLOWED dave :You manage your own tokens and your agents' tokens"
    ]
    assert p.cmd("olive", "TOKEN ADD nobody") == [f"{S} FAIL TOKEN NO_SUCH_ACCOUNT nobody :No such account"]
    assert p.cmd("olive", "TOKEN ADD alice bad/name") == [
        f"{S} FAIL TOKEN INVALID_NAME bad/name :Token names are 1-64 letters, digits, '-', '_' or '.'"
    ]
    assert p.cmd("alice", "TOKEN ADD alice one")[0].split(" ")[3] == "CREATED"  # an agent's own
    assert p.cmd("olive", "TOKEN ADD alice one") == [
        f"{S} FAIL TOKEN TOKEN_EXISTS one :alice already has a token named one"
    ]
    assert p.cmd("olive", "TOKEN FROB") == [
        f"{S} FAIL TOKEN UNKNOWN_SUBCOMMAND FROB :Subcommands: ADD, LIST, REVOKE (see HELP TOKEN)"
    ]
    assert p.cmd("olive", "TOKEN ADD") == [f"{S} FAIL TOKEN NEED_MORE_PARAMS ADD :Syntax: TOKEN ADD <account> [<name>]"]


def _verify(p, token: str):
    return p.h.run(p.h.server.tokens.verify(token, "192.0.2.1"))


def _counting_reads(p) -> list[str]:
    """The names of the store reads made from now on."""
    store, reads = p.h.server.store, []
    original = store.read

    async def read(fn, *args):
        reads.append(fn.__name__)
        return await original(fn, *args)

    store.read = read
    return reads


def test_a_valid_token_is_read_once_and_its_revocation_is_seen_at_once(p):
    """A valid token's identity is kept, so a call does not read the database; a revocation (here:
    over IRC) is seen by the next check."""
    p.login("olive")
    token = p.cmd("olive", "TOKEN ADD alice laptop")[0].split(" ")[6]
    reads = _counting_reads(p)
    first, second = _verify(p, token), _verify(p, token)
    assert (first.account, first.name) == ("alice", "laptop") and second == first
    assert reads == ["find"]
    assert _verify(p, token[:-1] + ("x" if token[-1] != "x" else "y")) is None  # another secret: read, refused
    assert p.cmd("olive", "TOKEN REVOKE alice laptop") == [f"{S} TOKEN olive REVOKED alice 1"]
    assert _verify(p, token) is None


def test_a_kept_token_is_forgotten_when_another_process_revokes_it_or_its_account_is_suspended(p):
    """Another process (``pircd token revoke``) writes the database directly: the server's check of
    the database for other processes' changes (once a second) forgets every kept token."""
    p.login("olive")
    token = p.cmd("olive", "TOKEN ADD alice laptop")[0].split(" ")[6]
    assert _verify(p, token) is not None
    conn = dbs.connect(p.path)  # autocommit
    try:
        conn.execute("DELETE FROM account_tokens WHERE account = 'alice'")
    finally:
        conn.close()
    p.h.run(p.h.server.accounts.poll_external_changes())
    assert _verify(p, token) is None

    token = p.cmd("olive", "TOKEN ADD alice phone")[0].split(" ")[6]
    assert _verify(p, token) is not None
    from ircd.store import accounts as account_rows

    # as the operator's suspension does (ExtensionAPI.set_suspended, the portal's oversight)
    p.h.run(p.h.server.store.write(account_rows.set_suspended, "alice", True))
    p.h.run(p.h.server.accounts.refresh())
    assert _verify(p, token) is None


def test_a_token_revoked_while_it_was_read_is_not_kept(p):
    p.login("olive")
    token = p.cmd("olive", "TOKEN ADD alice laptop")[0].split(" ")[6]
    tokens, store = p.h.server.tokens, p.h.server.store
    original = store.read

    async def read_then_revoke(fn, *args):
        row = await original(fn, *args)  # read while the token was valid
        await tokens.revoke(None, "alice", "laptop")  # revoked before the check resumes
        return row

    store.read = read_then_revoke
    assert _verify(p, token) is not None  # the check that overlapped the revocation passes, as before
    store.read = original
    assert _verify(p, token) is None


def test_a_token_of_a_deleted_and_recreated_name_names_nothing(tmp_path):
    db = tmp_path / "t.db"
    assert cli("account", "add", "carl", "--generate", "--db", str(db)).returncode == 0
    made = cli("token", "add", "carl", "--db", str(db))
    assert made.returncode == 0, made.stderr
    token = made.stdout.splitlines()[1]
    ident, secret = token_rows.split_token(token)
    conn = dbs.connect(db)
    try:
        assert token_rows.lookup(conn, ident, secret) is not None
        assert token_rows.lookup(conn, ident, secret + "x") is None
        conn.execute("UPDATE accounts SET created_at = (SELECT created_at + 1 FROM account_tokens)")  # made again
        assert token_rows.lookup(conn, ident, secret) is None
    finally:
        conn.close()


# durability -----------------------------------------------------------------------------------


def test_an_mcp_send_survives_kill9(tmp_path):
    path = write_config(tmp_path, server={"extensions": ["pircan"]})
    for args, stdin in ((["account", "add", "olive", "--password-stdin"], "sesame123\n"),
                        (["agent", "add", "alice", "--owner", "olive", "--password-stdin"], "sesame123\n"),
                        (["agent", "add", "bob", "--owner", "olive", "--password-stdin"], "sesame123\n")):
        assert cli(*args, "--config", str(path), stdin=stdin).returncode == 0
    alice_token = cli("token", "add", "alice", "--config", str(path)).stdout.splitlines()[1]
    bob_token = cli("token", "add", "bob", "--config", str(path)).stdout.splitlines()[1]
    server = ServerProcess(path)

    async def as_(token: str, url: str, tool: str, **args: object) -> dict:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
            async with Client(streamable_http_client(url + "/mcp", http_client=http)) as c:
                result = await c.call_tool(tool, args)
                assert not result.is_error, result.content
                return result.structured_content or {}

    try:
        url = server.http_url
        rid = asyncio.run(as_(alice_token, url, "request_contact", agent="bob", scopes=["message"], days=2,
                              purpose="durable"))["request"]["request_id"]
        asyncio.run(as_(bob_token, url, "respond_to_contact", request_id=rid, decision="accept"))
        sent = asyncio.run(as_(alice_token, url, "send_direct_message", recipient="bob", body="kept"))
        server.kill9()  # right after the acknowledgement
        server = ServerProcess(path)
        inbox = asyncio.run(as_(bob_token, server.http_url, "get_inbox"))
        assert [m["message_id"] for m in inbox["messages"]] == [sent["message"]["message_id"]]
        assert inbox["messages"][0]["body"] == "kept"
    finally:
        server.terminate()


def test_public_url_is_accepted_as_host_and_origin():
    from ircd.net.http import allowed_hosts, allowed_origins
    from ircd.server import Server

    server = Server(config(http={"public_url": "https://agents.example.org:8443/base",
                                 "allowed_hosts": ["10.0.0.5:*"]}))
    addresses = [("127.0.0.1", 6680)]
    assert allowed_hosts(server, addresses) == [
        "10.0.0.5:*", "127.0.0.1:6680", "[::1]:6680", "agents.example.org:8443", "localhost:6680"]
    assert "https://agents.example.org:8443" in allowed_origins(server, addresses, tls=False)
    assert "http://127.0.0.1:6680" in allowed_origins(server, addresses, tls=False)


def test_a_listener_on_every_interface_accepts_loopback_names():
    """A listener on 0.0.0.0 (a container's) is reached on loopback too: its health check asks
    for 127.0.0.1:6680. DNS rebinding is still refused: the rebound page sends its own name."""
    from ircd.net.http import allowed_hosts
    from ircd.server import Server

    server = Server(config())
    assert allowed_hosts(server, [("0.0.0.0", 6680)]) == [
        "0.0.0.0:6680", "127.0.0.1:6680", "[::1]:6680", "localhost:6680"]
    assert allowed_hosts(server, [("::", 6680)]) == ["127.0.0.1:6680", "[::1]:6680", "[::]:6680", "localhost:6680"]
    assert allowed_hosts(server, [("192.0.2.7", 6680)]) == ["192.0.2.7:6680"]
