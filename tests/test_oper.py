"""Operators: OPER with argon2 hashes from the config, KILL, REHASH, WALLOPS, user modes i w o B."""

from __future__ import annotations

import asyncio
import functools

import pytest

from ircd import passwords
from ircd.config import from_dict, load
from ircd.passwords import hash_sync
from tests.harness import Harness

A = "alice!alice@127.0.0.1"


@functools.lru_cache(maxsize=None)
def argon2_hash(password: str) -> str:
    return hash_sync(password)


OPER_TOML = """
[server]
name = "irc.test"
network = "TestNet"
motd = "{motd}"

[[opers]]
name = "root"
password = "{hash}"
hostmask = "*!*@127.0.0.1"
"""


@pytest.fixture
def opers():
    """alice and bob registered on a server with two [[opers]] blocks (argon2 hashes)."""
    cfg = from_dict({
        "server": {"name": "irc.test", "network": "TestNet"},
        "opers": [
            {"name": "root", "password": argon2_hash("s3cret")},
            {"name": "remote", "password": argon2_hash("s3cret"), "hostmask": "*!*@192.0.2.*"},
        ],
    })
    harness = Harness(cfg)
    harness.register("alice")
    harness.register("bob")
    yield harness
    harness.close()


def test_oper_with_argon2_hash(opers):
    """RFC 2812 3.1.4: "A normal user uses the OPER command to obtain operator privileges.\"; RPL_YOUREOPER
    "is sent back to a client which has just successfully issued an OPER message\""""
    h = opers
    h.send("alice", "OPER root s3cret")
    assert h.lines("alice") == [
        ":irc.test 381 alice :You are now an IRC operator",
        ":alice MODE alice +o",
    ]
    assert h.clients["alice"].is_oper
    h.send("bob", "LUSERS")
    assert ":irc.test 252 bob 1 :IRC Operators online" in h.lines("bob")


def test_oper_wrong_password_or_name_is_464(opers):
    """RFC 2812 3.1.4: ERR_PASSWDMISMATCH for a wrong password."""
    h = opers
    h.send("alice", "OPER root wrong")
    h.send("alice", "OPER nobody s3cret")
    h.send("alice", "OPER root")
    assert h.lines("alice") == [
        ":irc.test 464 alice :Password incorrect",
        ":irc.test 464 alice :Password incorrect",
        ":irc.test 461 alice OPER :Not enough parameters",
    ]
    assert not h.clients["alice"].is_oper


def test_oper_host_allowed_by_no_block_is_491(opers):
    """RFC 2812 ERR_NOOPERHOST: "If a client sends an OPER message and the server has not been configured
    to allow connections from the client's host as an operator, this error MUST be returned." No block
    accepts 198.51.100.7, so every OPER from there is 491, whatever the name and password."""
    h = Harness(from_dict({
        "server": {"name": "irc.test", "network": "TestNet"},
        "opers": [{"name": "root", "password": argon2_hash("s3cret"), "hostmask": "*!*@127.0.0.1"}],
    }))
    try:
        h.register("carol", ip="198.51.100.7")
        for line in ("OPER root s3cret", "OPER root wrong", "OPER nobody x"):
            h.send("carol", line)
        assert h.lines("carol") == [":irc.test 491 carol :No O-lines for your host"] * 3
    finally:
        h.close()


def test_oper_block_for_another_host_answers_like_a_wrong_password(opers):
    """issue 23.3: from a host the block does not allow, the right password must not answer differently
    from a wrong one (that would confirm the password)."""
    h = opers
    h.send("alice", "OPER remote s3cret")
    h.send("alice", "OPER remote wrong")
    assert h.lines("alice") == [":irc.test 464 alice :Password incorrect"] * 2
    assert not h.clients["alice"].is_oper


def test_oper_guesses_are_throttled_per_source(opers):
    """issue 23.3: OPER is throttled like SASL (accounts.login_attempts per source and name)."""
    h = opers
    for i in range(5):
        h.send("alice", f"OPER root guess{i}")
    h.send("alice", "OPER root s3cret")
    assert h.lines("alice") == [":irc.test 464 alice :Password incorrect"] * 5 + [
        ":irc.test 464 alice :Too many failed attempts; try again in 60 seconds"
    ]
    assert not h.clients["alice"].is_oper
    h.register("carol", ip="127.0.0.1")  # the same source
    h.send("carol", "OPER root s3cret")
    assert h.lines("carol") == [":irc.test 464 carol :Too many failed attempts; try again in 60 seconds"]
    h.clock.advance(61)
    h.send("alice", "OPER root s3cret")
    assert h.numerics("alice") == ["381", "MODE"]


def test_simultaneous_oper_guesses_are_counted_before_they_are_checked(opers):
    """issue 23.3: guesses sent at the same moment from many connections are counted before any check
    ends, so no more than accounts.login_attempts of them are checked."""
    h = opers
    names = [f"c{i}" for i in range(8)]
    pending = []
    for name in names:
        h.register(name)
        pending.append(h.server.handle_line(h.clients[name], f"OPER root guess-{name}".encode()))

    async def together() -> None:
        await asyncio.gather(*pending)

    h.run(together())
    h.server.flush_all()
    answers = [h.lines(name) for name in names]
    assert answers[:5] == [[f":irc.test 464 {name} :Password incorrect"] for name in names[:5]]
    assert answers[5:] == [
        [f":irc.test 464 {name} :Too many failed attempts; try again in 60 seconds"] for name in names[5:]
    ]


def test_unknown_oper_name_costs_the_same_check(opers, monkeypatch):
    """issue 23.3: an unknown name must not answer faster than a real one: it is checked against a
    configured hash."""
    checked: list[str] = []
    real = passwords.verify

    async def recording(hashed: str, password: str) -> bool:
        checked.append(hashed)
        return await real(hashed, password)

    monkeypatch.setattr(passwords, "verify", recording)
    opers.send("alice", "OPER nobody s3cret")
    assert opers.lines("alice") == [":irc.test 464 alice :Password incorrect"]
    assert checked == [argon2_hash("s3cret")]


def test_oper_commands_need_oper_481(opers):
    """RFC 2812 ERR_NOPRIVILEGES: "Any command requiring operator privileges to operate MUST return this
    error to indicate the attempt was unsuccessful.\""""
    h = opers
    for line in ("KILL bob :x", "REHASH", "WALLOPS :x"):
        h.send("alice", line)
    assert h.lines("alice") == [":irc.test 481 alice :Permission Denied- You're not an IRC operator"] * 3


def test_kill(opers):
    """RFC 2812 3.7.1: "The KILL command is used to cause a client-server connection to be closed by the
    server which has the actual connection.\""""
    h = opers
    h.register("carol")
    h.send("bob", "JOIN #a")
    h.send("carol", "JOIN #a")
    h.take("bob")
    h.take("carol")
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "KILL bob :spamming")
    assert h.lines("alice") == []
    assert h.lines("bob") == ["ERROR :Closing link: 127.0.0.1 (Killed (alice (spamming)))"]
    assert h.conns["bob"].closed
    assert h.lines("carol") == [":bob!bob@127.0.0.1 QUIT :Killed (alice (spamming))"]
    h.send("alice", "KILL bob :again")
    h.send("alice", "KILL carol")
    assert h.lines("alice") == [
        ":irc.test 401 alice bob :No such nick/channel",
        ":irc.test 461 alice KILL :Not enough parameters",
    ]


def test_wallops_reaches_plus_w_users(opers):
    """RFC 2812 3.7.2: "The WALLOPS command is used to send a message to all currently connected users who
    have set the 'w' user mode for themselves.\""""
    h = opers
    h.register("carol")
    h.send("bob", "MODE bob +w")
    h.take("bob")
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "WALLOPS :server restart at noon")
    assert h.lines("bob") == [f":{A} WALLOPS :server restart at noon"]
    assert h.lines("carol") == []
    assert h.lines("alice") == []
    h.send("alice", "WALLOPS")
    assert h.lines("alice") == [":irc.test 461 alice WALLOPS :Not enough parameters"]


def test_deoper_with_mode_minus_o(opers):
    """RFC 2812 3.1.5: a user may remove its own operator status with MODE -o."""
    h = opers
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "MODE alice -o")
    assert h.lines("alice") == [f":{A} MODE alice -o"]
    h.send("alice", "KILL bob :x")
    h.send("alice", "LUSERS")
    lines = h.lines("alice")
    assert lines[0] == ":irc.test 481 alice :Permission Denied- You're not an IRC operator"
    assert ":irc.test 252 alice 0 :IRC Operators online" in lines


def test_oper_status_in_whois_who_and_userhost(opers):
    """RFC 2812 RPL_WHOISOPERATOR (313), the '*' WHO flag and the '*' USERHOST marker show operators."""
    h = opers
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("bob", "WHOIS alice")
    assert ":irc.test 313 bob alice :is an IRC operator" in h.lines("bob")
    h.send("bob", "WHO alice")
    h.send("bob", "USERHOST alice")
    assert h.lines("bob") == [
        ":irc.test 352 bob * alice 127.0.0.1 irc.test alice H* :0 Alice Realname",
        ":irc.test 315 bob alice :End of WHO list",
        ":irc.test 302 bob alice*=+alice@127.0.0.1",
    ]


def test_help_lists_oper_commands_only_to_opers(opers):
    """HELP shows operator-only verbs to operators only."""
    h = opers
    h.send("bob", "HELP")
    assert "KILL" not in " ".join(h.lines("bob"))
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "HELP")
    assert "KILL" in " ".join(h.lines("alice"))


def test_rehash_reloads_config(opers, tmp_path):
    """RFC 2812 3.7.3 (REHASH): "The rehash command is an administrative command which can be used by an
    operator to force the server to re-read and process its configuration file.\""""
    h = opers
    path = tmp_path / "pircd.toml"
    path.write_text(OPER_TOML.format(motd="new motd", hash=argon2_hash("s3cret")))
    h.server.config_path = str(path)
    h.server.reload_config = lambda: h.server.rehash(load(path))
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "REHASH")
    assert h.lines("alice") == [f":irc.test 382 alice {path} Rehashing"]
    h.send("bob", "MOTD")
    assert ":irc.test 372 bob :- new motd" in h.lines("bob")


def test_rehash_keeps_old_config_on_error(opers, tmp_path):
    """A configuration that does not load is reported (FAIL REHASH CONFIG_ERROR) and the old one stays."""
    h = opers
    path = tmp_path / "pircd.toml"
    path.write_text("[server]\nname = 'no dot'\n")
    h.server.config_path = str(path)
    h.server.reload_config = lambda: h.server.rehash(load(path))
    old = h.server.config
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "REHASH")
    msgs = h.messages("alice")
    assert [(m.command, m.params[:2]) for m in msgs] == [("FAIL", ["REHASH", "CONFIG_ERROR"])]
    assert "server.name" in msgs[0].params[-1]
    assert h.server.config is old


def test_rehash_without_config_file(opers):
    """A server started without a file has nothing to reload."""
    h = opers
    h.send("alice", "OPER root s3cret")
    h.take("alice")
    h.send("alice", "REHASH")
    assert h.lines("alice") == [
        ":irc.test FAIL REHASH NO_CONFIG_FILE :This server was started without a configuration file"
    ]


def test_bot_mode(opers):
    """IRCv3 bot mode: "a user mode ... which indicates that the user is a bot"; WHO shows the B flag and
    WHOIS RPL_WHOISBOT (335)."""
    h = opers
    h.send("bob", "MODE bob +B")
    assert h.lines("bob") == [":bob!bob@127.0.0.1 MODE bob +B"]
    h.send("alice", "WHO bob")
    assert h.lines("alice") == [
        ":irc.test 352 alice * bob 127.0.0.1 irc.test bob HB :0 Bob Realname",
        ":irc.test 315 alice bob :End of WHO list",
    ]


def test_invisible_mode(opers):
    """RFC 2812 3.1.5: "i - marks a users as invisible"; a mask WHO does not list invisible users to
    strangers."""
    h = opers
    h.send("bob", "MODE bob +i")
    h.send("alice", "WHO b*")
    assert h.lines("alice") == [":irc.test 315 alice b* :End of WHO list"]
