"""What an idle pircd holds in memory, with the HTTP side on and off, and what its first MCP call costs.

    python -m bench.idle [--repeat 3] [--settle 2]

Starts ``pircd serve`` with the built-in defaults (history on, PIRCAN loaded, the HTTP listener on)
except for the addresses (IRC and HTTP on free ports of 127.0.0.1) and the database (a new file in a
temporary directory). The first start makes the database (and the key that signs intro tokens,
with cryptography loaded for it) and is stopped at once; the second, on that database as every
later start of a server is, is measured: it waits until it is ready (an IRC client registered and answered a PING, and the
HTTP listener answers ``/healthz``), lets it settle for ``--settle`` seconds and reads ``VmRSS`` of
``/proc/<pid>/status``. The same again with ``[http] enabled = false``. With the listener on it then
makes one MCP call (``list_agents`` with a bearer token, over raw HTTP in the sessionless protocol of
the MCP SDK's client) and reports how long it took and the RSS after it: the HTTP transports'
libraries are imported on their first request, so that request pays for the import. Prints the
median of ``--repeat`` starts of each.

``--imports`` prints instead what each part of the server costs to import, in the order a server
loads them, in a fresh interpreter: VmRSS after each step and the step's import time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from http.client import HTTPConnection
from pathlib import Path

from bench.servers import free_port, listening_ports, proc_sample

__all__ = ["main", "measure"]

_REPO = Path(__file__).resolve().parent.parent


def _config(directory: Path, port: int, http: bool) -> str:
    return f"""\
# pircd with its defaults, but on free loopback ports and a fresh database (bench/idle.py)
[server]
listen = ["127.0.0.1:{port}"]
db = "{directory / "pircd.db"}"

[http]
enabled = {"true" if http else "false"}
listen = ["127.0.0.1:0"]
"""


def _irc_ready(port: int, timeout: float) -> None:
    """Register a client and wait for the PONG of its PING: the server is serving IRC."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with sock:
        sock.sendall(b"NICK idle\r\nUSER idle 0 * :idle\r\nPING :ready\r\n")
        seen = b""
        while b"PONG" not in seen or b"ready" not in seen.split(b"PONG", 1)[1]:
            data = sock.recv(65536)
            if not data:
                raise RuntimeError(f"the server closed the connection: {seen[-300:]!r}")
            seen += data
        sock.sendall(b"QUIT\r\n")


def _http_port(pid: int, irc_port: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while True:
        others = listening_ports(pid) - {irc_port}
        if others:
            return min(others)
        if time.monotonic() > deadline:
            raise RuntimeError("no HTTP listener")
        time.sleep(0.05)


def _get(port: int, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    conn = HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("POST" if body is not None else "GET", path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def _token(directory: Path) -> str:
    """An agent account and its bearer token, written as ``pircd agent add`` and ``token add`` write them."""
    from bench.loadgen import Target, create_accounts
    from bench.mcp import create_tokens

    target = Target("pircd", "127.0.0.1", 0, lambda: (0.0, 0.0, 0), workdir=directory)
    create_accounts(target, ["idleowner"])
    create_accounts(target, ["idleagent"], kind="agent", owner="idleowner")
    return create_tokens(target, ["idleagent"])["idleagent"]


_CALL = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "tools/call",
    "params": {"name": "list_agents", "arguments": {},
               "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                         "io.modelcontextprotocol/clientInfo": {"name": "bench.idle", "version": "1"},
                         "io.modelcontextprotocol/clientCapabilities": {}}},
}).encode()


def measure(http: bool, settle: float, src: Path = _REPO, timeout: float = 60.0) -> dict[str, float]:
    """One start of pircd: VmRSS (MiB) when idle and, with ``http``, the first MCP call."""
    directory = Path(tempfile.mkdtemp(prefix="bench-idle-"))
    port = free_port()
    config = directory / "pircd.toml"
    config.write_text(_config(directory, port, http))
    token = _token(directory) if http else ""
    _stop(_start(config, directory, src), port, timeout)  # the first start makes the database
    started = time.perf_counter()
    proc = _start(config, directory, src)
    try:
        return _measure(proc, port, http, token, settle, started, timeout)
    finally:
        _stop(proc)
        shutil.rmtree(directory, ignore_errors=True)


def _start(config: Path, directory: Path, src: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ircd", "serve", "--config", str(config)], cwd=directory,
                            env={**os.environ, "PYTHONPATH": str(src)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen[bytes], port: int | None = None, timeout: float = 60.0) -> None:
    """Stop the server (once it serves, when ``port`` is given) by its PID."""
    try:
        if port is not None:
            _irc_ready(port, timeout)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _measure(proc: subprocess.Popen[bytes], port: int, http: bool, token: str, settle: float, started: float,
             timeout: float) -> dict[str, float]:
    """The ready server's figures (``measure``)."""
    _irc_ready(port, timeout)
    result: dict[str, float] = {}
    if http:
        http_port = _http_port(proc.pid, port, timeout)
        status, _ = _get(http_port, "/healthz")
        if status != 200:
            raise RuntimeError(f"/healthz answered {status}")
    result["ready_s"] = time.perf_counter() - started
    time.sleep(settle)
    result["idle_mib"] = proc_sample(proc.pid)[2] / 1024
    if http:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                   "Mcp-Method": "tools/call", "Mcp-Name": "list_agents",
                   "Host": f"127.0.0.1:{http_port}"}
        t0 = time.perf_counter()
        status, body = _get(http_port, "/mcp", _CALL, headers)
        result["first_call_ms"] = 1000 * (time.perf_counter() - t0)
        if status != 200 or b'"result"' not in body:
            raise RuntimeError(f"the MCP call answered {status}: {body[:300]!r}")
        t0 = time.perf_counter()
        _get(http_port, "/mcp", _CALL, headers)
        result["second_call_ms"] = 1000 * (time.perf_counter() - t0)
        time.sleep(settle)
        result["after_call_mib"] = proc_sample(proc.pid)[2] / 1024
    return result


# (what, modules) in the order a server with everything on loads them
IMPORT_STEPS = [
    ("the event loop (asyncio with ssl, uvloop)", ["asyncio", "uvloop"]),
    ("pydantic", ["pydantic"]),
    ("the configuration's models", ["ircd.config"]),
    ("the IRC server and its store", ["ircd.server", "ircd.app", "ircd.net.runner"]),
    ("PIRCAN (IRC verbs, service layer, webhooks worker, agent host)", ["ext.pircan"]),
    ("the command line (click; the other subcommands load when asked for)", ["ircd.cli"]),
    ("the HTTP listener (Starlette, uvicorn, httptools)", ["ircd.net.http", "starlette.applications", "uvicorn",
                                                          "uvicorn.protocols.http.httptools_impl"]),
    ("IRC over WebSocket: the websockets library (first upgrade)",
     ["uvicorn.protocols.websockets.websockets_sansio_impl"]),
    ("MCP: the SDK and the tools (first request to /mcp)", ["ext.pircan.mcp.app"]),
    ("A2A: the SDK, protobuf (first request to /a2a)", ["ext.pircan.a2a.web"]),
    ("the portal: Jinja2 (first request to /portal)", ["ext.pircan.portal.app"]),
    ("webhooks: httpx (first delivery)", ["ext.pircan.webhooks.client"]),
    ("verification codes by mail: smtplib (first code sent)", ["ircd.net.mail"]),
    ("intro tokens: PyJWT, cryptography (first key or token)", ["jwt", "cryptography.hazmat.primitives.asymmetric.ed25519"]),
]

_STEP = r'''
import importlib, json, sys, time
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
print(json.dumps(["the interpreter (python3 with site)", rss(), 0.0, len(sys.modules)]), flush=True)
for what, modules in json.loads(sys.argv[1]):
    t0 = time.perf_counter()
    for module in modules:
        importlib.import_module(module)
    print(json.dumps([what, rss(), time.perf_counter() - t0, len(sys.modules)]), flush=True)
'''


def imports(src: Path = _REPO) -> list[tuple[str, float, float, int]]:
    """(step, VmRSS MiB after it, its import seconds, modules loaded so far) for IMPORT_STEPS."""
    # in src: "python -c" puts the working directory first on the path, ahead of PYTHONPATH
    done = subprocess.run([sys.executable, "-c", _STEP, json.dumps(IMPORT_STEPS)], env={**os.environ,
                          "PYTHONPATH": str(src)}, cwd=src, capture_output=True, text=True, check=True,
                          timeout=300)
    return [tuple(json.loads(line)) for line in done.stdout.splitlines()]  # type: ignore[misc]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.idle", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--settle", type=float, default=2.0, help="seconds between ready and reading VmRSS")
    p.add_argument("--pircd-src", type=Path, default=_REPO, help="the pircd source tree (default: this one)")
    p.add_argument("--imports", action="store_true", help="what each part costs to import (RSS, time)")
    args = p.parse_args(argv)
    if args.imports:
        before = 0.0
        print(f"{'step':68} {'VmRSS':>9} {'+MiB':>6} {'import':>8} {'modules':>8}")
        for what, rss, seconds, modules in imports(args.pircd_src):
            print(f"{what:68} {rss:6.1f} MiB {rss - before:+6.1f} {1000 * seconds:6.0f} ms {modules:8d}")
            before = rss
        return 0
    rows = []
    for http in (True, False):
        runs = [measure(http, args.settle, args.pircd_src) for _ in range(args.repeat)]
        keys = runs[0].keys()
        rows.append((http, {k: statistics.median(r[k] for r in runs) for k in keys}, runs))
    for http, median, runs in rows:
        name = "HTTP on (the default)" if http else "[http] enabled = false"
        print(f"{name}: idle RSS {median['idle_mib']:.1f} MiB "
              f"(runs {', '.join(format(r['idle_mib'], '.1f') for r in runs)}), ready in {median['ready_s']:.2f} s")
        if http:
            print(f"  first MCP call {median['first_call_ms']:.0f} ms, the second {median['second_call_ms']:.1f} ms; "
                  f"RSS after them {median['after_call_mib']:.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
