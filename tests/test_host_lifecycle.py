"""The agent host across the server's own life (docs/host.md, "Lifecycle"): SIGTERM stops every
hosted process and what it started (no orphans), ``always`` agents come back with the server, and
a kill -9 of the server loses nothing a hosted agent had been acknowledged and leaves no second
process for an agent. The server runs as a real process (tests/proc.py)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tests import dbs
from tests.live import IRCClient
from tests.proc import ServerProcess, cli, write_config
from tests.test_host import ECHO, PASSWORD, log_dir, make_accounts, until

# an agent that starts a grandchild and says so: "ready <child pid> <grandchild pid>"
SPAWNER = ("import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
           "time.sleep(600)']); print('ready', os.getpid(), p.pid, flush=True); time.sleep(600)")


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except OSError:
        return False


def hosted_config(tmp: Path, entries: str) -> Path:
    path = write_config(tmp, server={"extensions": ["pircan"]})
    with open(path, "a") as f:
        f.write(f'[host]\nstop_grace_seconds = 3\nlog_dir = "{log_dir(tmp)}"\n' + entries)
    return path


def log_pids(tmp: Path, account: str, count: int = 1) -> list[list[int]]:
    """The pids of the "ready" lines of the agent's log (none for the echo agent), once there are
    ``count`` of them."""
    path = tmp / "pircd-host" / f"{account}.log"

    def lines() -> list[list[int]] | None:
        if not path.exists():
            return None
        found = [[int(w) for w in line.split()[1:]] for line in path.read_text().splitlines()
                 if line.split()[:1] == ["ready"]]
        return found if len(found) >= count else None

    return until(lines, 30)


def test_sigterm_stops_hosted_processes_and_what_they_started(tmp_path):
    make_accounts(tmp_path / "pircd.db", ("olive", "person", None), ("spawner", "agent", "olive"))
    config = hosted_config(tmp_path, f'[[host.agents]]\naccount = "spawner"\ncommand = ["{sys.executable}", "-c", '
                                     f'"{SPAWNER}"]\nstart = "always"\n')
    server = ServerProcess(config)
    try:
        ((child, grandchild),) = log_pids(tmp_path, "spawner")
        assert alive(child) and alive(grandchild)
    finally:
        assert server.terminate() == 0
    assert not alive(child) and not alive(grandchild)
    # restarted: the always agent comes back, as one new process
    server = ServerProcess(config)
    try:
        pids = log_pids(tmp_path, "spawner", 2)
        assert len(pids) == 2 and pids[1][0] not in (child, grandchild)
    finally:
        server.terminate()
    db = dbs.connect(tmp_path / "pircd.db")
    actions = [r[0] for r in db.execute("SELECT action FROM pircan_audit WHERE subject = 'spawner' ORDER BY id")]
    db.close()
    assert actions == ["host.start", "host.stop", "host.start", "host.stop"]


def test_kill9_loses_nothing_acknowledged_and_leaves_one_process(tmp_path):
    """Messages the hosted agent answered (its SEND acknowledged with a receipt, the message taken)
    are all there after kill -9; the restarted server kills what the old one left and starts the
    agent once."""
    db_path = tmp_path / "pircd.db"
    make_accounts(db_path, ("olive", "person", None), ("alice", "agent", "olive"), ("echo", "agent", "olive"))
    spawner_cmd = f'["{sys.executable}", "-c", "{SPAWNER}"]'
    config = hosted_config(
        tmp_path,
        f'[[host.agents]]\naccount = "echo"\ncommand = ["{sys.executable}", "{ECHO}"]\nstart = "always"\n'
        f'ready = {{ log = "^ready" }}\n'
        f'[[host.agents]]\naccount = "spawner"\ncommand = {spawner_cmd}\nstart = "always"\n',
    )
    make_accounts(db_path, ("spawner", "agent", "olive"))
    server = ServerProcess(config)
    clients: list[IRCClient] = []
    try:
        alice, olive = IRCClient(server.port), IRCClient(server.port)
        clients += [alice, olive]
        alice.login("alice", PASSWORD)
        olive.login("olive", PASSWORD)
        alice.send("CONTACT REQUEST echo message 30 :hi")
        request_id = alice.read_until(lambda m: m.command == "CONTACT")[-1].params[2]
        olive.send(f"CONTACT ACCEPT {request_id}")
        olive.read_until(lambda m: m.command == "CONTACT")
        sent = []
        for i in range(10):
            alice.send(f"SEND echo :n{i}")
            receipt = alice.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
            assert receipt.params[1] == "OK", receipt
            sent.append(receipt.params[2])
        got = []
        while len(got) < 10:
            alice.send("INBOX WAIT echo 20000 kinds=message")
            got.append(alice.read_until(lambda m: m.command == "INBOX" and m.params[1] in ("BODY", "TIMEOUT"))[-1]
                       .params[3])
        assert got == [f"echo: n{i}" for i in range(10)]
        ((child, grandchild),) = log_pids(tmp_path, "spawner")
        server.kill9()
        for c in clients:
            c.close()
        db = dbs.connect(db_path)
        replies = db.execute("SELECT COUNT(*) FROM pircan_messages WHERE sender = 'echo'").fetchone()
        unread = db.execute("SELECT COUNT(*) FROM pircan_messages WHERE recipient = 'echo' AND read_at IS NULL"
                            ).fetchone()
        db.close()
        assert replies == (10,) and unread == (0,)
        server = ServerProcess(config)
        pids = log_pids(tmp_path, "spawner", 2)
        until(lambda: not alive(child) and not alive(grandchild), 10)
        assert pids[1][0] != child
        echo_runs = log_pids(tmp_path, "echo", 2)
        assert len(echo_runs) == 2
    finally:
        for c in clients:
            c.close()
        server.terminate()



def test_operator_cli_ps_logs_start_stop(tmp_path):
    """pircd host ps/logs read the database and the log files; start/stop/restart are answered by
    the running server through the database."""
    make_accounts(tmp_path / "pircd.db", ("olive", "person", None), ("echo", "agent", "olive"))
    config = hosted_config(tmp_path, f'[[host.agents]]\naccount = "echo"\ncommand = ["{sys.executable}", "{ECHO}"]\n'
                                     f'ready = {{ log = "^ready" }}\n')
    server = ServerProcess(config)
    try:
        def host(*args: str):
            return cli("host", *args, "--config", str(config))

        ps = host("ps")
        assert ps.returncode == 0, ps.stderr
        assert ps.stdout.splitlines()[1].split() == ["echo", "parked", "-", "0", "*", "-"]
        assert host("start", "echo").stdout == "echo: starting\n"
        until(lambda: host("ps").stdout.splitlines()[1].split()[1] == "running")
        assert host("start", "echo").stdout == "echo: running already\n"
        logs = host("logs", "echo", "--lines", "1", "--grep", "^ready")
        assert (logs.returncode, logs.stdout) == (0, "ready\n")
        assert host("restart", "echo").stdout == "echo: restarting\n"
        log_pids(tmp_path, "echo", 2)  # its second run said ready
        assert host("stop", "echo").stdout == "echo: stopped\n"
        assert host("ps").stdout.splitlines()[1].split()[:3] == ["echo", "parked", "-"]
        bad = host("stop", "nobody")
        assert (bad.returncode, bad.stderr.splitlines()[-1]) == (1, "error: nobody is not a hosted agent")
        assert host("logs", "echo", "--grep", "(").stderr.splitlines()[-1].startswith(
            "error: --grep: not a regular expression")
    finally:
        server.terminate()
    db = dbs.connect(tmp_path / "pircd.db")
    actions = [r[0] for r in db.execute("SELECT action FROM pircan_audit WHERE subject = 'echo' ORDER BY id")]
    db.close()
    assert actions == ["host.start", "host.stop", "host.start", "host.stop"]
