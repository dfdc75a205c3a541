"""The agent host: how long a message to a parked hosted agent takes to be answered (revive latency),
and the server's CPU per revive.

    python -m bench.host [--rounds 40]

Starts ``pircd serve`` (PIRCAN loaded) with one hosted agent, ``bench/host_echo.py`` (Python, standard
library only: it signs in with SASL PLAIN and its PIRCAN_TOKEN, takes its inbox and answers every
message). A second agent, alice, holds a message agreement with it. Each round, the agent's owner
parks it (``HOST STOP``, answered once the process has exited), then alice sends ``SEND echo`` and
waits with ``INBOX WAIT echo`` for the reply: the time from the SEND to the reply's arrival is the
revive latency (process start, Python start-up, sign-in, inbox, reply), and the server's CPU time
(utime + stime from /proc, in 10 ms ticks: the mean over the rounds) over the same span is the CPU
per revive. The same round trip with the
agent already running is the reference ("warm").
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import free_port, proc_sample

ROOT = Path(__file__).resolve().parent.parent
ECHO = ROOT / "bench" / "host_echo.py"
PASSWORD = "sesame123"


class Client:
    """A blocking IRC client of the fewest lines: one login, then lines until a predicate holds."""

    def __init__(self, port: int, account: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.file = self.sock.makefile("rb")
        plain = base64.b64encode(f"\0{account}\0{PASSWORD}".encode()).decode()
        for line in ("CAP REQ :sasl", f"NICK {account}", f"USER {account} 0 * :{account}", "AUTHENTICATE PLAIN"):
            self.send(line)
        self.until(lambda words: words[1:2] == ["AUTHENTICATE"] or words[:1] == ["AUTHENTICATE"])
        self.send("AUTHENTICATE " + plain)
        self.until(lambda words: words[1:2] == ["903"])
        self.send("CAP END")
        self.until(lambda words: words[1:2] in (["376"], ["422"]))

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\r\n")

    def until(self, predicate) -> list[str]:  # type: ignore[no-untyped-def]
        for raw in self.file:
            words = raw.decode("utf-8", "replace").rstrip("\r\n").split(" ")
            if words[0] == "PING":
                self.send("PONG " + " ".join(words[1:]))
                continue
            if words[1:2] == ["904"] or words[:1] == ["ERROR"]:
                raise RuntimeError(" ".join(words))
            if predicate(words):
                return words
        raise RuntimeError("connection closed")

    def close(self) -> None:
        self.sock.close()


def _cli(directory: Path, *args: str, stdin: str | None = None) -> None:
    subprocess.run([sys.executable, "-m", "ircd", *args, "--db", str(directory / "pircd.db")], input=stdin,
                   text=True, check=True, capture_output=True, cwd=ROOT)


def _server(directory: Path) -> tuple[subprocess.Popen[bytes], int]:
    port, http = free_port(), free_port()
    for args in (("olive", "--kind", "person"), ("alice", "--kind", "agent", "--owner", "olive"),
                 ("echo", "--kind", "agent", "--owner", "olive")):
        _cli(directory, "account", "add", args[0], *args[1:], "--password-stdin", stdin=PASSWORD + "\n")
    config = directory / "pircd.toml"
    config.write_text(
        f'[server]\nname = "bench.pircd.local"\nlisten = ["127.0.0.1:{port}"]\ndb = "{directory / "pircd.db"}"\n'
        f'extensions = ["pircan"]\n[flood]\nenabled = false\n[http]\nlisten = ["127.0.0.1:{http}"]\n'
        f'[host]\nstop_grace_seconds = 5\n[[host.agents]]\naccount = "echo"\n'
        f'command = ["{sys.executable}", "{ECHO}"]\nready = {{ log = "^ready" }}\n')
    proc = subprocess.Popen([sys.executable, "-m", "ircd", "serve", "--config", str(config)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    for raw in proc.stderr:
        if b" ready" in raw:
            break
    else:
        raise RuntimeError("pircd did not start")
    return proc, port


def _round(alice: Client, text: str) -> None:
    alice.send(f"SEND echo :{text}")
    words = alice.until(lambda w: w[1:2] in (["SEND"], ["FAIL"]))
    if words[1] == "FAIL" or words[3] != "OK":
        raise RuntimeError(" ".join(words))
    alice.send("INBOX WAIT echo 30000 kinds=message")
    words = alice.until(lambda w: w[1:2] == ["INBOX"] and w[3] in ("BODY", "TIMEOUT"))
    if words[3] != "BODY":
        raise RuntimeError("no reply: " + " ".join(words))


def measure(rounds: int) -> dict[str, float]:
    directory = Path(tempfile.mkdtemp(prefix="pircd-bench-host-"))
    proc, port = _server(directory)
    try:
        olive, alice = Client(port, "olive"), Client(port, "alice")
        alice.send("CONTACT REQUEST echo message 30 :bench")
        request_id = alice.until(lambda w: w[1:2] == ["CONTACT"])[4]
        olive.send(f"CONTACT ACCEPT {request_id}")
        olive.until(lambda w: w[1:2] == ["CONTACT"])
        revive, cpu, warm = [], [], []
        for i in range(rounds):
            olive.send("HOST STOP echo")
            olive.until(lambda w: w[1:2] == ["HOST"] and w[3] in ("AGENT", "FAIL"))
            cpu0 = proc_sample(proc.pid)[0]
            t0 = time.perf_counter()
            _round(alice, f"revive {i}")
            revive.append(time.perf_counter() - t0)
            cpu.append(proc_sample(proc.pid)[0] - cpu0)
            t0 = time.perf_counter()
            _round(alice, f"warm {i}")
            warm.append(time.perf_counter() - t0)
        olive.close()
        alice.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
    return {
        "revive_p50_ms": statistics.median(revive) * 1000,
        "revive_max_ms": max(revive) * 1000,
        # /proc counts CPU time in clock ticks (10 ms): one span is 0 or 10 ms, the mean over the
        # rounds is the figure (a span starts at a random phase of the tick)
        "cpu_per_revive_ms": sum(cpu) / len(cpu) * 1000,
        "warm_p50_ms": statistics.median(warm) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.host", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args(argv)
    out = measure(args.rounds)
    print(f"revive: {args.rounds} rounds: SEND to first reply p50 {out['revive_p50_ms']:.0f} ms, "
          f"max {out['revive_max_ms']:.0f} ms; server CPU per revive {out['cpu_per_revive_ms']:.1f} ms")
    print(f"warm: the agent running: SEND to reply p50 {out['warm_p50_ms']:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
