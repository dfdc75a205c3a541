"""The CHATHISTORY scenario: clients read a channel's stored history back while others do the same.

Set-up (not measured): a sender fills #hist with ``lines`` lines; the readers register with
``draft/chathistory`` and ``batch``, join, and one warm-up query makes the history writer commit
what it buffered. Measured: every reader asks ``CHATHISTORY LATEST #hist * 100`` ``queries``
times, one after the other, all readers at once; a query's latency is the time until the end of
its batch. Each query is a read of the store (SQLite's reading thread, or a PostgreSQL reader
connection), so this is the store's read path as a client sees it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.loadgen import (
    CHANNEL_PAGE,
    BenchError,
    IRCClient,
    Target,
    _close_all,
    _usage,
    connect,
    join,
    measured,
    register,
    register_many,
    source_address,
)

__all__ = ["chathistory"]

CHANNEL = "#hist"
PAGE = CHANNEL_PAGE
CAPS = "draft/chathistory batch server-time message-tags"


async def _reader(target: Target, i: int) -> IRCClient:
    client = await connect(target, f"hr{i}", source=source_address(i))
    client.send(f"CAP REQ :{CAPS}")
    client.send("CAP END")
    await register(client)
    await join(client, CHANNEL)
    return client


async def _query(client: IRCClient, timeout: float = 60.0) -> float:
    """One query; its latency in seconds."""
    end = client.expect("BATCH", needle="-")
    started = time.perf_counter()
    client.send(f"CHATHISTORY LATEST {CHANNEL} * {PAGE}")
    await asyncio.wait_for(end, timeout)
    return time.perf_counter() - started


async def chathistory(target: Target, lines: int, readers: int, queries: int) -> dict[str, Any]:
    [sender] = await register_many(target, 1, "hs", channel=CHANNEL)
    clients: list[IRCClient] = [sender]
    try:
        for n in range(lines):
            sender.send(f"PRIVMSG {CHANNEL} :history line {n} of the CHATHISTORY benchmark, about 100 bytes long..")
            if n % 200 == 199:
                await sender.drain()
        await sender.ping(60)
        readers_made = await asyncio.gather(*(_reader(target, i) for i in range(readers)))
        clients += readers_made
        await _query(readers_made[0])  # the buffered history is committed before the measured queries
        latencies: list[float] = []

        async def read(client: IRCClient) -> None:
            for _ in range(queries):
                latencies.append(await _query(client))

        before = target.begin()
        await asyncio.gather(*(read(c) for c in readers_made))
        after = target.end()
        if len(latencies) != readers * queries:
            raise BenchError(f"{len(latencies)} of {readers * queries} queries answered")
        return measured(_usage(before, after), latencies, "queries", "query")
    finally:
        _close_all(clients)
