"""The benchmark's load generator against a live pircd process, with tiny counts.

Not a benchmark: it checks that every scenario of bench/ still runs end to end
(registration, JOIN, PING sync, counting, markers, QUIT) so that the suite does
not rot while the server changes. Figures are not asserted, only correctness:
no lost lines, no errors.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest

from bench import loadgen
from bench.servers import SERVERS, RunningServer


@pytest.fixture(scope="module")
def pircd():
    server = RunningServer(SERVERS["pircd"]).start()
    yield server
    server.stop()


def _run(pircd: RunningServer, make) -> dict:
    loop = loadgen.new_event_loop()
    try:
        target = loadgen.Target("pircd", "127.0.0.1", pircd.port, pircd.sample, workdir=pircd.dir,
                                http_port=pircd.http_port())
        return loop.run_until_complete(asyncio.wait_for(make(target), 60))
    finally:
        loop.close()


def test_fanout_delivers_every_line(pircd):
    result = _run(pircd, lambda t: loadgen.fanout(t, receivers=5, lines=40))
    assert result["delivered"] == 200
    assert result["lost"] == 0


def test_direct_messages_round_trip(pircd):
    result = _run(pircd, lambda t: loadgen.direct(t, pairs=2, round_trips=10))
    assert result["round_trips"] == 20
    assert result["p50_ms"] > 0


def test_connections_are_held(pircd):
    result = _run(pircd, lambda t: loadgen.connections(t, 30, concurrency=10, hold=0.1))
    assert result["registered"] == 30
    assert result["errors"] == 0


def test_churn_cycles(pircd):
    result = _run(pircd, lambda t: loadgen.churn(t, total=10, workers=3, timeout=5))
    assert result["cycles"] == 10
    assert result["errors"] == 0


def test_reconnect_storm(pircd):
    """A storm of 20 registrations at once while 2 bystanders (a process of their own) ping: every
    client registers, and round trips are measured before the storm (during it too, when it
    outlasts a round trip)."""
    result = _run(pircd, lambda t: loadgen.storm(t, 20, 2, quiet=0.3))
    assert (result["registered"], result["errors"]) == (20, 0)
    assert result["quiet_p99_ms"] > 0


def test_sasl_logins(pircd):
    result = _run(pircd, lambda t: loadgen.sasl_logins(t, 3, 1))
    assert result["logins"] == 3


def test_pircan_send(pircd):
    result = _run(pircd, lambda t: loadgen.pircan_send(t, 2, 3))
    assert result["sends"] == 6


def test_chathistory_queries(pircd):
    from bench.chathistory import chathistory

    result = _run(pircd, lambda t: chathistory(t, lines=30, readers=2, queries=3))
    assert result["queries"] == 6 and result["p50_ms"] > 0


def test_postgresql_pircd_pg_keeps_its_store_on_a_postgresql_server():
    """pircd-pg, the variant for the SQLite/PostgreSQL comparison: its server.db is a URL on the
    benchmark's own PostgreSQL server, and the SEND scenario writes its accounts there."""
    server = RunningServer(SERVERS["pircd-pg"]).start()
    try:
        database = SERVERS["pircd-pg"].database(server.dir)
        assert database.startswith("postgresql://")
        loop = loadgen.new_event_loop()
        try:
            target = loadgen.Target("pircd-pg", "127.0.0.1", server.port, server.sample, workdir=server.dir,
                                    database=database)
            result = loop.run_until_complete(asyncio.wait_for(loadgen.pircan_send(target, 2, 3), 60))
        finally:
            loop.close()
        assert result["sends"] == 6
    finally:
        server.stop()


def test_mcp_send(pircd):
    """Four MCP agents (the SDK's client, a token each) in two agreements: every call is answered,
    every message is in its recipient's inbox."""
    from bench.mcp import mcp_send

    result = _run(pircd, lambda t: mcp_send(t, 4, 3))
    assert (result["sends"], result["lost"], result["refused"]) == (12, 0, 0)
    assert result["p50_ms"] > 0


def test_http_load_measures_a_bystander_with_and_without_the_flood(pircd):
    """bench.http_load: the bystander's round trips during the flooder's seconds and between them,
    the flooder a process of its own calling MCP at the account's call limit (every call answered)
    and past it (answered or refused, nothing else)."""
    from bench.http_load import http_load

    result = _run(pircd, lambda t: http_load(t, 4.0, workers=2))
    assert result["rate_limit"] == 10.0
    assert min(result[f"{phase}_{kind}"] for phase in ("limit", "over") for kind in ("pings", "quiet_pings")) > 0
    assert result["limit_ok_per_s"] > 0 and result["limit_refused_per_s"] == 0
    assert result["over_ok_per_s"] + result["over_refused_per_s"] > 0
    assert result["limit_ratio"] == result["limit_p99"] / result["limit_quiet_p99"]


def test_the_http_listener_can_be_off():
    """pircd-nohttp, the variant for the HTTP on/off comparison, listens for IRC only."""
    from bench.mcp import mcp_send
    from bench.servers import listening_ports

    server = RunningServer(SERVERS["pircd-nohttp"]).start()
    try:
        assert server.http_port() is None
        assert listening_ports(server.pid) == {server.port}
        result = _run(server, lambda t: loadgen.direct(t, pairs=2, round_trips=5))
        assert result["round_trips"] == 10
        with pytest.raises(loadgen.BenchError, match=r"no HTTP listener \(\[http\] enabled = false\?\)"):
            _run(server, lambda t: mcp_send(t, 2, 1))
    finally:
        server.stop()


def test_pircd_logged_writes_the_default_levels_three_lines_per_connection():
    """pircd-logged (the compiled build at log level "info"; run from source here) logs each
    churn cycle's connect, registration and disconnect; pircd, at "warning", none of them."""
    import dataclasses
    import re
    from collections import Counter

    def lines(spec) -> list[str]:
        server = RunningServer(spec, keep_dir=True).start()
        try:
            result = _run(server, lambda t: loadgen.churn(t, total=3, workers=1, timeout=10))
            assert (result["cycles"], result["errors"]) == (3, 0)
        finally:
            server.stop()
        try:
            text = (server.dir / "server.log").read_text()
        finally:
            shutil.rmtree(server.dir, ignore_errors=True)
        return re.findall(r"pircd: (connect|registered|disconnect) id=", text)

    logged = SERVERS["pircd-logged"]
    assert logged.compiled
    # one connection more than the cycles: RunningServer.start's probe of the port
    assert Counter(lines(dataclasses.replace(logged, compiled=False, env=dict(logged.env)))) == {
        "connect": 4, "registered": 3, "disconnect": 4}
    assert lines(SERVERS["pircd"]) == []


def test_mcp_mail_runs_pircd_at_the_durability_of_mcp_agent_mail():
    """The mcp-mail scenario's pircd side (the MCP load generator of mcp-send) against pircd-normal,
    the variant with MCP Agent Mail's durability (WAL, synchronous=NORMAL): every call answered,
    every message in its recipient's inbox."""
    import tomllib

    from ircd.config import load

    server = RunningServer(SERVERS["pircd-normal"]).start()
    try:
        written = tomllib.loads((server.dir / "pircd.toml").read_text())
        assert written["storage"] == {"durability": "normal"}
        assert load(server.dir / "pircd.toml").storage.durability == "normal"
        scenario = loadgen.build_scenarios(loadgen.TINY)["mcp-mail-4x3"]
        assert scenario.servers is not None and {"pircd", "pircd-normal", "agentmail"} <= set(scenario.servers)
        result = _run(server, scenario.run)
        assert (result["sends"], result["lost"], result["refused"]) == (12, 0, 0)
    finally:
        server.stop()


def test_mcp_sends_the_server_refuses_are_counted_and_the_agents_go_on(monkeypatch):
    """A send the server answers with a tool error is counted as refused, with the first answer
    kept; the agent goes on with its next call, and the figures are those of the sends made."""
    from bench import mcp

    send = mcp._Pircd.send

    async def every_other_to_nobody(self, agent, client, i):
        if i % 2 == 0:
            return await send(self, agent, client, i)
        result = await client.call_tool("send_direct_message", {"recipient": "nobody", "body": "x"})
        mcp.structured(result, f"{agent.name}: send_direct_message")

    monkeypatch.setattr(mcp._Pircd, "send", every_other_to_nobody)
    server = RunningServer(SERVERS["pircd"]).start()
    try:
        result = _run(server, lambda t: mcp.mcp_send(t, 4, 4))
    finally:
        server.stop()
    assert (result["sends"], result["refused"], result["lost"]) == (8, 8, 0)
    assert result["first_refusal"].startswith("mcp")
    assert "send_direct_message refused: " in result["first_refusal"]


def test_agentmail_is_skipped_until_its_installation_is_named(tmp_path, monkeypatch, capsys):
    """MCP Agent Mail is not part of pircd: without its virtual environment and checkout the
    runner skips it and says how to name them; with paths that hold none, it says which is wrong."""
    from bench import run
    from bench.servers import AGENTMAIL_SRC, AGENTMAIL_VENV, AgentMailSpec

    monkeypatch.delenv(AGENTMAIL_VENV, raising=False)
    monkeypatch.delenv(AGENTMAIL_SRC, raising=False)
    assert AgentMailSpec.from_environment().missing() == (
        "set PIRCD_BENCH_AGENTMAIL_VENV and PIRCD_BENCH_AGENTMAIL_SRC (or --agentmail-venv and "
        "--agentmail-src) to its virtual environment and checkout; docs/benchmarks.md says how to install it"
    )
    spec = SERVERS["agentmail"]
    for name in ("venv", "src", "env"):  # the runner configures the shared spec: put it back afterwards
        monkeypatch.setattr(spec, name, getattr(spec, name))
    argv = ["--tiny", "--scenario", "mcp-mail", "--servers", "agentmail",
            "--agentmail-venv", str(tmp_path / "venv"), "--agentmail-src", str(tmp_path)]
    assert run.main(argv) == 1
    out = capsys.readouterr().out
    assert out == (
        f"skipping agentmail: no {tmp_path}/venv/bin/python: PIRCD_BENCH_AGENTMAIL_VENV must name a "
        "virtual environment\nno server to run\n"
    )
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    (tmp_path / "venv" / "bin" / "python").symlink_to(__import__("sys").executable)
    spec.configure(tmp_path / "venv", tmp_path)
    assert spec.missing() == (
        f"no {tmp_path}/src/mcp_agent_mail: PIRCD_BENCH_AGENTMAIL_SRC must name its checkout"
    )
    assert spec.env["PYTHONPATH"] == f"{tmp_path}/src"


_PARENT = """
import os, subprocess, sys
# each child burns CPU until its own counters say 60 ms, then reports them
BURN = "import os\\nwhile sum(os.times()[:2]) < 0.06: pass\\nprint(sum(os.times()[:2]), flush=True)\\n"
ended = subprocess.run([sys.executable, "-c", BURN], capture_output=True, text=True, check=True)
alive = subprocess.Popen([sys.executable, "-c", BURN + "import sys; sys.stdin.read()"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
print(float(ended.stdout) + float(alive.stdout.readline()), flush=True)
sys.stdin.read()
alive.stdin.close()
alive.wait()
"""


def test_server_cpu_includes_its_child_processes():
    """A server's CPU counts the processes it started (MCP Agent Mail runs git for each message):
    one that ended and was waited for, and one still running."""
    import os
    import subprocess
    import sys

    from bench.proc import proc_sample

    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        burned = float(parent.stdout.readline())
        own = proc_sample(parent.pid)[0]
        tree = proc_sample(parent.pid, children=True)[0]
    finally:
        parent.stdin.close()
        parent.wait(30)
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert burned >= 0.12
    assert tree - own >= burned - 4 * tick  # /proc counts whole ticks: user and system of each child


def test_every_scenario_runs():
    assert not [s.name for s in loadgen.SCENARIOS.values() if s.pending]


def test_hotpath_runs_every_path(capsys):
    """bench.hotpath (in-process, no sockets) with tiny counts: each of its five paths reports a figure."""
    from bench import hotpath

    argv = ["--messages", "20", "--reads", "1", "--receivers", "3", "--registrations", "5", "--repeat", "1",
            "--pairs", "3", "--rounds", "2", "--cycles", "5", "--members", "2"]
    assert hotpath.main(argv) == 0
    out = capsys.readouterr().out
    assert "us CPU per relayed message" in out
    assert "us CPU per delivered line, 3 receivers" in out
    assert "us CPU per registration" in out
    assert "us CPU per cycle, 2 members" in out
    assert "us CPU per SEND, both threads, 3 pairs" in out


def test_search_bench_times_every_kind_of_search(capsys):
    """bench.search (in-process, no sockets) with a small database: a row per kind of search, and
    the searches find what the fill put there (the worst case nothing, for the measured agent)."""
    from bench import search

    assert search.main(["--messages", "3000", "--pairs", "10", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "3,000 messages between 10 pairs" in out
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| ") and " ms |" in line]
    assert [r[1] for r in rows][:len(search.QUERIES)] == [f"`{q}`" for _, q in search.QUERIES]
    found = {r[1].strip("`"): int(r[3]) for r in rows}
    assert found["the"] == 20 and found["nowhere"] == 0 and found["elsewhere"] == 0


_FAKE_VALGRIND = """#!{python}
# Stands in for valgrind: runs the command after the options, and on exit writes a
# count to --log-file as callgrind does.
import signal, subprocess, sys
args = sys.argv[1:]
first = next(i for i, a in enumerate(args) if not a.startswith("--"))
log = next(a.split("=", 1)[1] for a in args[:first] if a.startswith("--log-file="))
child = subprocess.Popen(args[first:])
signal.signal(signal.SIGTERM, lambda *_: child.terminate())
child.wait()
with open(log, "w") as f:
    f.write("==1== Collected : 123456\\n")
"""

_FAKE_CONTROL = """#!{python}
# Stands in for callgrind_control: records how it was called.
import sys
with open({record!r}, "a") as f:
    f.write(" ".join(sys.argv[1:3]) + "\\n")
"""


def _stand_ins(tmp_path, monkeypatch):
    """valgrind and callgrind_control stand-ins first on PATH; the file that records the calls."""
    import sys

    record = tmp_path / "control.log"
    for name, text in (("valgrind", _FAKE_VALGRIND), ("callgrind_control", _FAKE_CONTROL)):
        path = tmp_path / name
        path.write_text(text.format(python=sys.executable, record=str(record)))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    return record


def test_instructions_counts_the_measured_phase(tmp_path, monkeypatch, capsys):
    """bench.instructions with stand-ins for valgrind and callgrind_control: counting is switched
    on and off once around the measured phase, and the count is divided by the relayed messages."""
    from bench import instructions

    record = _stand_ins(tmp_path, monkeypatch)
    assert instructions.main(["--pairs", "2", "--round-trips", "3"]) == 0
    assert record.read_text() == "-i on\n-i off\n"
    build = "compiled" if any(instructions._REPO.glob("ircd/*.so")) else "pure"  # the CI's second pass
    assert capsys.readouterr().out == (
        f"dm ({build}, 2 x 3): 10,288 instructions per relayed message (123,456 for 12)\n"
    )


def test_instructions_names_the_compiled_build_it_counted(tmp_path, monkeypatch, capsys):
    """--compiled counts a built copy and removes it afterwards; the printed build is the copy's
    (it used to be read after the copy was gone, and said "pure")."""
    from bench import instructions

    _stand_ins(tmp_path, monkeypatch)
    tree = tmp_path / "built"  # the checkout by links, with a compiled module's file beside them
    tree.mkdir()
    for entry in instructions._REPO.iterdir():
        if entry.name != "ircd":
            (tree / entry.name).symlink_to(entry)
    (tree / "ircd").mkdir()
    for entry in (instructions._REPO / "ircd").iterdir():  # in CI's compiled pass, its libraries too
        (tree / "ircd" / entry.name).symlink_to(entry)
    (tree / "ircd" / "unused.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    monkeypatch.setattr(instructions, "compiled_tree", lambda src: tree)
    assert instructions.main(["--pairs", "2", "--round-trips", "3", "--compiled"]) == 0
    assert capsys.readouterr().out == "dm (compiled, 2 x 3): 10,288 instructions per relayed message (123,456 for 12)\n"
    assert not tree.exists()
    assert (instructions._REPO / "ircd" / "server.py").is_file()  # removing the copy left the links' targets


def test_a_pircd_servers_version_is_read_from_the_source_it_runs(tmp_path):
    """--pircd-src and the compiled build run pircd from another tree (PYTHONPATH); the version
    line of the results names that tree's build, not the checkout's the runner was started in."""
    from bench import servers

    (tmp_path / "ircd").mkdir()
    (tmp_path / "ircd" / "__init__.py").write_text("")
    (tmp_path / "ircd" / "__main__.py").write_text("print('pircd, version 9 (compiled build)')\n")
    spec = servers._pircd_spec("pircd-elsewhere")
    spec.env["PYTHONPATH"] = str(tmp_path)
    assert spec.version() == "pircd, version 9 (compiled build)"


def test_instructions_says_what_it_needs(monkeypatch, capsys):
    from bench import instructions

    monkeypatch.setenv("PATH", "/nonexistent")
    assert instructions.main([]) == 2
    assert capsys.readouterr().err == "bench.instructions needs valgrind: apt-get install valgrind\n"


# --------------------------------------------------------------------------
# the floors (bench/floor.c, and bench/floor_py.py on uvloop): a yardstick must relay correctly
# to be one, and both give the same replies


@pytest.fixture(scope="module", params=["floor", "floor-py"])
def floor(request):
    import shutil

    spec = SERVERS[request.param]
    if spec.missing():
        pytest.skip(spec.missing())  # .ci/run installs a C compiler first, so CI never skips this
    tree = spec.prepare()
    server = RunningServer(spec).start()
    yield server
    server.stop()
    spec.built = None
    if tree is not None:
        shutil.rmtree(tree, ignore_errors=True)


def test_floor_runs_the_socket_scenarios(floor):
    fan = _run(floor, lambda t: loadgen.fanout(t, receivers=5, lines=40))
    assert (fan["delivered"], fan["lost"]) == (200, 0)
    dm = _run(floor, lambda t: loadgen.direct(t, pairs=2, round_trips=10))
    assert dm["round_trips"] == 20
    held = _run(floor, lambda t: loadgen.connections(t, 30, concurrency=10, hold=0.1))
    assert (held["registered"], held["errors"]) == (30, 0)
    churn = _run(floor, lambda t: loadgen.churn(t, total=10, workers=3, timeout=5))
    assert (churn["cycles"], churn["errors"]) == (10, 0)


def test_floor_replies(floor):
    import socket

    def read_until(sock: socket.socket, end: bytes) -> bytes:
        data = b""
        while not data.endswith(end):
            chunk = sock.recv(4096)
            assert chunk, data
            data += chunk
        return data

    with socket.create_connection(("127.0.0.1", floor.port)) as a, socket.create_connection(
        ("127.0.0.1", floor.port)
    ) as b:
        a.sendall(b"NICK fa\r\nUSER fa 0 * :a\r\n")
        welcome = read_until(a, b"376 fa :End of MOTD\r\n")
        assert welcome == b":floor 001 fa :Welcome\r\n:floor 376 fa :End of MOTD\r\n"
        b.sendall(b"NICK fa\r\nNICK fb\r\nUSER fb 0 * :b\r\nPING :t1\r\n")
        assert read_until(b, b":t1\r\n") == (
            b":floor 433 * fa :Nickname is in use\r\n:floor 001 fb :Welcome\r\n"
            b":floor 376 fb :End of MOTD\r\n:floor PONG floor :t1\r\n"
        )
        a.sendall(b"PRIVMSG fb :hello there\r\nPRIVMSG nobody :x\r\nPING t2\r\n")
        answers = read_until(a, b":t2\r\n")
        assert answers == b":floor 401 fa nobody :No such nick\r\n:floor PONG floor :t2\r\n"
        assert read_until(b, b"\r\n") == b":fa!u@127.0.0.1 PRIVMSG fb :hello there\r\n"
        a.sendall(b"PRIVMSG fb :" + b"x" * 1100 + b"\r\n")  # cut to 1,023 bytes, still a line
        long = read_until(b, b"\r\n")
        assert (len(long), long[:30]) == (1023, b":fa!u@127.0.0.1 PRIVMSG fb :xx")
        a.sendall(b"QUIT :bye\r\n")
        assert read_until(a, b"\r\n") == b"ERROR :Closing link\r\n"
        assert a.recv(10) == b""
