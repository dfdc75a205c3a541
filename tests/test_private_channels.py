"""PIRCAN private channels (#<account>/<name>): owner-only creation and invitations, and
invisibility: a non-member's replies are byte-for-byte those for a name nobody uses.

The differential test runs the same script in two worlds that differ only in whether the
owner created the private channel, and compares every reply a non-member gets; it also
compares, in the first world, the replies for the private channel with those for an unused
name in the same namespace. Included: a never-invited account, a kicked former member, a
guest without an account, and a restart of the server in between.
"""

from __future__ import annotations

import base64
import random
import re

import pytest

from ircd.commands.welcome import lusers_counts
from ircd.state.client import Client
from tests.harness import Harness, config
from tests.test_lusers_counts import formed

ACCOUNTS = ("bob", "carol", "dave", "eve")
PASSWORD = "sesame123"


def make(db: str) -> Harness:
    return Harness(
        config(storage={"durability": "off"}, server={"extensions": ["pircan"]}, pircan={"guests_may_join": True},
               flood={"enabled": False}),
        db=db,
        extensions=True,
    )


def login(h: Harness, name: str, caps: str = "") -> None:
    """Register ``name``; accounts log in with SASL while CAP negotiation holds registration."""
    h.connect(name)
    h.send(name, "CAP LS 302")
    h.send(name, "CAP REQ :" + " ".join(c for c in ("sasl" if name in ACCOUNTS else "", caps) if c))
    h.send(name, f"NICK {name}")
    h.send(name, f"USER {name} 0 * :{name}")
    if name in ACCOUNTS:
        h.send(name, "AUTHENTICATE PLAIN")
        h.send(name, "AUTHENTICATE " + base64.b64encode(f"\0{name}\0{PASSWORD}".encode()).decode())
    h.send(name, "CAP END")
    assert h.clients[name].registered
    h.take(name)


def build(db: str, with_channel: bool) -> Harness:
    h = make(db)
    for name in ACCOUNTS:
        h.run(h.server.accounts.create(name, PASSWORD))
    for name in ACCOUNTS:
        login(h, name, "message-tags server-time")
    login(h, "guest")
    h.send("bob", "JOIN #bob/public")  # a channel everyone can see, for a reference point
    if with_channel:
        h.send("bob", "JOIN #bob/secret")
        h.send("bob", "TOPIC #bob/secret :the secret topic")
        h.send("bob", "MODE #bob/secret +b x!*@*")
        h.send("bob", "INVITE carol #bob/secret")
        h.send("carol", "JOIN #bob/secret")
        h.send("bob", "INVITE dave #bob/secret")
        h.send("dave", "JOIN #bob/secret")
        h.send("bob", "PRIVMSG #bob/secret :hello members")
        h.send("bob", "KICK #bob/secret dave :out")
    h.settle()
    for name in list(h.clients):
        h.take(name)
    return h


SCRIPT = [
    "JOIN {c}",
    "PART {c}",
    "PRIVMSG {c} :hi",
    "NOTICE {c} :hi",
    "@+typing=active TAGMSG {c}",
    "TOPIC {c}",
    "TOPIC {c} :mine now",
    "NAMES {c}",
    "WHO {c}",
    "WHO {c} %tcuhnfar,42",
    "WHOIS bob",
    "WHOIS carol",
    "LIST",
    "LIST {c}",
    "LIST >0",
    "MODE {c}",
    "MODE {c} +b",
    "MODE {c} +e",
    "MODE {c} +I",
    "MODE {c} +o eve",
    "MODE {c} -P",
    "INVITE eve {c}",
    "INVITE carol {c}",
    "KICK {c} carol",
    "UNINVITE carol {c}",
    "CHATHISTORY LATEST {c} * 10",
    "LUSERS",
    "PRIVMSG @{c} :hi ops",
    "JOIN {c},#bob/public",
]

# tags that differ between runs for reasons unrelated to the channel (ids, times)
_VOLATILE = re.compile(r"(msgid|time)=[^; ]*;?")


def replies(h: Harness, who: str, channel: str) -> list[list[str]]:
    out = []
    for line in SCRIPT:
        h.send(who, line.format(c=channel))
        got = [_VOLATILE.sub("", ln) for ln in h.lines(who)]
        out.append(got)
        if line.startswith("JOIN"):  # undo a successful join so the next lines see the same state
            h.send(who, "PART #bob/public")
            h.take(who)
    return out


@pytest.mark.parametrize("who", ["eve", "dave", "guest"])
def test_non_member_sees_nothing(tmp_path, who):
    with_channel = build(str(tmp_path / "a.db"), with_channel=True)
    without = build(str(tmp_path / "b.db"), with_channel=False)
    try:
        seen_existing = replies(with_channel, who, "#bob/secret")
        seen_missing = replies(without, who, "#bob/secret")
        for line, a, b in zip(SCRIPT, seen_existing, seen_missing):
            assert a == b, line
        # in the same world, the private channel answers like an unused name in its namespace
        unused = [
            [ln.replace("#bob/nothere", "#bob/secret") for ln in lines]
            for lines in replies(with_channel, who, "#bob/nothere")
        ]
        for line, a, b in zip(SCRIPT, replies(with_channel, who, "#bob/secret"), unused):
            assert a == b, line
        # members are not told of the probing either
        for member in ("bob", "carol"):
            assert [ln for ln in with_channel.lines(member) if "secret" in ln] == []
    finally:
        with_channel.close()
        without.close()


def test_invisible_after_restart_and_members_keep_access(tmp_path):
    db_a, db_b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    build(db_a, with_channel=True).close()
    build(db_b, with_channel=False).close()
    restarted, never = make(db_a), make(db_b)
    try:
        for h in (restarted, never):
            for name in ("eve", "dave", "carol"):
                login(h, name, "message-tags server-time")
        channel = restarted.server.state.find_channel("#bob/secret")
        assert channel is not None and "P" in channel.modes and channel.owner_account == "bob"
        for who in ("eve", "dave"):
            assert replies(restarted, who, "#bob/secret") == replies(never, who, "#bob/secret")
        # carol joined with an invitation before the restart: still a member, may rejoin
        restarted.send("carol", "JOIN #bob/secret")
        lines = restarted.lines("carol")
        assert lines[0].endswith(":carol!carol@127.0.0.1 JOIN #bob/secret")
        assert any(" 332 carol #bob/secret :the secret topic" in ln for ln in lines)
    finally:
        restarted.close()
        never.close()


def untagged(h: Harness, who: str) -> list[str]:
    return [re.sub(r"^@\S+ ", "", ln) for ln in h.lines(who)]


def test_only_owner_creates_and_invites_and_invitations_last(tmp_path):
    h = build(str(tmp_path / "c.db"), with_channel=True)
    try:
        h.send("eve", "JOIN #carol/room")
        assert untagged(h, "eve") == [":irc.test 403 eve #carol/room :No such channel"]
        h.send("carol", "INVITE eve #bob/secret")
        assert untagged(h, "carol") == [
            ":irc.test 482 carol #bob/secret :Only the channel owner can invite to this channel"
        ]
        h.send("bob", "INVITE guest #bob/secret")
        assert untagged(h, "bob") == [
            ":irc.test 482 bob #bob/secret :Only logged-in accounts can be invited to this channel"
        ]
        h.send("bob", "INVITE eve #bob/secret")
        assert untagged(h, "bob") == [":irc.test 341 bob eve #bob/secret"]
        h.settle()
        h.close()
        h = make(str(tmp_path / "c.db"))  # the invitation survives a restart
        login(h, "eve")
        h.send("eve", "JOIN #bob/secret")
        assert untagged(h, "eve")[0] == ":eve!eve@127.0.0.1 JOIN #bob/secret"
        h.settle()
        rows = h.run(h.server.store.read(
            lambda conn: conn.execute(
                "SELECT channel, account FROM pircan_channel_members ORDER BY account"
            ).fetchall()
        ))
        assert rows == [("#bob/secret", "carol"), ("#bob/secret", "eve")]
    finally:
        h.close()


def test_uninvite_and_owner_makes_channel_public(tmp_path):
    h = build(str(tmp_path / "d.db"), with_channel=True)
    try:
        h.send("bob", "INVITE eve #bob/secret")
        h.take("bob")
        h.send("bob", "UNINVITE eve #bob/secret")
        assert untagged(h, "bob") == [":irc.test UNINVITE bob eve #bob/secret :Invitation withdrawn"]
        assert untagged(h, "eve") == [":bob!bob@127.0.0.1 INVITE eve #bob/secret"]
        h.send("eve", "JOIN #bob/secret")
        assert untagged(h, "eve") == [":irc.test 403 eve #bob/secret :No such channel"]
        h.send("bob", "UNINVITE eve #bob/secret")
        assert untagged(h, "bob") == [
            ":irc.test FAIL UNINVITE NO_SUCH_INVITATION eve #bob/secret "
            ":That account has no standing invitation to this channel"
        ]
        h.send("carol", "MODE #bob/secret -P")
        assert untagged(h, "carol") == [":irc.test 482 carol #bob/secret :You're not channel operator"]
        h.send("bob", "MODE #bob/secret -P")
        assert untagged(h, "bob") == [":bob!bob@127.0.0.1 MODE #bob/secret -P"]
        h.send("eve", "JOIN #bob/secret")
        assert untagged(h, "eve")[0] == ":eve!eve@127.0.0.1 JOIN #bob/secret"
        h.send("bob", "JOIN #public")
        h.send("bob", "MODE #public +P")
        assert untagged(h, "bob")[-1] == (
            ":irc.test 482 bob #public :Only channels in an account's namespace (#account/name) can be private"
        )
    finally:
        h.close()


def test_a_guest_is_told_how_to_register_when_registration_is_open(tmp_path):
    """A person with a plain client and no account follows the 477 text to a channel."""
    for accounts, how in (
        ({"registration": True}, "no account yet? PRIVMSG NickServ :REGISTER <password>, then log in"),
        ({"registration": True, "email_required": True, "email_command": ["true"]},
         "no account yet? PRIVMSG NickServ :REGISTER <password> <email>, then the code sent to it"),
    ):
        h = Harness(config(storage={"durability": "off"}, server={"extensions": ["pircan"]}, accounts=accounts),
                    db=str(tmp_path / f"r{len(accounts)}.db"),
                    extensions=True)
        try:
            login(h, "guest")
            h.send("guest", "JOIN #lobby")
            assert untagged(h, "guest") == [
                ":irc.test 477 guest #lobby :You need to be logged in to an account to join channels: SASL "
                f"(CAP REQ :sasl) or PRIVMSG NickServ :IDENTIFY <account> <password>; {how}"]
            if "email_required" not in accounts:
                h.send("guest", f"PRIVMSG NickServ :REGISTER {PASSWORD}")
                h.send("guest", "JOIN #lobby")
                assert ":guest!guest@127.0.0.1 JOIN #lobby" in untagged(h, "guest")
        finally:
            h.close()


def test_guests_need_an_account_by_default(tmp_path):
    h = Harness(config(storage={"durability": "off"}, server={"extensions": ["pircan"]}), db=str(tmp_path / "g.db"),
                extensions=True)
    try:
        login(h, "guest")
        h.send("guest", "JOIN #lobby")
        assert untagged(h, "guest") == [
            ":irc.test 477 guest #lobby :You need to be logged in to an account to join channels: SASL (CAP REQ "
            ":sasl) or PRIVMSG NickServ :IDENTIFY <account> <password>; accounts are made by the server's "
            "operator (ADMIN says who that is)"]
        h.run(h.server.accounts.create("eve", PASSWORD))
        login(h, "eve")
        h.send("eve", "JOIN #lobby")
        assert untagged(h, "eve")[0] == ":eve!eve@127.0.0.1 JOIN #lobby"
    finally:
        h.close()


# LUSERS ---------------------------------------------------------------------------------------


def walk(h: Harness, viewer: Client) -> int:
    """Channels formed as ``viewer`` may see them, counted over every channel of the server."""
    exists = h.server.visibility.channel_exists_for
    return sum(1 for ch in h.server.state.all_channels() if (ch.members or ch.owner_account) and exists(viewer, ch))


def test_lusers_counts_a_private_channel_for_those_who_may_see_it(tmp_path):
    """254 counts a private channel for its members and owner alone (a non-member cannot learn
    that it exists), and a registered channel while it is empty too."""
    h = build(str(tmp_path / "l.db"), with_channel=True)
    try:
        # bob's channels, both private (new ones in a namespace are): #bob/public with bob alone,
        # #bob/secret with bob and carol (dave kicked out)
        seen = {who: formed(h, who) for who in ("bob", "carol", "dave", "eve", "guest")}
        assert seen == {"bob": 2, "carol": 1, "dave": 0, "eve": 0, "guest": 0}
        h.send("guest", "JOIN #lobby")  # no account: not registered, ends with its last member
        h.send("eve", "JOIN #eve/room")  # eve's own namespace: private, and registered to her
        seen = {who: formed(h, who) for who in ("bob", "carol", "eve", "guest")}
        assert seen == {"bob": 3, "carol": 2, "eve": 2, "guest": 1}
        h.send("bob", "PART #bob/secret")
        h.send("carol", "QUIT")  # the last member: the channel stays, registered to bob
        h.send("eve", "PART #eve/room")
        login(h, "carol")  # a member who joined stays one
        seen = {who: formed(h, who) for who in ("bob", "carol", "dave", "eve", "guest")}
        assert seen == {"bob": 3, "carol": 2, "dave": 1, "eve": 2, "guest": 1}
        h.send("guest", "KICK #lobby guest")  # its last member
        seen = {who: formed(h, who) for who in ("bob", "carol", "dave", "eve", "guest")}
        assert seen == {"bob": 2, "carol": 1, "dave": 0, "eve": 1, "guest": 0}
        for who in seen:
            assert walk(h, h.clients[who]) == seen[who], who
    finally:
        h.close()


CHANNELS = ("#pub", "#open", "#bob/a", "#bob/b", "#carol/c", "#eve/e")
PEOPLE = ("bob", "carol", "eve", "guest", "zed")


def _step(h: Harness, rng: random.Random, here: list[str], renamed: list[int]) -> None:
    """One random JOIN, PART, KICK, QUIT (or a login back), INVITE, MODE +P/-P or RENAME."""
    gone = [who for who in PEOPLE if who not in here]
    who = rng.choice(here)
    mine = [ch.name for ch in h.clients[who].channels.values()]
    kind = rng.choice(("join", "join", "part", "kick", "quit", "invite", "mode", "rename"))
    if kind == "quit" and gone and (len(here) == 1 or rng.random() < 0.5):
        back = rng.choice(gone)
        login(h, back)
        here.append(back)
    elif kind == "quit":
        h.send(who, "QUIT")
        here.remove(who)
    elif kind == "join" or not mine:
        h.send(who, f"JOIN {rng.choice(CHANNELS)}")
    elif kind == "part":
        h.send(who, f"PART {rng.choice(mine)}")
    elif kind == "kick":
        h.send(who, f"KICK {rng.choice(mine)} {rng.choice(here)}")
    elif kind == "invite":
        h.send(who, f"INVITE {rng.choice(here)} {rng.choice(mine)}")
    elif kind == "mode":
        h.send(who, f"MODE {rng.choice(mine)} {rng.choice('+-')}P")
    else:
        renamed[0] += 1
        channel, n = rng.choice(mine), renamed[0]
        # within its namespace; or from none into the renamer's own (not private then), or none
        new = f"{channel.partition('/')[0]}/r{n}" if "/" in channel else rng.choice((f"#r{n}", f"#{who}/r{n}"))
        h.send(who, f"RENAME {channel} {new}")
    h.take(who)


@pytest.mark.parametrize("other", [None, "named", "unnamed"])
def test_lusers_counts_match_a_walk_over_every_channel(tmp_path, other):
    """After each of a random run of JOIN, PART, KICK, QUIT, INVITE, +P/-P and RENAME, every
    client's channels formed are what a walk over all channels counts. ``other``: a second
    filter, hiding namespaced channels from clients without an account, that names the
    channels it might hide (PIRCAN names them too: each must count once) or does not (LUSERS
    then walks all channels)."""
    h = make(str(tmp_path / "w.db"))
    try:
        state = h.server.state
        if other is not None:
            may_hide = (lambda: [ch for ch in state.all_channels() if "/" in ch.name]) if other == "named" else None
            h.server.visibility.add_filter(
                lambda viewer, ch: "/" not in ch.name or viewer.account_folded is not None or viewer in ch.members,
                may_hide,
            )
        for name in ("bob", "carol", "eve"):
            h.run(h.server.accounts.create(name, PASSWORD))
        here = list(PEOPLE)
        for name in here:
            login(h, name)
        rng, renamed, hidden = random.Random(254), [0], 0
        for _ in range(300):
            _step(h, rng, here, renamed)
            for who in here:
                viewer = h.clients[who]
                count = lusers_counts(h.server, viewer).channels
                assert count == walk(h, viewer), (who, [ch.name for ch in h.server.state.all_channels()])
                hidden += count < h.server.state.channels_formed()
            if other is None:  # PIRCAN names the channels in a namespace, and no channel gone since
                assert h.server.visibility.may_hide() == {ch for ch in state.all_channels() if "/" in ch.name}
        assert hidden > 100  # the run did hide channels from someone, often
    finally:
        h.close()
