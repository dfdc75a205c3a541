"""Acting on users of other nodes (docs/scaling.md): an account's identity moving from one node to
another with its channels, a person's second connection on another node, the forced rename of a
guest of another node holding an account's name, and a nick two users hold when two sides of a
split meet. The live tests run two nodes; the nick held twice is tested on a node built in this
process and given the other node's ops."""

from __future__ import annotations

import pytest

from ircd.cluster.replica import Replica
from ircd.state.cluster import ClusterState
from tests import dbs
from tests.clusters import bare, lines, names, until
from tests.harness import Harness
from tests.live import IRCClient
from tests.proc import cli
from tests.test_cluster import _agent_and_watcher
from tests.test_cluster_channels import FakeLink

MOVED = "Nick taken over by a new connection of its account"


def _said(sender: IRCClient, text: str, to: IRCClient, target: str) -> str:
    """What ``to`` gets (without tags) when ``sender`` says ``text`` to ``target``: a line that
    also orders everything ``sender``'s node said before it."""
    sender.send(f"PRIVMSG {target} :{text}")
    return bare(until(to, "PRIVMSG")[-1])


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
    assert dbs.rows(url, "SELECT folded, node FROM cluster_nicks WHERE folded = 'bot1'") == [("bot1", "b")]
    for client in (carol, dan, new):
        client.close()
