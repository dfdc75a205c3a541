"""The MCP scenario: agents send direct messages over MCP with the official MCP SDK's own client.

Set-up (not measured): agent accounts and one bearer token each are written into the server's
database as ``pircd agent add`` and ``pircd token add`` write them; each agent is an MCP client with
its own token (its own HTTP connection and MCP session); the agents pair up and make a ``message``
agreement through the MCP tools (``request_contact``, ``respond_to_contact``). Measured: every agent
calls ``send_direct_message`` to its peer ``per_agent`` times, one call after the other, all agents
at once; a call's latency is the time until the SDK hands back its result. Afterwards each agent's
unread count (``get_inbox``) must add up to the messages sent to it.

The load generator runs the SDK's client (httpx, anyio, pydantic) in this one process on the same
machine as the server, so its CPU use (``loadgen_cpu_us_per_send``) is reported next to the
server's.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from bench.loadgen import BenchError, Target, _p50_p99_ms, _usage, create_accounts, server_database

__all__ = ["create_tokens", "mcp_send"]

TOKEN_NAME = "bench"
OWNER = "mcpowner"


def create_tokens(target: Target, names: list[str]) -> dict[str, str]:
    """One bearer token per account, written as ``pircd token add NAME --name bench`` writes it
    (set-up, not measured); {name: token text}."""
    from ircd.store import tokens as rows
    from ircd.store.db import connect_sync, migrate, transaction

    conn = connect_sync(server_database(target))
    made: dict[str, str] = {}
    try:
        migrate(conn, rows.TRACK, rows.MIGRATIONS)
        now = int(time.time() * 1000)
        with transaction(conn):
            for name in names:
                ident, secret, text = rows.make_token()
                rows.insert(conn, ident, name.lower(), TOKEN_NAME, secret, now, "operator")
                made[name] = text
    finally:
        conn.close()
    return made


def _structured(result: Any, what: str) -> dict[str, Any]:
    if result.is_error:
        text = result.content[0].text if result.content else result.structured_content
        raise BenchError(f"{what} refused: {text}")
    return result.structured_content or {}


def _cause(exc: BaseException) -> str:
    """The first error inside the SDK's exception groups (anyio task groups wrap what failed)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class _Agent:
    """One MCP client: its own token, HTTP connection pool and MCP session, in one task (the SDK's
    anyio task groups must be left in the task that entered them)."""

    def __init__(self, name: str, peer: str, token: str) -> None:
        self.name = name
        self.peer = peer
        self.token = token
        self.sent = 0
        self.unread = 0
        self.latencies: list[float] = []


async def mcp_send(
    target: Target, agents: int, per_agent: int, *, timeout: float = 240.0, setup_limit: int = 25
) -> dict[str, Any]:
    """``agents`` MCP clients in pairs under ``message`` agreements; each sends ``per_agent``
    ``send_direct_message`` calls to its peer, one after the other, all at once."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    if agents < 2 or agents % 2:
        raise BenchError("the MCP scenario needs an even number of agents")
    if per_agent > 115:  # AGREEMENT_BUDGET: 120 messages an hour per sender and agreement
        raise BenchError("an agreement allows 120 messages an hour per sender: at most 115 calls per agent")
    if target.http_port is None:
        raise BenchError("the server has no HTTP listener ([http] enabled = false?)")
    url = f"http://{target.host}:{target.http_port}/mcp"
    names = [f"mcp{i}" for i in range(agents)]
    create_accounts(target, [OWNER])
    create_accounts(target, names, kind="agent", owner=OWNER)
    tokens = create_tokens(target, names)
    crew = [_Agent(n, names[i ^ 1], tokens[n]) for i, n in enumerate(names)]

    loop = asyncio.get_running_loop()
    requests: dict[str, asyncio.Future[str]] = {a.name: loop.create_future() for a in crew[0::2]}
    ready = [loop.create_future() for _ in crew]
    done = [loop.create_future() for _ in crew]
    go = asyncio.Event()
    finish = asyncio.Event()
    setup_slots = asyncio.Semaphore(setup_limit)  # clients connecting at once (set-up only)
    body = "benchmark message {} of a durable direct message over MCP"

    async def agreement(agent: _Agent, client: Client, index: int) -> None:
        if index % 2 == 0:  # the first of a pair asks, the second accepts
            for _ in range(100):  # the server reads new accounts from the database once a second
                result = await client.call_tool(
                    "request_contact",
                    {"agent": agent.peer, "scopes": ["message"], "days": 30, "purpose": "benchmark"},
                )
                code = ((result.structured_content or {}).get("error") or {}).get("code")
                if code != "NO_SUCH_ACCOUNT":
                    break
                await asyncio.sleep(0.1)
            asked = _structured(result, f"{agent.name}: request_contact")
            requests[agent.name].set_result(asked["request"]["request_id"])
        else:
            request_id = await asyncio.wait_for(asyncio.shield(requests[agent.peer]), timeout)
            decided = _structured(
                await client.call_tool("respond_to_contact", {"request_id": request_id, "decision": "accept"}),
                f"{agent.name}: respond_to_contact",
            )
            if decided.get("decision") != "accepted":
                raise BenchError(f"{agent.name}: respond_to_contact gave {decided!r}")

    async def run_agent(index: int) -> None:
        agent = crew[index]
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with setup_slots:
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(headers={"Authorization": f"Bearer {agent.token}"}, timeout=60)
                    )
                    client = await stack.enter_async_context(Client(streamable_http_client(url, http_client=http)))
                await agreement(agent, client, index)
                ready[index].set_result(None)
                await go.wait()
                for i in range(per_agent):
                    t0 = time.perf_counter()
                    result = await client.call_tool(
                        "send_direct_message", {"recipient": agent.peer, "body": body.format(i)}
                    )
                    agent.latencies.append(time.perf_counter() - t0)
                    sent = _structured(result, f"{agent.name}: send_direct_message")
                    if not sent.get("created"):
                        raise BenchError(f"{agent.name}: send_direct_message gave {sent!r}")
                    agent.sent += 1
                done[index].set_result(None)
                await finish.wait()  # every peer has sent: count what arrived
                inbox = _structured(await client.call_tool("get_inbox", {"limit": 1}), f"{agent.name}: get_inbox")
                agent.unread = int(inbox["unread"])
        except BaseException as exc:
            for fut in (ready[index], done[index]):
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else BenchError(repr(exc)))
            raise

    tasks = [asyncio.ensure_future(run_agent(i)) for i in range(agents)]
    try:
        await asyncio.wait_for(asyncio.gather(*ready), timeout)
        before = target.begin()
        go.set()
        await asyncio.wait_for(asyncio.gather(*done), timeout)
        after = target.end()
        finish.set()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout)
    except Exception as exc:  # noqa: BLE001 - whatever the SDK's client raised ends this run only
        raise BenchError(_cause(exc)) from None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for fut in [*ready, *done]:
            if fut.done() and not fut.cancelled():
                fut.exception()  # reported above

    usage = _usage(before, after)
    total = sum(a.sent for a in crew)
    p50, p99 = _p50_p99_ms([x for a in crew for x in a.latencies])
    loadgen_cpu_s = after.loadgen_cpu_s - before.loadgen_cpu_s
    return {
        "sends": total,
        "lost": total - sum(a.unread for a in crew),
        "sends_per_s": total / usage["wall_s"],
        "p50_ms": p50,
        "p99_ms": p99,
        "cpu_us_per_send": 1e6 * usage["server_cpu_s"] / total,
        "sys_us_per_send": 1e6 * usage["server_sys_s"] / total,
        "loadgen_cpu_us_per_send": 1e6 * loadgen_cpu_s / total,
        **usage,
    }

