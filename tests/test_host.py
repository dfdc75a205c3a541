"""The agent host (docs/host.md): hosted agents started on demand by the events that others put to
them, with the environment they sign in with, restarted by policy, and refused in the config when
an entry is wrong.

The server runs in-process on port 0 with its database in tmp_path; the hosted agent is
bench/host_echo.py (it answers every message with "echo: <text>"). Clients synchronise by reading
until the line they expect; the host's state is polled with a deadline, never slept on.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from ext.pircan.service import roster
from tests import dbs
from tests.live import IRCClient, LiveServer, pircan_server
from tests.proc import cli

ECHO = str(Path(__file__).resolve().parent.parent / "bench" / "host_echo.py")
PASSWORD = "sesame123"


def make_accounts(db: Path, *specs: tuple[str, str, str | None]) -> None:
    for name, kind, owner in specs:
        args = ["account", "add", name, "--kind", kind, "--password-stdin", "--db", str(db)]
        if owner:
            args += ["--owner", owner]
        result = cli(*args, stdin=PASSWORD + "\n")
        assert result.returncode == 0, result.stderr


def echo_entry(**extra: Any) -> dict[str, Any]:
    return {"account": "echo", "command": [sys.executable, ECHO], "ready": {"log": "^ready"}, **extra}


def log_dir(tmp: Path) -> str:
    """Where the agents' logs go: the default beside a SQLite file, said explicitly (a PostgreSQL
    database has no file to be beside)."""
    (tmp / "pircd-host").mkdir(exist_ok=True)
    return str(tmp / "pircd-host")


def host_server(tmp_path: Path, agents: list[dict[str, Any]], pircan: dict[str, Any] | None = None,
                **host: Any) -> LiveServer:
    return pircan_server(tmp_path, pircan=pircan or {},
                         host={"agents": agents, "stop_grace_seconds": 5, "log_dir": log_dir(tmp_path), **host})


def run(srv: LiveServer, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, srv.loop).result(30)


def until(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)  # polling a condition with a deadline, not synchronising on time
    raise AssertionError("condition not met within the deadline")


def audit_actions(db: Path, account: str) -> list[str]:
    return [action for action, _ in audit_details(db, account)]


@pytest.fixture
def world(tmp_path):
    make_accounts(tmp_path / "pircd.db", ("olive", "person", None), ("alice", "agent", "olive"),
                  ("echo", "agent", "olive"))
    servers: list[LiveServer] = []
    clients: list[IRCClient] = []

    def start(agents: list[dict[str, Any]] | None = None, pircan: dict[str, Any] | None = None,
              **host: Any) -> LiveServer:
        srv = host_server(tmp_path, [echo_entry()] if agents is None else agents, pircan, **host)
        servers.append(srv)
        return srv

    def login(srv: LiveServer, account: str) -> IRCClient:
        c = IRCClient(srv.port)
        clients.append(c)
        c.login(account, PASSWORD)
        return c

    yield start, login, tmp_path
    for c in clients:
        c.close()
    for srv in servers:
        srv.stop()


def echo_in_touch(world: Any, scopes: str = "message") -> tuple[LiveServer, IRCClient, IRCClient, Path]:
    """A server hosting echo; alice asks it for contact (which starts it: a request wakes), olive
    accepts for it; once it is running and signed in: (server, alice, olive, tmp)."""
    start, login, tmp = world
    srv = start()
    alice, olive = login(srv, "alice"), login(srv, "olive")
    alice.send(f"CONTACT REQUEST echo {scopes} 30 :let us talk")
    request_id = alice.read_until(lambda m: m.command == "CONTACT")[-1].params[2]
    olive.send(f"CONTACT ACCEPT {request_id}")
    assert olive.read_until(lambda m: m.command in ("CONTACT", "FAIL"))[-1].params[1] == "ACCEPTED"
    state = _state(srv)
    hosted = state.host.agents["echo"]
    until(lambda: hosted.state == "running" and state.present("echo"))
    return srv, alice, olive, tmp


def park(srv: LiveServer) -> None:
    """The owner's stop: echo is parked and gone from the network."""
    state = _state(srv)
    hosted = state.host.agents["echo"]
    assert run(srv, state.host.stop_agent("echo", "test")) == "stopped"
    until(lambda: not state.present("echo") and hosted.state == "parked")


def test_message_to_parked_agent_revives_it_and_it_replies(world):
    """A message for a hosted agent that is not running starts it once; it signs in with
    PIRCAN_TOKEN over SASL PLAIN, finds the message in its inbox and replies."""
    srv, alice, olive, tmp = echo_in_touch(world)
    state = _state(srv)
    hosted = state.host.agents["echo"]
    first_pid = hosted.pid
    park(srv)

    for i in range(3):  # three messages while it starts: one process
        alice.send(f"SEND echo :hello {i}")
        receipt = alice.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
        assert receipt.command == "SEND" and receipt.params[1] == "OK", receipt
        if i == 0:  # the receipt of the message that starts it: SEND <you> OK <id> echo revived ...
            assert receipt.params[3:5] == ["echo", "revived"], receipt
    alice.send("INBOX WAIT echo 20000 kinds=message")
    reply = alice.read_until(lambda m: m.command == "INBOX" and m.params[1] in ("BODY", "TIMEOUT"))[-1]
    assert reply.params[1:] == ["BODY", reply.params[2], "echo: hello 0"]
    assert hosted.pid != first_pid
    expected = ["host.revive", "host.start", "host.stop", "host.revive", "host.start"]
    until(lambda: audit_actions(tmp / "pircd.db", "echo") == expected)  # audit rows are queued writes


def test_a_parked_hosted_agent_is_parked_in_the_roster_and_skipped_by_a_broadcast(world):
    """The roster says idle for the echo agent in its INBOX WAIT, and parked once it is stopped (a
    message wakes it); SEND * sends only to live agents, so it starts no parked one (no revive
    stampede)."""
    srv, alice, olive, tmp = echo_in_touch(world)
    state = _state(srv)
    hosted = state.host.agents["echo"]
    # echo is its own process: signed in, it sends its INBOX WAIT when it gets to it (the roster's
    # idle, which the AGENTS line below must show)
    until(lambda: roster.status(state, "echo") == "idle")
    alice.send("AGENTS")
    assert [m.params[1:4] for m in alice.sync() if m.command == "AGENTS"][0] == [
        "AGENT", "echo", "idle"]  # in its INBOX WAIT
    park(srv)
    alice.send("AGENTS")
    assert [m.params[1:4] for m in alice.sync() if m.command == "AGENTS"][0] == ["AGENT", "echo", "parked"]
    alice.send("SEND * :everyone live, please")
    assert [m.params for m in alice.sync()] == [
        ["alice", "SKIPPED", "echo", "parked"],
        ["alice", "BROADCAST", "0", "0", "1", "No live agent to send to: none of your message agreements is with "
         "an agent that is running or idle (send to a parked one by name to wake it)"]]
    assert hosted.state == "parked" and hosted.task is None
    expected = ["host.revive", "host.start", "host.stop"]
    until(lambda: audit_actions(tmp / "pircd.db", "echo") == expected)


def _state(srv: LiveServer) -> Any:
    """PIRCAN's state (its message check is one of its methods)."""
    return next(fn.__self__ for fn in srv.server.message_checks if type(getattr(fn, "__self__", None)).__name__ == "Pircan")


def test_bearer_token_is_a_sasl_plain_password_of_its_account(world):
    """PIRCAN_TOKEN (any bearer token of the account) signs in with SASL PLAIN; a token of another
    account or a wrong one is refused like a wrong password."""
    start, login, tmp = world
    db = tmp / "pircd.db"
    token = cli("token", "add", "alice", "--db", str(db)).stdout.split()[-1]
    assert token.startswith("pircd_")
    srv = start(agents=[])
    ok = IRCClient(srv.port)
    try:
        got = ok.login("alice", token)
        assert [m.params[2] for m in got if m.command == "900"] == ["alice"]
    finally:
        ok.close()
    for name, password in (("echo", token), ("alice", token[:-2] + "xx")):
        bad = IRCClient(srv.port)
        try:
            with pytest.raises(AssertionError, match="904"):
                bad.login(name, password)
        finally:
            bad.close()


def _config(tmp: Path, agents_toml: str) -> Path:
    path = tmp / "host.toml"
    path.write_text(
        f'[server]\nlisten = ["127.0.0.1:0"]\ndb = "{dbs.database(tmp / "pircd.db")}"\nextensions = ["pircan"]\n'
        f'[http]\nlisten = ["127.0.0.1:0"]\n[host]\nlog_dir = "{log_dir(tmp)}"\n{agents_toml}'
    )
    return path


@pytest.mark.parametrize("entries, line", [
    ('[[host.agents]]\naccount = "olive"\ncommand = ["python3"]\n',
     "  host.agents.0.account: 'olive': a person, not an agent (pircd agent add)"),
    ('[[host.agents]]\naccount = "nobody"\ncommand = ["python3"]\n',
     "  host.agents.0.account: 'nobody': no such account (pircd agent add)"),
    ('[[host.agents]]\naccount = "echo"\ncommand = ["/no/such/agent"]\n',
     "  host.agents.0.command: Value error, '/no/such/agent' is not an executable file"),
    ('[[host.agents]]\naccount = "echo"\ncommand = ["python3"]\n[[host.agents]]\naccount = "Echo"\ncommand = ["python3"]\n',
     "  host.agents.1.account: 'Echo' is hosted twice (also host.agents.0)"),
    ('[[host.agents]]\naccount = "echo"\ncommand = ["python3"]\nrestart = "sometimes"\n',
     "  host.agents.0.restart: Input should be 'no', 'on-failure' or 'always'"),
])
def test_bad_host_entries_are_refused_by_check_config_and_serve(world, entries, line):
    """Bad input: one line naming the key, the same from check-config and from serve."""
    _, _, tmp = world
    path = _config(tmp, entries)
    checked = cli("check-config", str(path))
    served = cli("serve", "--config", str(path))
    assert (checked.returncode, checked.stderr) == (2, f"configuration is not valid:\n{line}\n")
    assert served.returncode == 2
    assert served.stderr.splitlines()[-2:] == ["configuration is not valid:", line]  # after its log line


def test_host_section_is_known_to_check_config(world):
    _, _, tmp = world
    path = _config(tmp, f'[[host.agents]]\naccount = "echo"\ncommand = ["{sys.executable}", "{ECHO}"]\n')
    result = cli("check-config", str(path))
    assert (result.returncode, result.stdout) == (0, f"{path}: configuration is valid\n")


def test_a_process_that_keeps_failing_ends_in_failed_not_in_a_loop(world):
    """on-failure restarts with a doubling backoff (1 s, 2 s); after max_failures failed runs in a
    row the agent is failed: not restarted, not woken by a message, and its owner sees why."""
    start, login, tmp = world
    crash = {"account": "echo", "command": [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"],
             "start": "always", "restart": "on-failure"}
    srv = start(agents=[crash], max_failures=3)
    state = _state(srv)
    hosted = state.host.agents["echo"]
    began = time.monotonic()
    until(lambda: hosted.state == "failed")
    assert time.monotonic() - began >= 3.0  # the two backoffs
    assert hosted.restarts == 2 and hosted.last_exit == "exit 3"
    expected = ["host.start", "host.crash", "host.start", "host.crash", "host.start", "host.crash", "host.failed"]
    until(lambda: audit_actions(tmp / "pircd.db", "echo") == expected)
    assert state.wakeable("echo") is False
    assert run(srv, _wake(state)) is False
    assert audit_actions(tmp / "pircd.db", "echo") == expected


async def _wake(state: Any) -> bool:
    return bool(state.wake("echo", "message"))


CAT = ("import sys; print('ready', flush=True)\n"
       "for line in sys.stdin:\n    print('got', line.strip(), flush=True)\n")


def test_owner_controls_a_hosted_agent_with_host(world):
    """HOST over IRC: the owner lists, reads the log, writes a stdin line, signals, stops and
    starts; another account gets the answer of an agent that is not hosted."""
    start, login, tmp = world
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", CAT], "start": "always",
                         "ready": {"log": "^ready"}}])
    state = _state(srv)
    hosted = state.host.agents["echo"]
    until(lambda: hosted.state == "running")
    olive, alice = login(srv, "olive"), login(srv, "alice")
    olive.send("HOST")
    listing = olive.sync()
    assert [m.params for m in listing] == [
        ["olive", "AGENT", "echo", "running", str(hosted.pid), "0", listing[0].params[6], "always/on-failure",
         listing[0].params[8], "-"],
        ["olive", "END", "1"],
    ]
    olive.send("HOST STDIN echo :hello there")
    assert [m.params for m in olive.sync()] == [["olive", "SENT", "echo", "12", "Written to its standard input"]]
    olive.send(f"HOST LOGS echo GREP ^got FROM {listing[0].params[8]} WAIT 10000")
    got = olive.sync()
    assert [m.params[1:] for m in got[:-1]] == [["LOG", "echo", "got hello there"]]
    assert got[-1].params[1:3] == ["LOGEND", "echo"]
    cursor = int(got[-1].params[3])
    olive.send(f"HOST LOGS echo FROM {cursor}")
    assert [m.params[1:4] for m in olive.sync()] == [["LOGEND", "echo", str(cursor)]]
    olive.send("HOST LOGS echo LINES 2")
    assert [m.params[3] for m in olive.sync()[:-1]] == ["ready", "got hello there"]

    for who, line in ((alice, "STATUS echo"), (alice, "STOP echo"), (alice, "STATUS nobody"), (olive, "STOP alice"),
                      (alice, "SIGNAL echo KILL"), (alice, "STDIN echo :x"), (alice, "LOGS echo")):
        who.send(f"HOST {line}")
        (fail,) = who.sync()
        name = line.split()[1]
        assert (fail.command, fail.params) == ("FAIL", ["HOST", "NOT_HOSTED", name,
                                                        "No hosted agent of yours by that name"])
    alice.send("HOST")
    assert [m.params for m in alice.sync()] == [["alice", "END", "0"]]

    first = hosted.pid
    olive.send("HOST SIGNAL echo hup")
    assert [m.params for m in olive.sync()] == [["olive", "SIGNALLED", "echo", "HUP", "SIGHUP sent to its process group"]]
    until(lambda: hosted.pid not in (None, first) and hosted.state == "running")  # on-failure: restarted
    assert hosted.restarts == 1
    olive.send("HOST STOP echo")
    (stopped,) = olive.sync()
    assert stopped.params[1:5] == ["AGENT", "echo", "parked", "*"]
    olive.send("HOST STDIN echo :anyone?")
    (fail,) = olive.sync()
    assert fail.params[:3] == ["HOST", "NOT_RUNNING", "echo"]
    olive.send("HOST START echo")
    (started,) = olive.sync()
    assert started.params[1:4] == ["AGENT", "echo", "starting"]
    until(lambda: hosted.state == "running")
    expected = ["host.start", "host.stdin", "host.signal", "host.crash", "host.start", "host.stop", "host.start"]
    until(lambda: audit_actions(tmp / "pircd.db", "echo") == expected)


def test_owner_tools_on_mcp_match_host(world):
    """The MCP owner tools call the same operations: list, logs with a cursor that a follow
    resumes from, stdin, signal, control; another account gets NOT_HOSTED as for no hosted agent."""
    from tests.test_mcp import call, mcp, refused, token_for

    start, login, tmp = world
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", CAT], "start": "always",
                         "ready": {"log": "^ready"}}])
    state = _state(srv)
    hosted = state.host.agents["echo"]
    until(lambda: hosted.state == "running")
    olive_token, alice_token = token_for(srv, "olive"), token_for(srv, "alice")

    async def scenario() -> None:
        async with mcp(srv, olive_token) as client:
            listed = await call(client, "list_hosted_agents")
            (agent,) = listed["agents"]
            assert (agent["account"], agent["state"], agent["pid"], agent["restart"]) == (
                "echo", "running", hosted.pid, "on-failure")
            cursor = agent["log_cursor"]
            assert await call(client, "write_hosted_agent_stdin", agent="echo", line="one") == {
                "agent": "echo", "bytes": 4}
            got = await call(client, "read_hosted_agent_logs", agent="echo", cursor=cursor, follow_ms=10000)
            assert got["text"] == "got one\n" and got["start"] == cursor
            assert await call(client, "write_hosted_agent_stdin", agent="echo", line="two")
            more = await call(client, "read_hosted_agent_logs", agent="echo", cursor=got["cursor"], follow_ms=10000)
            assert more["text"] == "got two\n"  # resumed where the last read stopped
            tail = await call(client, "read_hosted_agent_logs", agent="echo", lines=1, grep="^got")
            assert tail["text"] == "got two\n"
            assert await refused(client, "read_hosted_agent_logs", agent="echo", grep="(") == (
                "INVALID_PARAMS", ["("])
            stopped = await call(client, "control_hosted_agent", agent="echo", action="stop")
            assert stopped["agent"]["state"] == "parked"
            assert await refused(client, "signal_hosted_agent", agent="echo", signal="TERM") == (
                "NOT_RUNNING", ["echo"])
            started = await call(client, "control_hosted_agent", agent="echo", action="start")
            assert started["agent"]["state"] == "starting"
        async with mcp(srv, alice_token) as client:
            assert await call(client, "list_hosted_agents") == {"agents": []}
            for tool, args in (("control_hosted_agent", {"action": "stop"}), ("signal_hosted_agent", {"signal": "KILL"}),
                               ("read_hosted_agent_logs", {})):
                assert await refused(client, tool, agent="echo", **args) == ("NOT_HOSTED", ["echo"])
                assert await refused(client, tool, agent="nobody", **args) == ("NOT_HOSTED", ["nobody"])

    run(srv, scenario())


def test_portal_page_of_a_hosted_agent(world):
    """The owner's page: state, restarts and the log tail; the forms start, stop, write stdin and
    signal; another person's agent is a 404 as for no agent; a valid page (html_problems)."""
    from tests.portal import csrf_of, html_problems, sign_in

    start, login, tmp = world
    make_accounts(tmp / "pircd.db", ("paul", "person", None))
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", CAT], "start": "always",
                         "ready": {"log": "^ready"}}])
    hosted = _state(srv).host.agents["echo"]
    until(lambda: hosted.state == "running")
    client, csrf = sign_in(srv, "olive")
    page = client.get("/portal/agents/echo/host")
    assert page.status_code == 200
    assert f"PID: {hosted.pid}" in page.text and ">running<" in page.text and "ready\n" in page.text
    assert html_problems({"host": page.text}, tmp) == {"host": []}
    answer = client.post("/portal/agents/echo/host/stdin", data={"csrf": csrf, "line": "from the portal"})
    assert (answer.status_code, answer.headers["location"]) == (303, "/portal/agents/echo/host")
    until(lambda: "got from the portal" in client.get("/portal/agents/echo/host").text)
    answer = client.post("/portal/agents/echo/host/stop", data={"csrf": csrf})
    assert answer.status_code == 303
    page = client.get("/portal/agents/echo/host")
    assert "echo: stop done; it is parked now." in page.text and ">parked<" in page.text
    answer = client.post("/portal/agents/echo/host/signal", data={"csrf": csrf, "signal": "TERM"})
    assert "has no running process" in client.get("/portal/agents/echo/host").text
    assert client.post("/portal/agents/echo/host/start", data={"csrf": "wrong"}).status_code == 403
    assert client.get("/portal/agents/alice/host").text.count("is not run by this server") == 1
    other, _ = sign_in(srv, "paul")
    assert other.get("/portal/agents/echo/host").status_code == 404
    until(lambda: audit_actions(tmp / "pircd.db", "echo") == ["host.start", "host.stdin", "host.stop"])


# logs, the environment, the token, idle parking, task revival, failed -------------------------------


def test_the_log_rotates_and_a_cursor_reads_on_across_the_rotation(tmp_path):
    """The writer keeps one rotated file: a cursor is an offset in everything ever written, so a
    read from a cursor gets the bytes after it whether they are in the rotated file, the current
    one or both; a cursor older than the rotated file starts at its first byte (``start`` says so)."""
    from ext.pircan.host.logs import AgentLog, read_window

    log = AgentLog(tmp_path, "echo", max_bytes=100)
    log.write(b"a" * 60)
    cursor = log.end
    log.write(b"b" * 70)  # 40 in the first file, then it rotates, 30 in the new one
    assert (tmp_path / "echo.log.1").read_bytes() == b"a" * 60 + b"b" * 40
    assert (tmp_path / "echo.log.base").read_text() == "100"
    window = read_window(tmp_path, "echo", cursor, 1000)
    assert (window.data, window.start, window.cursor) == (b"b" * 70, 60, 130)
    log.write(b"c" * 100)  # the current file fills (70 c) and rotates again: the a's are gone
    log.write(b"d" * 5)
    follow = read_window(tmp_path, "echo", window.cursor, 1000)
    assert (follow.data, follow.start, follow.cursor) == (b"c" * 100 + b"d" * 5, 130, 235)
    old = read_window(tmp_path, "echo", 0, 1000)
    assert (old.start, old.data) == (100, b"b" * 30 + b"c" * 100 + b"d" * 5)
    log.close()


def test_a_follow_over_mcp_reads_on_across_rotations(world):
    """With host.log_max_bytes at its least (4096), the owner follows the output of 100 lines that
    rotate the log twice: what the cursors return, joined, is every line once, in order (a reader
    more than one rotated file behind would find its start moved on, as the unit test shows)."""
    from tests.test_mcp import call, mcp, token_for

    start, login, tmp = world
    # 100 stdin lines and the reads between them, one call after the other: past the account's
    # default burst of HTTP calls (60), which a follower pacing itself would stay under
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", CAT], "start": "always",
                         "ready": {"log": "^ready"}}], pircan={"http_calls_burst": 1000}, log_max_bytes=4096)
    hosted = _state(srv).host.agents["echo"]
    until(lambda: hosted.state == "running")
    token = token_for(srv, "olive")
    lines = [f"line {n:03d} " + "x" * 90 for n in range(100)]  # 'got ' + 100 + newline: 10,500 bytes

    async def scenario() -> bytes:
        async with mcp(srv, token) as olive:
            cursor = (await call(olive, "list_hosted_agents"))["agents"][0]["log_cursor"]
            text = ""
            for first in range(0, len(lines), 10):  # 1,050 bytes at a time: the reader keeps up
                for line in lines[first:first + 10]:
                    await call(olive, "write_hosted_agent_stdin", agent="echo", line=line)
                while text.count("\n") < first + 10:
                    got = await call(olive, "read_hosted_agent_logs", agent="echo", cursor=cursor,
                                     follow_ms=10_000)
                    assert got["start"] == cursor  # nothing skipped: every byte after the cursor is kept
                    text, cursor = text + got["text"], got["cursor"]
            return text.encode()

    assert run(srv, scenario()) == "".join(f"got {line}\n" for line in lines).encode()
    assert (tmp / "pircd-host" / "echo.log.1").stat().st_size == 4096
    assert int((tmp / "pircd-host" / "echo.log.base").read_text()) >= 8192


ENV_AGENT = ("import os, sys\n"
             "for key in ('PIRCAN_ACCOUNT', 'PIRCAN_IRC', 'PIRCAN_HTTP', 'PIRCAN_TOKEN', 'GREETING', 'NOT_PASSED'):\n"
             "    print(key + '=' + os.environ.get(key, '-'), flush=True)\n"
             "print('CWD=' + os.getcwd(), flush=True)\n"
             "print('ready', flush=True)\n"
             "sys.stdin.read()\n")


def test_the_environment_reaches_the_process_and_its_token_ends_with_it(world, monkeypatch):
    """PIRCAN_ACCOUNT, PIRCAN_IRC, PIRCAN_HTTP, PIRCAN_TOKEN, the entry's env and cwd reach the
    process, the server's own environment does not; the token signs in over SASL PLAIN while the
    process runs and is revoked when it ends."""
    from ext.pircan.host.logs import tail

    start, login, tmp = world
    monkeypatch.setenv("NOT_PASSED", "the server's secret")
    home = tmp / "agent-home"
    home.mkdir()
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", ENV_AGENT], "start": "always",
                         "restart": "no", "ready": {"log": "^ready"}, "cwd": str(home),
                         "env": {"GREETING": "hello"}}])
    state = _state(srv)
    hosted = state.host.agents["echo"]
    until(lambda: hosted.state == "running")
    seen = dict(line.split("=", 1) for line in tail(tmp / "pircd-host", "echo", 20).data.decode().splitlines()
                if "=" in line and not line.startswith("---"))
    assert seen["PIRCAN_ACCOUNT"] == "echo" and seen["GREETING"] == "hello" and seen["NOT_PASSED"] == "-"
    assert seen["PIRCAN_HTTP"] == srv.http_url and seen["PIRCAN_IRC"].endswith(f":{srv.port}")
    assert seen["CWD"] == str(home)
    token = seen["PIRCAN_TOKEN"]
    agent = IRCClient(srv.port)
    try:
        assert [m.params[2] for m in agent.login("echo", token) if m.command == "900"] == ["echo"]
    finally:
        agent.close()
    assert run(srv, state.host.stop_agent("echo", "test")) == "stopped"
    assert hosted.state == "parked"
    assert [t.name for t in run(srv, state.api.list_tokens(None, "echo")) if t.name.startswith("host-")] == []
    late = IRCClient(srv.port)
    try:
        with pytest.raises(AssertionError, match="904"):
            late.login("echo", token)
    finally:
        late.close()


async def _sweep(srv_state: Any, now: int) -> str:
    srv_state.host.sweep(now)
    await asyncio.sleep(0)  # the stop the sweep spawned has begun
    return srv_state.host.agents["echo"].state


def test_idle_stop_minutes_parks_an_agent_with_nothing_to_do(world):
    """The once-a-minute sweep parks a running agent that had no event and sent no message for
    idle_stop_minutes; one minute short of it, it keeps running. (The sweep's clock is given.)"""
    start, login, tmp = world
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", CAT], "start": "always",
                         "ready": {"log": "^ready"}, "idle_stop_minutes": 30}])
    state = _state(srv)
    hosted = state.host.agents["echo"]
    until(lambda: hosted.state == "running")
    began = hosted.started_at
    assert run(srv, _sweep(state, began + 29 * 60_000)) == "running"
    assert run(srv, _sweep(state, began + 30 * 60_000)) == "stopping"
    until(lambda: hosted.state == "parked" and hosted.task is None)
    until(lambda: audit_details(tmp / "pircd.db", "echo")[-1:] == [
        ("host.stop", f"pid {hosted_pid_of(tmp, 'echo')}: signal SIGTERM (idle for 30 min)")])


def audit_details(db: Path, account: str) -> list[tuple[str, str]]:
    return dbs.rows(db, "SELECT action, detail FROM pircan_audit WHERE subject = ? AND action LIKE 'host.%' "
                        "ORDER BY id", (account,))


def hosted_pid_of(tmp: Path, account: str) -> str:
    """The pid of the account's last start, from its audit row ('pid <n> (...)')."""
    starts = [detail for action, detail in audit_details(tmp / "pircd.db", account) if action == "host.start"]
    return starts[-1].split()[1] if starts else "?"


def test_a_task_request_revives_a_parked_agent(world):
    srv, alice, olive, tmp = echo_in_touch(world, "message,task:summarise")
    hosted = _state(srv).host.agents["echo"]
    park(srv)
    alice.send("TASK CREATE echo summarise :the weekly notes")
    created = alice.read_until(lambda m: m.command in ("TASK", "FAIL"))[-1]
    assert created.params[1] == "CREATED", created
    until(lambda: hosted.state == "running")
    until(lambda: [a for a in audit_details(tmp / "pircd.db", "echo") if a[0] == "host.revive"] == [
        ("host.revive", "for a request"), ("host.revive", "for a task")])


CRASH = "import sys; print('boom', flush=True); sys.exit(3)"


def test_the_owner_sees_failed_through_host_and_mcp(world):
    """A process that fails max_failures times in a row is failed; its owner sees it (and the last
    exit) on IRC HOST and MCP list_hosted_agents, and starting it by hand clears it."""
    from tests.test_mcp import call, mcp, token_for

    start, login, tmp = world
    srv = start(agents=[{"account": "echo", "command": [sys.executable, "-c", CRASH], "start": "always",
                         "restart": "on-failure"}], max_failures=1)
    hosted = _state(srv).host.agents["echo"]
    until(lambda: hosted.state == "failed")
    olive = login(srv, "olive")
    olive.send("HOST STATUS echo")
    (line,) = olive.sync()
    assert line.params[1:5] + line.params[9:] == ["AGENT", "echo", "failed", "*", "exit 3"]
    token = token_for(srv, "olive")

    async def listed() -> dict[str, Any]:
        async with mcp(srv, token) as client:
            return (await call(client, "list_hosted_agents"))["agents"][0]

    agent = run(srv, listed())
    assert (agent["state"], agent["pid"], agent["last_exit"]) == ("failed", None, "exit 3")
    olive.send("HOST START echo")
    (started,) = olive.sync()
    assert started.params[1:4] == ["AGENT", "echo", "starting"]
    until(lambda: hosted.state == "failed" and hosted.task is None)  # and it fails again, once
