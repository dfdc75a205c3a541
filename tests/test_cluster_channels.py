"""Channels across the nodes of a cluster (docs/scaling.md, channels): IRC's timestamp rule for
two nodes' views of one channel, MODE changes that travel as changes, and INVITE to a user of
another node. The rules are tested on one node built in this process, given the other node's
ops as they arrive from NATS; the live tests run two nodes."""

from __future__ import annotations

from typing import Any

import pytest

from ircd.cluster.replica import Replica
from ircd.state.cluster import ClusterState
from tests.clusters import bare, lines, names, until
from tests.harness import Harness
from tests.live import IRCClient
from tests.natsd import NatsServer
from tests.test_lusers_counts import formed

T = 1_800_000_000  # the harness clock's start: alice's channels here are created then


class FakeLink:
    """What node a publishes, kept for the test to read (no NATS)."""

    def __init__(self) -> None:
        self.node, self.peers = "a", {"b"}
        self.sent: list[dict[str, Any]] = []
        self.forwarded: list[tuple[str, int, bytes]] = []

    def broadcast(self, op: dict[str, Any]) -> None:
        self.sent.append(op)

    def to_node(self, node: str, op: dict[str, Any]) -> None:
        self.sent.append(op)

    def forward(self, node: str, ident: int, data: bytes) -> None:
        self.forwarded.append((node, ident, data))


def as_node_a(h: Harness) -> tuple[Replica, FakeLink]:
    """``h``'s server as node a, with alice on it, in #c (which she created)."""
    link = FakeLink()
    replica = Replica(h.server, ClusterState(h.server.state), link)  # type: ignore[arg-type]
    h.server.remote_users = replica
    h.register("alice")
    h.send("alice", "JOIN #c")
    h.take("alice")
    return replica, link


@pytest.fixture
def node():
    """Node a in this process (alice on it, in #c which she created), knowing bob, a user of b."""
    h = Harness()
    replica, link = as_node_a(h)
    apply(h, replica, {"op": "user", "id": 7, "nick": "bob", "user": "bob", "host": "10.0.0.2", "realname": "Bob",
                       "account": None, "account_kind": None, "modes": "", "caps": 0, "away": None, "signon": T,
                       "server": "b.test", "info": "node b"})
    yield h, replica, link
    h.close()


def apply(h: Harness, replica: Replica, op: dict[str, Any]) -> None:
    replica.apply({**op, "from": "b"})
    h.server.flush_all()


def names_here(h: Harness, who: str = "alice") -> str:
    h.send(who, "NAMES #c")
    return h.lines(who)[0]


def created_on_b(ts: int, modes: str = "nt", key: str | None = None, topic: str = "") -> dict[str, Any]:
    """bob's JOIN that created #c on b (with #c's state there: bob its only member, opped)."""
    state = {"chan": "#c", "ts": ts, "modes": modes, "key": key, "limit": None, "topic": topic,
             "topic_setter": "bob" if topic else "", "topic_time": ts if topic else 0,
             "lists": {"b": [], "e": [], "I": []}, "members": [["b", 7, "o"]]}
    return {"op": "join", "id": 7, "chan": "#c", "modes": "o", "ts": ts, "state": state}


def test_an_older_channel_wins_and_this_side_is_deopped(node):
    """b created #c ten seconds before a did (a split, or a race): a's side loses its ops and
    modes, told to a's members by a, and takes b's, with bob's JOIN and his op."""
    h, replica, _ = node
    apply(h, replica, created_on_b(T - 10, modes="nst", topic="b's topic"))
    assert h.lines("alice") == [":irc.test MODE #c -o+s alice", ":irc.test TOPIC #c :b's topic",
                                ":bob!bob@10.0.0.2 JOIN #c", ":irc.test MODE #c +o bob"]
    assert names_here(h) == ":irc.test 353 alice @ #c :alice @bob"  # secret (+s) now
    assert h.server.state.channel("#c").created == T - 10


def test_a_newer_channel_loses_where_an_older_one_is(node):
    """b's #c is newer: bob joins a's #c without his op, and b's key is not taken."""
    h, replica, _ = node
    apply(h, replica, created_on_b(T + 10, key="secret"))
    assert h.lines("alice") == [":bob!bob@10.0.0.2 JOIN #c"]
    assert names_here(h) == ":irc.test 353 alice = #c :@alice bob"
    channel = h.server.state.channel("#c")
    assert (channel.created, channel.key) == (T, None)


def test_the_same_timestamp_merges_both_sides(node):
    """Created in the same second on both nodes: both keep their ops, the modes are joined."""
    h, replica, _ = node
    apply(h, replica, created_on_b(T, modes="ns", key="k1"))
    assert h.lines("alice") == [":irc.test MODE #c +sk k1", ":bob!bob@10.0.0.2 JOIN #c", ":irc.test MODE #c +o bob"]
    assert names_here(h) == ":irc.test 353 alice @ #c :@alice @bob"


def test_mode_changes_travel_as_changes_and_both_of_two_at_once_stay(node):
    """alice sets +m while bob sets +s on b: each node keeps both. A change from a channel with a
    newer timestamp (the side that lost) is not applied; a member is named by node and id."""
    h, replica, link = node
    apply(h, replica, {"op": "join", "id": 7, "chan": "#c", "modes": "", "ts": T})
    h.send("alice", "MODE #c +mv bob")
    h.take("alice")
    assert link.sent[-1] == {"op": "mode", "chan": "#c", "ts": T,
                             "changes": [[True, "m", None], [True, "v", ["b", 7]]]}
    apply(h, replica, {"op": "mode", "chan": "#c", "ts": T, "changes": [[True, "s", None], [True, "o", ["a", 1]]]})
    apply(h, replica, {"op": "mode", "chan": "#c", "ts": T + 5, "changes": [[True, "i", None]]})
    channel = h.server.state.channel("#c")
    assert channel.mode_string(show_key=True) == ("+mnst", [])
    assert names_here(h) == ":irc.test 353 alice @ #c :@alice +bob"
    h.send("alice", "MODE #c +b x!*@*")
    assert link.sent[-1]["changes"] == [[True, "b", ["x!*@*", "alice!alice@127.0.0.1", T]]]
    apply(h, replica, {"op": "mode", "chan": "#c", "ts": T, "changes": [[False, "b", ["x!*@*"]],
                                                                      [True, "k", "key"], [True, "l", 5]]})
    assert (channel.lists["b"], channel.key, channel.limit) == ([], "key", 5)


def test_a_channel_sent_whole_after_a_change_is_taken_as_it_is(node):
    """A channel's whole state (``chan``, after a MODE its changes could not say) of the same TS
    replaces this node's, modes taken away too; one of an older TS wins as a JOIN's would."""
    h, replica, _ = node
    h.send("alice", "MODE #c +s")
    h.take("alice")
    state = {**created_on_b(T)["state"], "modes": "n", "members": [["a", 1, ""]]}
    apply(h, replica, {"op": "chan", **state})
    assert (h.server.state.channel("#c").mode_string(show_key=True), names_here(h)) == (
        ("+n", []), ":irc.test 353 alice = #c alice")
    assert h.lines("alice") == []  # its node told everyone
    apply(h, replica, {"op": "chan", **state, "ts": T - 1, "modes": "nt"})
    assert h.lines("alice") == [":irc.test MODE #c +t"]
    assert h.server.state.channel("#c").created == T - 1


def test_invite_of_a_user_of_another_node(node):
    """alice invites bob (on b) to +i #c: 341 to alice, the INVITE line to bob's node, and the
    invitation to every node, so b lets bob in; an invitation made on b lets a's user in here."""
    h, replica, link = node
    h.send("alice", "MODE #c +i")
    h.take("alice")
    h.send("alice", "INVITE bob #c")
    assert h.lines("alice") == [":irc.test 341 alice bob #c"]
    assert [(n, i, bare(d.decode())) for n, i, d in link.forwarded] == [
        ("b", 7, ":alice!alice@127.0.0.1 INVITE bob #c\r\n")]
    assert link.sent[-1] == {"op": "invite", "chan": "#c", "nick": "bob"}
    h.register("carol")
    h.send("carol", "JOIN #c")
    assert h.lines("carol")[0] == ":irc.test 473 carol #c :Cannot join channel (+i)"
    apply(h, replica, {"op": "invite", "chan": "#c", "nick": "carol"})
    h.send("carol", "JOIN #c")
    assert h.lines("carol")[0] == ":carol!carol@127.0.0.1 JOIN #c"
    apply(h, replica, {"op": "join", "id": 7, "chan": "#c", "modes": "", "ts": T})  # bob used his invitation
    assert h.server.state.channel("#c").invited == set()


def test_lusers_counts_the_other_nodes_channels(node):
    """254 counts a channel a user of b made, until its last member left it there; a burst's
    channel whose members do not arrive is no channel here, while it is settled neither."""
    h, replica, _ = node
    state = h.server.state
    assert formed(h, "alice") == 1  # #c
    made = created_on_b(T)
    apply(h, replica, {**made, "chan": "#d", "state": {**made["state"], "chan": "#d"}})
    assert formed(h, "alice") == 2
    apply(h, replica, {"op": "part", "node": "b", "id": 7, "chan": "#d"})
    assert (formed(h, "alice"), state.channel("#d")) == (1, None)
    # a channel of b's burst enters the state before its members; b's user of it is not sent
    seen: list[int] = []
    state.channel_added.append(lambda ch: seen.append(state.channels_formed()))
    apply(h, replica, {"op": "burst", "users": [], "answer": True,
                       "channels": [{**made["state"], "chan": "#e", "members": [["b", 8, "o"]]}]})
    assert (seen, formed(h, "alice"), state.channel("#e")) == ([1], 1, None)


# two nodes -----------------------------------------------------------------------------------


def test_invite_and_invite_exceptions_reach_the_other_node(nodes):
    """alice on a invites bob on b to her +i channel: 341 to her, the INVITE to bob, to carol (an
    op with invite-notify, on b) too, and b lets bob in; a +I mask set on a lets dave in on b.
    The welcome burst's LUSERS count both servers, and this node's users apart."""
    url, a, b = nodes
    alice = IRCClient(a.port)
    alice.register("alice")
    alice.send("JOIN #inv")
    alice.send("MONITOR + carol,bob")
    lines(alice)
    carol = IRCClient(b.port)
    carol.register("carol", ["invite-notify"])
    until(alice, "730")  # a knows carol
    alice.send("PRIVMSG carol :join #inv")  # after alice's JOIN on the way from a to b
    until(carol, "PRIVMSG")
    carol.send("JOIN #inv")
    until(alice, "JOIN")
    alice.send("MODE #inv +io carol")
    assert bare(until(carol, "MODE")[-1]) == ":alice!alice@127.0.0.1 MODE #inv +io carol"
    bob = IRCClient(b.port)
    welcome = [f":{m.source} {m.command} {' '.join(m.params[:-1])} :{m.params[-1]}" for m in bob.register("bob")
               if m.command in ("251", "255", "265", "266")]
    assert welcome == [":b.test 251 bob :There are 3 users and 0 invisible on 2 servers",
                       ":b.test 255 bob :I have 2 clients and 1 servers",
                       ":b.test 265 bob 2 2 :Current local users 2, max 2",
                       ":b.test 266 bob 3 3 :Current global users 3, max 3"]
    bob.send("JOIN #inv")
    assert lines(bob) == [":b.test 473 bob #inv :Cannot join channel (+i)"]
    until(alice, "730")  # a knows of bob
    alice.send("INVITE bob #inv")
    assert lines(alice) == [":a.test 341 alice bob #inv"]
    assert until(bob, "INVITE")[-1] == ":alice!alice@127.0.0.1 INVITE bob #inv"
    assert bare(until(carol, "INVITE")[-1]) == ":alice!alice@127.0.0.1 INVITE bob #inv"
    bob.send("JOIN #inv")
    assert bare(lines(bob)[0]) == ":bob!bob@127.0.0.1 JOIN #inv"
    assert bare(until(alice, "JOIN")[-1]) == ":bob!bob@127.0.0.1 JOIN #inv"
    alice.send("MODE #inv +I dave!*@*")
    until(carol, "MODE")  # the +I list is b's too
    dave = IRCClient(b.port)
    dave.register("dave")
    dave.send("JOIN #inv")
    assert bare(lines(dave)[0]) == ":dave!dave@127.0.0.1 JOIN #inv"
    assert bare(until(alice, "JOIN")[-1]) == ":dave!dave@127.0.0.1 JOIN #inv"
    assert names(alice, "#inv") == ":a.test 353 alice = #inv :@alice @carol bob dave"
    for client in (alice, bob, carol, dave):
        client.close()


def test_a_channel_made_on_both_sides_of_a_split_keeps_the_older(nodes, nats):
    """NATS goes away; alice makes #new on a at once, bob makes his own on b once b has given a
    up (seconds later). When the nodes meet again, a's older #new wins: b deops bob and tells him
    so, alice comes in with her op; on a, bob joins without his."""
    url, a, b = nodes
    alice = IRCClient(a.port, timeout=60)
    alice.register("alice")
    alice.send("MONITOR + bob")
    alice.send("JOIN #c")  # both in #c, to see the split and the netjoin
    lines(alice)
    bob = IRCClient(b.port, timeout=60)
    bob.register("bob")
    until(alice, "730")  # a knows bob
    alice.send("PRIVMSG bob :hi")  # after the JOIN on the way from a to b
    until(bob, "PRIVMSG")
    bob.send("JOIN #c")
    until(alice, "JOIN")
    nats[0].stop()
    alice.send("JOIN #new")
    assert [bare(ln) for ln in lines(alice)][1] == ":a.test 353 alice = #new @alice"
    until(bob, "QUIT")  # b gave a up
    bob.send("JOIN #new")
    assert [bare(ln) for ln in lines(bob)][1] == ":b.test 353 bob = #new @bob"
    nats.append(NatsServer(nats[0].port))
    got = []
    while not got or got[-1] != ":b.test MODE #new +o alice":
        got.append(bare(bob.read_line() or "closed"))
    assert [ln for ln in got if " #new" in ln] == [
        ":b.test MODE #new -o bob", ":alice!alice@127.0.0.1 JOIN #new", ":b.test MODE #new +o alice"]
    assert bare(until(alice, "JOIN", "#new")[-1]) == ":bob!bob@127.0.0.1 JOIN #new"
    assert names(alice, "#new") == ":a.test 353 alice = #new :@alice bob"
    assert names(bob, "#new") == ":b.test 353 bob = #new :bob @alice"
    alice.close()
    bob.close()
