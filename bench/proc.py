"""What the benchmark reads about a process from ``/proc``: its CPU time (with that of the
processes it started), its RSS, the ports it listens on; and a free loopback port."""

from __future__ import annotations

import os
import socket
from pathlib import Path

__all__ = ["free_port", "listening_ports", "proc_sample"]

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_ticks(pid: int) -> tuple[int, int, int, int]:
    """utime, stime, cutime, cstime of a process in clock ticks (fields 14-17 of proc(5));
    cutime and cstime are the CPU of its children that ended and were waited for."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[11]), int(fields[12]), int(fields[13]), int(fields[14])


def _children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:  # ended meanwhile
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            continue
    return found


def _tree_ticks(pid: int) -> tuple[int, int]:
    """(user, system) ticks of a process, of its children that ended, and of its live
    descendants with theirs. A child that ends between two samples moves from the live
    descendants into its parent's cutime/cstime, so the difference of two samples counts it once;
    the children are listed before the parent's own figures are read, so that one reaped in
    between is in those."""
    kids = _children(pid)
    try:
        utime, stime, cutime, cstime = _stat_ticks(pid)
    except OSError:  # a descendant that ended meanwhile: its parent's cutime has it
        return 0, 0
    user, system = utime + cutime, stime + cstime
    for child in kids:
        u, s = _tree_ticks(child)
        user, system = user + u, system + s
    return user, system


def proc_sample(pid: int, *, children: bool = False) -> tuple[float, float, int]:
    """(utime + stime and stime alone in seconds, VmRSS in KiB) of a process, all its threads
    included. stime is the kernel's work on the process's behalf (its system calls). With
    ``children`` the CPU of the processes it started is added (a server that runs ``git`` for
    each call, as MCP Agent Mail does); the RSS stays the process's own."""
    if children:
        user, system = _tree_ticks(pid)
    else:
        user, system = _stat_ticks(pid)[:2]
    stime = system / _CLK_TCK
    cpu = user / _CLK_TCK + stime
    rss = 0
    with open(f"/proc/{pid}/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                rss = int(line.split()[1])
                break
    return cpu, stime, rss


def listening_ports(pid: int) -> set[int]:
    """The TCP ports a process listens on: its socket inodes (``/proc/<pid>/fd``) found among the
    listening sockets of ``/proc/net/tcp`` and ``tcp6``. How the runner finds a port the server
    chose itself (pircd's HTTP listener binds port 0)."""
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            link = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:  # 0A: TCP_LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
