"""Reloading the configuration (REHASH, SIGHUP) and refusing to start cleanly."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

from tests.harness import Harness, config
from tests.live import IRCClient
from tests.proc import ServerProcess, write_config


def test_rehash_refuses_keys_that_need_a_restart():
    h = Harness()
    try:
        for section, values in (("server", {"name": "other.test"}), ("server", {"casemapping": "ascii"})):
            new = config(**{section: values})
            key = f"{section}.{next(iter(values))}"
            try:
                h.server.rehash(new)
            except ValueError as exc:
                assert str(exc) == f"{key} cannot change while the server runs (restart instead)"
            else:
                raise AssertionError(f"{key} changed on rehash")
        assert h.server.name == "irc.test"
    finally:
        h.close()


def test_sighup_reloads_the_config_file(tmp_path):
    cfg = write_config(tmp_path, server={"motd": "first"}, pircan={"guests_may_join": True})
    server = ServerProcess(cfg)
    try:
        c = IRCClient(server.port)
        welcome = c.register("early")
        assert ("372", ["early", "- first"]) in [(m.command, m.params) for m in welcome]
        cfg.write_text(cfg.read_text().replace('motd = "first"', 'motd = "second"'))
        server.proc.send_signal(signal.SIGHUP)
        # the reload is logged; wait for that line rather than for time to pass
        while not any("rehash on SIGHUP" in line for line in server.log):
            c.sync()
        c.send("MOTD")
        assert [(m.command, m.params) for m in c.sync() if m.command == "372"] == [("372", ["early", "- second"])]
        c.close()
    finally:
        assert server.terminate() == 0


def test_a_port_in_use_is_a_clear_error_not_a_hang(tmp_path):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    try:
        result = subprocess.run(
            [sys.executable, "-m", "ircd", "serve", "--listen", f"127.0.0.1:{port}", "--db", str(tmp_path / "x.db")],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
        )
    finally:
        blocker.close()
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1].startswith("pircd: cannot listen: ")
    assert "Traceback" not in result.stderr
