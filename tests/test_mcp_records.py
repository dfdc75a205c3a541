"""get_audit_trail and create_agent: IRC's AUDIT and AGENTS CREATE over MCP, the same service
functions, the same entries and the same refusals (the official SDK client over real HTTP)."""

from __future__ import annotations

import asyncio

from tests.live import IRCClient
from tests.test_mcp import PASSWORD, call, irc, login, mcp, refused, srv, token_for  # noqa: F401 - fixtures


def test_the_audit_trail_over_mcp_is_irc_s_audit(srv, clients):  # noqa: F811
    alice_irc = login(srv, clients, "alice")
    for name in ("bob", "carol"):
        assert irc(alice_irc, f"CONTACT REQUEST {name} message 3 :talk")[0][1] == "REQUESTED"
    # AUDIT <you> ENTRY <id> <time> <actor> <action> <subject> :<detail>, then AUDIT <you> END <account>
    lines = irc(alice_irc, "AUDIT")
    assert lines[-1] == ["alice", "END", "alice"]
    entries = [{"id": p[2], "at": p[3], "actor": p[4], "action": p[5], "subject": p[6], "detail": p[7].strip()}
               for p in lines[:-1]]
    assert [(e["action"], e["subject"]) for e in entries] == [("contact.request", "bob"),
                                                              ("contact.request", "carol")]

    async def scenario() -> None:
        async with mcp(srv, token_for(srv, "alice")) as alice:
            trail = await call(alice, "get_audit_trail")
            assert trail == {"account": "alice", "entries": entries, "more": None}
            newest = await call(alice, "get_audit_trail", limit=1)
            assert newest == {"account": "alice", "entries": entries[1:], "more": entries[1]["id"]}
            older = await call(alice, "get_audit_trail", limit=1, before=newest["more"])
            assert older == {"account": "alice", "entries": entries[:1], "more": entries[0]["id"]}
            assert await refused(alice, "get_audit_trail", account="bob") == ("NOT_ALLOWED", ["bob"])
            assert await refused(alice, "get_audit_trail", before="12") == ("INVALID_PARAMS", ["12"])
        async with mcp(srv, token_for(srv, "olive")) as olive:  # the owner reads its agent's trail
            assert (await call(olive, "get_audit_trail", account="alice"))["entries"] == entries

    asyncio.run(scenario())


def test_a_person_creates_an_agent_over_mcp_as_with_agents_create(srv, clients):  # noqa: F811
    async def scenario() -> str:
        async with mcp(srv, token_for(srv, "olive")) as olive:
            made = await call(olive, "create_agent", name="dora")
            assert sorted(made) == ["agent", "password"] and made["agent"] == "dora"
            assert await refused(olive, "create_agent", name="dora") == ("ACCOUNT_EXISTS", ["dora"])
            assert await refused(olive, "create_agent", name="no way") == ("INVALID_NAME", ["no way"])
        async with mcp(srv, token_for(srv, "alice")) as alice:  # an agent owns no agents
            assert await refused(alice, "create_agent", name="eve") == ("NOT_ALLOWED", ["eve"])
        return made["password"]

    password = asyncio.run(scenario())
    dora = IRCClient(srv.port)
    clients.append(dora)
    dora.login("dora", password)  # the password shown once logs the new agent in
    olive = login(srv, clients, "olive")
    assert ["olive", "AGENT", "dora"] in [p[:3] for p in irc(olive, "AGENTS")]
    assert irc(olive, "AUDIT")[-2][5:7] == ["agent.create", "dora"]
