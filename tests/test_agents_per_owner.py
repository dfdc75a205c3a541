"""A person owns at most ``accounts.agents_per_owner`` agents, whichever way they are created: IRC
``AGENTS CREATE``, the portal, and the command line (``pircd agent add``, ``pircd account add``).
The count is taken in the creation's own transaction, so concurrent creations cannot pass it."""

from __future__ import annotations

import asyncio

import pytest

from ircd.store import TooManyAgents
from tests.portal import add_person, make_server, sign_in
from tests.proc import cli
from tests.test_pircan import P, S

LIMIT_TEXT = ("You own 3 agents, as many as this network allows (accounts.agents_per_owner). "
              "Delete one you no longer need first (the portal's agent page)")


def test_agents_create_stops_at_the_cap_and_a_deleted_agent_frees_a_place(tmp_path):
    p = P(tmp_path, accounts={"agents_per_owner": 3})
    try:
        p.account("olive", kind="person")
        p.account("paul", kind="person")
        p.account("alice")  # olive's first agent
        p.login("olive")
        assert [line.split(" ")[3] for line in (p.cmd("olive", "AGENTS CREATE two") + p.cmd("olive", "AGENTS CREATE three"))
                ] == ["CREATED", "CREATED"]
        assert p.cmd("olive", "AGENTS CREATE four") == [f"{S} FAIL AGENTS AGENT_LIMIT four :{LIMIT_TEXT}"]
        assert p.rows("SELECT COUNT(*) FROM accounts WHERE owner = 'olive'") == [(3,)]
        # the cap is per person: paul's first agent is made
        p.login("paul")
        assert p.cmd("paul", "AGENTS CREATE pauls")[0].split(" ")[3] == "CREATED"
        # concurrent creations cannot pass it: the count is in the insert's transaction
        accounts = p.h.server.accounts

        async def both() -> list:
            return await asyncio.gather(accounts.create("five", "sesame123", kind="agent", owner="olive"),
                                        accounts.create("six", "sesame123", kind="agent", owner="olive"),
                                        return_exceptions=True)

        assert [type(r) for r in p.h.run(both())] == [TooManyAgents, TooManyAgents]
    finally:
        p.close()


def test_deleting_an_agent_frees_a_place(tmp_path):
    p = P(tmp_path, accounts={"agents_per_owner": 1})
    try:
        p.account("olive", kind="person")
        p.account("alice")
        p.login("olive")
        assert p.cmd("olive", "AGENTS CREATE two")[0].split(" ")[1:4] == ["FAIL", "AGENTS", "AGENT_LIMIT"]
        with pytest.raises(TooManyAgents):
            p.h.run(p.h.server.accounts.create("three", "sesame123", kind="agent", owner="olive"))
        assert p.h.run(p.h.server_api("pircan").delete_account("alice")) is True
        assert p.cmd("olive", "AGENTS CREATE two")[0].split(" ")[3] == "CREATED"
    finally:
        p.close()


def test_the_portal_and_the_command_line_obey_the_cap(tmp_path):
    server = make_server(tmp_path, accounts={"agents_per_owner": 1})
    try:
        add_person(server, "olive")
        client, csrf = sign_in(server, "olive")
        made = client.post("/portal/agents", data={"csrf": csrf, "name": "first"})
        assert (made.status_code, made.headers["location"]) == (303, "/portal/agents/first")
        refused = client.post("/portal/agents", data={"csrf": csrf, "name": "second"})
        assert refused.status_code == 303
        shown = "You own 1 agent, as many as this network allows (accounts.agents_per_owner) (AGENT_LIMIT)"
        assert f'<p class="notice error" role="alert">{shown}</p>' in client.get("/portal/").text
    finally:
        server.stop()
    db = str(tmp_path / "c.db")
    (tmp_path / "pircd.toml").write_text("[accounts]\nagents_per_owner = 1\n")
    conf = str(tmp_path / "pircd.toml")
    assert cli("account", "add", "olive", "--generate", "--db", db, "--config", conf).returncode == 0
    assert cli("agent", "add", "one", "--owner", "olive", "--db", db, "--config", conf).returncode == 0
    refused_cli = cli("agent", "add", "two", "--owner", "olive", "--db", db, "--config", conf)
    assert (refused_cli.returncode, refused_cli.stderr.splitlines()[-1]) == (
        1, "error: olive already owns 1 agent (accounts.agents_per_owner)")
    other = cli("account", "add", "three", "--kind", "agent", "--owner", "olive", "--generate", "--db", db,
                "--config", conf)
    assert (other.returncode, other.stderr.splitlines()[-1]) == (
        1, "error: olive already owns 1 agent (accounts.agents_per_owner)")
