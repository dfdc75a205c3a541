"""Machine instructions per unit of work in the running server, counted by callgrind.

    python -m bench.instructions [--scenario dm|fanout|churn|connections|mcp|pircan] [--compiled] [--pircd-src DIR]

CPU time on a shared machine moves with its neighbours; the number of
instructions the server executes for the same work does not. This script
starts ``pircd serve`` with the benchmark configuration under valgrind's
callgrind with counting off, drives one socket scenario with the load
generator, counts exactly its measured phase (``callgrind_control -i on`` and
``off``) and divides by the relayed messages or delivered lines (``churn``: by
the cycles of connect, register, JOIN, PRIVMSG and QUIT; ``connections``: by
the registrations; ``mcp``: by the ``send_direct_message`` calls of the MCP
scenario, bench/mcp.py; ``pircan``: by the durable ``SEND``s of the PIRCAN scenario, both the
event loop's thread and the database writer's).

Unlike ``bench.hotpath`` the count includes the event loop (uvloop's read and
write callbacks) and the real sockets' user-space side; the kernel's share is
not counted at all. Under callgrind the server runs some fifty times slower, so
an event-loop turn finds more ready reads than at full speed: compare counts
made with the same sizes. Needs valgrind (``apt-get install valgrind``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from bench import loadgen
from bench.servers import _REPO, _pircd_config, compiled_tree, free_port, listening_ports

_COLLECTED = re.compile(r"Collected : (\d+)")


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before it listened")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.2)  # valgrind starts slowly; this only polls for the listening socket
    raise RuntimeError(f"the server did not listen on port {port} within {timeout:.0f} s")


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a wrapper, such as a stand-in for valgrind, may hold the server
    as its child)."""
    pids, i = [pid], 0
    while i < len(pids):
        for task in Path(f"/proc/{pids[i]}/task").glob("*/children"):
            try:
                pids.extend(int(child) for child in task.read_text().split())
            except OSError:  # gone meanwhile
                pass
        i += 1
    return pids


def _wait_for_http(port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> int:
    """The port of the HTTP listener (bound to port 0), once it listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        others = set().union(*map(listening_ports, _tree(proc.pid))) - {port}
        if others:
            return min(others)
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before it listened")
        time.sleep(0.2)
    raise RuntimeError(f"the server's HTTP listener did not start within {timeout:.0f} s")


def _wait_for_health(http_port: int, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Until ``/healthz`` answers: the HTTP side is loaded and serving."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=10) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} before it served")
        time.sleep(0.2)
    raise RuntimeError(f"the server's /healthz did not answer within {timeout:.0f} s")


def count(src: Path, scenario: str, size: tuple[int, int], http: bool = True) -> dict[str, float]:
    """Run ``scenario`` once against pircd from ``src`` under callgrind (``http``: with the HTTP
    listener on, as by default)."""
    work = Path(tempfile.mkdtemp(prefix="bench-instructions-"))
    port = free_port()
    config = work / "pircd.toml"
    config.write_text(_pircd_config(work, port, True, http))
    out = work / "callgrind.out"
    log = work / "callgrind.log"
    argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
            f"--log-file={log}", sys.executable, "-m", "ircd", "serve", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(src)}
    # cwd: ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH
    proc = subprocess.Popen(argv, env=env, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, proc)

        def phase(on: bool) -> None:
            subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(proc.pid)],
                           capture_output=True, check=True)

        # with the listener on, every scenario waits until it answers: under callgrind the listener
        # is still importing its modules (some 70 million instructions) when the IRC port opens,
        # and those would be counted in the measured phase of an IRC scenario
        http_port = _wait_for_http(port, proc) if http else None
        if http_port is not None:
            _wait_for_health(http_port, proc)
        target = loadgen.Target("pircd", "127.0.0.1", port, lambda: (0.0, 0.0, 0), on_phase=phase,
                                workdir=work, http_port=http_port)
        loop = loadgen.new_event_loop()
        try:
            if scenario == "mcp":
                from bench.mcp import mcp_send

                result = loop.run_until_complete(mcp_send(target, *size, timeout=1800.0))
                units, unit = result["sends"], "send_direct_message call"
            elif scenario == "pircan":
                result = loop.run_until_complete(loadgen.pircan_send(target, *size, timeout=1800.0))
                units, unit = result["sends"], "SEND"
            elif scenario == "churn":
                result = loop.run_until_complete(loadgen.churn(target, *size, timeout=120.0))
                units, unit = result["cycles"], "churn cycle"
            elif scenario == "connections":
                result = loop.run_until_complete(loadgen.connections(target, size[0], size[1], hold=0.5))
                units, unit = result["registered"], "registration"
            elif scenario == "dm":
                result = loop.run_until_complete(loadgen.direct(target, *size))
                units, unit = 2 * result["round_trips"], "relayed message"
            else:
                result = loop.run_until_complete(loadgen.fanout(target, *size))
                units, unit = result["delivered"], "delivered line"
        finally:
            loop.close()
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    found = _COLLECTED.search(log.read_text())
    shutil.rmtree(work, ignore_errors=True)
    if found is None:
        raise RuntimeError("callgrind wrote no instruction count")
    return {"instructions": int(found.group(1)), "units": units, "per_unit": int(found.group(1)) / units,
            "unit": unit}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__.split("\n\n")[0])
    p.add_argument("--scenario", choices=("dm", "fanout", "churn", "connections", "mcp", "pircan"), default="dm")
    p.add_argument("--pairs", type=int, default=50, help="dm: client pairs")
    p.add_argument("--round-trips", type=int, default=40, help="dm: round trips per pair")
    p.add_argument("--receivers", type=int, default=200, help="fanout: channel members")
    p.add_argument("--lines", type=int, default=200, help="fanout: channel messages")
    p.add_argument("--cycles", type=int, default=400, help="churn: cycles in all")
    p.add_argument("--workers", type=int, default=20, help="churn: clients cycling at once")
    p.add_argument("--clients", type=int, default=1000, help="connections: clients to register")
    p.add_argument("--concurrency", type=int, default=100, help="connections: registrations at once")
    p.add_argument("--agents", type=int, default=20, help="mcp: MCP clients (in pairs)")
    p.add_argument("--calls", type=int, default=20, help="mcp: send_direct_message calls per agent")
    p.add_argument("--senders", type=int, default=20, help="pircan: sending agents (each with its recipient)")
    p.add_argument("--sends", type=int, default=20, help="pircan: SENDs per sender")
    p.add_argument("--no-http", action="store_true", help="IRC scenarios: with [http] enabled = false")
    p.add_argument("--compiled", action="store_true", help="build the compiled modules in a copy first")
    p.add_argument("--pircd-src", type=Path, default=_REPO, help="the pircd source tree (default: this one)")
    args = p.parse_args(argv)
    if args.no_http and args.scenario == "mcp":
        p.error("the mcp scenario needs the HTTP listener")
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("bench.instructions needs valgrind: apt-get install valgrind", file=sys.stderr)
        return 2
    src = args.pircd_src.resolve()
    tree = compiled_tree(src) if args.compiled else src
    size = {"dm": (args.pairs, args.round_trips), "fanout": (args.receivers, args.lines),
            "churn": (args.cycles, args.workers), "connections": (args.clients, args.concurrency),
            "mcp": (args.agents, args.calls), "pircan": (args.senders, args.sends)}[args.scenario]
    build = "compiled" if any(tree.glob("ircd/*.so")) else "pure"  # before the copy is removed
    try:
        got = count(tree, args.scenario, size, http=not args.no_http)
    finally:
        if args.compiled:
            shutil.rmtree(tree, ignore_errors=True)
    build += ", HTTP off" if args.no_http else ""
    print(f"{args.scenario} ({build}, {' x '.join(map(str, size))}): {got['per_unit']:,.0f} instructions "
          f"per {got['unit']} ({got['instructions']:,} for {got['units']:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
