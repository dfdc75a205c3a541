"""The owner operations on hosted agents, one rule set for every transport (IRC ``HOST``, the MCP
owner tools, the portal page): list, status, start, stop, restart, logs, a line to stdin, a signal.

Only the agent's owner may; anyone else gets ``NOT_HOSTED``, word for word the answer for an agent
that is not hosted, so that the answer does not tell who hosts what.

In a cluster every node answers LIST and STATUS alike (from the agent's row when another node runs
it, with the note ``on node <name>``); START of an agent another node runs answers its state there;
STOP, RESTART, STDIN and SIGNAL act on a process, so only the node running it does them, and the
others refuse them with ``OTHER_NODE`` naming that node. LOGS reads this node's log files.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from ext.pircan.host.logs import Window, read_window, tail
from ext.pircan.host.supervisor import SIGNALS, Hosted
from ext.pircan.service.contact import owns
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["Status", "LOG_LINES_MAX", "FOLLOW_MAX_MS", "hosted_of", "list_hosted", "status", "start", "stop",
           "restart", "logs", "stdin", "send_signal"]

LOG_LINES_MAX = 1000  # lines one logs call returns at most
LOG_BYTES_MAX = 256 * 1024  # bytes one logs call from a cursor returns at most
FOLLOW_MAX_MS = 60_000  # the longest a follow waits for new output
STDIN_MAX = 4096  # characters of one stdin line
_NOT_HOSTED = "No hosted agent of yours by that name"


@dataclass(frozen=True, slots=True)
class Status:
    account: str
    state: str  # parked, starting, running, stopping, backoff, failed
    pid: int | None
    started_at: int | None
    restarts: int
    last_exit: str | None
    note: str
    start: str  # on-demand or always
    restart: str  # no, on-failure or always
    log_cursor: int


async def _status(state: Pircan, hosted: Hosted) -> Status:
    spec = hosted.spec
    leases = state.host.leases
    row = await leases.elsewhere(hosted) if leases is not None else None
    if row is not None:  # another node runs it, or ran it last
        where = f"on node {row.node}" if row.lease_until is not None else f"last on node {row.node}"
        return Status(hosted.account, row.state, row.pid, row.started_at, row.restarts, row.last_exit, where,
                      spec.start, spec.restart, hosted.log.end)
    note = hosted.note
    if leases is not None and hosted.task is not None:
        note = f"on node {leases.node}" + (f"; {note}" if note else "")
    return Status(hosted.account, hosted.state, hosted.pid, hosted.started_at, hosted.restarts, hosted.last_exit,
                  note, spec.start, spec.restart, hosted.log.end)


async def _here(state: Pircan, hosted: Hosted, action: str) -> None:
    """In a cluster, OTHER_NODE when another node runs the agent (the process is there)."""
    leases = state.host.leases
    row = await leases.elsewhere(hosted) if leases is not None else None
    if row is not None and row.lease_until is not None:
        raise Refused("OTHER_NODE", hosted.account, row.node or "?",
                      text=f"{hosted.account} runs on node {row.node}: {action} it there",
                      next_step=f"connect to node {row.node}")


async def hosted_of(state: Pircan, actor: str, name: str) -> Hosted:
    """The hosted agent ``name`` of ``actor``'s, or NOT_HOSTED (also when it is not ``actor``'s)."""
    host = state.host
    folded = state.api.casefold(name)
    hosted = host.agents.get(folded) if host is not None else None
    if hosted is None or not await owns(state, actor, folded):
        raise Refused("NOT_HOSTED", name, text=_NOT_HOSTED)
    return hosted


async def list_hosted(state: Pircan, actor: str) -> list[Status]:
    host = state.host
    if host is None:
        return []
    return [await _status(state, h) for h in host.agents.values() if await owns(state, actor, h.account)]


async def status(state: Pircan, actor: str, name: str) -> Status:
    return await _status(state, await hosted_of(state, actor, name))


async def start(state: Pircan, actor: str, name: str) -> Status:
    hosted = await hosted_of(state, actor, name)
    leases = state.host.leases
    row = await leases.elsewhere(hosted) if leases is not None else None
    if row is None or row.lease_until is None:  # (else it runs on another node: its state there)
        state.host.start_agent(hosted.account, f"started by {actor}")
    return await _status(state, hosted)


async def stop(state: Pircan, actor: str, name: str) -> Status:
    hosted = await hosted_of(state, actor, name)
    await _here(state, hosted, "stop")
    await state.host.stop_agent(hosted.account, f"stopped by {actor}")
    return await _status(state, hosted)


async def restart(state: Pircan, actor: str, name: str) -> Status:
    hosted = await hosted_of(state, actor, name)
    await _here(state, hosted, "restart")
    await state.host.restart_agent(hosted.account, f"restarted by {actor}")
    return await _status(state, hosted)


async def logs(state: Pircan, actor: str, name: str, *, lines: int = 100, grep: str | None = None,
               cursor: int | None = None, follow_ms: int = 0) -> Window:
    """The last ``lines`` lines (matching ``grep``), or with ``cursor`` what was written after it,
    waiting up to ``follow_ms`` for output past it (a follow resumes at the returned cursor)."""
    hosted = await hosted_of(state, actor, name)
    if not 1 <= lines <= LOG_LINES_MAX:
        raise Refused("INVALID_PARAMS", str(lines), text=f"lines is 1 to {LOG_LINES_MAX}")
    if grep is not None:
        try:
            re.compile(grep)
        except re.error as exc:
            raise Refused("INVALID_PARAMS", grep, text=f"grep is not a regular expression: {exc}") from None
    directory = state.host.log_dir
    if cursor is None:
        return tail(directory, hosted.account, lines, grep)
    if cursor < 0:
        raise Refused("INVALID_PARAMS", str(cursor), text="A cursor is a byte offset a logs call returned")
    deadline = asyncio.get_running_loop().time() + min(max(follow_ms, 0), FOLLOW_MAX_MS) / 1000
    while hosted.log.end <= cursor and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.1)  # output is a file: polled, as a follow of a file is
    window = read_window(directory, hosted.account, cursor, LOG_BYTES_MAX)
    if grep is not None:
        pattern = re.compile(grep)
        kept = [line for line in window.data.splitlines(keepends=True)
                if pattern.search(line.decode("utf-8", "replace"))]
        window = Window(b"".join(kept), window.start, window.cursor)
    return window


async def stdin(state: Pircan, actor: str, name: str, line: str) -> int:
    """Write ``line`` and a newline to the process's standard input; the bytes written."""
    hosted = await hosted_of(state, actor, name)
    await _here(state, hosted, "write to")
    if len(line) > STDIN_MAX or "\n" in line or "\r" in line:
        raise Refused("INVALID_PARAMS", name, text=f"One line of at most {STDIN_MAX} characters")
    if not await state.host.write_stdin(hosted.account, line):
        raise Refused("NOT_RUNNING", name, text=f"{hosted.account} has no running process ({hosted.state})",
                      next_step=f"start it first (HOST START {hosted.account})")
    state.host.audit(hosted.account, "host.stdin", f"{len(line) + 1} bytes by {actor}", actor)
    return len(line.encode("utf-8")) + 1


async def send_signal(state: Pircan, actor: str, name: str, signal_name: str) -> str:
    hosted = await hosted_of(state, actor, name)
    sig = signal_name.upper().removeprefix("SIG")
    if sig not in SIGNALS:
        raise Refused("INVALID_PARAMS", signal_name, text="Signals are TERM, INT, HUP and KILL")
    await _here(state, hosted, "signal")
    if not state.host.send_signal(hosted.account, sig):
        raise Refused("NOT_RUNNING", name, text=f"{hosted.account} has no running process ({hosted.state})")
    state.host.audit(hosted.account, "host.signal", f"SIG{sig} by {actor}", actor)
    return sig
