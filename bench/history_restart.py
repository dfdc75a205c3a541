"""How long pircd takes to start on a database holding many history lines.

    python -m bench.history_restart [--lines 1000000] [--channels 100]

Fills a fresh database with LINES channel messages (written directly, through
the history store's own insert function, in large transactions), then starts
``pircd serve`` on it three times and reports the median time from process
start to the "ready" log line, and the time of a CHATHISTORY LATEST query for
100 lines over the socket. The database is removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.servers import free_port


def fill(db: Path, lines: int, channels: int) -> None:
    """LINES channel PRIVMSGs spread over CHANNELS channels, through the history store's insert."""
    from ircd.proto.msgid import IdGenerator, id_time_ms
    from ircd.proto.timestamps import format_ms
    from ircd.store import history as rows
    from ircd.store.db import connect_sync, migrate
    from ircd.store.schema import CORE_MIGRATIONS, CORE_TRACK

    conn = connect_sync(str(db), "off")
    migrate(conn, CORE_TRACK, CORE_MIGRATIONS)
    ids = IdGenerator()
    text = "a stored line of about one hundred bytes, " * 2
    batch = 50_000
    for start in range(0, lines, batch):
        chunk = []
        for n in range(start, min(lines, start + batch)):
            ident = ids.next_int()
            channel = f"#c{n % channels}"
            chunk.append((ident, channel, format_ms(id_time_ms(ident)), "PRIVMSG", f"u{n % 50}!u@127.0.0.1",
                          None, channel, text, None, None))
        conn.execute("BEGIN")
        rows.insert(conn, chunk)
        conn.execute("COMMIT")
    conn.close()


_running: subprocess.Popen | None = None


def start_once(directory: Path, port: int, keep: bool = False) -> float:
    """Start pircd on the filled database; seconds to its "ready" line (``keep``: leave it running)."""
    global _running
    config = directory / "pircd.toml"
    config.write_text(
        f'[server]\nname = "bench.pircd.local"\nlisten = ["127.0.0.1:{port}"]\ndb = "{directory / "pircd.db"}"\n'
        '[pircan]\nguests_may_join = true\n[flood]\nenabled = false\n'
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ircd", "serve", "--config", str(config)],
        stderr=subprocess.PIPE, text=True, cwd=directory,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if " ready" in line:
                if keep:
                    _running = proc
                return time.perf_counter() - t0
        raise RuntimeError("pircd exited before it was ready")
    finally:
        if not keep or _running is not proc:
            proc.terminate()
            proc.wait(30)


async def _until(reader: asyncio.StreamReader, needle: bytes) -> None:
    while True:
        line = await asyncio.wait_for(reader.readline(), 30)
        if not line:
            raise ConnectionError("server closed the connection")
        if needle in line:
            return


async def latest_query(port: int) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"CAP REQ :draft/chathistory batch server-time message-tags\r\nNICK reader\r\nUSER r 0 * :r\r\n"
                 b"CAP END\r\nJOIN #c0\r\n")
    await _until(reader, b" 366 ")
    t0 = time.perf_counter()
    writer.write(b"CHATHISTORY LATEST #c0 * 100\r\n")
    await _until(reader, b" BATCH -")
    elapsed = time.perf_counter() - t0
    writer.close()
    return elapsed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=1_000_000)
    p.add_argument("--channels", type=int, default=100)
    args = p.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="bench-history-"))
    try:
        t0 = time.perf_counter()
        fill(directory / "pircd.db", args.lines, args.channels)
        size = (directory / "pircd.db").stat().st_size
        print(f"filled {args.lines:,} lines in {time.perf_counter() - t0:.1f} s ({size / 2**20:.0f} MiB)", flush=True)
        starts = [start_once(directory, free_port()) for _ in range(3)]
        print(f"start to ready: median {statistics.median(starts):.2f} s (runs: {', '.join(f'{s:.2f}' for s in starts)})")
        port = free_port()
        start_once(directory, port, keep=True)
        proc = _running
        assert proc is not None
        try:
            print(f"CHATHISTORY LATEST 100 lines: {1000 * asyncio.run(latest_query(port)):.1f} ms", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
