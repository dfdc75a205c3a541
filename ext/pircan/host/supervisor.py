"""The agent host: runs the agents of ``[[host.agents]]`` as child processes, and starts a parked one
when an event for it arrives (it is PIRCAN's waker).

Invariants:
- at most one process per agent: each hosted agent has one run task, and every start goes
  through ``start_run``, which starts that task only when there is none; in a cluster the task
  first claims the agent's lease, so that it runs on one node of the network (``lease.py``);
- a process runs in its own session (its own process group), so a stop reaches everything it
  started; after the leader exits, what is left of the group is killed (no orphans); each child
  also has the kernel's parent-death signal (SIGKILL), and a server killed -9 finds at its next
  start the process ids it left in ``pircan_host`` and kills those groups before starting anything;
- a process's ``PIRCAN_TOKEN`` is a bearer token made for that run and revoked when it ends (and,
  after a kill -9, at the next start);
- a process that keeps failing (``max_failures`` runs in a row, each shorter than
  ``stable_seconds``) ends in ``failed`` and is not started again until an owner or the operator
  starts it: no restart loop. Restarts wait 1 s, 2 s, 4 s ... up to 30 s.
Every start, stop, exit, crash, revive and failure is an audit row (``host.*``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import re
import resource
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ext.pircan import store as db
from ext.pircan.host import store as hdb
from ext.pircan.host.config import AgentSpec, HostConfig
from ext.pircan.host.lease import Leases
from ext.pircan.host.logs import AgentLog
from ext.pircan.state import Pircan

__all__ = ["Host", "Hosted", "BACKOFF_CAP_S", "SIGNALS"]

log = logging.getLogger("pircd.pircan.host")

BACKOFF_CAP_S = 30.0
SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT, "HUP": signal.SIGHUP, "KILL": signal.SIGKILL}
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_PR_SET_PDEATHSIG = 1


@dataclass(eq=False)
class Hosted:
    spec: AgentSpec
    account: str  # folded
    log: AgentLog
    state: str = "parked"  # parked, starting, running, stopping, backoff, failed
    proc: asyncio.subprocess.Process | None = None
    pid: int | None = None
    started_at: int | None = None
    restarts: int = 0  # starts after the first, since the server started
    failures: int = 0  # failed runs in a row
    last_exit: str | None = None
    note: str = ""  # e.g. "not ready after 30 s"
    task: asyncio.Task[None] | None = None
    want: bool = False  # it should be running
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)  # ends a backoff early
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    last_event_ms: int = 0
    token_name: str | None = None
    why: str = "start"  # what the next start is for: revive, always, start, restart, takeover
    revive_for: str = ""  # the kind of event a revive is for (audited once the run is this node's)

    @property
    def command_text(self) -> str:
        return json.dumps(self.spec.command)


def _preexec(spec: AgentSpec) -> Callable[[], None]:
    memory = spec.limits.memory_mb
    files = spec.limits.open_files

    def run() -> None:  # in the child, before exec: nothing here may allocate much or log
        try:
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory << 20, memory << 20))
        if files is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (files, files))

    return run


class Host:
    """The supervisor of the hosted agents (one per server)."""

    def __init__(self, state: Pircan, cfg: HostConfig, log_dir: Path) -> None:
        self.state = state
        self.api = state.api
        self.cfg = cfg
        self.log_dir = log_dir
        self.agents: dict[str, Hosted] = {}
        self.stopping = False
        self._poller: Any = None
        self._data_version: int | None = None
        self._polling = False
        # in a cluster, which node runs each agent (None alone: this server runs them all)
        self.leases = Leases(self, self.api.node) if self.api.node is not None else None
        for spec in cfg.agents:
            folded = self.api.casefold(spec.account)
            self.agents[folded] = Hosted(spec, folded, AgentLog(log_dir, folded, cfg.log_max_bytes))

    # the Waker protocol -------------------------------------------------------------

    def can_wake(self, account: str) -> bool:
        hosted = self.agents.get(account)
        return hosted is not None and hosted.state != "failed" and not self.stopping

    def wake(self, account: str, kind: str) -> bool:
        hosted = self.agents.get(account)
        if hosted is None or hosted.state == "failed" or self.stopping:
            return False
        hosted.last_event_ms = self.state.now_ms()
        if hosted.task is None:
            if self.leases is None:
                self.audit(account, "host.revive", f"for a {kind}")
            else:  # audited by the node that gets the lease
                hosted.revive_for = kind
            self.start_run(hosted, "revive")
        return True

    def event_seen(self, recipient: str, kind: str, event_id: int, at: int) -> None:
        hosted = self.agents.get(recipient)
        if hosted is not None:
            hosted.last_event_ms = at
            if self.leases is not None and hosted.task is None:
                self.leases.seen(hosted, at)

    # start-up and shutdown ---------------------------------------------------------------

    async def start(self) -> None:
        database = self.state.database
        await database.migrate(hdb.TRACK, hdb.MIGRATIONS)
        for row in await database.read(hdb.all_rows):
            mine = self.leases is None or row.node in (None, self.leases.node)  # (others run on other nodes)
            if mine and row.pid is not None and row.state not in ("parked", "failed"):
                self._reap_leftover(row)
            hosted = self.agents.get(row.account)
            if hosted is not None and row.state == "failed":
                hosted.state, hosted.last_exit = "failed", row.last_exit
        await database.write(hdb.forget_others, list(self.agents))
        for hosted in self.agents.values():
            await self._revoke_leftover_tokens(hosted.account)
            await self._save(hosted)

    def ready_to_run(self) -> None:
        """The listeners are bound (PIRCAN_IRC and PIRCAN_HTTP are known): ``always`` agents start."""
        for hosted in self.agents.values():
            if hosted.spec.start == "always" and hosted.state != "failed":
                self.start_run(hosted, "always")
        self._poller = self.api.call_later(1.0, self._poll_tick)
        if self.leases is not None:
            self.leases.start()

    async def stop(self) -> None:
        """SIGTERM to every process group, SIGKILL after ``stop_grace_seconds``; tokens revoked."""
        self.stopping = True
        if self._poller is not None:
            self._poller.cancel()
        if self.leases is not None:
            self.leases.stop()
        await asyncio.gather(*(self._stop(h, "server shutdown") for h in self.agents.values()),
                             return_exceptions=True)
        for hosted in self.agents.values():
            hosted.log.close()

    def _reap_leftover(self, row: hdb.Row) -> None:
        """A process group a server killed -9 left running: killed, when the pid is still that command."""
        pid = row.pid
        assert pid is not None
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [part.decode("utf-8", "replace") for part in f.read().split(b"\0") if part]
        except OSError:
            argv = []  # the leader is gone (the parent-death signal took it); its group may not be
        if argv and argv != json.loads(row.command):  # (a zombie's command line is empty)
            return  # the pid is another program's now
        try:
            os.killpg(pid, signal.SIGKILL)  # a group id is not reused while the group has members
        except OSError:
            return
        self.audit(row.account, "host.stop", f"pid {pid} left by a server that did not stop cleanly, killed")

    async def _revoke_leftover_tokens(self, account: str) -> None:
        try:
            tokens = await self.api.list_tokens(None, account)
        except Exception:  # TokenRefused: the account is gone; start() refused that already
            return
        for token in tokens:
            if token.name.startswith("host-"):
                with contextlib.suppress(Exception):
                    await self.api.revoke_token(None, account, token.name)

    # operations (owners, the operator) -------------------------------------------------------

    def start_agent(self, account: str, why: str = "start") -> str:
        hosted = self.agents[account]
        if hosted.task is not None and hosted.state != "backoff":
            return f"{hosted.state} already"
        hosted.failures = 0
        if hosted.state == "failed":
            hosted.state = "parked"
        if hosted.task is not None:  # in a backoff: start now
            hosted.wakeup.set()
            return "starting"
        self.start_run(hosted, why)
        return "starting"

    async def stop_agent(self, account: str, why: str) -> str:
        hosted = self.agents[account]
        if hosted.task is None:
            return f"{hosted.state} already"
        await self._stop(hosted, why)
        return "stopped"

    async def restart_agent(self, account: str, why: str) -> str:
        hosted = self.agents[account]
        if hosted.task is not None:
            await self._stop(hosted, why)
        hosted.failures = 0
        if hosted.state == "failed":
            hosted.state = "parked"
        self.start_run(hosted, "restart")
        return "restarting"

    async def write_stdin(self, account: str, line: str) -> bool:
        hosted = self.agents[account]
        proc = hosted.proc
        if proc is None or proc.stdin is None or proc.returncode is not None:
            return False
        try:
            proc.stdin.write(line.encode("utf-8") + b"\n")
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    def send_signal(self, account: str, name: str) -> bool:
        hosted = self.agents[account]
        if hosted.proc is None or hosted.proc.returncode is not None or hosted.pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hosted.pid, SIGNALS[name])
        return True

    # running -------------------------------------------------------------------------

    def start_run(self, hosted: Hosted, why: str) -> None:
        if hosted.task is not None or self.stopping:
            return
        hosted.want = True
        hosted.why = why
        hosted.state = "starting"
        hosted.task = asyncio.get_running_loop().create_task(self._run(hosted))

    async def _run(self, hosted: Hosted) -> None:
        if self.leases is not None and not await self.leases.take(hosted):
            hosted.want, hosted.task = False, None  # another node runs it
            if hosted.state != "failed":
                hosted.state = "parked"
            return
        if hosted.revive_for:
            self.audit(hosted.account, "host.revive", f"for a {hosted.revive_for}")
            hosted.revive_for = ""
        try:
            while hosted.want and not self.stopping:
                began = time.monotonic()
                code = await self._one_run(hosted)
                if not hosted.want or self.stopping:
                    break
                ran = time.monotonic() - began
                crashed = code != 0
                if ran >= self.cfg.stable_seconds:
                    hosted.failures = 0
                if crashed or ran < self.cfg.stable_seconds:
                    hosted.failures += 1
                if hosted.failures >= self.cfg.max_failures:
                    hosted.state = "failed"
                    self.audit(hosted.account, "host.failed",
                                f"{hosted.failures} failed runs in a row (last: {hosted.last_exit}); "
                                "start it again by hand")
                    break
                policy = hosted.spec.restart
                if not (policy == "always" or (policy == "on-failure" and crashed)):
                    hosted.state = "parked"
                    break
                delay = min(BACKOFF_CAP_S, 2.0 ** max(0, hosted.failures - 1))
                hosted.state = "backoff"
                hosted.note = f"restart in {delay:g} s"
                await self._save(hosted)
                hosted.wakeup.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(hosted.wakeup.wait(), delay)
                hosted.why = "restart"
        finally:
            hosted.want = False
            hosted.task = None
            hosted.proc = None
            hosted.pid = None
            if hosted.state not in ("failed",):
                hosted.state = "parked"
            hosted.note = ""
            self.state.reviving.discard(hosted.account)
            if not self.stopping:
                await self._save(hosted, None)  # in a cluster: parked, the lease ends
            elif self.leases is not None:  # another node takes it over at once
                self.state.database.write_nowait(hdb.save_held, self._row(hosted), self.leases.node,
                                                  self.leases.now())
            else:
                self.state.database.write_nowait(hdb.save, self._row(hosted))
            if self.leases is not None:
                self.leases.released(hosted)

    async def _one_run(self, hosted: Hosted) -> int | None:
        """Start the process and wait for it to end; its exit status (None: it did not start)."""
        hosted.state, hosted.note = "starting", ""
        hosted.ready.clear()
        try:
            proc, token_name = await self._spawn(hosted)
        except Exception as exc:
            hosted.last_exit = f"cannot start: {exc}"
            self.audit(hosted.account, "host.crash", hosted.last_exit)
            hosted.log.write(f"--- pircd host: {hosted.last_exit}\n".encode())
            return 1
        hosted.proc, hosted.pid, hosted.token_name = proc, proc.pid, token_name
        if hosted.why == "restart":
            hosted.restarts += 1
        if not hosted.want or self.stopping:  # stopped while it was being started
            hosted.state = "stopping"
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        hosted.started_at = self.state.now_ms()
        hosted.log.write(f"--- pircd host: started pid {proc.pid} ({hosted.why})\n".encode())
        self.audit(hosted.account, "host.start", f"pid {proc.pid} ({hosted.why})")
        readers = [asyncio.ensure_future(self._read(hosted, stream)) for stream in (proc.stdout, proc.stderr)]
        readiness = asyncio.ensure_future(self._readiness(hosted))
        await self._save(hosted)
        code = await proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left behind in its group
        readiness.cancel()
        await asyncio.gather(*readers, readiness, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self.api.revoke_token(None, hosted.account, token_name)
        hosted.token_name = None
        hosted.last_exit = f"exit {code}" if code >= 0 else f"signal {signal.Signals(-code).name}"
        hosted.log.write(f"--- pircd host: pid {proc.pid} ended: {hosted.last_exit}\n".encode())
        if hosted.state == "stopping":
            self.audit(hosted.account, "host.stop", f"pid {proc.pid}: {hosted.last_exit} ({hosted.note})")
        else:
            self.audit(hosted.account, "host.crash" if code != 0 else "host.exit", f"pid {proc.pid}: {hosted.last_exit}")
        return code

    async def _spawn(self, hosted: Hosted) -> tuple[asyncio.subprocess.Process, str]:
        spec = hosted.spec
        name = f"host-{self.api.new_id() & 0xFFFFFFFFFF:010x}"
        _, token = await self.api.create_token(None, hosted.account, name)
        env = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        kwargs: dict[str, Any] = {}
        if spec.user is not None:
            import pwd

            entry = pwd.getpwnam(spec.user)
            env["HOME"] = entry.pw_dir
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[])
        env.update(spec.env)
        env.update({
            "PIRCAN_ACCOUNT": hosted.account,
            "PIRCAN_TOKEN": token,
            "PIRCAN_IRC": self.api.irc_address or "",
            "PIRCAN_HTTP": self.api.http_base_url or "",
        })
        try:
            proc = await asyncio.create_subprocess_exec(
                *spec.command, cwd=spec.cwd, env=env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                start_new_session=True, preexec_fn=_preexec(spec), **kwargs,
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await self.api.revoke_token(None, hosted.account, name)
            raise
        return proc, name

    async def _read(self, hosted: Hosted, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        pattern = re.compile(hosted.spec.ready.log) if hosted.spec.ready and hosted.spec.ready.log else None
        partial = b""
        while True:
            chunk = await stream.read(65536)
            if not chunk:
                return
            hosted.log.write(chunk)
            if pattern is not None and not hosted.ready.is_set():
                lines = (partial + chunk).split(b"\n")
                partial = lines.pop()[-4096:]
                if any(pattern.search(line.decode("utf-8", "replace")) for line in lines):
                    hosted.ready.set()

    async def _readiness(self, hosted: Hosted) -> None:
        ready = hosted.spec.ready
        if ready is not None:
            try:
                await asyncio.wait_for(self._ready_checks(hosted), ready.timeout)
            except asyncio.TimeoutError:
                hosted.note = f"not ready after {ready.timeout:g} s"
                hosted.log.write(f"--- pircd host: {hosted.note}\n".encode())
        if hosted.state == "starting":
            hosted.state = "running"
            await self._save(hosted)

    async def _ready_checks(self, hosted: Hosted) -> None:
        ready = hosted.spec.ready
        assert ready is not None
        if ready.log is not None:
            await hosted.ready.wait()
        if ready.port is not None:
            while True:
                try:
                    _, writer = await asyncio.open_connection(ready.host, ready.port)
                except OSError:
                    await asyncio.sleep(0.2)
                    continue
                writer.close()
                return

    async def _stop(self, hosted: Hosted, why: str) -> None:
        hosted.want = False
        task = hosted.task
        if task is None:
            return
        proc = hosted.proc
        if proc is not None and proc.returncode is None:
            hosted.state, hosted.note = "stopping", why
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), self.cfg.stop_grace_seconds)
            except asyncio.TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        else:
            hosted.wakeup.set()  # in a backoff: end it
            self.audit(hosted.account, "host.stop", f"{why}, while {hosted.state}")
        await asyncio.shield(task)

    # idle agents, the operator's requests --------------------------------------------------

    def sweep(self, now: int | None = None) -> None:
        """Once a minute (PIRCAN's sweep): a running agent idle for ``idle_stop_minutes`` (no event
        for it, no message from it, since it started) is parked again. ``now``: the clock's time,
        unless given (a test checks the rule without waiting for minutes)."""
        now = self.state.now_ms() if now is None else now
        for hosted in self.agents.values():
            minutes = hosted.spec.idle_stop_minutes
            if minutes is None or hosted.state != "running" or hosted.started_at is None:
                continue
            last = max(hosted.last_event_ms, hosted.started_at, self.state.last_active.get(hosted.account, 0))
            if now - last >= minutes * 60_000:
                self.api.spawn(self._stop(hosted, f"idle for {minutes:g} min"))

    def _poll_tick(self) -> None:
        self._poller = self.api.call_later(1.0, self._poll_tick)
        if not self._polling and not self.stopping:
            self._polling = True
            self.api.spawn(self._poll())

    async def _poll(self) -> None:
        """Requests another process (``pircd host start|stop|restart``) wrote since the last look."""
        try:
            version = await self.state.database.data_version()
            if version == self._data_version:
                return
            self._data_version = version
            for ident, account, action in await self.state.database.read(hdb.pending_requests):
                if self.leases is not None and not await self.leases.take_request(ident, account):
                    continue
                result = await self.operator_action(account, action)
                await self.state.database.write(hdb.answer_request, ident, self.state.now_ms(), result)
        finally:
            self._polling = False

    async def operator_action(self, account: str, action: str) -> str:
        if account not in self.agents:
            return f"error: {account} is not a hosted agent"
        if action == "start":
            return self.start_agent(account)
        if action == "stop":
            return await self.stop_agent(account, "stopped by the operator")
        if action == "restart":
            return await self.restart_agent(account, "restarted by the operator")
        return f"error: unknown action {action}"

    # records --------------------------------------------------------------------------

    def _row(self, hosted: Hosted) -> hdb.Row:
        return hdb.Row(hosted.account, hosted.state, hosted.pid, hosted.command_text, hosted.started_at,
                       hosted.restarts, hosted.last_exit, self.state.now_ms())

    async def _save(self, hosted: Hosted, lease: int | None | bool = True) -> None:
        """The agent's row; in a cluster only while this node runs it (or ran it last), and
        ``lease`` (``store.save_held``): True keeps its lease, None ends it."""
        if self.leases is None:
            await self.state.database.write(hdb.save, self._row(hosted))
        else:
            await self.state.database.write(hdb.save_held, self._row(hosted), self.leases.node, lease)

    def audit(self, account: str, action: str, detail: str, actor: str = "server") -> None:
        log.info("%s account=%s %s", action, account, detail)
        self.state.database.write_nowait(db.audit, self.state.new_id(), self.state.now_ms(), actor, account,
                                         action, detail)
