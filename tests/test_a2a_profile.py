"""The A2A endpoint an agent publishes (PROFILE ENDPOINT) and INTRO's refusals, in the socket-free
harness: exact replies, audit rows, who sees the endpoint, and that a deleted account's endpoint goes
with it (a new account of the same name does not inherit it).
"""

from __future__ import annotations

import pytest

from tests.test_pircan import P, S, agree
from tests.test_pircan_deleted_accounts import delete_from_another_process


@pytest.fixture
def p(tmp_path):
    harness = P(tmp_path)
    harness.account("olive", kind="person")
    harness.account("alice")
    harness.account("bob")
    harness.account("paul", kind="person")
    harness.account("rex", owner="paul")
    for name in ("olive", "alice", "bob", "rex"):
        harness.login(name)
    yield harness
    harness.close()


def test_publishing_an_endpoint(p):
    assert p.cmd("bob", "PROFILE ENDPOINT * https://bob.example/a2a") == [
        f"{S} PROFILE bob ENDPOINT bob https://bob.example/a2a"]
    assert p.cmd("bob", "PROFILE ENDPOINT * https://bob.example/a2a") == [  # no change, no audit row
        f"{S} PROFILE bob ENDPOINT bob https://bob.example/a2a"]
    assert p.cmd("olive", "PROFILE ENDPOINT bob http://[::1]:8080/") == [
        f"{S} PROFILE olive ENDPOINT bob http://[::1]:8080/"]
    assert p.cmd("rex", "PROFILE ENDPOINT bob https://rex.example/") == [
        f"{S} FAIL PROFILE NOT_ALLOWED bob :Only an account and its owner change its profile"]
    assert p.cmd("bob", "PROFILE ENDPOINT *") == [
        f"{S} FAIL PROFILE NEED_MORE_PARAMS ENDPOINT :Syntax: PROFILE ENDPOINT <account|*> <url|*>"]
    text = ("An endpoint is an http or https URL of at most 256 characters (no credentials, no fragment), "
            "or * to withdraw it")
    for bad in ("gopher://bob.example/", "https://", "https://bob.example:0/", "https://bob.example:x/",
                "https://[::1/", "https://bob.example/é"):
        assert p.cmd("bob", f"PROFILE ENDPOINT * {bad}") == [f"{S} FAIL PROFILE INVALID_PARAMS {bad} :{text}"], bad
    # shown to the agent and its owner, not to others
    assert p.cmd("olive", "PROFILE bob")[-2:] == [f"{S} PROFILE olive ENDPOINT bob http://[::1]:8080/",
                                                  f"{S} PROFILE olive END bob"]
    assert p.cmd("alice", "PROFILE bob") == [f"{S} PROFILE alice PROFILE bob agent olive *",
                                             f"{S} PROFILE alice END bob"]
    assert p.cmd("bob", "PROFILE ENDPOINT * *") == [f"{S} PROFILE bob ENDPOINT bob *"]
    assert p.cmd("bob", "PROFILE bob") == [f"{S} PROFILE bob PROFILE bob agent olive *", f"{S} PROFILE bob END bob"]
    p.h.settle()
    assert p.rows("SELECT actor, subject, detail FROM pircan_audit WHERE action = 'a2a.endpoint' ORDER BY id") == [
        ("bob", "bob", "https://bob.example/a2a"), ("olive", "bob", "http://[::1]:8080/ by owner"),
        ("bob", "bob", "(none)")]


def test_intro_refusals(p):
    p.cmd("bob", "PROFILE ENDPOINT * https://bob.example/a2a")
    assert p.cmd("alice", "INTRO bob") == [
        f"{S} FAIL INTRO NO_AGREEMENT bob :You need an active agreement with this account for an intro token. Ask for one: "
        "CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    agree(p, "alice", "bob", "task:summarise")
    assert p.cmd("bob", "INTRO alice") == [  # task scopes go one way: bob holds none toward alice
        f"{S} FAIL INTRO SCOPE_MISSING alice :You need an active agreement with this account for an intro token"]
    assert p.cmd("alice", "INTRO olive") == [
        f"{S} FAIL INTRO NO_AGREEMENT olive :You need an active agreement with this account for an intro token. Ask for one: "
        "CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    # without the HTTP listener (the harness has none) no key can be published: no token
    assert p.cmd("alice", "INTRO bob") == [
        f"{S} FAIL INTRO NOT_ALLOWED bob :Intro tokens need the server's HTTP listener ([http])"]
    assert p.cmd("alice", "INTRO") == [f"{S} FAIL INTRO NEED_MORE_PARAMS INTRO :Syntax: INTRO <agent>"]
    p.h.settle()
    assert p.rows("SELECT actor, subject, detail FROM pircan_audit WHERE action = 'refused' ORDER BY id") == [
        ("alice", "bob", "INTRO NO_AGREEMENT"), ("bob", "alice", "INTRO SCOPE_MISSING"),
        ("alice", "olive", "INTRO NO_AGREEMENT")]


def test_a_deleted_accounts_endpoint_goes_with_it(p):
    p.h.run(p.h.server.accounts.refresh())  # PIRCAN has seen the accounts the fixture made
    p.h.settle()
    p.cmd("bob", "PROFILE ENDPOINT * https://bob.example/a2a")
    delete_from_another_process(p, "bob")
    assert p.rows("SELECT account FROM pircan_a2a_endpoints") == []
    p.h.run(p.h.server.accounts.create("bob", "sesame123", kind="agent", owner="paul"))
    p.h.run(p.h.server.accounts.refresh())
    p.login("bob2", "bob")
    assert p.cmd("bob2", "PROFILE bob") == [f"{S} PROFILE bob PROFILE bob agent paul *", f"{S} PROFILE bob END bob"]
