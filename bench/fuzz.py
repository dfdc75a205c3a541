"""Fuzz a live pircd: at least a million malformed and hostile lines over real sockets.

    python -m bench.fuzz [--lines 1000000] [--connections 8] [--seed 1]

It starts ``pircd serve`` on a free loopback port with a fresh database (three accounts: a person and
two agents with agreements for messages, tasks and resources, made before the run), opens
``--connections`` clients (agents logged in with SASL, the person, and guests), and has them send the
lines of ``bench/fuzzlines.py`` (the generator the suite's fuzz test uses) in batches of 500, each batch
followed by a PING whose PONG must come back: a connection the server closed (QUIT, ERROR, SendQ) is
opened again and counted. At the end it checks the server still answers, stops it with SIGTERM, and
reports lines sent, connections opened, lines per second, tracebacks in the server's log and whether
the server crashed. The goal is 0 tracebacks and 0 crashes; the exit status is 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.fuzzlines import lines

PASSWORD = "fuzz-pass-1"
BATCH = 500
VERBS = [
    "ADMIN", "AGENTS", "AUDIT", "AUTHENTICATE", "AWAY", "BATCH", "CAP", "CHATHISTORY", "CONTACT", "HELP", "INBOX",
    "INFO", "INVITE", "ISON", "JOIN", "KICK", "KILL", "LINKS", "LIST", "LUSERS", "MARKREAD", "MODE", "MONITOR",
    "MOTD", "NAMES", "NICK", "NOTICE", "OPER", "PART", "PASS", "PING", "PONG", "PRIVMSG", "PROFILE", "REGISTER",
    "REHASH", "RESOURCE", "SEND", "SETNAME", "TAGMSG", "TASK", "TIME", "TOKEN", "TOPIC", "UNINVITE", "USER",
    "USERHOST", "VERIFY", "VERSION", "WALLOPS", "WHO", "WHOIS", "WHOWAS",
]

CONFIG = """\
[server]
name = "fuzz.pircd.local"
listen = ["127.0.0.1:0"]
db = "{db}"
[flood]
enabled = false
[connections]
max_per_ip = 10000
throttle_count = 100000
[pircan]
guests_may_join = true
[http]
listen = ["127.0.0.1:0"]
"""


def _cli(config: Path, *args: str, stdin: str | None = None) -> None:
    subprocess.run([sys.executable, "-m", "ircd", *args, "--config", str(config)], input=stdin, text=True,
                   check=True, capture_output=True)


def _prepare(work: Path) -> Path:
    config = work / "pircd.toml"
    config.write_text(CONFIG.format(db=work / "pircd.db"))
    _cli(config, "account", "add", "olive", "--password-stdin", stdin=PASSWORD + "\n")
    for agent in ("alice", "bob"):
        _cli(config, "agent", "add", agent, "--owner", "olive", "--password-stdin", stdin=PASSWORD + "\n")
    return config


class Client:
    def __init__(self, port: int, account: str | None, index: int) -> None:
        self.port = port
        self.account = account
        self.index = index
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.token = 0

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 22)
        nick = self.account or f"guest{self.index}"
        out = [b"CAP LS 302", b"CAP REQ :sasl message-tags batch labeled-response echo-message",
               f"NICK {nick}".encode(), f"USER {nick} 0 * :fuzz".encode()]
        if self.account is not None:
            secret = base64.b64encode(f"\0{self.account}\0{PASSWORD}".encode()).decode()
            out += [b"AUTHENTICATE PLAIN", f"AUTHENTICATE {secret}".encode()]
        out.append(b"CAP END")
        self.writer.write(b"\r\n".join(out) + b"\r\n")
        await self._until(b" 376 ", b" 422 ")

    async def _until(self, *needles: bytes) -> bool:
        assert self.reader is not None
        while True:
            line = await self.reader.readline()
            if not line:
                return False
            if any(n in line for n in needles):
                return True

    async def batch(self, raw: list[bytes]) -> bool:
        """Send the lines and a PING; True when its PONG came back, False when the server closed us."""
        assert self.writer is not None
        self.token += 1
        ping = f"PING fuzz{self.index}x{self.token}".encode()
        try:
            self.writer.write(b"\r\n".join(raw) + b"\r\n" + ping + b"\r\n")
            await self.writer.drain()
            return await self._until(b"PONG", b"fuzz%dx%d" % (self.index, self.token))
        except (ConnectionError, OSError):
            return False

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def _run(port: int, total: int, connections: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    accounts = ["alice", "bob", "olive", None]
    clients = [Client(port, accounts[i % len(accounts)], i) for i in range(connections)]
    opened = 0
    for c in clients:
        await c.open()
        opened += 1
    sent = 0
    source = lines(rng, VERBS, total)

    async def work(c: Client) -> None:
        nonlocal sent, opened
        while sent < total:
            raw = [line for _, line in zip(range(BATCH), source)]
            if not raw:
                return
            sent += len(raw)
            while not await asyncio.wait_for(c.batch(raw), 120):
                c.close()  # closed by the server (QUIT, ERROR...): open again and go on
                await c.open()
                opened += 1
                raw = []

    await asyncio.gather(*(work(c) for c in clients))
    for c in clients:
        c.close()
    return sent, opened


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pircd-fuzz-"))
    config = _prepare(work)
    proc = subprocess.Popen([sys.executable, "-m", "ircd", "serve", "--config", str(config)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    assert proc.stderr is not None
    log: list[str] = []
    port = None
    for line in proc.stderr:  # until the server says it is ready
        log.append(line)
        if port is None and "listening on 127.0.0.1:" in line and "(HTTP" not in line:
            port = int(line.rsplit(":", 1)[1].split()[0])
        if " ready" in line:
            break
    if port is None:
        print("".join(log), file=sys.stderr)
        return 1
    drain = threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True)  # type: ignore[arg-type]
    drain.start()
    started = time.monotonic()
    try:
        sent, opened = asyncio.run(_run(port, args.lines, args.connections, args.seed))
    finally:
        elapsed = time.monotonic() - started
        alive = proc.poll() is None
        if alive:
            proc.send_signal(signal.SIGTERM)
            status = proc.wait(30)
        else:
            status = proc.returncode
    drain.join(30)
    text = "".join(log)
    tracebacks = text.count("Traceback (most recent call last)")
    crashed = not alive or status != 0
    print(f"lines {sent:,} in {elapsed:.1f} s ({sent / max(elapsed, 1e-9):,.0f}/s), connections {opened:,}, "
          f"tracebacks {tracebacks}, crashes {int(crashed)} (exit status {status})")
    if tracebacks:
        print(text[text.index("Traceback"):][:3000])
    return 1 if tracebacks or crashed else 0


if __name__ == "__main__":
    sys.exit(main())
