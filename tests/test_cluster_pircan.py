"""PIRCAN on two nodes of one network (docs/scaling.md, "PIRCAN across nodes"): an agent on node a
and an agent on node b talk through SEND; NOTIFY comes from the recipient's node once, a wait on b
is woken by a send on a, an agreement revoked on a is gone on b, the conversation limit counts the
sends of both nodes, and a private channel's invitation made on a admits on b.

What a node publishes reaches another in order with the lines it forwards: ``_synced`` (a guest on
a messages a guest on b) returns once b has applied everything a published before it."""

from __future__ import annotations

import asyncio
import itertools
import re
from pathlib import Path
from typing import Any

import pytest

from tests import dbs
from tests.clusters import bare, cluster_of, lines, until
from tests.live import IRCClient
from tests.natsd import NatsServer
from tests.proc import ServerProcess, cli
from tests.test_mcp import call, mcp

LOBBY = "pircan.dev/lobby"
PASSWORDS = {"olive": "olive-pw-4821", "ant": "ant-pw-60213", "bee": "bee-pw-77105", "eve": "eve-pw-31877"}
_syncs = itertools.count(1)


@pytest.fixture
def pair(tmp_path: Path, nats) -> Any:
    """Nodes a and b (NOTIFY at once: no coalescing), the persons olive and eve and olive's agents
    ant and bee (made before the nodes start: a node learns of accounts made elsewhere later)."""
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))  # the database cluster_of uses
    for person in ("olive", "eve"):
        _account(url, person)
    for agent in ("ant", "bee"):
        _account(url, agent, "--kind", "agent", "--owner", "olive")
    url, started = cluster_of(tmp_path, nats[0].url, ("a", "b"), pircan={"notify_coalesce_ms": 0})
    try:
        yield started[0], started[1]
    finally:
        for node in started:
            node.terminate()


def _account(url: str, name: str, *options: str) -> None:
    result = cli("account", "add", name, *options, "--password-stdin", "--db", url, stdin=PASSWORDS[name] + "\n")
    assert result.returncode == 0, result.stderr


def _login(node: ServerProcess, account: str, caps: tuple[str, ...] = (LOBBY,)) -> IRCClient:
    client = IRCClient(node.port)
    client.login(account, PASSWORDS[account], caps)
    return client


def _guests(a: ServerProcess, b: ServerProcess) -> tuple[IRCClient, IRCClient]:
    """carol on a and dan on b, for ``_synced``."""
    carol, dan = IRCClient(a.port), IRCClient(b.port)
    carol.register("carol")
    dan.register("dan")
    for guest, other in ((carol, "dan"), (dan, "carol")):  # each node knows the other's guest
        guest.send(f"MONITOR + {other}")
        until(guest, "730")
    return carol, dan


def _synced(carol: IRCClient, dan: IRCClient, back: bool = False) -> None:
    """Return once node b (dan's) has applied what node a (carol's) published so far (``back``:
    once a has applied what b published)."""
    token = f"sync{next(_syncs)}"
    (frm, to), names = ((dan, carol), ("dan", "carol")) if back else ((carol, dan), ("carol", "dan"))
    frm.send(f"PRIVMSG {names[1]} :{token}")
    assert bare(until(to, "PRIVMSG")[-1]) == f":{names[0]}!{names[0]}@127.0.0.1 PRIVMSG {names[1]} {token}"


def _reply(client: IRCClient, line: str) -> str:
    """The first line ``client`` gets after sending ``line`` (NOTIFY left out), without tags."""
    client.send(line)
    got = [bare(x) for x in lines(client)]
    return next(x for x in got if " NOTIFY " not in x)


def _agreement(ant: IRCClient, bee: IRCClient) -> str:
    """ant (on a) asks bee (on b) for a message agreement and bee accepts it: the agreement's id."""
    requested = _reply(ant, "CONTACT REQUEST bee message 30 :talk").split()
    assert requested[3] == "REQUESTED", requested
    accepted = _reply(bee, f"CONTACT ACCEPT {requested[4]}").split()
    assert accepted[3] == "ACCEPTED", accepted
    # told after the agreement, on the same stream: a knows the agreement when ant hears this
    assert bare(until(ant, "NOTIFY")[-1]) == ":a.test NOTIFY ant decision 1"
    return accepted[5]


def _notifies(client: IRCClient) -> list[str]:
    return [bare(x) for x in lines(client) if " NOTIFY " in x]


def test_a_send_to_an_agent_of_the_other_node_is_notified_once_from_its_node(pair):
    """ant on a SENDs to bee on b: bee hears NOTIFY from b (its node), once, not also forwarded
    from a; INBOX on b shows the message."""
    a, b = pair
    ant, bee = _login(a, "ant"), _login(b, "bee")
    carol, dan = _guests(a, b)
    _agreement(ant, bee)
    _synced(carol, dan)
    lines(ant), lines(bee)  # the request's and the decision's NOTIFYs
    sent = _reply(ant, "SEND bee :hello from a").split()
    assert sent[:4] == [":a.test", "SEND", "ant", "OK"] and sent[5:7] == ["bee", "delivered"], sent
    mid = sent[4]
    _synced(carol, dan)  # a's NOTIFY (had it sent one) would be on b's stream before this
    assert _notifies(bee) == [":b.test NOTIFY bee message 1"]
    bee.send("INBOX")
    got = [bare(x) for x in lines(bee)]
    assert re.fullmatch(rf":b.test INBOX bee MESSAGE {mid} ant \S+ {mid} \* 0 12 :hello from a", got[0]), got
    assert got[1:] == [":b.test INBOX bee UNREAD 1 :1 unread message"]
    ant.send("SEND bee :again")  # the next one is news again, once
    lines(ant)
    _synced(carol, dan)
    assert _notifies(bee) == [":b.test NOTIFY bee message 1"]
    for client in (ant, bee, carol, dan):
        client.close()


def test_a_wait_on_b_is_woken_by_a_send_on_a_and_the_take_is_once(pair):
    """bee waits on b and on a (a second wait, from the other side of the network: an owner's
    reply-wait would do the same); ant's SEND on a is taken by exactly one wait; the other is told
    that it was taken."""
    a, b = pair
    ant, bee = _login(a, "ant"), _login(b, "bee")
    carol, dan = _guests(a, b)
    _agreement(ant, bee)
    lines(ant), lines(bee)
    bee.send("INBOX WAIT 60000")
    bee.send("PING waiting")
    until(bee, "PONG", "waiting")
    _synced(carol, dan)
    sent = _reply(ant, "SEND bee :wake up").split()
    assert sent[6] == "delivered", sent  # a's receipt knows of a's waits only
    mid = sent[4]
    until(bee, "INBOX")
    assert [bare(x) for x in lines(bee)][:2] == [f":b.test INBOX bee BODY {mid} :wake up", f":b.test INBOX bee END {mid}"]
    bee.send("INBOX")
    assert [bare(x) for x in lines(bee)] == [":b.test INBOX bee UNREAD 0 :0 unread messages"]  # the wait took it
    for client in (ant, bee, carol, dan):
        client.close()


def test_two_waits_on_two_nodes_one_takes_the_other_is_told(pair):
    """olive waits on a and on b (two connections, one per node); her agent ant's SEND on a is
    taken by exactly one of the waits, and the other is told that it was taken."""
    a, b = pair
    ant = _login(a, "ant")
    olive_a, olive_b = _login(a, "olive", ()), IRCClient(b.port)
    olive_b.login("olive", PASSWORDS["olive"], nick="olive2")
    carol, dan = _guests(a, b)
    for olive in (olive_a, olive_b):
        olive.send("INBOX WAIT 60000")
        olive.send("PING waiting")
        until(olive, "PONG", "waiting")
    _synced(carol, dan)  # a knows of olive2's login
    mid = _reply(ant, "SEND olive :which of you?").split()[4]
    answers = {}
    for olive in (olive_a, olive_b):
        words = bare(until(olive, "INBOX")[-1]).split(" ", 4)
        answers[words[3]] = words[4]
    assert answers.keys() == {"MESSAGE", "EVENT"}, answers  # one wait took it, the other was told
    assert answers["MESSAGE"].startswith(f"{mid} ant ")
    assert answers["EVENT"] == f"message {mid} ant {mid} taken :Another wait of your account took this message"
    for client in (ant, olive_a, olive_b, carol, dan):
        client.close()


def test_a_wait_on_b_for_a_person_on_a_ends_when_she_leaves_a(pair):
    """bee waits on b for a message from its owner olive, connected on a: her QUIT there ends it."""
    a, b = pair
    olive, bee = _login(a, "olive", ()), _login(b, "bee")
    carol, dan = _guests(a, b)
    _synced(carol, dan)
    bee.send("INBOX WAIT olive 60000")
    bee.send("PING waiting")
    until(bee, "PONG", "waiting")
    olive.send("QUIT :bye")
    olive.read_all_until_close()
    assert bare(until(bee, "INBOX")[-1]) == ":b.test INBOX bee GONE olive :olive left the network before sending you a message"
    for client in (bee, carol, dan):
        client.close()


def test_a_revoke_on_a_is_effective_on_b_at_once(pair):
    """An agreement ant revokes on a refuses bee's SEND on b from then on."""
    a, b = pair
    ant, bee = _login(a, "ant"), _login(b, "bee")
    carol, dan = _guests(a, b)
    agreement = _agreement(ant, bee)
    lines(ant), lines(bee)
    assert _reply(bee, "SEND ant :before").split()[3] == "OK"
    assert _reply(ant, f"CONTACT REVOKE {agreement}").split()[3] == "REVOKED"
    _synced(carol, dan)
    assert _reply(bee, "SEND ant :after") == (
        ":b.test FAIL SEND NO_AGREEMENT ant :You have no active agreement with this account. Ask for one: "
        "CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision")
    for client in (ant, bee, carol, dan):
        client.close()


def test_a_revoke_made_while_the_nodes_were_apart_is_known_when_they_meet_again(pair, nats):
    """NATS is away while ant revokes on a: the news is lost, so b reads the agreements again when
    a joins it again, and bee's PRIVMSG to ant (checked against b's memory only) is refused."""
    a, b = pair
    ant, bee = _login(a, "ant"), _login(b, "bee")
    agreement = _agreement(ant, bee)
    bee.send("MONITOR + ant")
    assert bare(until(bee, "730")[-1]) == ":b.test 730 bee ant!ant@127.0.0.1"
    nats[0].stop()
    assert bare(until(bee, "731")[-1]) == ":b.test 731 bee ant"
    assert _reply(ant, f"CONTACT REVOKE {agreement}").split()[3] == "REVOKED"
    logged = len(b.log)
    nats.append(NatsServer(nats[0].port))
    assert bare(until(bee, "730")[-1]) == ":b.test 730 bee ant!ant@127.0.0.1"
    b.wait_for_log("pircan state read again after a node joined agreements=0", since=logged)
    assert _reply(bee, "PRIVMSG ant :still there?") == (
        ":b.test FAIL PRIVMSG NO_AGREEMENT ant :Agents need a message agreement to talk directly (CONTACT REQUEST)")
    ant.close()
    bee.close()


def test_policy_and_display_name_set_on_a_are_known_on_b(pair):
    """ant sets its contact policy to deny and its display name on a: on b, bee's request is
    denied and ant's profile shows the name."""
    a, b = pair
    ant, bee = _login(a, "ant"), _login(b, "bee")
    carol, dan = _guests(a, b)
    assert _reply(ant, "CONTACT POLICY ant deny") == ":a.test CONTACT ant POLICY ant deny"
    assert _reply(ant, "PROFILE NAME * :Ant the First") == ":a.test PROFILE ant NAME ant :Ant the First"
    _synced(carol, dan)
    assert _reply(bee, "CONTACT REQUEST ant message 30 :talk") == (
        ":b.test FAIL CONTACT DENIED ant :This account does not accept contact requests")
    bee.send("PROFILE ant")
    assert ":b.test PROFILE bee PROFILE ant agent olive :Ant the First" in [bare(x) for x in lines(bee)]
    for client in (ant, bee, carol, dan):
        client.close()


def test_the_conversation_limit_counts_the_sends_of_both_nodes(pair):
    """40 messages an hour in one conversation: 20 on a, 20 on b, the 41st refused on b."""
    a, b = pair
    ant, bee = _login(a, "ant"), _login(b, "bee")
    carol, dan = _guests(a, b)
    _agreement(ant, bee)
    lines(ant), lines(bee)
    first = _reply(ant, "SEND bee :m0").split()
    assert first[3] == "OK", first
    root = first[4]
    for i in range(1, 20):
        got = _reply(ant, f"SEND bee {root} :m{i}")
        assert got.split()[3] == "OK", got
    _synced(carol, dan)
    for i in range(20, 40):
        got = _reply(bee, f"SEND ant {root} :m{i}")
        assert got.split()[3] == "OK", got
    refused = _reply(bee, f"SEND ant {root} :m40")
    prefix = (f":b.test FAIL SEND CONVERSATION_RATE {root} :This conversation reached 40 messages in the last "
              "hour. Wait for the retry time, or end the exchange. Retry in ")
    assert refused.startswith(prefix) and re.fullmatch(r"\d+ s", refused[len(prefix):]), refused
    for client in (ant, bee, carol, dan):
        client.close()


def test_a_private_channel_invitation_made_on_a_admits_on_b(pair):
    """olive creates #olive/lab on a and invites eve there; eve, on b, sees and joins it."""
    a, b = pair
    olive, eve = _login(a, "olive", ()), _login(a, "eve", ())
    carol, dan = _guests(a, b)
    olive.send("JOIN #olive/lab")
    lines(olive)
    olive.send("INVITE eve #olive/lab")
    lines(olive)
    eve.send("QUIT :moving")
    eve.read_all_until_close()
    _synced(carol, dan)
    eve = _login(b, "eve", ())
    eve.send("JOIN #olive/lab")
    assert bare(lines(eve)[0]) == ":eve!eve@127.0.0.1 JOIN #olive/lab"
    for client in (olive, eve, carol, dan):
        client.close()


def test_an_agent_on_mcp_at_a_is_present_on_b_until_a_is_gone(tmp_path, nats):
    """ant has an MCP session on a (never on IRC): its agreement with bee and its message reach bee
    on b (NOTIFY from b, once); bee's SEND on b says delivered, not queued; once a stops, b drops
    what a had counted and the next SEND is queued."""
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))
    _account(url, "olive")
    for agent in ("ant", "bee"):
        _account(url, agent, "--kind", "agent", "--owner", "olive")
    token = cli("token", "add", "ant", "--db", url).stdout.split()[-1]
    url, (a, b) = cluster_of(tmp_path, nats[0].url, ("a", "b"), "--http-listen", "127.0.0.1:0",
                             pircan={"notify_coalesce_ms": 0})
    try:
        bee = _login(b, "bee")
        carol, dan = _guests(a, b)
        for guest in (carol, dan):
            guest.send("JOIN #c")
            lines(guest)
        assert _reply(bee, "CONTACT POLICY bee auto-accept") == ":b.test CONTACT bee POLICY bee auto-accept"
        _synced(carol, dan, back=True)
        lines(bee)
        sent = asyncio.run(_request_over_mcp(a, token))
        _synced(carol, dan)
        assert _notifies(bee) == [":b.test NOTIFY bee agreement 1", ":b.test NOTIFY bee message 1"]
        bee.send("INBOX")
        assert bare(lines(bee)[0]).startswith(f":b.test INBOX bee MESSAGE {sent['message']['message_id']} ant ")
        sent = _reply(bee, "SEND ant :are you there?").split()
        assert sent[3] == "OK" and sent[6] == "delivered", sent
        a.terminate()
        until(dan, "QUIT")
        sent = _reply(bee, "SEND ant :still there?").split()
        assert sent[3] == "OK" and sent[6] == "queued", sent
        for client in (bee, carol, dan):
            client.close()
    finally:
        a.terminate()
        b.terminate()


async def _request_over_mcp(a: ServerProcess, token: str) -> dict[str, Any]:
    """ant, over MCP on a, gets an agreement with bee and sends it a message: the receipt."""
    async with mcp(a, token) as ant:  # type: ignore[arg-type]
        made = await call(ant, "request_contact", agent="bee", scopes=["message"], days=30, purpose="talk")
        assert made["outcome"] == "accepted", made
        sent = await call(ant, "send_direct_message", recipient="bee", body="hello over MCP")
        assert sent["delivery"] == "delivered", sent
        return sent


def test_a_channel_tool_of_an_account_connected_to_the_other_node_is_refused_there(tmp_path, nats):
    """ant is connected over IRC to b: its MCP join_channel on a would act on b's user from a, so a
    refuses it with OTHER_NODE naming b; on b the same tool joins ant's connection to the channel."""
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))
    _account(url, "olive")
    _account(url, "ant", "--kind", "agent", "--owner", "olive")
    token = cli("token", "add", "ant", "--db", url).stdout.split()[-1]
    url, (a, b) = cluster_of(tmp_path, nats[0].url, ("a", "b"), "--http-listen", "127.0.0.1:0")
    try:
        ant = _login(b, "ant")
        carol, dan = _guests(a, b)
        _synced(carol, dan, back=True)  # a knows ant by now: b told it before dan's message

        async def join(node: ServerProcess) -> Any:
            async with mcp(node, token) as session:  # type: ignore[arg-type]
                return await session.call_tool("join_channel", {"channel": "#ants"})

        refused = asyncio.run(join(a))
        assert refused.is_error and refused.content[0].text == (
            "OTHER_NODE: Your account is connected to b.test, another server of this network: channel operations "
            "run there (#ants)")
        joined = asyncio.run(join(b))
        assert not joined.is_error, joined.content
        assert bare(until(ant, "JOIN")[-1]) == ":ant!ant@127.0.0.1 JOIN #ants"
        for client in (ant, carol, dan):
            client.close()
    finally:
        a.terminate()
        b.terminate()
