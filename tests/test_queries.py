"""Queries: WHO/WHOX, WHOIS, WHOWAS, ISON, USERHOST, AWAY, VERSION, TIME, INFO, ADMIN, HELP, MOTD, LUSERS."""

from __future__ import annotations

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"


# WHO -------------------------------------------------------------------------


def test_who_channel(room):
    """RFC 2812 3.6.1 / Modern IRC RPL_WHOREPLY: "<client> <channel> <username> <host> <server> <nick>
    <flags> :<hopcount> <realname>\""""
    h = room
    h.send("bob", "AWAY :afk")
    h.send("alice", "WHO #a")
    assert h.lines("alice") == [
        ":irc.test 352 alice #a alice 127.0.0.1 irc.test alice H@ :0 Alice Realname",
        ":irc.test 352 alice #a bob 127.0.0.1 irc.test bob G :0 Bob Realname",
        ":irc.test 315 alice #a :End of WHO list",
    ]


def test_who_mask_and_nick(room):
    """RFC 2812 3.6.1: "The <mask> passed to WHO is matched against users' host, server, real name and
    nickname if the channel <mask> cannot be found.\""""
    h = room
    h.register("robert")
    h.send("alice", "WHO bob")
    assert h.lines("alice") == [
        ":irc.test 352 alice * bob 127.0.0.1 irc.test bob H :0 Bob Realname",
        ":irc.test 315 alice bob :End of WHO list",
    ]
    h.send("alice", "WHO rob*")
    assert h.lines("alice") == [
        ":irc.test 352 alice * robert 127.0.0.1 irc.test robert H :0 Robert Realname",
        ":irc.test 315 alice rob* :End of WHO list",
    ]
    h.send("alice", "WHO nobody")
    h.send("alice", "WHO #nope")
    assert h.lines("alice") == [
        ":irc.test 315 alice nobody :End of WHO list",
        ":irc.test 315 alice #nope :End of WHO list",
    ]


def test_who_hides_invisible_users_from_outsiders(room):
    """RFC 2812 3.6.1: invisible users (+i) are listed only to users sharing a channel with them."""
    h = room
    h.register("carol")
    h.send("bob", "MODE bob +i")
    h.send("carol", "WHO #a")
    assert h.lines("carol") == [
        ":irc.test 352 carol #a alice 127.0.0.1 irc.test alice H@ :0 Alice Realname",
        ":irc.test 315 carol #a :End of WHO list",
    ]


def test_whox_all_fields(room):
    """IRCv3 WHOX: "fields ... t: the token ... c: channel ... u: username ... i: IP ... h: hostname ...
    s: server ... n: nickname ... f: flags ... d: hopcount ... l: idle seconds ... a: account name ...
    o: channel op level ... r: realname"; the realname comes last."""
    h = room
    h.clock.advance(7)
    h.send("alice", "WHO #a %tcuihsnfdlaor,123")
    assert h.lines("alice") == [
        ":irc.test 354 alice 123 #a alice 127.0.0.1 127.0.0.1 irc.test alice H@ 0 7 0 n/a :Alice Realname",
        ":irc.test 354 alice 123 #a bob 255.255.255.255 127.0.0.1 irc.test bob H 0 7 0 n/a :Bob Realname",
        ":irc.test 315 alice #a :End of WHO list",
    ]


def test_whox_field_order_is_fixed(room):
    """IRCv3 WHOX: fields are sent in the fixed order, whatever order the client asked for them."""
    h = room
    h.send("alice", "WHO bob %rnau")
    assert h.lines("alice") == [
        ":irc.test 354 alice bob bob 0 :Bob Realname",
        ":irc.test 315 alice bob :End of WHO list",
    ]
    h.send("alice", "WHO bob %t")
    assert h.lines("alice") == [":irc.test 354 alice 0", ":irc.test 315 alice bob :End of WHO list"]


def test_who_operators_only(room):
    """RFC 2812 3.6.1: "If the "o" parameter is passed only operators are returned according to the name
    mask supplied.\""""
    h = room
    h.send("alice", "WHO #a o")
    assert h.lines("alice") == [":irc.test 315 alice #a :End of WHO list"]


# WHOIS -----------------------------------------------------------------------


def test_whois(room):
    """RFC 2812 3.6.2: "This command is used to query information about particular user.\""""
    h = room
    h.clock.advance(30)
    h.send("bob", "PRIVMSG #a :hi")
    h.clock.advance(12)
    h.send("bob", "AWAY :busy")
    h.send("bob", "MODE bob +B")
    h.send("alice", "WHOIS bob")
    assert h.lines("alice") == [
        f":{B} PRIVMSG #a hi",
        ":irc.test 311 alice bob bob 127.0.0.1 * :Bob Realname",
        ":irc.test 319 alice bob #a",
        ":irc.test 312 alice bob irc.test :pircd IRC server",
        ":irc.test 301 alice bob busy",
        ":irc.test 335 alice bob :is a bot on TestNet",
        ":irc.test 317 alice bob 12 1800000000 :seconds idle, signon time",
        ":irc.test 318 alice bob :End of /WHOIS list",
    ]


def test_whois_self_shows_actual_host(room):
    """Modern IRC RPL_WHOISACTUALLY (338) is shown to the user itself (and to operators)."""
    h = room
    h.send("alice", "WHOIS ALICE")
    assert h.lines("alice") == [
        ":irc.test 311 alice alice alice 127.0.0.1 * :Alice Realname",
        ":irc.test 319 alice alice @#a",
        ":irc.test 312 alice alice irc.test :pircd IRC server",
        ":irc.test 338 alice alice alice@127.0.0.1 127.0.0.1 :Actual user@host, actual IP",
        ":irc.test 317 alice alice 0 1800000000 :seconds idle, signon time",
        ":irc.test 318 alice alice :End of /WHOIS list",
    ]


def test_whois_with_server_parameter_and_unknown_nick(room):
    """RFC 2812 3.6.2: "WHOIS [ <target> ] <mask> *( "," <mask> )"; an unknown nick gets 401 then 318."""
    h = room
    h.send("alice", "WHOIS irc.test bob")
    assert h.numerics("alice") == ["311", "319", "312", "317", "318"]
    h.send("alice", "WHOIS nobody")
    h.send("alice", "WHOIS")
    assert h.lines("alice") == [
        ":irc.test 401 alice nobody :No such nick/channel",
        ":irc.test 318 alice nobody :End of /WHOIS list",
        ":irc.test 461 alice WHOIS :Not enough parameters",
    ]


def test_whois_hides_secret_channels(room):
    """RFC 2811 4.2.6: secret channels are not shown to non-members (in WHOIS replies)."""
    h = room
    h.register("carol")
    h.send("alice", "JOIN #secret")
    h.send("alice", "MODE #secret +s")
    h.send("carol", "WHOIS alice")
    lines = h.lines("carol")
    assert ":irc.test 319 carol alice @#a" in lines
    assert not any("#secret" in ln for ln in lines)


def test_whois_of_an_invisible_user_shows_only_shared_channels(room):
    """A +i user's channels are listed only to those in them too (irctest's testInvisibleWhois):
    bob shares #a with alice and sees it, not #b; carol shares nothing and gets no 319."""
    h = room
    h.register("carol")
    h.send("alice", "JOIN #b")
    h.send("carol", "WHOIS alice")
    assert ":irc.test 319 carol alice :@#a @#b" in h.lines("carol")
    h.send("alice", "MODE alice +i")
    h.lines("alice")
    h.send("carol", "WHOIS alice")
    assert not [ln for ln in h.lines("carol") if " 319 " in ln]
    h.send("bob", "WHOIS alice")
    assert [ln for ln in h.lines("bob") if " 319 " in ln] == [":irc.test 319 bob alice @#a"]
    h.send("alice", "WHOIS alice")
    assert [ln for ln in h.lines("alice") if " 319 " in ln] == [":irc.test 319 alice alice :@#a @#b"]


# WHOWAS ----------------------------------------------------------------------


def test_whowas(room):
    """RFC 2812 3.6.3: "Whowas asks for information about a nickname which no longer exists.\""""
    h = room
    h.send("bob", "QUIT")
    h.send("alice", "WHOWAS bob")
    assert h.lines("alice") == [
        f":{B} QUIT Quit:",
        ":irc.test 314 alice bob bob 127.0.0.1 * :Bob Realname",
        ":irc.test 312 alice bob irc.test :Fri Jan 15 08:00:00 2027",
        ":irc.test 369 alice bob :End of WHOWAS",
    ]
    h.send("alice", "WHOWAS nobody")
    h.send("alice", "WHOWAS")
    assert h.lines("alice") == [
        ":irc.test 406 alice nobody :There was no such nickname",
        ":irc.test 369 alice nobody :End of WHOWAS",
        ":irc.test 461 alice WHOWAS :Not enough parameters",
    ]


def test_whowas_remembers_nick_changes_and_count(room):
    """RFC 2812 3.6.3: "If a <number> is given, only return up to <number> entries.\""""
    h = room
    h.send("bob", "NICK bob2")
    h.send("bob", "NICK bob")
    h.send("bob", "NICK bob3")
    h.take("alice")
    h.send("alice", "WHOWAS bob")
    assert h.numerics("alice") == ["314", "312", "314", "312", "369"]
    h.send("alice", "WHOWAS bob 1")
    assert h.numerics("alice") == ["314", "312", "369"]


# ISON, USERHOST, AWAY --------------------------------------------------------


def test_ison(room):
    """RFC 2812 4.9: "ISON only returns the nicknames that are present on the network.\""""
    h = room
    h.send("alice", "ISON Bob nobody alice")
    h.send("alice", "ISON :bob nobody")
    h.send("alice", "ISON nobody")
    assert h.lines("alice") == [
        ":irc.test 303 alice :bob alice",
        ":irc.test 303 alice bob",
        ":irc.test 303 alice :",
    ]


def test_userhost(room):
    """RFC 2812 RPL_USERHOST: "The '*' indicates whether the client has registered as an Operator. The
    '-' or '+' characters represent whether the client has set an AWAY message or not respectively.\""""
    h = room
    h.send("bob", "AWAY :away")
    h.send("alice", "USERHOST alice bob nobody")
    assert h.lines("alice") == [":irc.test 302 alice :alice=+alice@127.0.0.1 bob=-bob@127.0.0.1"]
    h.send("alice", "USERHOST a b c d e bob")
    assert h.lines("alice") == [":irc.test 302 alice :"]


def test_away(room):
    """RFC 2812 4.1: "With the AWAY command, clients can set an automatic reply string for any PRIVMSG
    commands directed at them (not to a channel they are on).\""""
    h = room
    h.send("alice", "AWAY :gone home")
    h.send("alice", "AWAY")
    h.send("alice", "AWAY :")
    assert h.lines("alice") == [
        ":irc.test 306 alice :You have been marked as being away",
        ":irc.test 305 alice :You are no longer marked as being away",
        ":irc.test 305 alice :You are no longer marked as being away",
    ]
    assert h.lines("bob") == []


def test_away_is_truncated_to_awaylen(make_harness):
    """ISUPPORT AWAYLEN: "the maximum length for the <reason> of an AWAY command.\""""
    h = make_harness(limits={"awaylen": 5})
    h.register("alice")
    h.register("bob")
    h.send("alice", "AWAY :abcdefgh")
    h.send("bob", "PRIVMSG alice :hi")
    assert h.lines("bob") == [":irc.test 301 bob alice abcde"]


# server information ------------------------------------------------------------


def test_version(room):
    """RFC 2812 3.4.3: "The VERSION command is used to query the version of the server program.\""""
    h = room
    h.send("alice", "VERSION")
    lines = h.lines("alice")
    assert lines[0] == ":irc.test 351 alice pircd-0.1.0 irc.test :pure-Python IRC server with PIRCAN"
    assert [ln.split()[1] for ln in lines[1:]] == ["005"] * (len(lines) - 1)


def test_time(room):
    """RFC 2812 3.4.6: "The time command is used to query local time from the specified server.\""""
    h = room
    h.send("alice", "TIME")
    assert h.lines("alice") == [":irc.test 391 alice irc.test :Friday January 15 2027 -- 08:00:00 +00:00"]


def test_info(room):
    """RFC 2812 3.4.10: "The INFO command is REQUIRED to return information describing the server\""""
    h = room
    h.send("alice", "INFO")
    lines = h.lines("alice")
    assert lines[-2] == ":irc.test 371 alice :Version pircd-0.1.0, running since 2027-01-15 08:00:00 UTC."
    assert lines[-1] == ":irc.test 374 alice :End of INFO list"
    assert all(ln.startswith(":irc.test 371 alice :") for ln in lines[:-1])


def test_admin(make_harness):
    """RFC 2812 3.4.9: "The admin command is used to find information about the administrator of the
    given server\""""
    h = make_harness(admin={"location1": "Somewhere nice", "location2": "Ops team", "email": "ops@x.test"})
    h.register("alice")
    h.send("alice", "ADMIN")
    assert h.lines("alice") == [
        ":irc.test 256 alice irc.test :Administrative info",
        ":irc.test 257 alice :Somewhere nice",
        ":irc.test 258 alice :Ops team",
        ":irc.test 259 alice ops@x.test",
    ]


def test_motd_and_missing_motd(make_harness, tmp_path):
    """RFC 2812 3.4.1: "The MOTD command is used to get the "Message Of The Day"\"; ERR_NOMOTD when there
    is none."""
    motd = tmp_path / "motd.txt"
    motd.write_text("line one\nline two\n")
    h = make_harness(server={"motd_file": str(motd)})
    h.register("alice")
    h.send("alice", "MOTD")
    assert h.lines("alice") == [
        ":irc.test 375 alice :- irc.test Message of the day - ",
        ":irc.test 372 alice :- line one",
        ":irc.test 372 alice :- line two",
        ":irc.test 376 alice :End of /MOTD command",
    ]
    h.send("alice", "MOTD other.server")
    assert h.lines("alice") == [":irc.test 402 alice other.server :No such server"]
    h2 = make_harness(server={"motd": ""})
    h2.register("bob")
    h2.send("bob", "MOTD")
    assert h2.lines("bob") == [":irc.test 422 bob :MOTD File is missing"]


def test_lusers(room):
    """RFC 2812 3.4.2: "The LUSERS command is used to get statistics about the size of the IRC network.\""""
    h = room
    h.connect("unregistered")
    h.send("bob", "MODE bob +i")
    h.send("alice", "LUSERS")
    assert h.lines("alice") == [
        ":irc.test 251 alice :There are 1 users and 1 invisible on 1 servers",
        ":irc.test 252 alice 0 :IRC Operators online",
        ":irc.test 253 alice 1 :unknown connection(s)",
        ":irc.test 254 alice 1 :channels formed",
        ":irc.test 255 alice :I have 2 clients and 0 servers",
        ":irc.test 265 alice 2 2 :Current local users 2, max 2",
        ":irc.test 266 alice 2 2 :Current global users 2, max 2",
    ]


# HELP ------------------------------------------------------------------------


def test_every_command_has_syntax_and_help(h):
    """Every verb in the command table documents its syntax and what it does."""
    specs = h.server.commands.specs
    assert len(specs) > 30
    missing = [verb for verb, spec in specs.items() if not spec.syntax.strip() or not spec.help.strip()]
    assert missing == []
    for verb, spec in specs.items():
        # the syntax names the verb (or, for an alias like HELPOP, the verb it stands for)
        assert spec.syntax.split()[0] in specs, (verb, spec.syntax)


def test_help_for_every_command(h):
    """Modern IRC HELP: RPL_HELPSTART (704), RPL_HELPTXT (705) lines and RPL_ENDOFHELP (706)."""
    h.register("alice")
    for verb, spec in sorted(h.server.commands.specs.items()):
        h.send("alice", f"HELP {verb.lower()}")
        msgs = h.messages("alice")
        assert [m.command for m in msgs] == ["704"] + ["705"] * (len(msgs) - 2) + ["706"], verb
        assert len(msgs) >= 3, verb
        assert msgs[0].params == ["alice", verb, spec.syntax]
        assert [m.params[2] for m in msgs[1:-1]] == spec.help.splitlines()
        assert msgs[-1].params == ["alice", verb, "End of /HELP"]


def test_help_index_and_unknown_topic(h):
    """HELP without a topic lists the commands; an unknown topic is ERR_HELPNOTFOUND (524)."""
    h.register("alice")
    h.send("alice", "HELP")
    msgs = h.messages("alice")
    assert msgs[0].params == ["alice", "*", "pircd help: HELP <command> explains one command"]
    assert msgs[-1].params == ["alice", "*", "End of /HELP"]
    listed = " ".join(m.params[2] for m in msgs[1:-1] if m.command == "705").split()
    table = h.server.commands.specs
    assert [v for v in listed if v in table] == sorted(v for v in table if not table[v].oper)
    h.send("alice", "HELP frobnicate")
    assert h.lines("alice") == [":irc.test 524 alice frobnicate :No help available on this topic"]
