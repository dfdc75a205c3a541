"""Operators: OPER with argon2 hashes from the config, KILL, REHASH, WALLOPS, user modes i w o B."""

from __future__ import annotations

import functools

import pytest

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


def test_oper_host_mismatch_is_491(opers):
    """RFC 2812 ERR_NOOPERHOST: "If a client sends an OPER message and the server has not been configured
    to allow connections from the client's host as an operator, this error MUST be returned.\""""
    h = opers
    h.send("alice", "OPER remote s3cret")
    assert h.lines("alice") == [":irc.test 491 alice :No O-lines for your host"]


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
