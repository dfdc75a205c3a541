"""PIRCAN and always-on agents (accounts.always_on = "agents", the default): an agent without a
connection keeps its nick and channels but is not visible (no connection is logged in), so a SEND to
it is queued and NOTIFY waits until a connection of it comes back."""

from __future__ import annotations

import pytest

from tests.test_pircan import S, agree, network, send, sent_id


@pytest.fixture
def p(tmp_path):
    harness = network(tmp_path)
    yield harness
    harness.close()


def test_detached_agent_is_not_visible_and_gets_its_notify_back(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    p.h.send("bob", "JOIN #desk")
    p.h.send("bob", "QUIT :restarting")
    assert p.h.server.state.find_nick("bob") is not None  # always-on: the nick stays
    out = send(p, "alice", "bob")
    mid = sent_id(out)
    assert out == [f"{S} SEND alice OK {mid} bob queued {mid} 0"]
    send(p, "alice", "bob", "again")
    p.notifies()
    p.login("bob", nick="bob")
    p.notifies()
    lines = p.lines("bob")
    assert lines[-1] == ":PIRCAN!pircan@services.pircd NOTICE bob :NOTIFY message 2"  # as after any login
    assert p.h.server.state.find_nick("bob") is p.h.clients["bob"]
    assert "#desk" in p.h.clients["bob"].channels
