"""The ``mcp-mail`` scenario against MCP Agent Mail, with the load generator of ``bench/mcp.py``.

MCP Agent Mail (``Dicklesworthstone/mcp_agent_mail``) is the MCP mailbox many coding agents use: a
FastMCP server over SQLite that also writes every message into a git archive. Its tools take the
agent's name and its registration token as arguments; HTTP clients on localhost need no bearer
token by default. Set-up (not measured): one agent calls ``ensure_project``; every agent calls
``register_agent`` (the server picks its name and hands back its token); the first of each pair
calls ``request_contact`` and the second ``respond_contact`` to accept: the counterpart of pircd's
``message`` agreement. Measured: each agent calls ``send_message`` to its peer ``per_agent`` times,
one call after the other, all agents at once. Afterwards ``fetch_inbox`` must list every message
the peer sent (the contact request's note, also in the inbox, is not counted).
"""

from __future__ import annotations

import asyncio
from typing import Any

from bench.loadgen import BenchError, Target
from bench.mcp import BODY, Agent, drive, pairs, structured

__all__ = ["PROJECT", "agentmail_send"]

PROJECT = "/bench/mcp-mail"  # a project's key is the absolute path of the agents' working directory
SUBJECT = "benchmark message {}"


class _AgentMail:
    def __init__(self, crew: list[Agent], per_agent: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        self.project: asyncio.Future[None] = loop.create_future()
        self.names: dict[str, asyncio.Future[str]] = {a.name: loop.create_future() for a in crew}
        self.asked: dict[str, asyncio.Future[None]] = {a.name: loop.create_future() for a in crew[0::2]}
        self.per_agent = per_agent
        self.timeout = timeout

    async def _wait(self, fut: asyncio.Future[Any]) -> Any:
        return await asyncio.wait_for(asyncio.shield(fut), self.timeout)

    async def _call(self, agent: Agent, client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return structured(await client.call_tool(tool, args), f"{agent.name}: {tool}")

    async def setup(self, agent: Agent, client: Any) -> None:
        if agent.index == 0:
            await self._call(agent, client, "ensure_project", {"human_key": PROJECT})
            self.project.set_result(None)
        await self._wait(self.project)
        me = await self._call(
            agent,
            client,
            "register_agent",
            {
                "project_key": PROJECT,
                "program": "pircd-bench",
                "model": "none",
                "task_description": "benchmark",
            },
        )
        agent.state.update(mail_name=me["name"], token=me["registration_token"])
        self.names[agent.name].set_result(me["name"])
        agent.state["peer_name"] = await self._wait(self.names[agent.peer])
        if agent.index % 2 == 0:  # the first of a pair asks, the second accepts
            await self._call(
                agent,
                client,
                "request_contact",
                {
                    "project_key": PROJECT,
                    "from_agent": me["name"],
                    "to_agent": agent.state["peer_name"],
                    "reason": "benchmark",
                    "registration_token": me["registration_token"],
                },
            )
            self.asked[agent.name].set_result(None)
        else:
            await self._wait(self.asked[agent.peer])
            answer = await self._call(
                agent,
                client,
                "respond_contact",
                {
                    "project_key": PROJECT,
                    "to_agent": me["name"],
                    "from_agent": agent.state["peer_name"],
                    "accept": True,
                    "registration_token": me["registration_token"],
                },
            )
            if not answer.get("approved"):
                raise BenchError(f"{agent.name}: respond_contact gave {answer!r}")

    async def send(self, agent: Agent, client: Any, i: int) -> None:
        sent = await self._call(
            agent,
            client,
            "send_message",
            {
                "project_key": PROJECT,
                "sender_name": agent.state["mail_name"],
                "to": [agent.state["peer_name"]],
                "subject": SUBJECT.format(i),
                "body_md": BODY.format(i),
                "sender_token": agent.state["token"],
            },
        )
        if sent.get("count") != 1:
            raise BenchError(f"{agent.name}: send_message gave {sent!r}")

    async def arrived(self, agent: Agent, client: Any) -> int:
        inbox = await self._call(
            agent,
            client,
            "fetch_inbox",
            {
                "project_key": PROJECT,
                "agent_name": agent.state["mail_name"],
                "limit": min(1000, self.per_agent + 10),
                "registration_token": agent.state["token"],
            },
        )
        subjects = {SUBJECT.format(i) for i in range(self.per_agent)}
        return sum(
            1
            for m in inbox.get("result", [])
            if m.get("from") == agent.state["peer_name"] and m.get("subject") in subjects
        )


async def agentmail_send(
    target: Target,
    agents: int,
    per_agent: int,
    *,
    timeout: float = 600.0,
    setup_limit: int = 25,
    call_timeout: float = 60.0,
) -> dict[str, Any]:
    """``agents`` MCP clients of MCP Agent Mail in pairs, contact approved; each makes
    ``per_agent`` ``send_message`` calls to its peer, one after the other, all at once."""
    if per_agent > 990:  # fetch_inbox lists at most 1,000
        raise BenchError("fetch_inbox lists at most 1,000 messages: at most 990 calls per agent")
    crew = [Agent(i, name, peer) for i, (name, peer) in enumerate(pairs("mail", agents))]
    url = f"http://{target.host}:{target.port}/mcp/"
    mailbox = _AgentMail(crew, per_agent, timeout)
    return await drive(
        target, url, crew, mailbox, per_agent,
        timeout=timeout, setup_limit=setup_limit, call_timeout=call_timeout,
    )
