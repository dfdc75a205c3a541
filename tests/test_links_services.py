"""LINKS lists the built-in services as a server linked to this one (docs/conformance.md)."""

from __future__ import annotations

import pytest

from ircd.config import ConfigError, from_dict
from tests.harness import Harness, config


def harness(tmp_path, **server):
    return Harness(config(storage={"durability": "off"}, server=server), db=str(tmp_path / "s.db"))


def test_links_lists_the_services_one_hop_away(tmp_path):
    """RFC 2812 3.4.5 RPL_LINKS "<mask> <server> :<hopcount> <server info>"; irctest's
    testLinksWithServices expects the services as a second server, linked to this one."""
    h = harness(tmp_path)
    try:
        h.register("alice")
        h.send("alice", "LINKS")
        assert h.lines("alice") == [
            ":irc.test 364 alice irc.test irc.test :0 pircd IRC server",
            ":irc.test 364 alice services.irc.test irc.test :1 Accounts and NickServ, built into this server",
            ":irc.test 365 alice * :End of /LINKS list",
        ]
    finally:
        h.close()


def test_services_name_and_whois_nickserv(tmp_path):
    h = harness(tmp_path, name="My.Little.Server", services_name="My.Little.Services")
    try:
        h.register("alice")
        h.send("alice", "LINKS")
        assert h.lines("alice")[1] == (
            ":My.Little.Server 364 alice My.Little.Services My.Little.Server :1 Accounts and NickServ, "
            "built into this server"
        )
        h.send("alice", "WHOIS nickserv")
        assert h.lines("alice") == [
            ":My.Little.Server 311 alice NickServ NickServ services.pircd * :Account services",
            ":My.Little.Server 312 alice NickServ My.Little.Services :Accounts and NickServ, built into this server",
            ":My.Little.Server 318 alice NickServ :End of /WHOIS list",
        ]
    finally:
        h.close()


def test_services_name_is_a_server_name_of_its_own():
    with pytest.raises(ConfigError) as info:
        from_dict({"server": {"name": "irc.example.org", "services_name": "IRC.example.org"}})
    assert info.value.problems == [("server", "Value error, services_name must differ from name")]
    with pytest.raises(ConfigError) as info:
        from_dict({"server": {"services_name": "services"}})
    assert info.value.problems == [
        ("server.services_name", "Value error, server name must contain a dot and no spaces")
    ]
