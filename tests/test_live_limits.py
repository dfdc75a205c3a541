"""Connection limits at the socket: the open-file limit (max_clients capped at start-up, accepting backs off
when descriptors run out, logged once), and TLS connections counted before their handshake."""

from __future__ import annotations

import logging
import os
import re
import resource
import socket
import ssl
import subprocess
import sys
import threading

import pytest
from click.testing import CliRunner

from ircd.cli import main
from ircd.config import load
from tests.live import IRCClient
from tests.proc import write_config


def _until(srv, condition, tries: int = 5000) -> None:
    """Let the server's event loop run until ``condition()`` (run on that loop) holds; each try is
    one round trip through the loop, so an accept that is due has happened by the next one."""
    for _ in range(tries):
        if srv.call(condition):
            return
    raise AssertionError("the server never got there")


# the open-file limit ------------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_max_clients_is_capped_by_the_open_file_limit(tmp_path, loop):
    """With the default max_clients (100,000) far above the process's open-file limit, the server says at
    start-up how many clients it will serve, serves that many, and refuses the next with ERROR: no
    descriptor runs out, nothing is logged per refusal, and no traceback at all. (It used to log a
    traceback for every refused accept: 101,601 of them, 41 MB, in 12 seconds.) With uvloop (when
    installed) plain connections are accepted by uvloop itself, with asyncio by the listener."""
    config = write_config(tmp_path)
    limited = (  # `pircd serve` in a process that may open 160 files
        "import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160)); "
        "sys.argv = ['pircd'] + sys.argv[1:]; runpy.run_module('ircd', run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", limited, "serve", "--config", str(config),
         *(["--no-uvloop"] if loop == "asyncio" else [])],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    log: list[str] = []
    clients: list[IRCClient] = []
    try:
        assert proc.stderr is not None
        port = most = None
        for line in proc.stderr:
            log.append(line)
            found = re.search(r"serving at most (\d+) clients", line)
            most = int(found.group(1)) if found else most
            found = re.search(r"listening on 127\.0\.0\.1:(\d+)$", line.strip())  # IRC, not HTTP
            port = int(found.group(1)) if found and port is None else port
            if " ready" in line:
                break
        assert port is not None and most is not None and 40 < most < 160, log
        stderr = proc.stderr
        drain = threading.Thread(target=lambda: log.extend(stderr), daemon=True)
        drain.start()
        for _ in range(most):
            client = IRCClient(port)
            clients.append(client)
            client.sync()  # PING before registration: this one is in
        extra = IRCClient(port)
        clients.append(extra)
        assert extra.read_all_until_close() == ["ERROR :Closing link: 127.0.0.1 (Server is full)"]
        for _ in range(5):
            again = IRCClient(port)
            clients.append(again)
            assert again.read_all_until_close() == ["ERROR :Closing link: 127.0.0.1 (Server is full)"]
        clients[0].close()  # a place comes free, once the server has seen the close
        for _ in range(100):
            late = IRCClient(port)
            clients.append(late)
            late.send("PING late")
            first = late.read_line()
            if first != "ERROR :Closing link: 127.0.0.1 (Server is full)":
                break
        assert first is not None and first.endswith(" PONG irc.test late")
    finally:
        for client in clients:
            client.close()
        proc.terminate()
        proc.wait(10)
    text = "".join(log)
    assert "Traceback" not in text
    assert text.count("is more than the open-file limit allows") == 1
    assert text.count("reason='Server is full'") == 1  # six refusals, one line


def test_accept_backs_off_while_descriptors_run_out(live, client_factory, caplog):
    """When accept fails for want of a descriptor the listener stops reading its socket for a second
    (the connection waits in the kernel's backlog), logs that once however often it happens, and the
    waiting connection is served when descriptors are free again."""
    srv = live()
    caplog.set_level(logging.INFO, logger="pircd")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    waiting = [socket.socket(), socket.socket()]  # made now: connect() needs no new descriptor
    spare: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 16, hard))
        try:
            while True:
                spare.append(os.dup(0))
        except OSError:
            pass
        for sock in waiting:
            sock.connect(("127.0.0.1", srv.port))
            _until(srv, lambda: any("cannot accept connections" in r.getMessage() for r in caplog.records))
        assert srv.call(lambda: len(srv.server.clients)) == 0
    finally:
        for fd in spare:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        for sock in waiting:  # served once the listener tries again
            sock.sendall(b"PING after\r\n")
            sock.settimeout(10)
            assert sock.recv(512).endswith(b" PONG irc.test after\r\n")
    finally:
        for sock in waiting:
            sock.close()
    lines = [r for r in caplog.records if "cannot accept connections" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelname == "WARNING" and lines[0].exc_info is None
    assert not any(r.exc_info for r in caplog.records)


# TLS handshakes ----------------------------------------------------------------------------


@pytest.fixture
def tls_server(tmp_path, live):
    result = CliRunner().invoke(main, ["init", str(tmp_path), "--name", "irc.test"])
    assert result.exit_code == 0, result.output
    cfg = load(tmp_path / "pircd.toml")
    srv = live(
        server={"tls_listen": ["127.0.0.1:0"], "tls_cert": cfg.server.tls_cert,
                "tls_key": cfg.server.tls_key},
        connections={"max_per_ip": 3, "exempt_loopback": False},
    )
    ctx = ssl.create_default_context(cafile=cfg.server.tls_cert)
    return srv, ctx


def test_stalled_tls_handshakes_count_against_the_per_ip_limit(tls_server, client_factory):
    """A TLS connection holds a place from the moment it is accepted: handshakes that never finish count
    against connections.max_per_ip (they held 200 places from one address, none refused). Over the
    limit a TLS connection is closed before its handshake and a plain one gets ERROR; when a stalled
    one goes, its place comes back."""
    srv, ctx = tls_server
    plain_port, tls_port = srv.addresses[0][1], srv.addresses[1][1]
    stalled = [socket.create_connection(("127.0.0.1", tls_port)) for _ in range(3)]
    try:
        _until(srv, lambda: srv.server.admission.handshaking == 3)
        with pytest.raises(OSError):  # closed before the handshake: EOF or reset
            client_factory(tls_port, tls=ctx, server_hostname="irc.test")
        plain = client_factory(plain_port)
        assert plain.read_all_until_close() == [
            "ERROR :Closing link: 127.0.0.1 (Too many connections from your IP address)"
        ]
        stalled.pop().close()
        _until(srv, lambda: srv.server.admission.handshaking == 2)
        secure = client_factory(tls_port, tls=ctx, server_hostname="irc.test")
        assert secure.register("alice")[-1].command in ("376", "422")
        assert srv.call(lambda: (srv.server.admission.handshaking, srv.server.admission.ip_counts.get("127.0.0.1"))) == (2, 1)
    finally:
        for sock in stalled:
            sock.close()
    _until(srv, lambda: srv.server.admission.handshaking == 0)
