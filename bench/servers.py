"""The servers under test: pircd, ngIRCd and InspIRCd, each as its own process,
the floors (bench/floor.c, and bench/floor_py.py on uvloop), the yardsticks of
what the socket work alone costs, and MCP Agent Mail, an MCP mailbox for agents,
when its installation is named.

Each run starts a fresh server on a free loopback port with a config written
to a temporary directory, and stops it by its PID (SIGTERM, then SIGKILL after
a grace period). CPU time (utime + stime, with that of the processes it started)
and RSS (VmRSS) come from ``/proc/<pid>``.

pircd-pg is pircd with its store on PostgreSQL: one PostgreSQL server for the
whole benchmark run (Debian's binaries, fsync on as in production; tests/dbs.py
starts it), a new database per run. pircd-base is pircd from another source tree
(``--base-src``, e.g. a ``git worktree`` of an earlier commit), measured in the
same run as this one.

The configs lift the limits that would otherwise measure the server's
anti-abuse policy instead of its throughput: flood control, per-IP connection
limits, connection throttles, send queues. docs/benchmarks.md lists every
setting changed, server by server.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.proc import _CLK_TCK, free_port, listening_ports, proc_sample

__all__ = [
    "AGENTMAIL_SRC",
    "AGENTMAIL_VENV",
    "SERVERS",
    "AgentMailSpec",
    "RunningServer",
    "ServerSpec",
    "free_port",
    "listening_ports",
    "proc_sample",
]

_REPO = Path(__file__).resolve().parent.parent
OPER = ("bench", "benchpass")
MOTD = "Welcome to the benchmark."
SENDQ = 16 * 1024 * 1024


@dataclass
class ServerSpec:
    name: str
    binary: str | None  # looked up on PATH; None: runs with this Python
    write_config: Callable[[Path, int], list[str]]  # (directory, port) -> argv
    oper: tuple[str, str] | None = None
    oper_modes: str = ""
    version_argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    compiled: bool = False  # pircd's compiled build: prepare() builds it from the source in PYTHONPATH
    native: Path | None = None  # a C program in bench/: prepare() builds it with cc into ``built``
    built: Path | None = None
    http: bool = False  # pircd with its HTTP listener (MCP at /mcp) on
    database: Callable[[Path], str] | None = None  # pircd's server.db for a run's directory
    start_timeout: float = 20.0  # seconds until it must accept connections

    def missing(self) -> str | None:
        """Why this server cannot run here, or None."""
        if self.binary is not None and shutil.which(self.binary) is None:
            return f"{self.binary} not found on PATH (apt-get install -y {self.binary})"
        if self.compiled and importlib.util.find_spec("mypyc") is None:
            return "mypyc not installed (pip install mypy)"
        if (self.compiled or self.native) and shutil.which("cc") is None:
            return "no C compiler (apt-get install -y gcc)"
        if self.database is POSTGRES.database and not POSTGRES.version():
            return "PostgreSQL not installed (apt-get install -y postgresql)"
        return None

    def prepare(self) -> Path | None:
        """Build what the server needs before its first run; returns a directory to remove afterwards."""
        if self.native is not None:
            tree = Path(tempfile.mkdtemp(prefix=f"bench-{self.name}-build-"))
            binary = tree / self.name
            argv = ["cc", "-O2", "-o", str(binary), str(self.native)]
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                shutil.rmtree(tree, ignore_errors=True)
                raise RuntimeError(f"cc {self.native.name} failed:\n{done.stderr[-2000:]}")
            self.built = binary
            return tree
        if not self.compiled:
            return None
        tree = compiled_tree(Path(self.env["PYTHONPATH"]))
        self.env["PYTHONPATH"] = str(tree)
        return tree

    def version(self) -> str:
        if self.native is not None:
            return f"{self.native.name}, built with cc -O2"
        if not self.version_argv or self.missing():
            return ""
        try:  # in the environment the server runs in, and not in this checkout: `python -m` puts the
            # working directory first on the path, so pircd's would name this checkout's build
            out = subprocess.run(self.version_argv, capture_output=True, text=True, timeout=10, check=False,
                                 env={**os.environ, **self.env}, cwd=tempfile.gettempdir())
        except (OSError, subprocess.TimeoutExpired):
            return ""
        text = (out.stdout or out.stderr).strip().splitlines()
        mine = text[0] if text else ""
        return f"{mine}, store on {POSTGRES.version()}" if self.database is POSTGRES.database else mine


class RunningServer:
    """One server process. ``argv_hook`` may wrap its command line (a profiler);
    with ``server_is_child`` the measured server is the wrapper's child."""

    def __init__(
        self,
        spec: ServerSpec,
        *,
        argv_hook: Callable[[list[str]], list[str]] | None = None,
        server_is_child: bool = False,
        keep_dir: bool = False,
    ) -> None:
        self.spec = spec
        self.dir = Path(tempfile.mkdtemp(prefix=f"bench-{spec.name}-"))
        self.keep_dir = keep_dir
        self.port = free_port()
        argv = spec.write_config(self.dir, self.port)
        if argv_hook is not None:
            argv = argv_hook(argv)
        self.server_is_child = server_is_child
        self.log = open(self.dir / "server.log", "wb")  # noqa: SIM115 (lives as long as the process)
        env = {**os.environ, **spec.env}
        self.proc = subprocess.Popen(
            argv, cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env
        )
        self.pid = self.proc.pid  # the measured process (see _find_measured for wrappers)

    def start(self, timeout: float | None = None) -> RunningServer:
        timeout = self.spec.start_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.spec.name} exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            self.stop()
            raise RuntimeError(f"{self.spec.name} did not listen on port {self.port} within {timeout} s")
        if self.server_is_child:
            self.pid = self._find_measured()
        return self

    def _find_measured(self) -> int:
        """Under a wrapper (py-spy), the server is the wrapper's child process."""
        try:
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        except OSError:
            children = []
        return int(children[0]) if children else self.proc.pid

    def sample(self) -> tuple[float, float, int]:
        """The server's CPU (and RSS), with that of the processes it started; for pircd-pg the
        PostgreSQL server's CPU is added: the database's work per SEND is the server's work too, as
        it is in-process with SQLite."""
        cpu, sys_s, rss = proc_sample(self.pid, children=True)
        if self.spec.database is POSTGRES.database:
            pg_cpu, pg_sys = POSTGRES.cpu()
            cpu, sys_s = cpu + pg_cpu, sys_s + pg_sys
        return cpu, sys_s, rss

    def http_port(self, timeout: float = 20.0) -> int | None:
        """The port of pircd's HTTP listener (bound to port 0 by the benchmark config), once it
        listens; None for a server without one. pircd starts it right after the IRC listener."""
        if not self.spec.http:
            return None
        deadline = time.monotonic() + timeout
        while True:
            others = listening_ports(self.pid) - {self.port}
            if others:
                return min(others)
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.spec.name}: no HTTP listener within {timeout} s: {self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, n: int = 20) -> str:
        try:
            if not self.log.closed:
                self.log.flush()
            lines = (self.dir / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to the server's PID, SIGKILL after ``grace`` seconds; a wrapper then ends by itself."""
        for pid in dict.fromkeys([self.pid, self.proc.pid]):
            if self.proc.poll() is not None and pid == self.proc.pid:
                continue
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if pid != self.proc.pid:
                break  # the wrapper (py-spy) exits when its child does
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            for pid in dict.fromkeys([self.pid, self.proc.pid]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait(5)
        self.log.close()
        if not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


# --------------------------------------------------------------------------
# pircd


def sqlite_file(directory: Path) -> str:
    return str(directory / "pircd.db")


class _Postgres:
    """The run's PostgreSQL server, started when a pircd-pg run first needs it, and a new database
    for each run (named after the run's directory)."""

    def __init__(self) -> None:
        self.server: Any = None
        self.made: dict[Path, str] = {}

    def database(self, directory: Path) -> str:
        if directory not in self.made:
            if self.server is None:
                from tests.dbs import PgServer  # the test suite's throwaway server, fsync on here

                self.server = PgServer(durable=True).start()
                atexit.register(self.server.destroy)
            name = "bench_" + "".join(c if c.isalnum() else "_" for c in directory.name)
            self.server.admin(f"CREATE DATABASE {name}")
            self.made[directory] = self.server.url(name)
        return self.made[directory]

    def cpu(self) -> tuple[float, float]:
        """(CPU, of which system) in seconds of the PostgreSQL server: the postmaster, the
        processes it runs now (backends, WAL writer, ...) and those that ended."""
        if self.server is None or self.server.proc is None:
            return 0.0, 0.0
        master = int((self.server.data / "postmaster.pid").read_text().split()[0])
        total = system = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                raw = stat.read_bytes()
            except OSError:
                continue
            fields = raw[raw.rfind(b")") + 2 :].split()
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == master:  # its own, and that of its children which ended (cutime, cstime)
                total += sum(int(f) for f in fields[11:15]) / _CLK_TCK
                system += (int(fields[12]) + int(fields[14])) / _CLK_TCK
            elif ppid == master:
                total += (int(fields[11]) + int(fields[12])) / _CLK_TCK
                system += int(fields[12]) / _CLK_TCK
        return total, system

    def version(self) -> str:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
        return f"PostgreSQL {found[-1].parent.parent.name} (Debian), fsync on" if found else ""


POSTGRES = _Postgres()


def _pircd_config(directory: Path, port: int, history: bool = True, http: bool = True,
                  database: Callable[[Path], str] = sqlite_file, durability: str = "full",
                  name: str = "bench.pircd.local", log_level: str = "warning") -> str:
    return f"""\
# pircd, benchmark configuration (bench/servers.py)
[server]
name = "{name}"
listen = ["127.0.0.1:{port}"]
db = "{database(directory)}"
motd = "{MOTD}"

[limits]
# a receiver that falls behind must not be dropped at the default 256 KiB
sendq = {SENDQ}
nicklen = 32

[timeouts]
registration = 120.0
ping_interval = 600.0
ping_timeout = 120.0

[flood]
# the sender and the direct-message clients send as fast as the server reads
enabled = false

[http]
# on, as by default, on a port the system picks (the runner reads it from /proc);
# pircd-nohttp turns it off, to compare the IRC figures with and without it
enabled = {"true" if http else "false"}
listen = ["127.0.0.1:0"]

[connections]
max_per_ip = 100000
throttle_count = 100000
max_clients = 100000

[log]
# "info", the default, logs three lines per connection that comes and goes: measured apart
# (pircd-logged; of the other servers, ngIRCd logs every connection, InspIRCd none)
level = "{log_level}"

[pircan]
# the load generator's clients have no accounts
guests_may_join = true

[history]
# pircd-nohistory turns channel history off, to measure what storing it costs
enabled = {"true" if history else "false"}

[storage]
# "full", the default; pircd-normal: WAL with synchronous=NORMAL, as MCP Agent Mail's SQLite
durability = "{durability}"
"""


def _pircd(no_uvloop: bool, history: bool = True, http: bool = True,
           database: Callable[[Path], str] = sqlite_file, durability: str = "full", log_level: str = "warning",
           ) -> Callable[[Path, int], list[str]]:
    def write(directory: Path, port: int) -> list[str]:
        path = directory / "pircd.toml"
        path.write_text(_pircd_config(directory, port, history, http, database, durability, log_level=log_level))
        argv = [sys.executable, "-m", "ircd", "serve", "--config", str(path)]
        if no_uvloop:
            argv.append("--no-uvloop")
        return argv

    return write


def compiled_tree(src: Path) -> Path:
    """A copy of the pircd source at ``src`` with the modules of its compiled build
    (pyproject.toml, ``[tool.pircd] compiled``) built in place by mypyc."""
    tree = Path(tempfile.mkdtemp(prefix="bench-pircd-compiled-"))
    for name in ("ircd", "ext"):
        shutil.copytree(src / name, tree / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy2(src / name, tree / name)
    done = subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=tree, env={**os.environ, "PIRCD_COMPILE": "1"}, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        shutil.rmtree(tree, ignore_errors=True)
        raise RuntimeError(f"the compiled build failed:\n{done.stderr[-2000:]}")
    return tree


# --------------------------------------------------------------------------
# ngIRCd


def _ngircd(directory: Path, port: int) -> list[str]:
    (directory / "motd.txt").write_text(MOTD + "\n")
    (directory / "conf.d").mkdir(exist_ok=True)
    path = directory / "ngircd.conf"
    path.write_text(f"""\
# ngIRCd, benchmark configuration (bench/servers.py)
[Global]
    Name = bench.ngircd.local
    Info = benchmark server
    Listen = 127.0.0.1
    Ports = {port}
    MotdFile = {directory / "motd.txt"}
    AdminInfo1 = bench
    AdminInfo2 = bench
    AdminEMail = bench@localhost

[Limits]
    MaxConnections = 0
    MaxConnectionsIP = 0
    MaxJoins = 0
    MaxNickLength = 31
    # no penalty delays (the 3-commands-per-read-pass limit is compiled in)
    MaxPenaltyTime = 0
    PingTimeout = 600
    PongTimeout = 120

[Options]
    DNS = no
    Ident = no
    PAM = no
    MorePrivacy = no
    IncludeDir = {directory / "conf.d"}

[Operator]
    Name = {OPER[0]}
    Password = {OPER[1]}
""")
    return ["ngircd", "--nodaemon", "--config", str(path)]


# --------------------------------------------------------------------------
# InspIRCd (3.x)


def _inspircd(directory: Path, port: int) -> list[str]:
    (directory / "motd.txt").write_text(MOTD + "\n")
    path = directory / "inspircd.conf"
    path.write_text(f"""\
# InspIRCd, benchmark configuration (bench/servers.py)
<server name="bench.inspircd.local" description="benchmark server" network="bench" id="0BE">
<admin name="bench" nick="bench" email="bench@localhost">
<bind address="127.0.0.1" port="{port}" type="clients">
<files motd="{directory / "motd.txt"}">
<pid file="{directory / "inspircd.pid"}">

<connect name="bench"
         allow="*"
         maxchans="100"
         timeout="120"
         pingfreq="600"
         hardsendq="{SENDQ}"
         softsendq="{SENDQ}"
         recvq="1048576"
         threshold="1000000"
         commandrate="100000000"
         fakelag="no"
         localmax="100000"
         globalmax="100000"
         resolvehostnames="no"
         useident="no"
         limit="100000">

<performance somaxconn="4096" softlimit="100000" clonesonconnect="no" netbuffersize="65534" quietbursts="yes">
<security maxtargets="20" announceinvites="none">
<options prefixquit="" suffixquit="" syntaxhints="no" casemapping="rfc1459">

<class name="bench" commands="*" privs="users/flood/no-fakelag users/flood/no-throttle users/flood/increased-buffers" usermodes="*" chanmodes="*">
<type name="Bench" classes="bench">
<oper name="{OPER[0]}" password="{OPER[1]}" host="*@*" type="Bench">
""")
    return ["inspircd", "--nofork", "--runasroot", "--config", str(path)]


def _pircd_spec(
    name: str, *, no_uvloop: bool = False, history: bool = True, compiled: bool = False, http: bool = True,
    database: Callable[[Path], str] = sqlite_file, durability: str = "full", log_level: str = "warning",
) -> ServerSpec:
    return ServerSpec(
        name,
        None,
        _pircd(no_uvloop=no_uvloop, history=history, http=http, database=database, durability=durability,
               log_level=log_level),
        version_argv=[sys.executable, "-m", "ircd", "--version"],
        env={"PYTHONPATH": str(_REPO)},
        compiled=compiled,
        http=http,
        database=database,
    )


# --------------------------------------------------------------------------
# the floor: a C relay that does only the socket work (bench/floor.c)


def _floor_spec() -> ServerSpec:
    def write(directory: Path, port: int) -> list[str]:
        if spec.built is None:
            raise RuntimeError("the floor is not built: call prepare() first")
        return [str(spec.built), str(port)]

    spec = ServerSpec("floor", None, write, native=_REPO / "bench" / "floor.c")
    return spec


# --------------------------------------------------------------------------
# MCP Agent Mail: another project's MCP mailbox (FastMCP, SQLite, a git archive), installed
# outside pircd in a virtual environment of its own (docs/benchmarks.md says how)

AGENTMAIL_VENV = "PIRCD_BENCH_AGENTMAIL_VENV"
AGENTMAIL_SRC = "PIRCD_BENCH_AGENTMAIL_SRC"


@dataclass
class AgentMailSpec(ServerSpec):
    """MCP Agent Mail's HTTP server (``python -m mcp_agent_mail.cli serve-http``), run with the
    Python of its virtual environment ``venv`` and the code of its checkout ``src``. Its own
    defaults stay (the git archive of every message, its console logging of each tool call), but
    for where it listens and stores: a ``.env`` file in the run's directory, the way its README
    configures it, puts its SQLite file and its archive there."""

    venv: Path | None = None
    src: Path | None = None

    @classmethod
    def from_environment(cls) -> AgentMailSpec:
        spec = cls("agentmail", None, lambda directory, port: spec.write(directory, port), start_timeout=90.0)
        spec.configure(os.environ.get(AGENTMAIL_VENV), os.environ.get(AGENTMAIL_SRC))
        return spec

    def configure(self, venv: str | Path | None, src: str | Path | None) -> None:
        self.venv = Path(venv).expanduser().resolve() if venv else None
        self.src = Path(src).expanduser().resolve() if src else None
        self.env = {
            # its code from the checkout, not pircd's PYTHONPATH
            "PYTHONPATH": str(self.src / "src") if self.src else "",
            # LiteLLM would fetch its model price list from the internet at import, retrying for
            # about 10 s when there is none: it is set-up only, but delays every start
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }

    @property
    def python(self) -> Path:
        assert self.venv is not None
        return self.venv / "bin" / "python"

    def missing(self) -> str | None:
        if self.venv is None or self.src is None:
            return (
                f"set {AGENTMAIL_VENV} and {AGENTMAIL_SRC} (or --agentmail-venv and --agentmail-src) "
                "to its virtual environment and checkout; docs/benchmarks.md says how to install it"
            )
        if not self.python.exists():
            return f"no {self.python}: {AGENTMAIL_VENV} must name a virtual environment"
        if not (self.src / "src" / "mcp_agent_mail").is_dir():
            return f"no {self.src / 'src' / 'mcp_agent_mail'}: {AGENTMAIL_SRC} must name its checkout"
        return None

    def write(self, directory: Path, port: int) -> list[str]:
        (directory / ".env").write_text(
            "# MCP Agent Mail, benchmark configuration (bench/servers.py): its defaults, but where it\n"
            "# listens and where it keeps its SQLite file and the git archive of the messages\n"
            f"HTTP_HOST=127.0.0.1\nHTTP_PORT={port}\n"
            f"STORAGE_ROOT={directory / 'archive'}\n"
            f"DATABASE_URL=sqlite+aiosqlite:///{directory / 'storage.sqlite3'}\n"
        )
        serve = ["serve-http", "--host", "127.0.0.1", "--port", str(port)]
        return [str(self.python), "-m", "mcp_agent_mail.cli", *serve]

    def version(self) -> str:
        if self.missing():
            return ""
        script = (
            "import importlib.metadata as m, sys; v = m.version\n"
            "print('mcp-agent-mail', v('mcp-agent-mail'), '(fastmcp', v('fastmcp') + ', mcp', v('mcp') + "
            "', SQLAlchemy', v('sqlalchemy') + ', uvicorn', v('uvicorn') + ', Python', "
            "sys.version.split()[0] + ')')"
        )
        try:
            out = subprocess.run(
                [str(self.python), "-c", script], capture_output=True, text=True, timeout=30, check=False,
                env={**os.environ, **self.env},
            )
        except (OSError, subprocess.TimeoutExpired):
            return ""
        return out.stdout.strip() or out.stderr.strip()[-200:]
def _floor_py(directory: Path, port: int) -> list[str]:
    return [sys.executable, "-m", "bench.floor_py", str(port)]


SERVERS: dict[str, ServerSpec] = {
    "pircd": _pircd_spec("pircd"),
    "pircd-asyncio": _pircd_spec("pircd-asyncio", no_uvloop=True),
    "pircd-nohistory": _pircd_spec("pircd-nohistory", history=False),
    "pircd-nohttp": _pircd_spec("pircd-nohttp", http=False),
    # the store on PostgreSQL (server.db a postgresql:// URL) instead of a SQLite file
    "pircd-pg": _pircd_spec("pircd-pg", database=POSTGRES.database),
    # pircd from --base-src (an earlier commit), to compare with this checkout in one run
    "pircd-base": _pircd_spec("pircd-base"),
    # commits survive a crash of the process but not of the machine: the durability of MCP Agent Mail
    "pircd-normal": _pircd_spec("pircd-normal", durability="normal"),
    # the same source, with the modules of the compiled build compiled: what `pip install .` installs (docs/compiled.md)
    "pircd-compiled": _pircd_spec("pircd-compiled", compiled=True),
    # the default install (compiled) at the default log level, "info": a line per connect,
    # registration and disconnect, written to the server's log file
    "pircd-logged": _pircd_spec("pircd-logged", compiled=True, log_level="info"),
    "ngircd": ServerSpec(
        "ngircd", "ngircd", _ngircd, oper=OPER, oper_modes="+F", version_argv=["ngircd", "--version"]
    ),
    "inspircd": ServerSpec(
        "inspircd", "inspircd", _inspircd, oper=OPER, version_argv=["inspircd", "--version"]
    ),
    "floor": _floor_spec(),
    "agentmail": AgentMailSpec.from_environment(),
    # the same yardstick in Python on uvloop (bench/floor_py.py): the interpreter's floor
    "floor-py": ServerSpec("floor-py", None, _floor_py, env={"PYTHONPATH": str(_REPO)}),
}
