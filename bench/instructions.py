"""Machine instructions per unit of work in the running server, counted by callgrind.

    python -m bench.instructions [--scenario dm|fanout] [--compiled] [--pircd-src DIR]

CPU time on a shared machine moves with its neighbours; the number of
instructions the server executes for the same work does not. This script
starts ``pircd serve`` with the benchmark configuration under valgrind's
callgrind with counting off, drives one socket scenario with the load
generator, counts exactly its measured phase (``callgrind_control -i on`` and
``off``) and divides by the relayed messages or delivered lines.

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
from pathlib import Path

from bench import loadgen
from bench.servers import _REPO, _pircd_config, compiled_tree, free_port

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


def count(src: Path, scenario: str, size: tuple[int, int]) -> dict[str, float]:
    """Run ``scenario`` once against pircd from ``src`` under callgrind."""
    work = Path(tempfile.mkdtemp(prefix="bench-instructions-"))
    port = free_port()
    config = work / "pircd.toml"
    config.write_text(_pircd_config(work, port, True))
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

        target = loadgen.Target("pircd", "127.0.0.1", port, lambda: (0.0, 0.0, 0), on_phase=phase,
                                workdir=work)
        loop = loadgen.new_event_loop()
        try:
            if scenario == "dm":
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
    p.add_argument("--scenario", choices=("dm", "fanout"), default="dm")
    p.add_argument("--pairs", type=int, default=50, help="dm: client pairs")
    p.add_argument("--round-trips", type=int, default=40, help="dm: round trips per pair")
    p.add_argument("--receivers", type=int, default=200, help="fanout: channel members")
    p.add_argument("--lines", type=int, default=200, help="fanout: channel messages")
    p.add_argument("--compiled", action="store_true", help="build the compiled modules in a copy first")
    p.add_argument("--pircd-src", type=Path, default=_REPO, help="the pircd source tree (default: this one)")
    args = p.parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("bench.instructions needs valgrind: apt-get install valgrind", file=sys.stderr)
        return 2
    src = args.pircd_src.resolve()
    tree = compiled_tree(src) if args.compiled else src
    size = (args.pairs, args.round_trips) if args.scenario == "dm" else (args.receivers, args.lines)
    try:
        got = count(tree, args.scenario, size)
    finally:
        if args.compiled:
            shutil.rmtree(tree, ignore_errors=True)
    build = "compiled" if any(tree.glob("ircd/*.so")) else "pure"
    print(f"{args.scenario} ({build}, {' x '.join(map(str, size))}): {got['per_unit']:,.0f} instructions "
          f"per {got['unit']} ({got['instructions']:,} for {got['units']:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
