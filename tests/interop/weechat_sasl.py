#!/usr/bin/env python3
"""WeeChat logs in with SASL (PLAIN, then SCRAM-SHA-256) to an account made with ``pircd account add``.

A sibling of ``real_clients.py`` (same helpers, same rules: no fixed sleeps, every step checked by an
observer). Not a pytest test, since it needs the Debian package; run it by hand:

    apt-get install -y weechat-headless
    python tests/interop/weechat_sasl.py            # from the repository root, pircd installed

What it does:

1. ``pircd init`` into a temporary directory and ``pircd serve`` on a free loopback TLS port (and a
   plain one for the observer).
2. While the server runs, ``pircd account add weeacct --password-stdin`` creates the account in the
   server's database, as an operator would.
3. The observer (extended-join, account-tag) logs in to its own account (a PIRCAN network admits
   only logged-in clients to channels), joins ``#interop`` and MONITORs the WeeChat nick.
4. For each mechanism (``plain``, ``scram-sha-256``): ``weechat-headless`` connects over TLS with
   ``sasl_mechanism``, ``sasl_username``, ``sasl_password`` and ``sasl_fail = disconnect`` (a failed
   login would end the connection instead of going on without an account), and ``autojoin
   #interop``. The observer checks: MONITOR 730 (online); the JOIN carries the account
   (extended-join); ``WHOIS`` answers 330 ``is logged in as weeacct``; the PRIVMSG carries ``account=weeacct`` (account-tag); QUIT. WeeChat's
   own server-buffer log must contain ``SASL authentication successful``.
5. pircd is stopped with SIGTERM (by its PID) and must exit 0.
"""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.interop.real_clients import CHANNEL, Observer, WeeChat, nick_of, run_with_server, say

ACCOUNT = "weeacct"
PASSWORD = "wee-sasl-secret-1"
NICK = "weesasl"
OBSERVER_ACCOUNT, OBSERVER_PASSWORD = "obsacct", "observer-secret-1"


def run_weechat(tmp: Path, tls_port: int, obs: Observer, mechanism: str) -> None:
    home = tmp / f"weechat-{mechanism}"
    weechat = WeeChat(home, tls_port, NICK, "WeeChat SASL bot", (
        f"/set irc.server.pircd.sasl_mechanism {mechanism}",
        f"/set irc.server.pircd.sasl_username {ACCOUNT}",
        f"/set irc.server.pircd.sasl_password {PASSWORD}",
        "/set irc.server.pircd.sasl_fail disconnect",
    ), secret=PASSWORD)
    say(f"SASL {mechanism}")
    try:
        obs.expect(f"{NICK} online (MONITOR 730)", lambda m: m.command == "730" and NICK in m.params[-1])
        weechat.wait_for_fifo()
        obs.expect(f"JOIN from {NICK} with account {ACCOUNT} (extended-join)",
                   lambda m: m.command == "JOIN" and nick_of(m) == NICK and m.params[:2] == [CHANNEL, ACCOUNT])
        obs.client.send(f"WHOIS {NICK}")
        obs.expect(f"330 {NICK} {ACCOUNT}", lambda m: m.command == "330" and m.params[1:3] == [NICK, ACCOUNT])
        weechat.command(f"/msg {CHANNEL} hello over {mechanism}")
        obs.expect(f"PRIVMSG from {NICK} tagged account={ACCOUNT}",
                   lambda m: m.command == "PRIVMSG" and nick_of(m) == NICK and m.tags.get("account") == ACCOUNT
                   and m.params == [CHANNEL, f"hello over {mechanism}"])
        weechat.command(f"/quit bye from weechat ({mechanism})")
        obs.expect(f"QUIT from {NICK}", lambda m: m.command == "QUIT" and nick_of(m) == NICK)
        weechat.wait()
    finally:
        weechat.close()
    server_log = home / "logs" / "irc.server.pircd.weechatlog"  # written by WeeChat's logger plugin
    output = server_log.read_text(errors="replace") if server_log.exists() else ""
    said = [line.split("\t")[-1] for line in output.splitlines()
            if "SASL authentication successful" in line or "You are now logged in as" in line]
    if not any("SASL authentication successful" in line for line in said):
        raise AssertionError(f"WeeChat did not report a successful SASL login; see {server_log} and {home / 'stdout.log'}")
    for line in said:
        say(f"  weechat logged: {line}")


def add_account(config: Path, db: Path, name: str, password: str) -> None:
    add = ["pircd", "account", "add", name, "--password-stdin", "--config", str(config), "--db", str(db)]
    say(" ".join(add) + "   (while the server runs)")
    created = subprocess.run(add, input=password + "\n", text=True, capture_output=True, check=True)
    say("  " + created.stdout.strip())


def observer_login(obs: Observer) -> None:
    """Register the observer with SASL PLAIN (raw lines: the observer is not the client under test)."""
    blob = base64.b64encode(f"\0{OBSERVER_ACCOUNT}\0{OBSERVER_PASSWORD}".encode()).decode()
    for line in ("CAP LS 302", "CAP REQ :extended-join account-tag sasl", "AUTHENTICATE PLAIN"):
        obs.client.send(line)
    obs.expect("AUTHENTICATE +", lambda m: m.command == "AUTHENTICATE" and m.params == ["+"])
    obs.client.send(f"AUTHENTICATE {blob}")
    obs.expect("903 (observer logged in)", lambda m: m.command == "903")
    for line in ("NICK observer", "USER observer 0 * :observer", "CAP END"):
        obs.client.send(line)
    obs.expect("end of MOTD", lambda m: m.command in ("376", "422"))


def _sasl_logins(tmp: Path, port: int, tls_port: int, config: Path, db: Path) -> Observer:
    add_account(config, db, ACCOUNT, PASSWORD)
    add_account(config, db, OBSERVER_ACCOUNT, OBSERVER_PASSWORD)
    obs = Observer(port)
    observer_login(obs)
    obs.client.send(f"JOIN {CHANNEL}")
    obs.client.send(f"MONITOR + {NICK}")
    obs.client.sync()
    for mechanism in ("plain", "scram-sha-256"):
        run_weechat(tmp, tls_port, obs, mechanism)
    return obs


def main() -> int:
    return run_with_server("pircd-weechat-sasl-", ("weechat-headless",), _sasl_logins)


if __name__ == "__main__":
    sys.exit(main())
