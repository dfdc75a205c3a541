#!/usr/bin/env python3
"""Drive the real IRC clients irssi and WeeChat against pircd, and check every step from an observer.

This is not a pytest test (it needs the Debian packages and a terminal multiplexer); run it by hand:

    apt-get install -y irssi weechat-headless tmux
    python tests/interop/real_clients.py            # from the repository root, pircd installed

What it does:

1. ``pircd init`` into a temporary directory (config and a self-signed certificate), then starts
   ``pircd serve`` as a subprocess on two free loopback ports: one plain, one TLS.
2. A raw observer client registers, joins ``#interop`` and MONITORs the two client nicks.
3. irssi runs in a detached tmux session (``irssi --home TMP -c 127.0.0.1 -p PORT -n irssibot``); the
   script types into it with ``tmux send-keys``: ``/join #interop``, a line of text, ``/topic ...``,
   ``/quit ...``. After each client joins, the observer (channel operator) gives it +o so it may set
   the topic of the +t channel.
4. WeeChat runs as ``weechat-headless`` connected over TLS (certificate not verified: it is
   self-signed) with its FIFO plugin on a known path; the script writes the same steps into the FIFO
   (``*/join``, ``*/msg``, ``*/topic``, ``*/quit``, all to the server buffer).
5. After every step the observer reads until the matching line arrives (JOIN, PRIVMSG, TOPIC, QUIT,
   and RPL_WHOISSECURE 671 for the TLS client) and prints it. No fixed sleeps: each wait ends when the
   line arrives or fails after a timeout.
6. pircd is stopped with SIGTERM (by its PID); the observer must get ``ERROR`` and the server must exit 0.

The script exits 0 when every check passed and prints the transcript of what the observer saw.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.live import IRCClient  # noqa: E402

CHANNEL = "#interop"
TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_START = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - _START:6.2f}s] {text}", flush=True)


class Observer:
    def __init__(self, port: int) -> None:
        self.client = IRCClient(port, timeout=TIMEOUT)

    def expect(self, what: str, predicate) -> None:
        deadline = time.monotonic() + TIMEOUT
        while True:
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            line = self.client.read_line()
            if line is None:
                raise AssertionError(f"connection closed while waiting for {what}")
            from ircd.proto.lines import parse_line

            msg = parse_line(line.encode())
            if msg is None:
                continue
            if msg.command == "PING":
                self.client.send(f"PONG :{msg.params[-1]}")
                continue
            if predicate(msg):
                say(f"  observer saw: {line}")
                return


    def op(self, nick: str) -> None:
        """Give channel operator status (the channel is +t, so TOPIC needs it)."""
        self.client.send(f"MODE {CHANNEL} +o {nick}")
        self.expect(f"MODE +o {nick}", lambda m: m.command == "MODE" and m.params == [CHANNEL, "+o", nick])


def nick_of(msg) -> str:
    return (msg.source or "").split("!")[0]


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"pircd exited early with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)  # polling a port that is not open yet; nothing to synchronise with
    raise SystemExit("pircd did not start listening")


def run_irssi(tmp: Path, port: int, obs: Observer) -> None:
    nick = "irssibot"
    session = f"pircd-irssi-{os.getpid()}"
    home = tmp / "irssi"
    home.mkdir()
    say(f"irssi: tmux session {session}, irssi --home {home} -c 127.0.0.1 -p {port} -n {nick}")
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "200", "-y", "50",
         f"irssi --home {home} -c 127.0.0.1 -p {port} -n {nick}"],
        check=True,
    )

    def keys(text: str) -> None:
        say(f"irssi <- {text}")
        subprocess.run(["tmux", "send-keys", "-t", session, "-l", text], check=True)
        subprocess.run(["tmux", "send-keys", "-t", session, "Enter"], check=True)

    try:
        obs.expect(f"{nick} online (MONITOR 730)", lambda m: m.command == "730" and nick in m.params[-1])
        keys(f"/join {CHANNEL}")
        obs.expect(f"JOIN from {nick}", lambda m: m.command == "JOIN" and nick_of(m) == nick)
        obs.op(nick)
        keys("hello from irssi")
        obs.expect(f"PRIVMSG from {nick}",
                   lambda m: m.command == "PRIVMSG" and nick_of(m) == nick and m.params == [CHANNEL, "hello from irssi"])
        keys("/topic irssi was here")
        obs.expect(f"TOPIC from {nick}",
                   lambda m: m.command == "TOPIC" and nick_of(m) == nick and m.params == [CHANNEL, "irssi was here"])
        keys("/quit bye from irssi")
        obs.expect(f"QUIT from {nick}",
                   lambda m: m.command == "QUIT" and nick_of(m) == nick and m.params == ["Quit: bye from irssi"])
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, capture_output=True)


class WeeChat:
    """weechat-headless connected to pircd over TLS, joining CHANNEL, driven through its FIFO.

    ``extra`` are more commands run before ``/connect`` (SASL settings); ``secret`` is
    masked where the command line is shown. Commands sent with ``command`` go to the
    server buffer: a channel buffer may not exist yet when the observer sees the JOIN.
    """

    def __init__(self, home: Path, tls_port: int, nick: str, realname: str,
                 extra: tuple[str, ...] = (), secret: str | None = None) -> None:
        home.mkdir()
        self.home = home
        self.fifo = home / "weechat.fifo"
        version = subprocess.run(["weechat-headless", "--version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        tls = "tls" if int(version.split(".")[0]) >= 4 else "ssl"  # WeeChat 4.0 renamed the ssl options
        commands = "; ".join([
            f"/set fifo.file.path {self.fifo}",
            "/fifo enable",
            f"/server add pircd 127.0.0.1/{tls_port} -{tls} -no{tls}_verify",
            f"/set irc.server.pircd.{tls}_verify off",
            f"/set irc.server.pircd.nicks {nick}",
            f"/set irc.server.pircd.username {nick}",
            f"/set irc.server.pircd.realname {realname}",
            *extra,
            # autojoin rather than a FIFO /join: the observer may see the client online (MONITOR,
            # WHOIS) before WeeChat has read the welcome, and WeeChat drops a /join until it has
            f"/set irc.server.pircd.autojoin {CHANNEL}",
            "/connect pircd",
        ])
        shown = commands.replace(secret, "***") if secret else commands
        say(f"weechat {version}")
        say(f"weechat: weechat-headless --dir {home} -r '{shown}'")
        self.log = open(home / "stdout.log", "w")
        self.proc = subprocess.Popen(["weechat-headless", "--dir", str(home), "--stdout", "-r", commands],
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_for_fifo(self) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not self.fifo.exists():  # the FIFO appears once the plugin has read its option
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("WeeChat FIFO did not appear")
            time.sleep(0.05)

    def command(self, text: str) -> None:
        say(f"weechat fifo <- irc.server.pircd *{text}")
        with open(self.fifo, "w") as fh:
            fh.write(f"irc.server.pircd *{text}\n")

    def wait(self) -> None:
        self.proc.wait(TIMEOUT)
        say(f"weechat exited with {self.proc.returncode}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.log.close()


def run_weechat(tmp: Path, tls_port: int, obs: Observer) -> None:
    nick = "weebot"
    weechat = WeeChat(tmp / "weechat", tls_port, nick, "WeeChat test bot")
    try:
        obs.expect(f"{nick} online (MONITOR 730)", lambda m: m.command == "730" and nick in m.params[-1])
        weechat.wait_for_fifo()
        obs.client.send(f"WHOIS {nick}")
        obs.expect(f"671 (TLS) for {nick}", lambda m: m.command == "671" and m.params[1] == nick)
        obs.expect(f"JOIN from {nick}", lambda m: m.command == "JOIN" and nick_of(m) == nick)
        obs.op(nick)
        weechat.command(f"/msg {CHANNEL} hello from weechat")
        obs.expect(f"PRIVMSG from {nick}",
                   lambda m: m.command == "PRIVMSG" and nick_of(m) == nick and m.params == [CHANNEL, "hello from weechat"])
        weechat.command(f"/topic {CHANNEL} weechat was here")
        obs.expect(f"TOPIC from {nick}",
                   lambda m: m.command == "TOPIC" and nick_of(m) == nick and m.params == [CHANNEL, "weechat was here"])
        weechat.command("/quit bye from weechat")
        obs.expect(f"QUIT from {nick}",
                   lambda m: m.command == "QUIT" and nick_of(m) == nick and m.params == ["Quit: bye from weechat"])
        weechat.wait()
    finally:
        weechat.close()


def run_with_server(
    prefix: str,
    tools: tuple[str, ...],
    scenario: Callable[[Path, int, int, Path, Path], Observer],
    *,
    guests: bool = False,
) -> int:
    """The lifecycle every interop script shares: check the tools, ``pircd init`` into a temporary
    directory, serve on a plain and a TLS port, run ``scenario(tmp, port, tls_port, config, db)``
    (it returns its observer), stop pircd with SIGTERM (the observer must get ERROR, the server must
    exit 0), clean up, and report. Returns the exit status."""
    for tool in (*tools, "pircd"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed (see the top of this file)")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    port, tls_port = free_port(), free_port()
    subprocess.run(["pircd", "init", str(tmp / "srv"), "--name", "irc.interop.test"], check=True,
                   capture_output=True)
    config, db = tmp / "srv" / "pircd.toml", tmp / "pircd.db"
    if guests:  # clients without accounts; a PIRCAN network admits only logged-in clients to channels
        config.write_text(config.read_text().replace("guests_may_join = false", "guests_may_join = true"))
    server_cmd = ["pircd", "serve", "--config", str(config), "--listen", f"127.0.0.1:{port}",
                  "--tls-listen", f"127.0.0.1:{tls_port}", "--db", str(db)]
    say("server: " + " ".join(server_cmd))
    server_log = open(tmp / "pircd.log", "w")
    server = subprocess.Popen(server_cmd, stdout=server_log, stderr=subprocess.STDOUT)
    ok = False
    try:
        wait_for_port(port, server)
        wait_for_port(tls_port, server)
        obs = scenario(tmp, port, tls_port, config, db)
        say(f"stopping pircd (SIGTERM to pid {server.pid})")
        server.send_signal(signal.SIGTERM)
        obs.expect("ERROR on shutdown", lambda m: m.command == "ERROR")
        code = server.wait(TIMEOUT)
        say(f"pircd exited with {code}")
        ok = code == 0
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(10)
        server_log.close()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say(f"logs kept in {tmp}")
    say("ALL CHECKS PASSED" if ok else "FAILED")
    return 0 if ok else 1


def _irssi_and_weechat(tmp: Path, port: int, tls_port: int, config: Path, db: Path) -> Observer:
    obs = Observer(port)
    obs.client.register("observer")
    obs.client.send(f"JOIN {CHANNEL}")
    obs.client.send("MONITOR + irssibot,weebot")
    obs.client.sync()
    run_irssi(tmp, port, obs)
    run_weechat(tmp, tls_port, obs)
    return obs


def main() -> int:
    return run_with_server("pircd-interop-", ("irssi", "weechat-headless", "tmux"), _irssi_and_weechat,
                           guests=True)


if __name__ == "__main__":
    sys.exit(main())
