"""Acting on users of other nodes (docs/scaling.md): an account's identity moving from one node to
another with its channels, a person's second connection on another node, the forced rename of a
guest of another node holding an account's name, and a nick two users hold when two sides of a
split meet. The live tests run two nodes; the rules of a nick held twice, and a move as the other
nodes apply it, are tested on a node built in this process and given the other node's ops."""

from __future__ import annotations

from typing import Any

import pytest

from ircd.cluster.replica import Replica
from tests import dbs
from tests.clusters import bare, lines, names, relayed, until
from tests.harness import Harness
from tests.live import IRCClient
from tests.natsd import NatsServer
from tests.proc import cli
from tests.test_cluster import _agent_and_watcher, _alice_and_bob_in_c
from tests.test_cluster_channels import as_node_a, names_here

MOVED = "Nick taken over by a new connection of its account"


def _said(sender: IRCClient, text: str, to: IRCClient, target: str) -> str:
    """What ``to`` gets (without tags) when ``sender`` says ``text`` to ``target``: a line that
    also orders everything ``sender``'s node said before it."""
    sender.send(f"PRIVMSG {target} :{text}")
    return bare(until(to, "PRIVMSG")[-1])


def _committed(port: int) -> None:
    """What the node on ``port`` queued for the database so far is committed: a new client's NICK
    waits for its own write, which the node's one writer makes after those."""
    probe = IRCClient(port)
    probe.register("probe")
    probe.close()


def _members(reply: str) -> list[str]:
    """The members a 353 line names, sorted (their order is that of the JOINs a node heard)."""
    return sorted(reply.split(" :", 1)[1].split())


def test_an_agent_connected_on_one_node_moves_to_the_other_with_its_channels(nodes):
    """bot1, connected on a, op of #c, logs in on b: a closes the old connection (ERROR), b's
    connection takes the identity over with #c and its op; carol on a and dan on b see nothing
    of it (no QUIT, no JOIN, MONITOR stays online), and messages reach the new connection."""
    url, a, b = nodes
    dan = _agent_and_watcher(url, b)
    old = IRCClient(a.port)
    old.login("bot1", "bot1-pw-93157")
    old.send("JOIN #c")
    old.send("TOPIC #c :the bots' room")
    lines(old)
    carol = IRCClient(a.port)
    carol.register("carol")
    carol.send("JOIN #c")
    lines(carol)
    assert _said(carol, "joined", dan, "dan") == ":carol!carol@127.0.0.1 PRIVMSG dan joined"  # b knows
    dan.send("JOIN #c")
    lines(dan)
    assert _said(dan, "here", carol, "#c") == ":dan!dan@127.0.0.1 PRIVMSG #c here"
    lines(old)

    new = IRCClient(b.port)
    new.login("bot1", "bot1-pw-93157", sync=False)
    burst = [bare(ln) for ln in lines(new)]  # #c again, as after a disconnect on one node
    assert burst[3].rsplit(" ", 1)[0] == ":b.test 333 bot1 #c bot1!bot1@127.0.0.1"
    assert burst[:3] + burst[4:] == [
        ":bot1 MODE bot1 +B", ":bot1!bot1@127.0.0.1 JOIN #c", ":b.test 332 bot1 #c :the bots' room",
        ":b.test 353 bot1 = #c :carol dan @bot1", ":b.test 366 bot1 #c :End of /NAMES list"]
    assert old.read_all_until_close()[-1] == f"ERROR :Closing link: 127.0.0.1 ({MOVED})"
    assert _said(new, "moved", carol, "#c") == ":bot1!bot1@127.0.0.1 PRIVMSG #c moved"
    assert lines(carol) == []  # no QUIT, no JOIN: the same user
    assert _said(carol, "welcome back", new, "#c") == ":carol!carol@127.0.0.1 PRIVMSG #c :welcome back"
    new.send("MODE #c +v carol")  # still an operator of #c
    assert bare(until(carol, "MODE")[-1]) == ":bot1!bot1@127.0.0.1 MODE #c +v carol"
    assert [bare(ln) for ln in lines(new)] == [":bot1!bot1@127.0.0.1 MODE #c +v carol"]
    assert names(carol) == ":a.test 353 carol = #c :+carol dan @bot1"
    assert names(new) == ":b.test 353 bot1 = #c :+carol dan @bot1"
    assert [bare(ln) for ln in lines(dan)] == [  # nothing of the move: bot1 is the same user
        ":bot1!bot1@127.0.0.1 PRIVMSG #c moved", ":carol!carol@127.0.0.1 PRIVMSG #c :welcome back",
        ":bot1!bot1@127.0.0.1 MODE #c +v carol"]
    carol.send("WHOIS bot1")
    assert ":a.test 312 carol bot1 b.test :" in " ".join(lines(carol))
    carol.send("NICK bot1")
    assert lines(carol) == [":a.test 433 carol bot1 :Nickname is already in use"]
    _committed(b.port)
    assert dbs.rows(url, "SELECT folded, node FROM cluster_nicks WHERE folded = 'bot1'") == [("bot1", "b")]
    for client in (carol, dan, new):
        client.close()


def test_a_detached_identity_moves_and_comes_back_from_away(nodes):
    """bot1's connection on a closed: its identity stays on a, away, in #c. Its next login is on
    b: the identity is b's now, back from away (AWAY to those with away-notify, on both nodes)."""
    url, a, b = nodes
    dan = _agent_and_watcher(url, b)
    carol = IRCClient(a.port)
    carol.register("carol", ["away-notify"])
    carol.send("JOIN #c")
    lines(carol)
    dan.send("CAP REQ away-notify")
    dan.send("JOIN #c")
    lines(dan)
    assert _said(dan, "joined", carol, "carol") == ":dan!dan@127.0.0.1 PRIVMSG carol joined"  # a knows
    old = IRCClient(a.port)
    old.login("bot1", "bot1-pw-93157")
    old.send("JOIN #c")
    old.send("QUIT :later")
    old.read_all_until_close()
    assert [bare(ln) for ln in lines(carol)] == [
        ":bot1!bot1@127.0.0.1 JOIN #c", ":bot1!bot1@127.0.0.1 AWAY :Not connected"]
    assert _said(carol, "bot1 left", dan, "#c") == ":carol!carol@127.0.0.1 PRIVMSG #c :bot1 left"
    assert [bare(ln) for ln in lines(dan)] == []  # the JOIN and AWAY came before carol's line
    dan.send("WHOIS bot1")
    assert ":b.test 301 dan bot1 :Not connected" in lines(dan)

    new = IRCClient(b.port)
    new.login("bot1", "bot1-pw-93157", sync=False)
    assert [bare(ln) for ln in lines(new)][1:2] == [":bot1!bot1@127.0.0.1 JOIN #c"]
    assert bare(until(carol, "AWAY")[-1]) == ":bot1!bot1@127.0.0.1 AWAY"
    assert [bare(ln) for ln in lines(dan)] == [":bot1!bot1@127.0.0.1 AWAY"]
    assert _said(carol, "hello again", new, "bot1") == ":carol!carol@127.0.0.1 PRIVMSG bot1 :hello again"
    carol.send("WHOIS bot1")
    whois = lines(carol)
    assert not [ln for ln in whois if " 301 " in ln]
    assert ":a.test 312 carol bot1 b.test :" in " ".join(whois)
    for client in (carol, dan, new):
        client.close()


def test_a_persons_second_connection_on_another_node_takes_the_identity_over(nodes):
    """Connections of one person on two nodes cannot share one nick: olive's connection on b
    takes her identity over from a (ERROR there), with her channels; carol sees nothing."""
    url, a, b = nodes
    assert cli("account", "add", "olive", "--password-stdin", "--db", url, stdin="olive-pw-4821\n").returncode == 0
    first = IRCClient(a.port)
    first.login("olive", "olive-pw-4821")
    first.send("JOIN #c")
    lines(first)
    carol = IRCClient(a.port)
    carol.register("carol")
    carol.send("JOIN #c")
    carol.send("MONITOR + dan")
    lines(carol)
    assert _said(carol, "hi", first, "#c") == ":carol!carol@127.0.0.1 PRIVMSG #c hi"
    dan = IRCClient(b.port)
    dan.register("dan")
    until(carol, "730")  # a knows dan
    assert _said(first, "hi dan", dan, "dan") == ":olive!olive@127.0.0.1 PRIVMSG dan :hi dan"  # b knows #c
    second = IRCClient(b.port)
    second.login("olive", "olive-pw-4821", sync=False)
    burst = [bare(ln) for ln in lines(second)]
    assert burst[0] == ":olive!olive@127.0.0.1 JOIN #c"
    assert burst[-2:] == [":b.test 353 olive = #c :carol @olive", ":b.test 366 olive #c :End of /NAMES list"]
    assert first.read_all_until_close()[-1] == f"ERROR :Closing link: 127.0.0.1 ({MOVED})"
    assert _said(second, "on b now", carol, "#c") == ":olive!olive@127.0.0.1 PRIVMSG #c :on b now"
    assert lines(carol) == []
    for client in (carol, dan, second):
        client.close()


def test_an_accounts_name_held_by_a_guest_of_another_node(nodes):
    """A guest on a goes by olive; olive logs in on b: the guest is renamed on a (as on one node),
    every node sees the new nick, and the nick is the account's on both."""
    url, a, b = nodes
    guest = IRCClient(a.port)
    guest.register("olive")  # before the account was made
    assert cli("account", "add", "olive", "--password-stdin", "--db", url, stdin="olive-pw-4821\n").returncode == 0
    guest.send("JOIN #c")
    lines(guest)
    carol = IRCClient(a.port)
    carol.register("carol")
    carol.send("JOIN #c")
    lines(carol)
    dan = IRCClient(b.port)
    dan.register("dan")
    dan.send("JOIN #c")
    lines(dan)
    assert _said(dan, "joined", guest, "#c") == ":dan!dan@127.0.0.1 PRIVMSG #c joined"
    lines(carol)

    owner = IRCClient(b.port)
    got = owner.login("olive", "olive-pw-4821")
    assert [m.params[0] for m in got if m.command == "001"] == ["olive"]  # the nick is the account's at once
    renamed, notice = (bare(ln) for ln in until(guest, "NOTICE")[-2:])
    new_nick = renamed.rsplit(" ", 1)[1]
    assert new_nick.startswith("Guest")
    assert renamed == f":olive!olive@127.0.0.1 NICK {new_nick}"
    assert notice == (f":a.test NOTICE {new_nick} :The nick olive belongs to the account olive, which has "
                      f"logged in; you are now {new_nick}")
    assert bare(until(carol, "NICK")[-1]) == renamed
    assert bare(until(dan, "NICK")[-1]) == renamed
    assert _members(names(dan)) == [f"@{new_nick}", "carol", "dan"]
    owner.send("JOIN #c")
    assert bare(until(carol, "JOIN")[-1]) == ":olive!olive@127.0.0.1 JOIN #c"
    assert _members(names(carol)) == [f"@{new_nick}", "carol", "dan", "olive"]
    carol.send("WHOIS olive")
    assert ":a.test 330 carol olive olive :is logged in as" in lines(carol)
    guest.send("NICK olive")
    assert lines(guest)[-1:] == [f":a.test 433 {new_nick} olive :Nickname is already in use"]
    _committed(b.port)
    assert dbs.rows(url, "SELECT node FROM cluster_nicks WHERE folded = 'olive'") == [("b",)]
    for client in (guest, carol, dan, owner):
        client.close()


# a nick held twice (two sides of a split that each gave the other up) ------------------------


def test_a_nick_taken_on_both_sides_of_a_split(nodes, nats):
    """NATS goes away, each node gives the other up and frees its nicks, and a client of b takes
    alice, which a's alice holds. When they meet again the older keeps it: b renames its own."""
    _, a, b = nodes
    alice, bob = _alice_and_bob_in_c(a, b)
    nats[0].stop()
    assert until(alice, "QUIT")[-1] == ":bob!bob@127.0.0.1 QUIT :*.net *.split"
    assert until(bob, "QUIT")[-1] == ":alice!alice@127.0.0.1 QUIT :*.net *.split"
    other = IRCClient(b.port, timeout=60)
    other.register("alice")  # free on b's side of the split
    nats.append(NatsServer(nats[0].port))
    renamed, notice = (bare(ln) for ln in until(other, "NOTICE")[-2:])
    guest = renamed.rsplit(" ", 1)[1]
    assert renamed == f":alice!alice@127.0.0.1 NICK {guest}" and guest.startswith("Guest")
    assert notice == (f":b.test NOTICE {guest} :Nick collision: alice is held by another user of the network; "
                      f"you are now {guest}")
    assert until(bob, "JOIN")[-1] == ":alice!alice@127.0.0.1 JOIN #c"
    bob.send("WHOIS alice")
    assert ":b.test 312 bob alice a.test :" in " ".join(lines(bob))
    assert relayed(bob, "PRIVMSG alice :which one?", alice) == ":bob!bob@127.0.0.1 PRIVMSG alice :which one?"
    alice.send(f"WHOIS {guest}")
    assert ":a.test 312 alice " + guest + " b.test :" in " ".join(lines(alice))
    assert lines(alice) == []
    for client in (alice, bob, other):
        client.close()

T = 1_800_000_000  # the harness clock's start: alice signed on then


@pytest.fixture
def node_a(tmp_path):
    """Node a in this process, with accounts, and alice on it, in #c."""
    h = Harness(db=str(tmp_path / "a.db"))
    replica, link = as_node_a(h)
    yield h, replica, link
    h.close()


def _burst(h: Harness, replica: Replica, nick: str, signon: int, account: str | None = None) -> None:
    """b's burst: its user 9 going by ``nick``, signed on at ``signon``."""
    user = {"id": 9, "nick": nick, "user": "x", "host": "10.0.0.9", "realname": "X", "account": account,
            "account_kind": "person" if account else None, "modes": "", "caps": 0, "away": None,
            "signon": signon, "server": "b.test", "info": "node b", "chans": []}
    replica.apply({"op": "burst", "users": [user], "channels": [], "answer": False, "from": "b"})
    h.server.flush_all()


def test_an_older_user_in_a_burst_keeps_the_nick_and_this_nodes_is_renamed(node_a):
    """b's alice signed on before a's: a's is renamed (NICK to her, her channels' members and
    the other nodes, with a NOTICE saying why), b's holds the nick here."""
    h, replica, link = node_a
    alice = h.clients["alice"]
    h.register("carol")
    h.send("carol", "JOIN #c")
    h.take("carol")
    h.take("alice")
    link.sent.clear()
    _burst(h, replica, "alice", T - 100)
    guest = f"Guest{alice.id}"
    assert h.lines("alice") == [
        f":alice!alice@127.0.0.1 NICK {guest}",
        (f":irc.test NOTICE {guest} :Nick collision: alice is held by another user of the network; "
         f"you are now {guest}")]
    assert h.lines("carol") == [f":alice!alice@127.0.0.1 NICK {guest}"]
    assert link.sent == [{"op": "nick", "id": alice.id, "nick": guest}]
    assert h.server.state.nick_holder("alice") is replica.remote.find_remote("b", 9)
    h.send("carol", "WHOIS alice")
    assert h.lines("carol")[:2] == [":irc.test 311 carol alice x 10.0.0.9 * X",
                                    ":irc.test 312 carol alice b.test :node b"]


def test_a_newer_user_in_a_burst_waits_for_its_node_to_rename_it(node_a):
    """b's alice signed on after a's: a's keeps the nick and hears nothing; b's is kept out of the
    nick index until b's rename arrives."""
    h, replica, link = node_a
    alice = h.clients["alice"]
    link.sent.clear()
    _burst(h, replica, "alice", T + 100)
    assert h.lines("alice") == []
    assert link.sent == []
    assert h.server.state.nick_holder("alice") is alice
    replica.apply({"op": "nick", "id": 9, "nick": "Guest9", "from": "b"})
    h.send("alice", "WHOIS Guest9")
    assert h.lines("alice")[:1] == [":irc.test 311 alice Guest9 x 10.0.0.9 * X"]
    assert h.server.state.nick_holder("alice") is alice


def test_the_user_logged_in_to_the_nicks_account_keeps_it(node_a):
    """b's alice signed on later but is logged in to the account alice: she keeps the nick."""
    h, replica, _ = node_a
    alice = h.clients["alice"]
    _burst(h, replica, "alice", T + 100, account="alice")
    assert h.lines("alice")[0] == f":alice!alice@127.0.0.1 NICK Guest{alice.id}"
    assert h.server.state.nick_holder("alice") is replica.remote.find_remote("b", 9)


# a move as the other nodes apply it ---------------------------------------------------------


def _record(ident: int, nick: str, **more: Any) -> dict[str, Any]:
    """A user as its node describes it (``user``, ``move``)."""
    return {"id": ident, "nick": nick, "user": nick, "host": "127.0.0.1", "realname": nick, "account": nick,
            "account_kind": "agent", "modes": "B", "caps": 0, "away": None, "auto_away": False, "signon": T,
            "server": "b.test", "info": "node b", **more}


def test_a_move_between_two_other_nodes_changes_only_where_the_lines_go(node_a):
    """bot1 of b, in #c, moves to c: a's alice sees nothing, and what she says to bot1 goes to c."""
    h, replica, link = node_a
    link.peers.add("c")
    replica.apply({"op": "user", **_record(7, "bot1"), "from": "b"})
    replica.apply({"op": "join", "id": 7, "chan": "#c", "modes": "v", "ts": T, "from": "b"})
    replica.apply({"op": "move", "node": "b", "old": 7, **_record(3, "bot1", server="c.test", info="node c"),
                   "chans": [["#c", "v"]], "from": "c"})
    h.server.flush_all()
    assert h.lines("alice") == []
    assert names_here(h) == ":irc.test 353 alice = #c :@alice +bot1"
    link.forwarded.clear()
    h.send("alice", "PRIVMSG bot1 :where are you?")
    assert [(node, ident, data) for node, ident, data in link.forwarded] == [
        ("c", 3, b":alice!alice@127.0.0.1 PRIVMSG bot1 :where are you?\r\n")]
    h.send("alice", "WHOIS bot1")
    assert ":irc.test 312 alice bot1 c.test :node c" in h.lines("alice")


def test_an_identity_of_this_node_moving_away_closes_its_connection_quietly(node_a):
    """alice's identity moves to b: her connection here gets ERROR, carol (here, in #c) nothing;
    alice is b's user now, still @ in #c."""
    h, replica, link = node_a
    alice = h.clients["alice"]
    h.run(h.server.accounts.create("alice", "alice-pw-4821"))
    h.send("alice", "PRIVMSG NickServ :IDENTIFY alice alice-pw-4821")
    h.register("carol")
    h.send("carol", "JOIN #c")
    h.take("carol")
    assert alice.account == "alice"
    h.take("alice")
    replica.apply({"op": "move", "node": "a", "old": alice.id, **_record(5, "alice", account_kind="person", modes=""),
                   "chans": [["#c", "o"]], "from": "b"})
    h.server.flush_all()
    assert h.lines("alice") == [f"ERROR :Closing link: 127.0.0.1 ({MOVED})"]
    assert h.lines("carol") == []
    assert h.server.state.nick_holder("alice") is replica.remote.find_remote("b", 5)
    assert names_here(h, "carol") == ":irc.test 353 carol = #c :carol @alice"
    h.send("carol", "PRIVMSG alice :still there?")
    assert link.forwarded[-1] == ("b", 5, b":carol!carol@127.0.0.1 PRIVMSG alice :still there?\r\n")
    h.send("carol", "LUSERS")
    assert ":irc.test 251 carol :There are 2 users and 0 invisible on 2 servers" in h.lines("carol")
