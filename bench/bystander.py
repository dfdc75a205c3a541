"""Bystanders for the reconnect-storm scenario, in a process of their own.

    python -m bench.bystander HOST PORT CLIENTS [--seconds LIMIT]

Registers CLIENTS clients, prints ``ready``, then each client sends ``PING``,
waits for the ``PONG`` and sends the next after a short pause, until a line
``stop`` arrives on stdin (or LIMIT seconds pass). It then prints one JSON
line: the round trips as ``[[sent, seconds], ...]``, ``sent`` on the system's
monotonic clock (``time.monotonic()``, the same in every process), and the
errors.

A process of its own so that the storm's ten thousand connections, which keep
the load generator's event loop busy, do not delay the bystanders' own reads:
what they measure is the server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from bench import loadgen

PAUSE = 0.005  # seconds between a client's PONG and its next PING


async def _ping_loop(client: loadgen.IRCClient, stop: asyncio.Event, samples: list[tuple[float, float]],
                     errors: list[str]) -> None:
    n = 0
    while not stop.is_set():
        n += 1
        token = f"by{n}"
        fut = client.expect("PONG", needle=token)
        sent = time.monotonic()
        client.send(f"PING {token}")
        try:
            await asyncio.wait_for(fut, 60)
        except (TimeoutError, ConnectionError) as exc:
            errors.append(f"{client.nick}: {exc!r}")
            return
        samples.append((sent, time.monotonic() - sent))
        await asyncio.sleep(PAUSE)


async def _stdin_says_stop(stop: asyncio.Event, limit: float) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        await asyncio.wait_for(reader.readline(), limit)  # "stop", or EOF when the parent is gone
    except TimeoutError:
        pass
    stop.set()


async def run(host: str, port: int, count: int, limit: float) -> dict[str, object]:
    target = loadgen.Target("bystanders", host, port, lambda: (0.0, 0.0, 0))
    clients = await loadgen.register_many(target, count, "by")
    samples: list[tuple[float, float]] = []
    errors: list[str] = []
    stop = asyncio.Event()
    try:
        print("ready", flush=True)
        await asyncio.gather(_stdin_says_stop(stop, limit), *(_ping_loop(c, stop, samples, errors) for c in clients))
    finally:
        for c in clients:
            c.abort()
    return {"samples": samples, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.bystander", description=__doc__.split("\n\n")[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("clients", type=int)
    p.add_argument("--seconds", type=float, default=900.0, help="stop by itself after this long")
    args = p.parse_args(argv)
    loop = loadgen.new_event_loop()
    try:
        result = loop.run_until_complete(run(args.host, args.port, args.clients, args.seconds))
    finally:
        loop.close()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
