"""Run pircd as a separate process (for restarts and kill -9), on an ephemeral loopback port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

from tests import dbs

_LISTENING = re.compile(r"listening on 127\.0\.0\.1:(\d+)( \(HTTP)?")


def write_config(directory: Path, **sections: dict) -> Path:
    """A config file: loopback port 0, the database in ``directory`` (on PostgreSQL runs, the
    database that path names: tests/dbs.py), flood control off."""
    base = {
        "server": {"name": "irc.test", "listen": ["127.0.0.1:0"], "db": dbs.database(directory / "pircd.db")},
        "flood": {"enabled": False},
        "http": {"listen": ["127.0.0.1:0"]},
    }
    for key, values in sections.items():
        base.setdefault(key, {}).update(values)
    lines = []
    for section, values in base.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {_toml(value)}")
    path = directory / "pircd.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):  # an inline table (a list of them: an array of tables)
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


class ServerProcess:
    def __init__(self, config: Path, *args: str) -> None:
        """``args``: more ``serve`` options (``--http-listen``, ``--no-http``)."""
        self.config = config
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ircd", "serve", "--config", str(config), "--no-uvloop", *args],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.log: list[str] = []
        self._logged = threading.Condition()
        self._ended = False
        self.port = self._wait_for_port()
        # keep draining stderr so the server never blocks on a full pipe
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _wait_for_port(self) -> int:
        """The first IRC port; the HTTP listener's goes to ``http_port`` (read until 'ready')."""
        assert self.proc.stderr is not None
        port = None
        self.http_port: int | None = None
        for line in self.proc.stderr:
            self.log.append(line)
            match = _LISTENING.search(line)
            if match and match.group(2):
                self.http_port = self.http_port or int(match.group(1))
            elif match and port is None:
                port = int(match.group(1))
            if port is not None and " ready" in line:
                return port
        raise RuntimeError("pircd exited before listening:\n" + "".join(self.log))

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._logged:
                self.log.append(line)
                self._logged.notify_all()
        with self._logged:  # the process ended: nothing more will come
            self._ended = True
            self._logged.notify_all()

    def wait_for_log(self, text: str, timeout: float = 30.0, since: int = 0) -> str:
        """The first log line containing ``text`` (from the ``since``-th line logged on), waiting for
        it at most ``timeout`` seconds."""

        def found() -> str | None:
            return next((line for line in self.log[since:] if text in line), None)

        with self._logged:
            self._logged.wait_for(lambda: found() is not None or self._ended, timeout)
            line = found()
        if line is None:
            raise AssertionError(f"no log line with {text!r} within {timeout} s:\n" + "".join(self.log))
        return line

    def kill9(self) -> None:
        """SIGKILL: no shutdown hooks, no flush; what was committed must be all there is."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def terminate(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(20)


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``pircd ARGS``; a ``--db PATH`` names the test database of that path (tests/dbs.py)."""
    argv = [dbs.database(arg) if i and args[i - 1] == "--db" else arg for i, arg in enumerate(args)]
    return subprocess.run(
        [sys.executable, "-m", "ircd", *argv], input=stdin, capture_output=True, text=True, timeout=60
    )
