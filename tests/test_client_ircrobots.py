"""ircrobots against a live pircd, from its own virtualenv.

ircrobots pins ``anyio~=2.0`` while pircd needs ``anyio>=4``, so it cannot be installed next to pircd.
This test builds a virtualenv with ircrobots in pytest's cache directory (``.pytest_cache/d/``, reused by
later runs; a temporary directory when the cache plugin is off), then runs ``tests/interop/ircrobots_bot.py``
there as a subprocess against a server on port 0. The first run needs PyPI (or the configured index).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.proc import cli

IRCROBOTS = "ircrobots==0.7.2"
BOT = Path(__file__).parent / "interop" / "ircrobots_bot.py"
CHANNEL = "#robots"


@pytest.fixture(scope="session")
def ircrobots_python(request, tmp_path_factory) -> Path:
    cache = getattr(request.config, "cache", None)
    base = Path(cache.mkdir("ircrobots-venv")) if cache is not None else tmp_path_factory.mktemp("ircrobots")
    python = base / "bin" / "python"
    marker = base / "installed.txt"
    if python.exists() and marker.exists() and marker.read_text() == IRCROBOTS:
        return python
    shutil.rmtree(base, ignore_errors=True)
    install = ["install", "--quiet", "--disable-pip-version-check", IRCROBOTS]
    made = subprocess.run([sys.executable, "-m", "venv", str(base)], capture_output=True, timeout=300)
    if made.returncode == 0:
        subprocess.run([str(python), "-m", "pip", *install], check=True, timeout=600)
    else:
        # no ensurepip (Debian's python3 without python3-venv): an empty venv, filled by this pip
        shutil.rmtree(base, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base)], check=True, timeout=300)
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *install], check=True, timeout=600)
    marker.write_text(IRCROBOTS)
    return python


def test_ircrobots_joins_and_talks(ircrobots_python, live, client_factory):
    """An ircrobots bot (CAP negotiation, irctokens framing) registers, joins, answers and quits."""
    srv = live()
    observer = client_factory(srv.port)
    observer.register("observer")
    observer.send(f"JOIN {CHANNEL}")
    observer.sync()
    proc = subprocess.Popen(
        [str(ircrobots_python), str(BOT), str(srv.port), "robot", CHANNEL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        joined = observer.read_until(lambda m: m.command == "JOIN")[-1]
        assert (joined.source, joined.params) == ("robot!robot@127.0.0.1", [CHANNEL])
        observer.send(f"PRIVMSG {CHANNEL} :hello robot")
        answer = observer.read_until(lambda m: m.command == "PRIVMSG")[-1]
        assert (answer.source, answer.params) == ("robot!robot@127.0.0.1", [CHANNEL, "robot heard: hello robot"])
        observer.send(f"PRIVMSG {CHANNEL} :quit")
        quit_msg = observer.read_until(lambda m: m.command == "QUIT")[-1]
        assert (quit_msg.source, quit_msg.params) == ("robot!robot@127.0.0.1", ["Quit: robots out"])
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out == "ircrobots bot done\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _add_account(db: Path, name: str, password: str) -> None:
    """Create an account the way an operator does: ``pircd account add`` on the server's database."""
    added = cli("account", "add", name, "--password-stdin", "--db", str(db), stdin=password + "\n")
    assert added.returncode == 0, added.stderr


@pytest.mark.parametrize("mechanism, named", [("SCRAM", "SCRAM-SHA-256"), ("PLAIN", "PLAIN")])
def test_ircrobots_logs_in_with_sasl(ircrobots_python, tmp_path, client_factory, mechanism, named):
    """ircrobots logs in with SASL SCRAM-SHA-256 and with PLAIN (its own SASL code) to an account made
    with ``pircd account add``; a channel member with extended-join and account-tag sees the account."""
    from tests.harness import config
    from tests.live import LiveServer

    db = tmp_path / "robots.db"
    _add_account(db, "robotacct", "robot password")
    srv = LiveServer(config(server={"listen": ["127.0.0.1:0"]}, storage={"durability": "off"}), db=str(db))
    srv.start()
    proc = None
    try:
        observer = client_factory(srv.port)
        observer.register("observer", caps=["extended-join", "account-tag"])
        observer.send(f"JOIN {CHANNEL}")
        observer.sync()
        proc = subprocess.Popen(
            [str(ircrobots_python), str(BOT), str(srv.port), "robot", CHANNEL, mechanism, "robotacct",
             "robot password"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        joined = observer.read_until(lambda m: m.command == "JOIN")[-1]
        assert (joined.source, joined.params[:2]) == ("robot!robot@127.0.0.1", [CHANNEL, "robotacct"])
        observer.send(f"PRIVMSG {CHANNEL} :hello robot")
        answer = observer.read_until(lambda m: m.command == "PRIVMSG")[-1]
        assert answer.tags.get("account") == "robotacct"
        assert answer.params == [CHANNEL, "robot heard: hello robot"]
        observer.send(f"PRIVMSG {CHANNEL} :quit")
        observer.read_until(lambda m: m.command == "QUIT")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert out == f"sasl {named} SUCCESS\nircrobots bot done\n"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        srv.stop()
