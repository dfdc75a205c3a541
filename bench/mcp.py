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
server's. ``drive`` is that load generator, whatever the server: ``bench/agentmail.py`` gives it
MCP Agent Mail's tools instead of pircd's, for the ``mcp-mail`` scenario that runs both.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, Protocol

from bench.loadgen import BenchError, Target, _p50_p99_ms, _usage, create_accounts, server_database

__all__ = ["BODY", "Agent", "Mailbox", "Refused", "create_tokens", "drive", "mcp_send", "pairs", "structured"]

TOKEN_NAME = "bench"
OWNER = "mcpowner"
BODY = "benchmark message {} of a durable direct message over MCP"


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


class Refused(BenchError):
    """A tool call answered with an error: counted during the measured sends, fatal in set-up."""


def structured(result: Any, what: str) -> dict[str, Any]:
    if result.is_error:
        text = result.content[0].text if result.content else result.structured_content
        raise Refused(f"{what} refused: {text}")
    return result.structured_content or {}


def _cause(exc: BaseException) -> str:
    """The first error inside the SDK's exception groups (anyio task groups wrap what failed)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class Agent:
    """One MCP client: its own HTTP connection pool and MCP session, in one task (the SDK's
    anyio task groups must be left in the task that entered them). ``name`` and ``peer`` are
    the load generator's labels; a mailbox keeps what its server gave the agent in ``state``."""

    def __init__(self, index: int, name: str, peer: str, headers: dict[str, str] | None = None) -> None:
        self.index = index
        self.name = name
        self.peer = peer
        self.headers = headers or {}
        self.state: dict[str, Any] = {}
        self.sent = 0
        self.arrived = 0
        self.refused: list[str] = []  # the server's answers to the sends it refused
        self.latencies: list[float] = []


class Mailbox(Protocol):
    """What differs between two MCP servers in the scenario: how a pair of agents gets ready to
    write to each other, the send call, and how many of the peer's messages an inbox holds."""

    async def setup(self, agent: Agent, client: Any) -> None: ...

    async def send(self, agent: Agent, client: Any, i: int) -> None: ...

    async def arrived(self, agent: Agent, client: Any) -> int: ...


async def drive(
    target: Target, url: str, crew: list[Agent], mailbox: Mailbox, per_agent: int,
    *, timeout: float = 240.0, setup_limit: int = 25, call_timeout: float = 60.0,
) -> dict[str, Any]:
    """Every agent connects (``setup_limit`` at a time) and sets up; then, all at once, each makes
    ``per_agent`` send calls, one after the other, timed from the call to its result; then each
    counts what arrived in its inbox. Only the sends are measured. A send the server refuses (a tool
    error) is counted and the agent goes on; the figures are of the sends made. A call without an
    answer within ``call_timeout`` seconds ends the run."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    loop = asyncio.get_running_loop()
    ready = [loop.create_future() for _ in crew]
    done = [loop.create_future() for _ in crew]
    go = asyncio.Event()
    finish = asyncio.Event()
    setup_slots = asyncio.Semaphore(setup_limit)  # clients connecting at once (set-up only)

    async def run_agent(agent: Agent) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with setup_slots:
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(headers=agent.headers, timeout=call_timeout)
                    )
                    client = await stack.enter_async_context(
                        Client(streamable_http_client(url, http_client=http))
                    )
                await mailbox.setup(agent, client)
                ready[agent.index].set_result(None)
                await go.wait()
                for i in range(per_agent):
                    t0 = time.perf_counter()
                    try:
                        await mailbox.send(agent, client, i)
                    except Refused as exc:  # answered, but not sent: the next call follows
                        agent.refused.append(str(exc))
                        continue
                    agent.latencies.append(time.perf_counter() - t0)
                    agent.sent += 1
                done[agent.index].set_result(None)
                await finish.wait()  # every peer has sent: count what arrived
                agent.arrived = await mailbox.arrived(agent, client)
        except BaseException as exc:
            for fut in (ready[agent.index], done[agent.index]):
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else BenchError(repr(exc)))
            raise

    tasks = [asyncio.ensure_future(run_agent(a)) for a in crew]
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
    refused = [text for a in crew for text in a.refused]
    if not total:
        raise BenchError(f"every send was refused; the first: {refused[0]}")
    p50, p99 = _p50_p99_ms([x for a in crew for x in a.latencies])
    loadgen_cpu_s = after.loadgen_cpu_s - before.loadgen_cpu_s
    return {
        "sends": total,
        "lost": total - sum(a.arrived for a in crew),
        "refused": len(refused),
        **({"first_refusal": refused[0]} if refused else {}),
        "sends_per_s": total / usage["wall_s"],
        "p50_ms": p50,
        "p99_ms": p99,
        "cpu_us_per_send": 1e6 * usage["server_cpu_s"] / total,
        "sys_us_per_send": 1e6 * usage["server_sys_s"] / total,
        "loadgen_cpu_us_per_send": 1e6 * loadgen_cpu_s / total,
        **usage,
    }


def pairs(prefix: str, agents: int) -> list[tuple[str, str]]:
    """(name, peer) of ``agents`` agents in pairs: 0 and 1, 2 and 3, ..."""
    if agents < 2 or agents % 2:
        raise BenchError("the MCP scenarios need an even number of agents")
    names = [f"{prefix}{i}" for i in range(agents)]
    return [(n, names[i ^ 1]) for i, n in enumerate(names)]


class _Pircd:
    """pircd's tools: a ``message`` agreement per pair (``request_contact``, ``respond_to_contact``),
    ``send_direct_message``, and the unread count of ``get_inbox``."""

    def __init__(self, crew: list[Agent], timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self.requests: dict[str, asyncio.Future[str]] = {a.name: loop.create_future() for a in crew[0::2]}
        self.timeout = timeout

    async def setup(self, agent: Agent, client: Any) -> None:
        if agent.index % 2 == 0:  # the first of a pair asks, the second accepts
            for _ in range(100):  # the server reads new accounts from the database once a second
                result = await client.call_tool(
                    "request_contact",
                    {"agent": agent.peer, "scopes": ["message"], "days": 30, "purpose": "benchmark"},
                )
                code = ((result.structured_content or {}).get("error") or {}).get("code")
                if code != "NO_SUCH_ACCOUNT":
                    break
                await asyncio.sleep(0.1)
            asked = structured(result, f"{agent.name}: request_contact")
            self.requests[agent.name].set_result(asked["request"]["request_id"])
        else:
            request_id = await asyncio.wait_for(asyncio.shield(self.requests[agent.peer]), self.timeout)
            decided = structured(
                await client.call_tool("respond_to_contact", {"request_id": request_id, "decision": "accept"}),
                f"{agent.name}: respond_to_contact",
            )
            if decided.get("decision") != "accepted":
                raise BenchError(f"{agent.name}: respond_to_contact gave {decided!r}")

    async def send(self, agent: Agent, client: Any, i: int) -> None:
        result = await client.call_tool(
            "send_direct_message", {"recipient": agent.peer, "body": BODY.format(i)}
        )
        sent = structured(result, f"{agent.name}: send_direct_message")
        if not sent.get("created"):
            raise BenchError(f"{agent.name}: send_direct_message gave {sent!r}")

    async def arrived(self, agent: Agent, client: Any) -> int:
        result = await client.call_tool("get_inbox", {"limit": 1})
        inbox = structured(result, f"{agent.name}: get_inbox")
        return int(inbox["unread"])


async def mcp_send(
    target: Target, agents: int, per_agent: int, *, timeout: float = 240.0, setup_limit: int = 25,
    call_timeout: float = 60.0,
) -> dict[str, Any]:
    """``agents`` MCP clients in pairs under ``message`` agreements; each sends ``per_agent``
    ``send_direct_message`` calls to its peer, one after the other, all at once."""
    crew_names = pairs("mcp", agents)
    if per_agent > 115:  # AGREEMENT_BUDGET: 120 messages an hour per sender and agreement
        raise BenchError("an agreement allows 120 messages an hour per sender: at most 115 calls per agent")
    if target.http_port is None:
        raise BenchError("the server has no HTTP listener ([http] enabled = false?)")
    names = [name for name, _ in crew_names]
    create_accounts(target, [OWNER])
    create_accounts(target, names, kind="agent", owner=OWNER)
    tokens = create_tokens(target, names)
    crew = [
        Agent(i, name, peer, {"Authorization": f"Bearer {tokens[name]}"})
        for i, (name, peer) in enumerate(crew_names)
    ]
    url = f"http://{target.host}:{target.http_port}/mcp"
    mailbox = _Pircd(crew, timeout)
    return await drive(
        target, url, crew, mailbox, per_agent,
        timeout=timeout, setup_limit=setup_limit, call_timeout=call_timeout,
    )
