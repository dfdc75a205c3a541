"""Three nodes, one killed under load (docs/scaling.md, node loss): a channel with members on
nodes a, b and c carries a load of messages from c while b is killed with kill -9. What c's
client said reaches a's in order with the same msgids, b's users leave with a netsplit QUIT on
a and c, their nicks are free at once, b comes back cleanly, and every PIRCAN SEND b
acknowledged before it died is in the database."""

from __future__ import annotations

from ircd.proto.lines import parse_line
from tests import dbs
from tests.clusters import bare, cluster_of, lines, start_node, until
from tests.live import IRCClient
from tests.proc import cli
from tests.test_durability import agreed, sasl_client

TAGS = ["echo-message", "message-tags", "server-time"]
LOAD = 300  # messages from carol
KILL_AT = 150  # b dies after this many
PACE = 5  # carol waits for a PONG after every PACE messages


def said(raw: list[str], nick: str = "carol") -> list[tuple[str, str]]:
    """(msgid, text) of each PRIVMSG from ``nick`` in ``raw``."""
    out = []
    for line in raw:
        msg = parse_line(line.encode())
        if msg is not None and msg.command == "PRIVMSG" and msg.source and msg.source.startswith(nick + "!"):
            out.append((msg.tags["msgid"], msg.params[1]))
    return out


def members(client: IRCClient) -> list[str]:
    client.send("NAMES #c")
    got = [bare(ln) for ln in lines(client)]
    return sorted(next(ln for ln in got if " 353 " in ln).split(" :", 1)[1].split())


def test_three_nodes_lose_one_under_load_and_take_it_back(tmp_path, nats):
    url = dbs.fresh_url(dbs.name_for(tmp_path / "cluster"))  # cluster_of's database: the accounts first
    for args in (("olive",), ("sndr", "--kind", "agent", "--owner", "olive"),
                 ("recv", "--kind", "agent", "--owner", "olive")):
        assert cli("account", "add", *args, "--password-stdin", "--db", url, stdin="sesame123\n").returncode == 0
    url, (a, b, c) = cluster_of(tmp_path, nats[0].url, ("a", "b", "c"))
    try:
        alice = IRCClient(a.port, timeout=60)
        alice.register("alice", TAGS)
        alice.send("JOIN #c")
        alice.send("MONITOR + bob,carol")
        lines(alice)
        bob = IRCClient(b.port, timeout=60)
        bob.register("bob")
        bob.send("MONITOR + carol")
        lines(bob)
        carol = IRCClient(c.port, timeout=60)
        carol.register("carol", TAGS)
        until(alice, "730")
        until(alice, "730")  # a knows bob and carol
        until(bob, "730")  # b knows carol
        alice.send("PRIVMSG bob :come in")  # after alice's JOIN on the way from a to b
        alice.send("PRIVMSG carol :come in")  # and from a to c
        until(bob, "PRIVMSG")
        until(carol, "PRIVMSG")
        bob.send("JOIN #c")
        until(alice, "JOIN")
        bob.send("PRIVMSG carol :me too")  # after bob's JOIN on the way from b to c
        until(carol, "PRIVMSG")
        carol.send("JOIN #c")
        until(alice, "JOIN")
        until(bob, "JOIN")
        assert members(alice) == members(carol) == ["@alice", "bob", "carol"]

        recv = agreed(b.port, "recv", ["sndr"])  # both agents on b
        sender = sasl_client(b.port, "sndr", "sesame123")
        acked: list[str] = []
        echoes: list[str] = []
        for i in range(LOAD):
            carol.send(f"PRIVMSG #c :load {i}")
            if i % PACE == PACE - 1:
                echoes += lines(carol)
                if i < KILL_AT:  # a durable SEND on b, acknowledged, between two paces
                    sender.send(f"SEND recv :note {i}")
                    receipt = sender.read_until(lambda m: m.command in ("SEND", "FAIL"))[-1]
                    assert receipt.command == "SEND" and receipt.params[1] == "OK", receipt
                    acked.append(receipt.params[2])
            if i == KILL_AT:
                sender.send("SEND recv :in flight")  # its receipt may or may not come
                b.kill9()
        echoes += lines(carol)
        late = [m for m in (parse_line(ln.encode()) for ln in sender.read_all_until_close()) if m is not None]
        acked += [m.params[2] for m in late if m.command == "SEND" and m.params[1] == "OK"]

        # a's member got every message carol sent, in order, with the msgids carol's echo has
        sent = said(echoes)
        assert [text for _, text in sent] == [f"load {i}" for i in range(LOAD)]
        got_a = until(alice, "PRIVMSG", f"load {LOAD - 1}")
        assert said(got_a) == sent
        # b's users leave with a netsplit QUIT on a and on c
        assert bare(until(alice, "QUIT")[-1]) == ":bob!bob@127.0.0.1 QUIT :*.net *.split"
        assert bare(until(carol, "QUIT")[-1]) == ":bob!bob@127.0.0.1 QUIT :*.net *.split"
        # their nicks are free at once
        bob2 = IRCClient(a.port, timeout=60)
        assert [m.command for m in bob2.register("bob")][0] == "001"
        bob2.send("JOIN #c")
        assert bare(until(carol, "JOIN")[-1]) == ":bob!bob@127.0.0.1 JOIN #c"
        assert bare(until(alice, "JOIN")[-1]) == ":bob!bob@127.0.0.1 JOIN #c"
        # every SEND b acknowledged is stored
        stored = {f"{row[0]:016x}" for row in dbs.rows(url, "SELECT id FROM pircan_messages WHERE sender = 'sndr'")}
        assert len(acked) >= KILL_AT // PACE and set(acked) <= stored

        # b comes back: its new user is seen on a and c, and #c is the same on all three
        for client in (alice, carol):
            client.send("MONITOR + dave")
            lines(client)
        b = start_node(tmp_path, url, nats[0].url, "b")
        dave = IRCClient(b.port, timeout=60)
        dave.register("dave")
        # a and c know dave: b has had each one's burst (their users and channels) by then
        assert bare(until(alice, "730")[-1]) == ":a.test 730 alice dave!dave@127.0.0.1"
        assert bare(until(carol, "730")[-1]) == ":c.test 730 carol dave!dave@127.0.0.1"
        dave.send("JOIN #c")
        assert bare(until(alice, "JOIN")[-1]) == ":dave!dave@127.0.0.1 JOIN #c"
        assert bare(until(carol, "JOIN")[-1]) == ":dave!dave@127.0.0.1 JOIN #c"
        lines(dave)
        assert members(alice) == members(carol) == members(dave) == ["@alice", "bob", "carol", "dave"]
        for client in (alice, bob, bob2, carol, dave, recv):
            client.close()
    finally:
        for node in (a, b, c):
            node.terminate()
