"""Account names: the nick grammar, and never a nick reserved for the server's services (issue 22.3)."""

from __future__ import annotations

import base64

import pytest

from ircd.accountnames import InvalidAccountName, account_name_problem
from tests.harness import Harness, config
from tests.proc import cli


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture
def ah(tmp_path):
    harness = Harness(config(storage={"durability": "off"}), db=str(tmp_path / "a.db"))
    yield harness
    harness.close()


def test_the_one_rule():
    assert account_name_problem("helper", 32) is None
    assert account_name_problem("ChanServ", 32) == "reserved for the server's own services"
    assert account_name_problem("9lives", 32) == "not a valid account name (nick rules, at most 32 characters)"


def test_reserved_names_cannot_be_accounts(ah, tmp_path):
    """issue 22.3: a name reserved as a nick would be an account that can never connect."""
    for name in ("ChanServ", "saslserv", "NICKSERV", "PIRCAN"):
        with pytest.raises(InvalidAccountName):
            ah.run(ah.server.accounts.create(name, "password123"))
    db = str(tmp_path / "cli.db")
    assert cli("account", "add", "bob", "--generate", "--db", db).returncode == 0
    refused = cli("agent", "add", "ChanServ", "--owner", "bob", "--db", db)
    assert (refused.returncode, refused.stderr) == (
        1, "error: 'ChanServ' is not a valid account name (nick rules, at most 32 characters)\n"
    )


def test_agents_create_refuses_a_reserved_name(tmp_path):
    cfg = config(storage={"durability": "off"}, server={"extensions": ["pircan"]})
    h = Harness(cfg, db=str(tmp_path / "p.db"), extensions=True)
    try:
        h.run(h.server.accounts.create("bob", "bob password"))
        h.register("b", "bob2")
        h.send("b", "AUTHENTICATE PLAIN")
        h.send("b", "AUTHENTICATE " + b64("\0bob\0bob password"))
        h.take("b")
        h.send("b", "AGENTS CREATE SaslServ")
        assert h.lines("b") == [
            ":irc.test FAIL AGENTS INVALID_NAME SaslServ :That is not a valid account name"
        ]
        assert "saslserv" not in h.server.accounts.names
    finally:
        h.close()
