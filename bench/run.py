"""Run the benchmark scenarios against pircd and the other servers; print one table.

    python -m bench.run                              # every scenario, 3 repeats, all servers found
    python -m bench.run --quick                      # small counts, 1 repeat: a check that all works
    python -m bench.run --scenario fanout --repeat 5 --servers pircd,ngircd
    python -m bench.run --profile --scenario fanout-1000x500   # pircd under cProfile (or py-spy)
    python -m bench.run --scenario mcp-mail --servers pircd,pircd-normal,agentmail \
        --agentmail-venv VENV --agentmail-src CHECKOUT   # against MCP Agent Mail (docs/benchmarks.md)

Each (scenario, repeat, server) run gets a freshly started server process on
a free loopback port; the servers take turns within a repeat so that drift
on a shared machine spreads over all of them. The table shows medians over
the repeats and each server's ratio to pircd, measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import cluster, loadgen
from bench.loadgen import FULL, QUICK, TINY, BenchError, Scenario, Target, build_scenarios
from bench.servers import (
    AGENTMAIL_SRC,
    AGENTMAIL_VENV,
    POSTGRES,
    SERVERS,
    AgentMailSpec,
    RunningServer,
    ServerSpec,
)

DEFAULT_SERVERS = "pircd,ngircd,inspircd"


# --------------------------------------------------------------------------
# one run


def run_one(
    spec: ServerSpec,
    sc: Scenario,
    loop: asyncio.AbstractEventLoop,
    *,
    argv_hook: Callable[[list[str]], list[str]] | None = None,
    phase: Callable[[RunningServer, bool], None] | None = None,
) -> dict[str, Any]:
    """Start the server, run the scenario once against it, stop it (by PID)."""
    server = RunningServer(spec, argv_hook=argv_hook)
    try:
        server.start()
        target = Target(
            spec.name,
            "127.0.0.1",
            server.port,
            server.sample,
            oper=spec.oper,
            oper_modes=spec.oper_modes,
            on_phase=(lambda on: phase(server, on)) if phase else None,
            workdir=server.dir,
            database=spec.database(server.dir) if spec.database is not None else None,
            http_port=server.http_port(),
        )
        assert sc.run is not None
        return loop.run_until_complete(asyncio.wait_for(sc.run(target), sc.timeout))
    except (TimeoutError, BenchError, OSError, RuntimeError) as exc:
        tail = server.log_tail(5)
        raise BenchError(
            f"{type(exc).__name__}: {exc}" + (f"\n    server log: {tail}" if tail else "")
        ) from None
    finally:
        server.stop()
        _drain_loop(loop)


def _drain_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Let aborted transports finish closing before the next run."""
    loop.run_until_complete(asyncio.sleep(0.2))


# --------------------------------------------------------------------------
# the table


def _median(values: list[float]) -> float | None:
    values = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    return statistics.median(values) if values else None


def render_table(scenarios: list[Scenario], servers: list[str], results: dict, repeat: int) -> str:
    base = servers[0]
    others = servers[1:]
    head = ["scenario / metric", *servers, *[f"{o}/{base}" for o in others], "better"]
    rows: list[list[str]] = []
    for sc in scenarios:
        runs = {s: results.get((sc.name, s), []) for s in servers}
        ok = {s: [r for r in runs[s] if "error" not in r] for s in servers}
        label = sc.name + "".join(
            f"  [{s}: {len(ok[s])}/{len(runs[s])} ok]"
            for s in servers
            if runs[s] and len(ok[s]) < len(runs[s])
        )
        rows.append([label])
        for m in sc.metrics:
            med = {s: _median([r[m.key] for r in ok[s] if m.key in r]) for s in servers}
            cells = [m.fmt.format(med[s]) if med[s] is not None else "-" for s in servers]
            ratios = []
            for o in others:
                mine, theirs = med[base], med[o]
                ratios.append("-" if mine is None or theirs is None or mine == 0 else f"{theirs / mine:.2f}")
            rows.append(["  " + m.label, *cells, *ratios, m.better])
    widths = [max(len(r[i]) for r in [head, *rows] if len(r) > i) for i in range(len(head))]
    out = []
    fmt_row = lambda r: "  ".join(
        (c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])) for i, c in enumerate(r)
    )
    out.append(fmt_row(head))
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append(r[0] if len(r) == 1 else fmt_row(r))
    return "\n".join(out)


# --------------------------------------------------------------------------
# machine


def machine_info() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")]
        info["cpu"] = f"{len(models)} x {models[0]}" if models else "?"
    except OSError:
        info["cpu"] = "?"
    try:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        total = int(next(ln for ln in meminfo if ln.startswith("MemTotal")).split()[1])
        info["memory"] = f"{total / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        info["memory"] = "?"
    info["kernel"] = platform.release()
    info["python"] = platform.python_version()
    try:
        import uvloop

        info["uvloop"] = uvloop.__version__
    except ImportError:
        info["uvloop"] = "not installed"
    return info


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --------------------------------------------------------------------------
# profiling


def profile_pircd(sc: Scenario, tool: str, out_dir: Path, top: int, loop: asyncio.AbstractEventLoop,
                  name: str = "pircd") -> None:
    """Run pircd (``name``: one of its configurations, pircd-pg say) once under a profiler that
    records only the scenario's measured phase."""
    spec = SERVERS[name]
    if tool == "auto":
        tool = "py-spy" if shutil.which("py-spy") else "cprofile"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"profile-{sc.name}"
    argv_hook = None
    if tool == "py-spy":
        raw = stem.with_suffix(".collapsed")
        spy: list[subprocess.Popen[bytes]] = []

        def phase(server: RunningServer, on: bool) -> None:
            if on:
                spy.append(
                    subprocess.Popen(
                        [
                            "py-spy",
                            "record",
                            "--pid",
                            str(server.pid),
                            "--rate",
                            "1000",
                            "--format",
                            "raw",
                            "--output",
                            str(raw),
                            "--nonblocking",
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                    )
                )
                time.sleep(1.0)  # py-spy needs a moment to attach
            elif spy:
                proc = spy.pop()
                os.kill(proc.pid, signal.SIGINT)  # py-spy writes its output on SIGINT
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(5)
    else:
        raw = stem.with_suffix(".prof")

        def argv_hook(argv: list[str]) -> list[str]:
            i = argv.index(
                "ircd"
            )  # [python, -m, ircd, serve, ...] -> [python, -m, bench.profiled, OUT, serve, ...]
            return [*argv[:i], "bench.profiled", str(raw), *argv[i + 1 :]]

        def phase(server: RunningServer, on: bool) -> None:
            os.kill(server.pid, signal.SIGUSR1 if on else signal.SIGUSR2)
            time.sleep(0.1)  # the handler runs at the server's next pass through Python code

    print(f"profiling pircd with {tool} on {sc.name} (measured phase only) ...", flush=True)
    values = run_one(spec, sc, loop, argv_hook=argv_hook, phase=phase)
    print("  " + ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()))
    print("  (figures under a profiler are slower than real; use them only to rank functions)")
    for _ in range(100):  # a profiler writes its file as it exits
        if raw.exists() and raw.stat().st_size:
            break
        time.sleep(0.1)
    text = summarize_collapsed(raw, top) if tool == "py-spy" else summarize_cprofile(raw, top)
    summary = stem.with_suffix(".txt")
    summary.write_text(
        f"pircd profile, scenario {sc.name}, {tool}\n{json.dumps(values, default=str)}\n\n{text}"
    )
    print(text)
    print(f"profile data: {raw}\nsummary: {summary}")


def summarize_cprofile(path: Path, top: int) -> str:
    import io
    import pstats

    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.strip_dirs()
    out.write("== by own time (tottime) ==\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write("== by cumulative time ==\n")
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def summarize_collapsed(path: Path, top: int) -> str:
    """Own and inclusive shares per function (and own per line) from py-spy's raw output."""
    own: dict[str, int] = {}
    own_line: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        funcs = [re.sub(r":\d+\)$", ")", f) for f in frames]
        own[funcs[-1]] = own.get(funcs[-1], 0) + n
        own_line[frames[-1]] = own_line.get(frames[-1], 0) + n
        for f in set(funcs):
            incl[f] = incl.get(f, 0) + n
    if not total:
        return "no samples\n"

    def block(title: str, table: dict[str, int]) -> list[str]:
        rows = [f"== {title} ==", "     %  function"]
        for f, n in sorted(table.items(), key=lambda kv: -kv[1])[:top]:
            rows.append(f"{100 * n / total:6.1f}  {f}")
        return rows + [""]

    lines = [f"{total} samples of the server's busy time (waiting in the event loop is not sampled)", ""]
    lines += block("own time, by function", own)
    lines += block("inclusive time, by function", incl)
    lines += block("own time, by line", own_line)
    return "\n".join(lines)


# --------------------------------------------------------------------------
# main


def select(table: dict[str, Scenario], wanted: list[str]) -> list[Scenario]:
    if not wanted:
        return list(table.values())
    chosen: list[Scenario] = []
    for w in wanted:
        hits = [s for s in table.values() if w in (s.name, s.family)]
        if not hits:
            names = ", ".join(sorted({*table, *(s.family for s in table.values())}))
            raise SystemExit(f"unknown scenario {w!r}; choose from: {names}")
        chosen += [s for s in hits if s not in chosen]
    return chosen


def loadgen_loop() -> asyncio.AbstractEventLoop:
    loop = loadgen.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


def run_cluster(chosen: list[Scenario], args: argparse.Namespace, loop: asyncio.AbstractEventLoop) -> int:
    """The cluster scenarios (bench/cluster.py): 1 node and 2 nodes instead of the servers."""
    fds = raise_fd_limit()
    repeat = args.repeat or (1 if (args.quick or args.tiny) else 3)
    info = machine_info()
    print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + f", open files {fds}")
    print(f"pircd nodes: {SERVERS['pircd'].version()}, store on {POSTGRES.version()}")
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    errors: list[str] = []
    started = time.monotonic()
    try:
        cluster.run_suite(chosen, repeat, loop, results, errors)
    finally:
        loop.close()
    configs = list(cluster.CONFIGS)
    print()
    print(render_table(chosen, configs, results, repeat))
    print(f"\nmedians of {repeat} run(s); ratios are other/{configs[0]}; total {time.monotonic() - started:.0f} s")
    for e in errors:
        print("error: " + e)
    if args.json or args.out:
        path = args.json or (args.out / "results.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = [{"scenario": k[0], "server": k[1], "runs": v} for k, v in results.items()]
        path.write_text(json.dumps({"machine": info, "repeat": repeat, "results": rows}, indent=1, default=str))
        print(f"results: {path}")
    return 1 if errors else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="scenario name or family (fanout, dm, connections, churn, storm, sasl, pircan, mcp, mcp-mail, "
        "chathistory, http-load, cluster: only when named); "
        "repeatable or comma-separated",
    )
    p.add_argument(
        "--servers",
        default=DEFAULT_SERVERS,
        help=f"comma-separated, first is the baseline for ratios (default {DEFAULT_SERVERS}; "
        f"known: {', '.join(SERVERS)})",
    )
    p.add_argument(
        "--repeat", type=int, default=None, help="runs per scenario and server (default 3, quick 1)"
    )
    p.add_argument("--quick", action="store_true", help="small counts: checks every path in about a minute")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # smoke test sizes
    p.add_argument(
        "--profile",
        nargs="?",
        const="auto",
        choices=["auto", "cprofile", "py-spy"],
        help="run pircd alone under a profiler for one scenario and print its top functions",
    )
    p.add_argument("--top", type=int, default=30, help="functions listed by --profile")
    p.add_argument("--out", type=Path, default=None, help="directory for profiles and the JSON results")
    p.add_argument("--json", type=Path, default=None, help="also write all results as JSON here")
    p.add_argument(
        "--pircd-src",
        type=Path,
        default=None,
        help="run pircd from this source tree (e.g. a `git archive` of one commit) instead of "
        "this checkout, so that edits in the checkout during a long run do not leak in",
    )
    p.add_argument(
        "--base-src",
        type=Path,
        default=None,
        help="the source tree of the pircd-base server (e.g. `git worktree add /tmp/base COMMIT`), "
        "to compare an earlier pircd with this one in the same run",
    )
    p.add_argument(
        "--agentmail-venv",
        type=Path,
        default=None,
        help=f"the virtual environment MCP Agent Mail is installed in, for --servers ...,agentmail "
        f"(default: ${AGENTMAIL_VENV})",
    )
    p.add_argument(
        "--agentmail-src",
        type=Path,
        default=None,
        help=f"MCP Agent Mail's checkout, whose code that server runs (default: ${AGENTMAIL_SRC})",
    )
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = p.parse_args(argv)

    sizes = TINY if args.tiny else QUICK if args.quick else FULL
    table = build_scenarios(sizes)
    clustered = cluster.build_scenarios(sizes)  # run only when named: they start servers of their own
    if args.list:
        for s in [*table.values(), *clustered.values()]:
            print(f"{s.name:22} {s.description}" + (f"  (pending: {s.pending})" if s.pending else ""))
        return 0
    wanted = [w for item in args.scenario for w in item.split(",") if w]
    chosen = select({**table, **clustered}, wanted) if wanted else select(table, wanted)
    if chosen and all(s.family == "cluster" for s in chosen):
        return run_cluster(chosen, args, loadgen_loop())
    if any(s.family == "cluster" for s in chosen):
        raise SystemExit("the cluster scenarios start their own servers: run them on their own (--scenario cluster)")
    for s in chosen:
        if s.pending:
            print(f"skipping {s.name}: {s.pending}")
    runnable = [s for s in chosen if not s.pending]
    if args.pircd_src is not None:
        for name in [n for n in SERVERS if n.startswith("pircd") and n != "pircd-base"]:
            SERVERS[name].env["PYTHONPATH"] = str(args.pircd_src.resolve())
    if args.base_src is not None:
        SERVERS["pircd-base"].env["PYTHONPATH"] = str(args.base_src.resolve())
    elif "pircd-base" in args.servers.split(","):
        raise SystemExit("pircd-base needs --base-src DIR (the earlier pircd's source tree)")
    agentmail = SERVERS["agentmail"]
    if isinstance(agentmail, AgentMailSpec) and (args.agentmail_venv or args.agentmail_src):
        agentmail.configure(args.agentmail_venv or agentmail.venv, args.agentmail_src or agentmail.src)
    fds = raise_fd_limit()
    loop = loadgen_loop()
    built: list[Path] = []  # compiled copies of pircd, removed at the end
    try:
        if args.profile:
            if len(runnable) != 1:
                default = next(s for s in table.values() if s.family == "fanout")
                runnable = [default] if not wanted else runnable[:1]
            out = args.out or Path(tempfile.mkdtemp(prefix="bench-profile-"))
            first = args.servers.split(",")[0]
            profile_pircd(runnable[0], args.profile, out, args.top, loop, first if first.startswith("pircd") else "pircd")
            return 0

        servers: list[str] = []
        versions: dict[str, str] = {}
        for name in [s for s in args.servers.split(",") if s]:
            spec = SERVERS.get(name)
            if spec is None:
                raise SystemExit(f"unknown server {name!r}; known: {', '.join(SERVERS)}")
            missing = spec.missing()
            if missing:
                print(f"skipping {name}: {missing}")
                continue
            if spec.compiled or spec.native:
                print(f"{name}: building ...", flush=True)
                try:
                    tree = spec.prepare()
                except RuntimeError as exc:
                    print(f"skipping {name}: {exc}")
                    continue
                if tree is not None:
                    built.append(tree)
            servers.append(name)
            versions[name] = spec.version()
        if not servers:
            print("no server to run")
            return 1
        repeat = args.repeat or (1 if (args.quick or args.tiny) else 3)
        info = machine_info()
        print("machine: " + ", ".join(f"{k} {v}" for k, v in info.items()) + f", open files {fds}")
        for name in servers:
            print(f"{name}: {versions[name]}")
        results: dict[tuple[str, str], list[dict[str, Any]]] = {}
        errors: list[str] = []
        started = time.monotonic()
        for sc in runnable:
            for rep in range(repeat):
                order = servers[rep % len(servers) :] + servers[: rep % len(servers)]
                for name in order:
                    if sc.servers is not None and name not in sc.servers:
                        continue  # e.g. PIRCAN scenarios need pircd
                    t0 = time.monotonic()
                    try:
                        values = run_one(SERVERS[name], sc, loop)
                    except BenchError as exc:
                        values = {"error": str(exc)}
                        errors.append(f"{sc.name} #{rep + 1} {name}: {exc}")
                    results.setdefault((sc.name, name), []).append(values)
                    brief = values.get("error") or ", ".join(
                        m.fmt.format(values[m.key]) + " " + m.label
                        for m in sc.metrics[:2]
                        if isinstance(values.get(m.key), (int, float))
                    )
                    print(
                        f"  {sc.name} #{rep + 1} {name}: {brief} ({time.monotonic() - t0:.0f} s)", flush=True
                    )
        print()
        print(render_table(runnable, servers, results, repeat))
        print(
            f"\nmedians of {repeat} run(s); ratios are other/{servers[0]}; "
            f"total {time.monotonic() - started:.0f} s"
        )
        for e in errors:
            print("error: " + e)
        if args.json or args.out:
            path = args.json or (args.out / "results.json")  # type: ignore[operator]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                json.dumps(
                    {
                        "machine": info,
                        "versions": versions,
                        "repeat": repeat,
                        "sizes": "tiny" if args.tiny else "quick" if args.quick else "full",
                        "results": [
                            {"scenario": k[0], "server": k[1], "runs": v} for k, v in results.items()
                        ],
                    },
                    indent=1,
                    default=str,
                )
            )
            print(f"results: {path}")
        return 1 if errors else 0
    finally:
        loop.close()
        for tree in built:
            shutil.rmtree(tree, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
