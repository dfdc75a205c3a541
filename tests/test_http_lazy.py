"""The HTTP side is loaded only when it is used: with ``[http] enabled = false`` none of its libraries
is imported, and with the listener on the MCP SDK, the A2A SDK and the portal's Jinja2 are imported by
the first request that reaches their path (ext/pircan/lazy.py), which is then served as usual. So are
argon2-cffi (the first password hashed), the mail sender (the first code sent) and the WebSocket
protocol (the first upgrade).

Each check runs in a fresh interpreter (``sys.modules`` of the test process holds everything), that
starts the server as the live tests do and makes its requests with the standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_PROBE = r'''
import json, sys, urllib.error, urllib.request
from tests.harness import config
from tests.live import LiveServer

HEAVY = ("mcp", "a2a", "jinja2", "starlette", "uvicorn", "httpx", "jwt")
LATER = ("argon2", "smtplib", "websockets")
http_on = sys.argv[1] == "on"
sections = {"server": {"listen": ["127.0.0.1:0"], "extensions": ["pircan"]},
            "http": {"enabled": http_on, "listen": ["127.0.0.1:0"]}}
server = LiveServer(config(**sections), db=sys.argv[2]).start()
report = {}

def loaded(names=HEAVY):
    return sorted(name for name in names if name in sys.modules)

def upgrade():
    """A WebSocket upgrade of IRC, in raw HTTP: the status line of the answer."""
    import socket
    host, port = server.server.http.addresses[0]
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                     "Sec-WebSocket-Protocol: text.ircv3.net\r\n\r\n".encode())
        answer = b""
        while b"\r\n" not in answer:
            answer += sock.recv(4096)
    return answer.split(b"\r\n", 1)[0].decode()

def request(path, body=None, headers=None):
    host, port = server.server.http.addresses[0]
    req = urllib.request.Request(f"http://{host}:{port}{path}", data=body, headers=headers or {},
                                 method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()

try:
    report["started"] = loaded()
    report["started, later"] = loaded(LATER)
    if http_on:
        report["no token"] = [request("/mcp", b"{}")[0], loaded()]
        account = server.server.accounts
        fut = __import__("asyncio").run_coroutine_threadsafe(account.create("olive", "sesame123", kind="person",
                                                                            owner=None), server.loop)
        fut.result(30)
        report["a password hashed"] = loaded(LATER)
        report["websocket"] = [upgrade(), loaded(LATER)]
        fut = __import__("asyncio").run_coroutine_threadsafe(server.server.tokens.create(None, "olive"), server.loop)
        token = fut.result(30)[1]
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "get_profile", "arguments": {}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "probe", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}}}
        status, text = request("/mcp", json.dumps(call).encode(), {
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call", "Mcp-Name": "get_profile"})
        report["mcp call"] = [status, json.loads(text)["result"]["structuredContent"]["account"], loaded()]
        status, text = request("/portal/signin")
        report["portal"] = [status, "<form" in text, loaded()]
        status, text = request("/.well-known/agent-card.json")
        report["card"] = [status, json.loads(text)["name"] != "", loaded()]
finally:
    server.stop()
print(json.dumps(report))
'''


def probe(tmp_path: Path, http: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _PROBE, http, str(tmp_path / "p.db")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_with_http_off_nothing_of_the_http_side_is_imported(tmp_path):
    assert probe(tmp_path, "off") == {"started": [], "started, later": []}


def test_each_http_transport_is_imported_by_the_first_request_to_its_path(tmp_path):
    """A request the bearer gate refuses loads nothing; the first MCP call loads the MCP SDK (and
    is answered); the portal's first page loads Jinja2; the Agent Card loads the A2A SDK."""
    report = probe(tmp_path, "on")
    assert report["started"] == ["starlette", "uvicorn"]
    assert report["started, later"] == []
    assert report["a password hashed"] == ["argon2"]
    assert report["websocket"] == ["HTTP/1.1 101 Switching Protocols", ["argon2", "websockets"]]
    assert report["no token"] == [401, ["starlette", "uvicorn"]]
    status, account, loaded = report["mcp call"]
    assert (status, account) == (200, "olive") and "mcp" in loaded and "jinja2" not in loaded
    assert "a2a" not in loaded
    status, form, loaded = report["portal"]
    assert (status, form) == (200, True) and "jinja2" in loaded and "a2a" not in loaded
    status, named, loaded = report["card"]
    assert (status, named) == (200, True) and "a2a" in loaded


def test_a_module_loaded_twice_at_once_is_handed_out_whole(tmp_path, monkeypatch):
    """Two first requests at once (two webhook deliveries, say) both get the module once its import
    is done, never the half-made module that ``sys.modules`` holds while it runs."""
    import asyncio
    import threading

    from ext.pircan.lazy import load

    started, go = threading.Event(), threading.Event()
    gate = type(sys)("lazy_probe_gate")
    gate.started, gate.go = started, go  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "lazy_probe_gate", gate)
    (tmp_path / "lazy_probe_slow.py").write_text(
        "import lazy_probe_gate\nlazy_probe_gate.started.set()\nlazy_probe_gate.go.wait(30)\nwhole = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    async def use() -> bool:
        module = await load("lazy_probe_slow")
        return getattr(module, "whole", False)  # used as soon as it is handed out

    async def scenario() -> list[bool]:
        first = asyncio.ensure_future(use())
        await asyncio.to_thread(started.wait, 30)  # the import runs, the module is half made
        second = asyncio.ensure_future(use())
        await asyncio.sleep(0)  # the second load has looked for the module
        go.set()
        return list(await asyncio.gather(first, second))

    try:
        assert asyncio.run(scenario()) == [True, True]
    finally:
        go.set()
        sys.modules.pop("lazy_probe_slow", None)
