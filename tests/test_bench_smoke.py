"""The benchmark's load generator against a live pircd process, with tiny counts.

Not a benchmark: it checks that every scenario of bench/ still runs end to end
(registration, JOIN, PING sync, counting, markers, QUIT) so that the suite does
not rot while the server changes. Figures are not asserted, only correctness:
no lost lines, no errors.
"""

from __future__ import annotations

import asyncio

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


def test_mcp_send(pircd):
    """Four MCP agents (the SDK's client, a token each) in two agreements: every call is answered,
    every message is in its recipient's inbox."""
    from bench.mcp import mcp_send

    result = _run(pircd, lambda t: mcp_send(t, 4, 3))
    assert (result["sends"], result["lost"]) == (12, 0)
    assert result["p50_ms"] > 0


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


def test_instructions_counts_the_measured_phase(tmp_path, monkeypatch, capsys):
    """bench.instructions with stand-ins for valgrind and callgrind_control: counting is switched
    on and off once around the measured phase, and the count is divided by the relayed messages."""
    import sys

    from bench import instructions

    record = tmp_path / "control.log"
    for name, text in (("valgrind", _FAKE_VALGRIND), ("callgrind_control", _FAKE_CONTROL)):
        path = tmp_path / name
        path.write_text(text.format(python=sys.executable, record=str(record)))
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{__import__('os').environ['PATH']}")
    assert instructions.main(["--pairs", "2", "--round-trips", "3"]) == 0
    assert record.read_text() == "-i on\n-i off\n"
    build = "compiled" if any(instructions._REPO.glob("ircd/*.so")) else "pure"  # the CI's second pass
    assert capsys.readouterr().out == (
        f"dm ({build}, 2 x 3): 10,288 instructions per relayed message (123,456 for 12)\n"
    )


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
