"""The HTTP-load scenario: what one MCP client flooding at its call limit costs a bystander on IRC.

    python -m bench.run --servers pircd --scenario http-load

HTTP handlers run on the same event loop as IRC, so every MCP call delays IRC lines by the time the
loop spends on it. The call limits (``pircan.http_calls_burst`` and ``http_calls_per_second`` per
account) bound that time; this scenario measures what a client at that bound costs a bystander.

Set-up (not measured): one agent account and a bearer token written into the server's database as
``pircd agent add`` and ``pircd token add`` write them; one registered IRC client, the bystander,
which sends ``PING`` and waits for its ``PONG`` again and again (5 ms apart), recording each round
trip; one ``list_agents`` call, so that the server has loaded the MCP SDK (which its first request to
/mcp does) before anything is measured. Two phases of SECONDS each; in both, a flooder calls the MCP tool ``list_agents`` (the
sessionless 2026 protocol that the MCP SDK's client speaks) on 32 kept-alive connections (half of
what one address may open) during every other second, and is silent in between:

1. **at the limit**: paced at exactly the account's ``http_calls_per_second`` (the server's
   default), which the limit lets through;
2. **over the limit**: unpaced, each connection sending its next call as soon as the last one was
   answered, ignoring ``Retry-After``; past the burst the server refuses the excess with ``429``.

The bystander's round trips during the flooder's seconds are compared with those during its silent
seconds of the same phase (leaving out the first 100 ms of each, while answers may still go out):
interleaving them a second at a time makes the machine's other load, which moves a p99 on a shared
machine by several times over minutes, fall on both sides alike. The flooder is this module in a
process of its own (``python -m bench.http_load flood ...``, raw HTTP/1.1 on asyncio streams), so
that neither its CPU nor its event loop is the bystander's. Reported per phase: the bystander's
p50, p99 and slowest round trip with and without the flood and the ratio of the p99s (the goal: at
most 3 at the limit), calls answered and refused per second of flood, and the server's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bench.loadgen import BenchError, IRCClient, Target, _p50_p99_ms, _usage, create_accounts, register_many
from bench.mcp import create_tokens

__all__ = ["flood", "http_load"]

ROOT = Path(__file__).resolve().parent.parent
FLOODER = "flood0"
OWNER = "floodowner"
SLICE = 1.0  # seconds of flood, then as many of silence
_SETTLE = 0.1  # the start of a silent second left out: answers to the last calls may still be going out
_PAUSE = 0.005  # between two bystander round trips


async def _round_trips(client: IRCClient, stop: asyncio.Event, rtts: list[tuple[float, float]]) -> None:
    """(when it was sent, on the system-wide monotonic clock; round trip) until ``stop``."""
    while not stop.is_set():
        sent, t0 = time.monotonic(), time.perf_counter()
        await client.ping(30)
        rtts.append((sent, time.perf_counter() - t0))
        await asyncio.sleep(_PAUSE)


def _split(rtts: list[tuple[float, float]], start: float) -> tuple[list[float], list[float]]:
    """Round trips sent during the flooder's seconds, and during its silent ones."""
    on: list[float] = []
    off: list[float] = []
    for sent, rtt in rtts:
        if sent < start:
            continue
        number, into = divmod(sent - start, SLICE)
        if int(number) % 2 == 0:
            on.append(rtt)
        elif into >= _SETTLE:
            off.append(rtt)
    return on, off


async def _phase(target: Target, bystander: IRCClient, flooder: list[str]) -> dict[str, Any]:
    """The bystander's round trips while the flooder (its argv) runs, split by the flooder's seconds."""
    rtts: list[tuple[float, float]] = []
    stop = asyncio.Event()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.http_load", *flooder, cwd=str(ROOT), stdout=asyncio.subprocess.PIPE
    )
    before = target.begin()
    pings = asyncio.ensure_future(_round_trips(bystander, stop, rtts))
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 600)
        if proc.returncode != 0:
            raise BenchError(f"the flooder failed (exit status {proc.returncode})")
    finally:
        after = target.end()
        stop.set()
        await pings
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    report = json.loads(out)
    on, off = _split(rtts, report["start"])
    if not on or not off:
        raise BenchError("the bystander measured nothing during the flood or between its seconds")
    usage = _usage(before, after)
    flooding = report["seconds"] / 2
    counts = report["statuses"]
    p50, p99 = _p50_p99_ms(on)
    quiet_p50, quiet_p99 = _p50_p99_ms(off)
    return {"p50": p50, "p99": p99, "max": 1000 * max(on), "quiet_p50": quiet_p50, "quiet_p99": quiet_p99,
            "quiet_max": 1000 * max(off), "ratio": p99 / quiet_p99, "pings": len(on), "quiet_pings": len(off),
            "ok_per_s": counts.get("200", 0) / flooding, "refused_per_s": counts.get("429", 0) / flooding,
            "other": sum(v for k, v in counts.items() if k not in ("200", "429")),
            "cpu": usage["server_cpu_s"] / usage["wall_s"]}


async def http_load(
    target: Target, seconds: float, workers: int = 32, rate: float | None = None
) -> dict[str, Any]:
    """The two phases; ``rate``: the paced flood's calls a second (default: the server's default limit)."""
    from ext.pircan.config import PircanConfig

    if target.http_port is None:
        raise BenchError("the server has no HTTP listener ([http] enabled = false?)")
    if rate is None:
        rate = PircanConfig().http_calls_per_second  # the server runs with the defaults
    create_accounts(target, [OWNER])
    create_accounts(target, [FLOODER], kind="agent", owner=OWNER)
    token = create_tokens(target, [FLOODER])[FLOODER]
    url = f"http://{target.host}:{target.http_port}/mcp"
    bystander = (await register_many(target, 1, "bystander"))[0]
    try:
        await asyncio.sleep(1.5)  # the server reads new accounts from the database once a second
        await _warm_up(url, token)
        argv = ["flood", url, token, "--seconds", str(seconds), "--workers", str(workers)]
        phases = {"limit": await _phase(target, bystander, [*argv, "--rate", str(rate)]),
                  "over": await _phase(target, bystander, argv)}
    finally:
        bystander.abort()
    if any(phase["other"] for phase in phases.values()):
        raise BenchError("the flooder got answers other than 200 and 429")
    result: dict[str, Any] = {"rate_limit": rate}
    for name, phase in phases.items():
        result.update({f"{name}_{key}": value for key, value in phase.items() if key != "other"})
    return result


# the flooder ------------------------------------------------------------------------------------------


def _request(url: str, token: str) -> bytes:
    parts = urlsplit(url)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "list_agents", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    head = (f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: list_agents\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


async def _response(reader: asyncio.StreamReader) -> int:
    """Read one HTTP/1.1 response (Content-Length or chunked); its status."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    if fields.get("transfer-encoding") == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    else:
        await reader.readexactly(int(fields.get("content-length", "0")))
    return status


async def _warm_up(url: str, token: str) -> None:
    """One call before the phases: the first request to /mcp loads the MCP SDK (ext/pircan/lazy.py),
    which the phases would otherwise measure in their first second."""
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        writer.write(_request(url, token))
        status = await asyncio.wait_for(_response(reader), 60)
    finally:
        writer.close()
    if status != 200:
        raise BenchError(f"the warm-up call answered {status}")


def _on_time(start: float, elapsed: float) -> float:
    """The wall time (monotonic) at which ``elapsed`` seconds of flooding have gone by."""
    number, into = divmod(elapsed, SLICE)
    return start + 2 * SLICE * number + into


async def flood(url: str, token: str, seconds: float, workers: int, rate: float | None) -> dict[str, Any]:
    """Call list_agents on ``workers`` connections during every other second of ``seconds``: paced
    at ``rate`` calls a second in all, or (None) each connection sending its next call as soon as
    the last one was answered. The statuses counted, and when the first second began."""
    parts = urlsplit(url)
    request = _request(url, token)
    statuses: dict[str, int] = {}
    connections = [await asyncio.open_connection(parts.hostname, parts.port) for _ in range(workers)]
    start = time.monotonic()
    deadline = start + seconds
    slot = 0

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal slot
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                if rate is not None:
                    at = _on_time(start, slot / rate)
                    slot += 1
                else:
                    now = time.monotonic()
                    number, into = divmod(now - start, SLICE)
                    at = now if int(number) % 2 == 0 else now + SLICE - into
                if at >= deadline:
                    return
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                writer.write(request)
                status = str(await _response(reader))
                statuses[status] = statuses.get(status, 0) + 1
        finally:
            writer.close()

    await asyncio.gather(*(worker(r, w) for r, w in connections))
    return {"start": start, "seconds": seconds, "statuses": statuses}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.http_load", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    flooder = sub.add_parser("flood", help="call list_agents as the scenario's flooder; print what it got")
    flooder.add_argument("url")
    flooder.add_argument("token")
    flooder.add_argument("--seconds", type=float, required=True)
    flooder.add_argument("--workers", type=int, default=32)
    flooder.add_argument("--rate", type=float, default=None, help="calls a second in all (default: unpaced)")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(flood(args.url, args.token, args.seconds, args.workers, args.rate))))


if __name__ == "__main__":
    main()
