"""Several pircd nodes as one network (docs/scaling.md): the [cluster] table, and two nodes on
one PostgreSQL database and one NATS server, started here on free ports, seen by their clients
as one network (nicks, direct messages, channels, NAMES, WHOIS, LUSERS)."""

from __future__ import annotations

import asyncio
import re

import pytest

from tests import dbs
from tests.clusters import bare, cluster_of, lines, names, relayed, until
from tests.live import IRCClient
from tests.natsd import NatsServer
from tests.proc import ServerProcess, cli, write_config

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d")


# the table ---------------------------------------------------------------------------------


def _problems(result) -> tuple[int, list[str]]:
    return result.returncode, [ln for ln in result.stderr.splitlines() if not _LOG_LINE.match(ln)]


def test_cluster_table_needs_postgresql_at_check_config_and_serve(tmp_path):
    """With [cluster] the store must be PostgreSQL: a SQLite file is refused with one line by
    both commands, before anything starts; a postgresql:// URL is a valid configuration."""
    path = tmp_path / "c.toml"
    path.write_text(f'[server]\ndb = "{tmp_path}/pircd.db"\n[cluster]\nnode = "a"\nnats = ["nats://127.0.0.1:4222"]\n')
    refused = (2, ["configuration is not valid:",
                   "  cluster: needs a PostgreSQL server.db (postgresql://...): the nodes share one database, "
                   "and a SQLite file belongs to one process"])
    assert _problems(cli("check-config", str(path))) == refused
    assert _problems(cli("serve", "--config", str(path), "--listen", "127.0.0.1:0", "--no-http")) == refused
    assert not (tmp_path / "pircd.db").exists()
    path.write_text('[server]\ndb = "postgresql://pircd@127.0.0.1/pircd"\n'
                    '[cluster]\nnode = "a"\nnats = ["nats://127.0.0.1:4222"]\n')
    assert cli("check-config", str(path)).stdout == f"{path}: configuration is valid\n"


def test_cluster_table_keys_are_checked(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[server]\ndb = "postgresql://pircd@127.0.0.1/pircd"\n'
                    '[cluster]\nnode = "a.b"\nnats = ["127.0.0.1:4222"]\nport = 1\n')
    assert _problems(cli("check-config", str(path))) == (2, [
        "configuration is not valid:",
        "  cluster.node: String should match pattern '^[A-Za-z0-9_-]{1,32}$'",
        "  cluster.nats: Value error, '127.0.0.1:4222' is not a nats://HOST:PORT or tls://HOST:PORT URL",
        "  cluster.port: Extra inputs are not permitted",
    ])
    path.write_text('[server]\ndb = "postgresql://pircd@127.0.0.1/pircd"\n[cluster]\nnode = "a"\nnats = []\n')
    assert _problems(cli("check-config", str(path))) == (2, [
        "configuration is not valid:",
        "  cluster.nats: List should have at least 1 item after validation, not 0",
    ])


def test_the_cluster_table_cannot_change_on_rehash():
    """A node's links are made at start-up: REHASH refuses a [cluster] added, removed or changed."""
    from ircd.config import from_dict
    from ircd.server import Server

    server_section = {"db": "postgresql://pircd@127.0.0.1/pircd"}
    cluster = {"node": "a", "nats": ["nats://127.0.0.1:4222"]}
    server = Server(from_dict({"server": server_section, "cluster": cluster}))
    for other in ({"server": server_section}, {"server": server_section, "cluster": {**cluster, "node": "b"}}):
        with pytest.raises(ValueError) as refused:
            server.rehash(from_dict(other))
        assert str(refused.value) == "cluster cannot change while the server runs (restart instead)"
    lone = Server(from_dict({"server": server_section}))
    with pytest.raises(ValueError):
        lone.rehash(from_dict({"server": server_section, "cluster": cluster}))


def test_a_node_that_cannot_reach_nats_does_not_start(tmp_path):
    """Its first connection to NATS must succeed (once up, it reconnects for as long as it takes);
    the error names the server without the credentials in its URL."""
    port = dbs.free_port()  # nothing listens there
    config = write_config(tmp_path, server={"db": dbs.fresh_url(dbs.name_for(tmp_path / "c"))},
                          cluster={"node": "a", "nats": [f"nats://pircd:nats-pw-77@127.0.0.1:{port}"]})
    result = cli("serve", "--config", str(config), "--no-http")
    assert _problems(result) == (1, [f"pircd: cannot start: cannot reach NATS at nats://127.0.0.1:{port}: "
                                     "nats: no servers available for connection"])


def test_ids_of_two_nodes_never_meet():
    """Nodes sharing a database put their number in the top bits of the ids' sequence: in one
    millisecond (a frozen clock) two nodes' ids differ, and each node's keep increasing, also
    after an id of the other node was observed (a restart reading the newest stored id)."""
    from ircd.proto.msgid import IdGenerator

    gens = [IdGenerator(lambda: 1_700_000_000.0) for _ in range(2)]
    for number, gen in enumerate(gens):
        gen.set_node(number, 8)
    made = [[gen.next_int() for _ in range(300)] for gen in gens]
    assert not set(made[0]) & set(made[1])
    assert all((i >> 14) & 0xFF == n for n, ids in enumerate(made) for i in ids)
    assert all(ids == sorted(ids) and len(set(ids)) == 300 for ids in made)
    gens[0].observe(made[1][-1])  # above node 0's band: node 0 goes on after it
    assert gens[0].next_int() > made[1][-1]
    gens[1].observe(made[0][-1])  # below node 1's band: nothing to do
    assert gens[1].next_int() > made[1][-1]
    with pytest.raises(ValueError):
        gens[0].set_node(256, 8)


# two nodes -----------------------------------------------------------------------------------


def test_two_nodes_are_one_network(nodes):
    url, a, b = nodes
    bob = IRCClient(b.port)
    bob.register("bob", ["echo-message", "message-tags", "server-time"])
    bob.send("MONITOR + alice")
    assert [bare(ln) for ln in lines(bob)][-1:] == [":b.test 731 bob alice"]

    alice = IRCClient(a.port)
    alice.register("alice", ["message-tags", "server-time"])
    # b learns of alice from a: its MONITOR says she came online
    assert bare(until(bob, "730")[-1]) == ":b.test 730 bob alice!alice@127.0.0.1"

    # one nick on the network: b refuses alice's nick; a claim in the database (a node's
    # client whose arrival the others have not heard of yet) refuses it as well
    carol = IRCClient(b.port)
    carol.send("NICK alice")
    assert lines(carol) == [":b.test 433 * alice :Nickname is already in use"]
    conn = dbs.connect(url)
    conn.execute("INSERT INTO cluster_nicks (folded, node, client, claimed_at) VALUES ('dave', 'a', 999, 0)")
    conn.close()
    carol.send("NICK dave")
    assert lines(carol) == [":b.test 433 * dave :Nickname is already in use"]
    carol.register("carol")
    assert dbs.rows(url, "SELECT folded, node FROM cluster_nicks ORDER BY folded") == [
        ("alice", "a"), ("bob", "b"), ("carol", "b"), ("dave", "a")]

    # a direct message to a user of the other node, with one msgid and server-time on both;
    # the msgid's sequence starts with b's number (a started first: 0, b: 1)
    assert dbs.rows(url, "SELECT node, number FROM cluster_nodes ORDER BY node") == [("a", 0), ("b", 1)]
    bob.send("PRIVMSG alice :hello from b")
    echo = until(bob, "PRIVMSG")[-1]
    match = re.fullmatch(r"@msgid=(\S+);time=\S+ :bob!bob@127\.0\.0\.1 PRIVMSG alice :hello from b", echo)
    assert match is not None and (int(match.group(1), 16) >> 14) & 0xFF == 1
    assert until(alice, "PRIVMSG")[-1] == echo
    assert relayed(alice, "NOTICE bob :hello from a", bob) == ":alice!alice@127.0.0.1 NOTICE bob :hello from a"

    # WHOIS and LUSERS see the other node's users (with the real name alice set on a)
    alice.send("SETNAME :Alice A.")
    alice.send("PRIVMSG carol :renamed")  # after the SETNAME on the way from a to b
    until(carol, "PRIVMSG")
    carol.send("WHOIS alice")
    whois = lines(carol)
    assert whois[0] == ":b.test 311 carol alice alice 127.0.0.1 * :Alice A."
    assert [ln for ln in whois if " 312 " in ln] == [":b.test 312 carol alice a.test :pircd IRC server"]
    assert whois[-1] == ":b.test 318 carol alice :End of /WHOIS list"
    carol.send("LUSERS")
    lusers = lines(carol)
    # the network's users on its two servers; this node's own (255, 265) apart from all (266)
    assert lusers == [":b.test 251 carol :There are 3 users and 0 invisible on 2 servers",
                      ":b.test 252 carol 0 :IRC Operators online",
                      ":b.test 253 carol 0 :unknown connection(s)",  # alice is no unknown connection here
                      ":b.test 254 carol 0 :channels formed",
                      ":b.test 255 carol :I have 2 clients and 1 servers",
                      ":b.test 265 carol 2 2 :Current local users 2, max 2",
                      ":b.test 266 carol 3 3 :Current global users 3, max 3"]

    # a channel across the nodes: JOIN, NAMES, PRIVMSG both ways, PART
    alice.send("JOIN #c")
    assert [bare(ln) for ln in lines(alice)] == [":alice!alice@127.0.0.1 JOIN #c", ":a.test 353 alice = #c @alice",
                                                   ":a.test 366 alice #c :End of /NAMES list"]
    alice.send("PRIVMSG bob :in #c now")  # after the JOIN on the same way: b knows of it before this
    until(bob, "PRIVMSG")
    bob.send("JOIN #c")
    joined = [bare(ln) for ln in lines(bob)]
    assert joined == [":bob!bob@127.0.0.1 JOIN #c", ":b.test 353 bob = #c :@alice bob",
                      ":b.test 366 bob #c :End of /NAMES list"]
    assert bare(until(alice, "JOIN")[-1]) == ":bob!bob@127.0.0.1 JOIN #c"
    bob.send("PRIVMSG #c :hi all")
    echo = until(bob, "PRIVMSG")[-1]
    assert bare(echo) == ":bob!bob@127.0.0.1 PRIVMSG #c :hi all"
    assert until(alice, "PRIVMSG")[-1] == echo
    assert relayed(alice, "PRIVMSG #c :hi bob", bob) == ":alice!alice@127.0.0.1 PRIVMSG #c :hi bob"
    assert names(alice) == ":a.test 353 alice = #c :@alice bob"

    # MODE and TOPIC on one node: the channel is the same on the other
    assert relayed(alice, "MODE #c +mv bob", bob) == ":alice!alice@127.0.0.1 MODE #c +mv bob"
    assert relayed(alice, "TOPIC #c :across nodes", bob) == ":alice!alice@127.0.0.1 TOPIC #c :across nodes"
    bob.send("TOPIC #c")
    bob.send("MODE #c")
    got = [bare(ln) for ln in lines(bob)]
    assert got[0] == ":b.test 332 bob #c :across nodes"
    assert re.fullmatch(r":b\.test 333 bob #c alice!alice@127\.0\.0\.1 \d+", got[1])
    assert got[2] == ":b.test 324 bob #c +mnt"
    assert names(bob) == ":b.test 353 bob = #c :@alice +bob"
    bob.send("WHO #c")
    assert [bare(ln) for ln in lines(bob)] == [
        ":b.test 352 bob #c alice 127.0.0.1 a.test alice H@ :0 Alice A.",
        ":b.test 352 bob #c bob 127.0.0.1 b.test bob H+ :0 bob",
        ":b.test 315 bob #c :End of WHO list"]
    assert relayed(bob, "PRIVMSG #c :voiced now", alice) == ":bob!bob@127.0.0.1 PRIVMSG #c :voiced now"
    alice.send("@+typing=active TAGMSG #c")  # client tags cross too
    tagmsg = until(bob, "TAGMSG")[-1]
    assert re.fullmatch(r"@\+typing=active;msgid=\S+;time=\S+ :alice!alice@127\.0\.0\.1 TAGMSG #c", tagmsg), tagmsg
    assert relayed(bob, "PART #c :bye", alice) == ":bob!bob@127.0.0.1 PART #c bye"
    assert names(alice) == ":a.test 353 alice = #c @alice"

    # KICK of a user of the other node: it is out of the channel on both
    bob.send("JOIN #c")
    until(alice, "JOIN")
    assert relayed(alice, "KICK #c bob :out", bob) == ":alice!alice@127.0.0.1 KICK #c bob out"
    bob.send("NAMES #c")
    assert [bare(ln) for ln in lines(bob)] == [":b.test 353 bob = #c @alice", ":b.test 366 bob #c :End of /NAMES list"]
    assert bare(until(alice, "KICK")[-1]) == ":alice!alice@127.0.0.1 KICK #c bob out"
    assert names(alice) == ":a.test 353 alice = #c @alice"

    # QUIT: the others see it, the nick is free again on every node
    bob.send("JOIN #c")
    until(alice, "JOIN")
    assert relayed(bob, "QUIT :later", alice) == ":bob!bob@127.0.0.1 QUIT :Quit: later"
    alice.send("WHOIS bob")
    assert [bare(ln) for ln in lines(alice)][0] == ":a.test 401 alice bob :No such nick/channel"
    for client in (alice, bob, carol):
        client.close()


def _alice_and_bob_in_c(a: ServerProcess, b: ServerProcess) -> tuple[IRCClient, IRCClient]:
    """alice on a and bob on b in #c, alice watching bob (MONITOR); clients that wait up to a
    minute for a line (a node gives another up after seconds of silence)."""
    alice = IRCClient(a.port, timeout=60)
    alice.register("alice")
    alice.send("JOIN #c")
    lines(alice)
    alice.send("MONITOR + bob")
    assert lines(alice)[-1:] == [":a.test 731 alice bob"]
    bob = IRCClient(b.port, timeout=60)
    bob.register("bob")
    until(alice, "730")  # a knows of bob
    alice.send("PRIVMSG bob :join #c")  # after alice's JOIN on the way from a to b
    until(bob, "PRIVMSG")
    bob.send("JOIN #c")
    assert until(alice, "JOIN")[-1] == ":bob!bob@127.0.0.1 JOIN #c"
    return alice, bob


def test_a_node_killed_leaves_with_a_netsplit_and_frees_its_nicks(nodes):
    """kill -9 of a node: the others stop hearing its heartbeat, its users leave their channels
    with a netsplit QUIT, and its nicks are free again."""
    url, a, b = nodes
    alice, bob = _alice_and_bob_in_c(a, b)
    b.kill9()
    assert until(alice, "QUIT")[-1] == ":bob!bob@127.0.0.1 QUIT :*.net *.split"
    assert lines(alice) == [":a.test 731 alice bob"]
    alice.send("NICK bob")
    assert lines(alice) == [":alice!alice@127.0.0.1 NICK bob"]
    assert dbs.rows(url, "SELECT folded, node FROM cluster_nicks ORDER BY folded") == [("bob", "a")]
    alice.close()
    bob.close()


def test_a_login_after_registration_is_seen_on_the_other_node(nodes):
    url, a, b = nodes
    assert cli("account", "add", "olive", "--password-stdin", "--db", url, stdin="olive-pw-4821\n").returncode == 0
    carol = IRCClient(b.port)
    carol.register("carol")
    carol.send("MONITOR + guest")
    lines(carol)
    guest = IRCClient(a.port)
    guest.register("guest")
    until(carol, "730")
    guest.send("PRIVMSG NickServ :IDENTIFY olive olive-pw-4821")
    assert [ln for ln in lines(guest) if " 900 " in ln] == [
        ":a.test 900 guest guest!guest@127.0.0.1 olive :You are now logged in as olive"]
    guest.send("PRIVMSG carol :logged in")  # after the login on the way from a to b
    until(carol, "PRIVMSG")
    carol.send("WHOIS guest")
    assert ":b.test 330 carol guest olive :is logged in as" in lines(carol)
    # a private channel made on a is as invisible on b to those not in it
    guest.send("JOIN #olive/den")
    guest.send("PRIVMSG carol :made #olive/den")  # after the JOIN on the way from a to b
    until(carol, "PRIVMSG")
    carol.send("NAMES #olive/den")
    assert lines(carol) == [":b.test 366 carol #olive/den :End of /NAMES list"]
    carol.close()
    guest.close()


def _agent_and_watcher(url: str, b: ServerProcess) -> IRCClient:
    """The agent bot1 (password bot1-pw-93157) of olive, and dan on node b watching it (MONITOR)."""
    assert cli("account", "add", "olive", "--password-stdin", "--db", url, stdin="olive-pw-4821\n").returncode == 0
    assert cli("account", "add", "bot1", "--kind", "agent", "--owner", "olive", "--password-stdin", "--db", url,
               stdin="bot1-pw-93157\n").returncode == 0
    dan = IRCClient(b.port)
    dan.register("dan")
    dan.send("MONITOR + bot1")
    assert lines(dan)[-1:] == [":b.test 731 dan bot1"]
    return dan


@pytest.fixture
def nodes_without_always_on(tmp_path, nats):
    url, started = cluster_of(tmp_path, nats[0].url, ("a", "b"), accounts={"always_on": "off"})
    try:
        yield url, started[0], started[1]
    finally:
        for node in started:
            node.terminate()


def test_an_agent_has_one_connection_across_nodes(nodes_without_always_on):
    """An agent that is not always-on logging in on b while connected on a: a closes the old
    connection (ERROR, QUIT to its peers), b's connection holds the nick, on both nodes. (An
    always-on identity moves instead: tests/test_cluster_identity.py.)"""
    url, a, b = nodes_without_always_on
    dan = _agent_and_watcher(url, b)
    old = IRCClient(a.port)
    old.login("bot1", "bot1-pw-93157")
    old.send("JOIN #c")
    lines(old)
    assert until(dan, "730")[-1] == ":b.test 730 dan bot1!bot1@127.0.0.1"
    carol = IRCClient(a.port)
    carol.register("carol")
    carol.send("JOIN #c")
    lines(carol)
    new = IRCClient(b.port)
    new.login("bot1", "bot1-pw-93157")
    assert old.read_all_until_close()[-1] == "ERROR :Closing link: 127.0.0.1 (Nick taken over by a new connection of its account)"
    assert until(carol, "QUIT")[-1] == ":bot1!bot1@127.0.0.1 QUIT :Nick taken over by a new connection of its account"
    carol.send("MONITOR + bot1")  # online again when a hears of b's connection (at once if it has)
    assert until(carol, "730")[-1] == ":a.test 730 carol bot1!bot1@127.0.0.1"
    carol.send("PRIVMSG bot1 :which one?")
    assert until(new, "PRIVMSG")[-1] == ":carol!carol@127.0.0.1 PRIVMSG bot1 :which one?"
    carol.send("NICK bot1")
    assert lines(carol) == [":a.test 433 carol bot1 :Nickname is already in use"]
    # dan saw the new connection come online, and (the old one's QUIT reached b before carol's
    # message did) no offline for the old one, whose nick b's connection holds
    assert lines(dan) == [":b.test 730 dan bot1!bot1@127.0.0.1"]
    for client in (carol, dan, new):
        client.close()


def test_an_always_on_agent_stays_on_the_network_and_its_end_reaches_every_node(nodes):
    """An agent is always-on (the default): when its connection on a closes, b still has it; when
    the identity ends on a without a connection (the account suspended), b forgets it too."""
    url, a, b = nodes
    dan = _agent_and_watcher(url, b)
    bot = IRCClient(a.port)
    bot.login("bot1", "bot1-pw-93157")
    assert until(dan, "730")[-1] == ":b.test 730 dan bot1!bot1@127.0.0.1"
    bot.send("QUIT :bye")
    bot.read_all_until_close()
    carol = IRCClient(a.port)
    carol.register("carol")
    carol.send("PRIVMSG dan :after bot1 left")  # after bot1's QUIT on the way from a to b
    until(dan, "PRIVMSG")
    dan.send("WHOIS bot1")
    assert lines(dan)[0] == ":b.test 311 dan bot1 bot1 127.0.0.1 * bot1"
    assert cli("account", "suspend", "bot1", "--db", url).returncode == 0
    assert until(dan, "731")[-1] == ":b.test 731 dan bot1"
    dan.close()
    carol.close()


def test_kill_of_a_user_of_the_other_node(nodes):
    """An operator on b kills a user of a: a closes the connection, with the reason KILL gives,
    and its channel peers see the QUIT."""
    url, a, b = nodes
    alice = IRCClient(a.port)
    alice.register("alice")
    carol = IRCClient(a.port)
    carol.register("carol")
    for client in (alice, carol):
        client.send("JOIN #c")
        lines(client)
    root = IRCClient(b.port)
    root.register("root")
    root.send("OPER root root-pw-5521")
    root.send("MONITOR + alice")
    until(root, "730")
    alice.send("MODE alice +i")
    alice.send("PRIVMSG root :invisible now")  # after the mode change on the way from a to b
    until(root, "PRIVMSG")
    root.send("LUSERS")
    lusers = lines(root)
    assert ":b.test 251 root :There are 2 users and 1 invisible on 2 servers" in lusers
    assert ":b.test 252 root 1 :IRC Operators online" in lusers
    root.send("PRIVMSG carol :an operator now")  # after root's OPER on the way from b to a
    until(carol, "PRIVMSG")
    carol.send("LUSERS")
    assert ":a.test 252 carol 1 :IRC Operators online" in lines(carol)
    root.send("KILL alice :spam")
    assert alice.read_all_until_close()[-1] == "ERROR :Closing link: 127.0.0.1 (Killed (root (spam)))"
    assert until(carol, "QUIT")[-1] == ":alice!alice@127.0.0.1 QUIT :Killed (root (spam))"
    assert until(root, "731")[-1] == ":b.test 731 root alice"
    carol.close()
    root.close()


def test_nick_rows_settle_who_holds_a_nick(tmp_path):
    """The store functions behind the nick claims, on PostgreSQL: the first node to claim a nick
    holds it, a node holding it may claim it again, only its holder frees it, a node's rows go
    with it, and a takeover moves a row from the node named to the new one."""
    from ircd.store import cluster as rows
    from ircd.store.db import connect_sync
    from ircd.store.migrate import migrate

    conn = connect_sync(dbs.fresh_url(dbs.name_for(tmp_path / "claims")))
    try:
        migrate(conn, rows.CLUSTER_TRACK, rows.CLUSTER_MIGRATIONS)
        assert (rows.claim_nick(conn, "ann", "a", 1, 0), rows.claim_nick(conn, "ann", "b", 7, 0)) == (True, False)
        assert rows.claim_nick(conn, "ann", "a", 2, 0) is True
        rows.release_nick(conn, "ann", "b")
        assert conn.execute("SELECT node, client FROM cluster_nicks").fetchall() == [("a", 2)]
        assert rows.take_over_nick(conn, "ann", "c", 3, 0, "b") is False  # b does not hold it
        assert rows.take_over_nick(conn, "ann", "b", 8, 0, "a") is True
        assert rows.take_over_nick(conn, "zed", "b", 9, 0, "a") is True  # a had deleted it already
        assert rows.release_node(conn, "b") == 2
        assert rows.claim_nick(conn, "ann", "c", 4, 0) is True
        assert [rows.node_number(conn, n) for n in ("a", "b", "a")] == [0, 1, 0]
    finally:
        conn.close()


def test_nats_restarting_splits_the_nodes_and_joins_them_again(nodes, nats):
    """NATS goes away: each node gives the other up (netsplit QUITs); NATS comes back on its
    port: the nodes find each other again, the users rejoin their channels with a JOIN, and the
    channel carries messages across again."""
    url, a, b = nodes
    alice, bob = _alice_and_bob_in_c(a, b)
    nats[0].stop()
    assert until(alice, "QUIT")[-1] == ":bob!bob@127.0.0.1 QUIT :*.net *.split"
    assert until(bob, "QUIT")[-1] == ":alice!alice@127.0.0.1 QUIT :*.net *.split"
    nats.append(NatsServer(nats[0].port))
    assert until(alice, "JOIN")[-1] == ":bob!bob@127.0.0.1 JOIN #c"
    assert until(bob, "JOIN")[-1] == ":alice!alice@127.0.0.1 JOIN #c"
    assert relayed(bob, "PRIVMSG #c :together again", alice) == ":bob!bob@127.0.0.1 PRIVMSG #c :together again"
    alice.close()
    bob.close()


def test_a_line_for_many_clients_of_a_node_is_one_frame():
    """A fan-out forwards one frame per run of the same bytes, with every client's id; a client's
    own lines stay in order (a run is cut when another line comes between)."""
    from ircd.cluster.link import Link, unpack_lines

    link = Link("n", "a", ["nats://127.0.0.1:1"], lambda op: None, lambda frames: None)
    link._queue = asyncio.Queue()  # noqa: SLF001 - what the sending task would publish

    async def fan_out() -> list[bytes]:
        for ident in (1, 2, 3):
            link.forward("b", ident, b"one\r\n")
        link.forward("b", 2, bytearray(b"two\r\n"))
        link.forward("b", 4, b"one\r\n")  # the same bytes again, after another line: a frame of its own
        link.forward("c", 9, b"one\r\n")
        link._queue_lines()  # noqa: SLF001 - what the end of the event loop's pass does
        return [link._queue.get_nowait() for _ in range(link._queue.qsize())]  # noqa: SLF001

    queued = asyncio.run(fan_out())
    assert [(subject, unpack_lines(payload)) for subject, payload in queued] == [
        ("pircd.n.node.b", [([1, 2, 3], b"one\r\n"), ([2], b"two\r\n"), ([4], b"one\r\n")]),
        ("pircd.n.node.c", [([9], b"one\r\n")]),
    ]


def test_messages_longer_than_nats_takes_go_in_pieces():
    """Lines for a node are packed in messages of at most NATS's max_payload, cut between
    frames; a longer message (a big burst) goes in pieces that are put together again, each
    sender's apart from the others'."""
    from ircd.cluster.link import Joiner, pack_lines, split, unpack_lines

    frames = [([n, n + 1000], bytes([65 + n % 26]) * (100 + n)) for n in range(60)]
    messages = pack_lines(frames, 1000)
    assert len(messages) > 1 and all(len(m) <= 1000 for m in messages)
    assert [f for m in messages for f in unpack_lines(m)] == frames
    whole = pack_lines(frames)  # no limit: one message
    assert len(whole) == 1 and unpack_lines(whole[0]) == frames

    joiner = Joiner()
    first, second = bytes(range(256)) * 40, b'{"op": "burst"}' * 500
    pieces_a, pieces_b = split(first, 1000, "a"), split(second, 1000, "node-b")
    assert all(len(p) <= 1000 for p in pieces_a + pieces_b)
    got = []
    for pair in zip(pieces_a, pieces_b):  # two senders' pieces interleaved
        got += [whole for whole in map(joiner.piece, pair) if whole is not None]
    got += [whole for whole in map(joiner.piece, pieces_a[len(pieces_b):] + pieces_b[len(pieces_a):])
            if whole is not None]
    assert sorted(got) == sorted([first, second])
    joiner.piece(split(first, 1000, "a")[0])  # a restarts in the middle of a message
    joiner.restarted("a")
    assert [joiner.piece(p) for p in split(b"{}", 1000, "a")] == [b"{}"]


def test_a_burst_and_lines_past_the_payload_limit_reach_the_other_node(tmp_path):
    """With NATS taking 4 KB a message, a's burst of 30 users in #big (some 10 KB) reaches b
    when it starts, and a line said on b to #big reaches every member on a (30 frames)."""
    from tests.clusters import cluster_of, start_node

    nats = NatsServer(max_payload=4096)
    started: list[ServerProcess] = []
    try:
        url, started = cluster_of(tmp_path, nats.url, ("a",))
        members = []
        for n in range(30):
            member = IRCClient(started[0].port)
            member.register(f"member{n}-{'x' * 20}")
            member.send("JOIN #big")
            lines(member)
            members.append(member)
        started.append(start_node(tmp_path, url, nats.url, "b"))
        bob = IRCClient(started[1].port)
        bob.register("bob")
        bob.send("JOIN #big")
        assert bare(until(bob, "366")[-1]) == ":b.test 366 bob #big :End of /NAMES list"
        bob.send("LUSERS")
        assert ":b.test 266 bob 31 31 :Current global users 31, max 31" in [bare(x) for x in lines(bob)]
        said = "PRIVMSG #big :" + " ".join(["word"] * 60)
        bob.send(said)
        for member in members:
            assert bare(until(member, "PRIVMSG")[-1]) == f":bob!bob@127.0.0.1 {said}"
        assert not [ln for node in started for ln in node.log if "publish failed" in ln]
        for client in (*members, bob):
            client.close()
    finally:
        for node in started:
            node.terminate()
        nats.stop()
