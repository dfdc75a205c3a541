"""IRCv3 extensions: labeled-response, batch, echo-message, server-time, msgid, message-tags, bot, cap-notify,
setname, chghost, invite-notify, away-notify, extended-join, multi-prefix, userhost-in-names,
no-implicit-names, standard replies and MONITOR."""

from __future__ import annotations

import re

from ircd.commands.query import change_host
from ircd.proto.lines import parse_line

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"
T = "2027-01-15T08:00:00.000Z"  # the harness clock, as server-time


def together(h, channel, *names):
    for name in names:
        h.send(name, f"JOIN {channel}")
    for name in names:
        h.take(name)


# labeled-response and batch ----------------------------------------------------


def test_labeled_response_ack(h):
    """IRCv3 labeled-response: "Servers MUST respond with a labeled `ACK` message when a client sends a labeled
    command that normally produces no response.\""""
    h.register("alice", caps=["labeled-response", "batch"])
    h.send("alice", "@label=abc PONG x")
    assert h.lines("alice") == ["@label=abc :irc.test ACK"]


def test_labeled_response_single_line(h):
    """IRCv3 labeled-response: "For any message received from a client that includes this tag, the server MUST
    include the same tag and value in any response produced from this message\"."""
    h.register("alice", caps=["labeled-response", "batch"])
    h.send("alice", "@label=x1 PING tok")
    assert h.lines("alice") == ["@label=x1 :irc.test PONG irc.test tok"]
    h.send("alice", "@label=x2 NOSUCHCOMMAND")
    assert h.lines("alice") == ["@label=x2 :irc.test 421 alice NOSUCHCOMMAND :Unknown command"]


def test_labeled_response_batch(h):
    """IRCv3 labeled-response: "If a response consists of more than one message, a batch MUST be used to group
    them into a single logical response. The start of the batch MUST be tagged with the `label` tag.\""""
    h.register("alice", caps=["labeled-response", "batch"])
    h.send("alice", "@label=j1 JOIN #a")
    lines = h.lines("alice")
    ref = parse_line(lines[0].encode()).params[0][1:]
    assert lines == [
        f"@label=j1 :irc.test BATCH +{ref} labeled-response",
        f"@batch={ref} :{A} JOIN #a",
        f"@batch={ref} :irc.test 353 alice = #a @alice",
        f"@batch={ref} :irc.test 366 alice #a :End of /NAMES list",
        f":irc.test BATCH -{ref}",
    ]
    # the next batch gets a new reference
    h.send("alice", "@label=j2 NAMES #a")
    ref2 = parse_line(h.lines("alice")[0].encode()).params[0][1:]
    assert ref2 != ref


def test_label_ignored_without_the_cap(h):
    """IRCv3 labeled-response: "This specification depends on the `batch` capability which MUST be negotiated to
    use labeled responses.\"; without the capability the label is ignored."""
    h.register("alice")
    h.send("alice", "@label=abc PING tok")
    h.send("alice", "@label=abc PONG tok")
    assert h.lines("alice") == [":irc.test PONG irc.test tok"]


def test_labeled_errors_in_a_failed_gate(h):
    """The label goes on replies produced by the command gate too (461 here)."""
    h.register("alice", caps=["labeled-response", "batch"])
    h.send("alice", "@label=g1 JOIN")
    assert h.lines("alice") == ["@label=g1 :irc.test 461 alice JOIN :Not enough parameters"]


# echo-message, server-time, msgid ---------------------------------------------------


def test_echo_message(h):
    """IRCv3 echo-message: "If enabled, servers MUST send `PRIVMSG` and `NOTICE` messages back to the client that
    sent them.\" (the same message the recipients get, msgid included)."""
    h.register("alice", caps=["echo-message", "message-tags"])
    h.register("bob", caps=["message-tags"])
    together(h, "#a", "alice", "bob")
    h.send("alice", "PRIVMSG #a :hello")
    h.send("alice", "NOTICE bob :psst")
    echoed = h.messages("alice")
    got = h.messages("bob")
    assert [(m.source, m.command, m.params) for m in echoed] == [
        (A, "PRIVMSG", ["#a", "hello"]),
        (A, "NOTICE", ["bob", "psst"]),
    ]
    assert echoed == got  # same tags (msgid) and content


def test_echo_message_with_label(h):
    """IRCv3 labeled-response: the echo of a labeled PRIVMSG carries the label."""
    h.register("alice", caps=["echo-message", "labeled-response", "batch"])
    h.register("bob")
    h.send("alice", "@label=m1 PRIVMSG bob :hi")
    assert h.lines("alice") == [f"@label=m1 :{A} PRIVMSG bob hi"]
    assert h.lines("bob") == [f":{A} PRIVMSG bob hi"]


def test_server_time(h):
    """IRCv3 server-time: "The time tag ... has the format YYYY-MM-DDThh:mm:ss.sssZ\" (UTC, milliseconds)."""
    h.register("alice", caps=["server-time"])
    h.register("bob")
    together(h, "#a", "alice", "bob")
    h.clock.advance(1.234)
    h.send("bob", "PRIVMSG #a :now")
    h.send("alice", "PING x")
    assert h.lines("alice") == [
        f"@time=2027-01-15T08:00:01.234Z :{B} PRIVMSG #a now",
        "@time=2027-01-15T08:00:01.234Z :irc.test PONG irc.test x",
    ]


def test_msgid_format_and_order(h):
    """IRCv3 message-ids: "the msgid tag ... MUST be unique"; pircd ids are 16 lowercase hex digits that
    increase with time (time-ordered 64-bit ids)."""
    h.register("alice")
    h.register("bob", caps=["message-tags"])
    h.register("carol", caps=["message-tags"])
    together(h, "#a", "alice", "bob", "carol")
    ids = []
    for i in range(5):
        h.send("alice", f"PRIVMSG #a :message {i}")
        if i == 2:
            h.clock.advance(0.001)
        to_bob = h.messages("bob")
        to_carol = h.messages("carol")
        assert to_bob == to_carol  # one id per message, the same for every recipient
        ids.append(to_bob[0].tags["msgid"])
    for msgid in ids:
        assert re.fullmatch(r"[0-9a-f]{16}", msgid), msgid
    assert ids == sorted(ids) and len(set(ids)) == 5


def test_client_tags_relayed_and_server_tags_stripped(h):
    """IRCv3 message-tags: "Client-only tags are client-initiated tags that servers MUST attach as-is to any
    relevant message relayed to other clients.\" and "Tags without the client-only prefix MUST be removed by
    the server before being relayed with any message to another client.\""""
    h.register("alice", caps=["message-tags"])
    h.register("bob", caps=["message-tags"])
    h.register("carol")
    together(h, "#a", "alice", "bob", "carol")
    h.send("alice", r"@+example.com/x=a\sb\:c;unknown=1;+draft/reply=42 PRIVMSG #a :tagged")
    [msg] = h.messages("bob")
    assert msg.tags["+example.com/x"] == "a b;c"
    assert msg.tags["+draft/reply"] == "42"
    assert "unknown" not in msg.tags
    assert h.lines("carol") == [f":{A} PRIVMSG #a tagged"]


def test_client_tag_data_at_the_limit_is_accepted(h):
    """IRCv3 message-tags: "Clients MUST NOT send messages with tag data exceeding 4094 bytes, this includes
    tags with or without the client-only prefix.\" (4094 bytes is allowed)."""
    h.register("alice", caps=["message-tags"])
    h.register("bob", caps=["message-tags"])
    data = "+x=" + "y" * 4091
    assert len(data) == 4094
    h.send("alice", f"@{data} TAGMSG bob")
    assert h.lines("alice") == []
    [msg] = h.messages("bob")
    assert msg.tags["+x"] == "y" * 4091


def test_client_tag_data_over_the_limit_is_417(h):
    """IRCv3 message-tags: "Servers MUST reply with the ERR_INPUTTOOLONG (417) error numeric if a client sends
    a message with more tag data than the allowed limit.\" The limit counts every tag, client-only or not;
    the 417 carries the line's label (labeled-response)."""
    h.register("alice", caps=["message-tags", "labeled-response"])
    h.register("bob", caps=["message-tags"])
    h.send("alice", "@+x=" + "y" * 4092 + " TAGMSG bob")
    h.send("alice", "@label=1;+x=" + "y" * 4084 + " TAGMSG bob")
    assert h.lines("alice") == [
        ":irc.test 417 alice :Input line was too long",
        "@label=1 :irc.test 417 alice :Input line was too long",
    ]
    assert h.lines("bob") == []


def test_bot_tag(h):
    """IRCv3 bot mode: "the server MUST add the bot tag to messages ... sent by the bot" for clients with
    message-tags."""
    h.register("robot")
    h.register("bob", caps=["message-tags"])
    h.register("carol")
    h.send("robot", "MODE robot +B")
    together(h, "#a", "robot", "bob", "carol")
    h.send("robot", "PRIVMSG #a :beep")
    [msg] = h.messages("bob")
    assert "bot" in msg.tags and msg.tags["bot"] == ""
    assert h.lines("carol") == [":robot!robot@127.0.0.1 PRIVMSG #a beep"]


# capabilities that change what others see --------------------------------------------


def test_cap_notify_is_implied_by_cap_302(h):
    """IRCv3 cap-notify: "servers MUST NOT disable the `cap-notify` capability if the client requests `CAP LS`
    with a version of 302 or newer.\"; "Clients that do not support CAP version 302 MAY request the
    `cap-notify` capability explicitly. Such clients MAY explicitly disable the capability\"."""
    h.connect("a")
    h.send("a", "CAP LS 302")
    h.take("a")
    h.send("a", "CAP LIST")
    h.send("a", "CAP REQ :-cap-notify")
    assert h.lines("a") == [":irc.test CAP * LIST cap-notify", ":irc.test CAP * NAK -cap-notify"]
    # a client without 302 may enable and disable it
    h.connect("b")
    h.send("b", "CAP REQ cap-notify")
    h.send("b", "CAP REQ -cap-notify")
    assert h.lines("b") == [":irc.test CAP * ACK cap-notify", ":irc.test CAP * ACK -cap-notify"]


def test_cap_notify_new_and_del_on_rehash(h):
    """IRCv3 cap-notify: "When enabled, the server MUST notify the client about all new capabilities and about
    existing capabilities that are no longer available using the `NEW` and `DEL` subcommands\"; "Servers MUST
    cancel any capability-specific behavior for a client after sending the `CAP DEL` message\"."""
    from ircd.caps import Capability
    from tests.harness import config

    h.server.caps.add(Capability(
        "vendor.example/watch",
        value=lambda s: str(s.config.limits.monitor),
        available=lambda s: s.config.limits.monitor > 5,
    ))
    h.register("new", caps=["vendor.example/watch"])  # CAP LS 302 implies cap-notify
    h.register("old")
    h.connect("v1")
    h.send("v1", "CAP REQ :cap-notify")
    h.send("v1", "NICK v1")
    h.send("v1", "USER v1 0 * :V1")
    h.send("v1", "CAP END")
    h.take("v1")

    def rehash(cfg) -> None:
        h.server.rehash(cfg)
        h.server.flush_all()

    rehash(config(limits={"monitor": 0}))
    assert h.lines("new") == [":irc.test CAP new DEL vendor.example/watch"]
    assert h.lines("v1") == [":irc.test CAP v1 DEL vendor.example/watch"]
    assert h.lines("old") == []
    h.send("new", "CAP LIST")
    assert "vendor.example/watch" not in h.lines("new")[0]
    rehash(config(limits={"monitor": 10}))
    assert h.lines("new") == [":irc.test CAP new NEW vendor.example/watch=10"]
    assert h.lines("v1") == [":irc.test CAP v1 NEW vendor.example/watch"]
    rehash(config(limits={"monitor": 10}))
    assert h.lines("new") == []
    rehash(config(limits={"monitor": 20}))
    assert h.lines("new") == [":irc.test CAP new NEW vendor.example/watch=20"]


def test_setname(h):
    """IRCv3 setname: "the server MUST send the SETNAME message to the client itself and to clients that share
    a channel with the client and have negotiated the setname capability\""""
    h.register("alice", caps=["setname"])
    h.register("bob", caps=["setname"])
    h.register("carol")
    together(h, "#a", "alice", "bob", "carol")
    h.send("alice", "SETNAME :Alice Pleasance Liddell")
    assert h.lines("alice") == [f":{A} SETNAME :Alice Pleasance Liddell"]
    assert h.lines("bob") == [f":{A} SETNAME :Alice Pleasance Liddell"]
    assert h.lines("carol") == []
    h.send("carol", "WHOIS alice")
    assert h.lines("carol")[0] == ":irc.test 311 carol alice alice 127.0.0.1 * :Alice Pleasance Liddell"


def test_setname_invalid(make_harness):
    """IRCv3 setname: "If the realname is invalid ... FAIL SETNAME INVALID_REALNAME\""""
    h = make_harness(limits={"realnamelen": 10})
    h.register("alice", caps=["setname"])
    h.send("alice", "SETNAME :this is far too long")
    h.send("alice", "SETNAME")
    assert h.lines("alice") == [
        ":irc.test FAIL SETNAME INVALID_REALNAME :Realname is not valid",
        ":irc.test 461 alice SETNAME :Not enough parameters",
    ]


def test_chghost(h):
    """IRCv3 chghost: "the server MUST send a CHGHOST message to clients that share a channel with the user
    and have the chghost capability; clients without it see a QUIT and a JOIN (and the MODE restoring the
    user's channel status)."""
    h.register("alice", caps=["chghost"])
    h.register("bob", caps=["chghost"])
    h.register("carol")
    together(h, "#a", "alice", "bob", "carol")
    change_host(h.server, h.clients["alice"], "ali", "cloaked.example")
    h.server.flush_all()
    assert h.lines("alice") == [f":{A} CHGHOST ali cloaked.example"]
    assert h.lines("bob") == [f":{A} CHGHOST ali cloaked.example"]
    assert h.lines("carol") == [
        f":{A} QUIT :Changing host",
        ":alice!ali@cloaked.example JOIN #a",
        ":irc.test MODE #a +o alice",
    ]


def test_invite_notify(h):
    """IRCv3 invite-notify: operators of the channel with the capability are told about invitations."""
    h.register("alice", caps=["invite-notify"])
    h.register("bob", caps=["invite-notify"])
    h.register("carol", caps=["invite-notify"])
    h.register("dave")
    together(h, "#a", "alice", "bob", "carol")
    h.send("alice", "MODE #a +o bob")
    for name in ("alice", "bob", "carol"):
        h.take(name)
    h.send("alice", "INVITE dave #a")
    assert h.lines("alice") == [":irc.test 341 alice dave #a"]
    assert h.lines("dave") == [f":{A} INVITE dave #a"]
    assert h.lines("bob") == [f":{A} INVITE dave #a"]
    assert h.lines("carol") == []


def test_away_notify(h):
    """IRCv3 away-notify: "the server MUST send an AWAY message to clients that share a channel with the user
    ... when the user's away status changes\", and after a JOIN of a user who is away."""
    h.register("alice")
    h.register("bob", caps=["away-notify"])
    h.register("carol")
    together(h, "#a", "alice", "bob", "carol")
    h.send("alice", "AWAY :lunch")
    assert h.lines("bob") == [f":{A} AWAY lunch"]
    assert h.lines("carol") == []
    h.send("alice", "AWAY")
    assert h.lines("bob") == [f":{A} AWAY"]
    h.register("dave")
    h.send("dave", "AWAY :not here")
    h.send("dave", "JOIN #a")
    assert h.lines("bob") == [":dave!dave@127.0.0.1 JOIN #a", ":dave!dave@127.0.0.1 AWAY :not here"]
    assert h.lines("carol") == [":dave!dave@127.0.0.1 JOIN #a"]


def test_extended_join(h):
    """IRCv3 extended-join: "JOIN <channel> <accountname> :<realname>\" with * for no account."""
    h.register("alice", caps=["extended-join"])
    h.register("bob")
    together(h, "#a", "alice")
    h.send("bob", "JOIN #a")
    assert h.lines("alice") == [f":{B} JOIN #a * :Bob Realname"]
    assert h.lines("bob")[0] == f":{B} JOIN #a"


def test_multi_prefix(h):
    """IRCv3 multi-prefix: "all the prefixes of a user in a channel are shown in NAMES, WHO and WHOIS, in order
    of rank.\""""
    h.register("alice", caps=["multi-prefix"])
    h.register("bob")
    together(h, "#a", "alice", "bob")
    h.send("alice", "MODE #a +v alice")
    h.take("alice")
    h.take("bob")
    h.send("alice", "NAMES #a")
    h.send("alice", "WHO alice")
    h.send("alice", "WHO #a")
    assert h.lines("alice") == [
        ":irc.test 353 alice = #a :@+alice bob",
        ":irc.test 366 alice #a :End of /NAMES list",
        ":irc.test 352 alice * alice 127.0.0.1 irc.test alice H :0 Alice Realname",
        ":irc.test 315 alice alice :End of WHO list",
        ":irc.test 352 alice #a alice 127.0.0.1 irc.test alice H@+ :0 Alice Realname",
        ":irc.test 352 alice #a bob 127.0.0.1 irc.test bob H :0 Bob Realname",
        ":irc.test 315 alice #a :End of WHO list",
    ]
    h.send("bob", "NAMES #a")
    assert h.lines("bob")[0] == ":irc.test 353 bob = #a :@alice bob"
    h.send("bob", "WHOIS alice")
    assert ":irc.test 319 bob alice @#a" in h.lines("bob")
    h.send("alice", "WHOIS alice")
    assert ":irc.test 319 alice alice @+#a" in h.lines("alice")


def test_userhost_in_names(h):
    """IRCv3 userhost-in-names: "the server MUST send the full nick!user@host of each user in RPL_NAMREPLY\""""
    h.register("alice", caps=["userhost-in-names"])
    h.register("bob")
    together(h, "#a", "alice", "bob")
    h.send("alice", "NAMES #a")
    assert h.lines("alice") == [
        f":irc.test 353 alice = #a :@{A} {B}",
        ":irc.test 366 alice #a :End of /NAMES list",
    ]


def test_no_implicit_names(h):
    """IRCv3 no-implicit-names: "the server MUST NOT send RPL_NAMREPLY and RPL_ENDOFNAMES in response to a
    JOIN\""""
    h.register("alice", caps=["draft/no-implicit-names"])
    h.send("alice", "JOIN #a")
    assert h.lines("alice") == [f":{A} JOIN #a"]
    h.send("alice", "NAMES #a")
    assert h.numerics("alice") == ["353", "366"]


def test_account_tag_and_standard_replies_are_offered(h):
    """IRCv3 account-tag is wired (fed by accounts); standard-replies may be requested."""
    h.register("alice", caps=["account-tag", "message-tags", "standard-replies"])
    h.register("bob")
    h.clients["bob"].account = "Bobby"
    h.send("bob", "PRIVMSG alice :hi")
    [msg] = h.messages("alice")
    assert msg.tags["account"] == "Bobby"


# MONITOR -------------------------------------------------------------------------------


def test_monitor_add_and_status(h):
    """IRCv3 monitor: "If any of the targets being added are online, the server will generate `RPL_MONONLINE`
    numerics listing those targets that are online.\" (and RPL_MONOFFLINE for the offline ones)."""
    h.register("alice")
    h.register("bob")
    h.send("alice", "MONITOR + bob,carol")
    assert h.lines("alice") == [
        f":irc.test 730 alice {B}",
        ":irc.test 731 alice carol",
    ]


def test_monitor_notifications(h):
    """IRCv3 monitor, RPL_MONONLINE: "This numeric is used to indicate to a client that either a target has just
    become online\"; RPL_MONOFFLINE: "that either a target has just left the irc network\" (a nick change
    counts as both)."""
    h.register("alice")
    h.send("alice", "MONITOR + bob,robert")
    h.take("alice")
    h.register("bob")
    assert h.lines("alice") == [f":irc.test 730 alice {B}"]
    h.send("bob", "NICK robert")
    assert h.lines("alice") == [
        ":irc.test 731 alice bob",
        ":irc.test 730 alice robert!bob@127.0.0.1",
    ]
    h.send("bob", "QUIT")
    assert h.lines("alice") == [":irc.test 731 alice robert"]


def test_monitor_list_remove_clear_status(h):
    """IRCv3 monitor: "`MONITOR L` Outputs the current list of targets being monitored. All output will use
    `RPL_MONLIST`, and the output will be terminated with `RPL_ENDOFMONLIST`.\"; "`MONITOR C` Clears the list
    of targets being monitored.\""""
    h.register("alice")
    h.register("bob")
    h.send("alice", "MONITOR + bob,carol,dave")
    h.send("alice", "MONITOR - dave")
    h.take("alice")
    h.send("alice", "MONITOR L")
    h.send("alice", "MONITOR S")
    assert h.lines("alice") == [
        ":irc.test 732 alice bob,carol",
        ":irc.test 733 alice :End of MONITOR list",
        f":irc.test 730 alice {B}",
        ":irc.test 731 alice carol",
    ]
    h.send("alice", "MONITOR C")
    h.send("alice", "MONITOR L")
    assert h.lines("alice") == [":irc.test 733 alice :End of MONITOR list"]
    h.register("carol")
    assert h.lines("alice") == []


def test_monitor_limit_734(make_harness):
    """IRCv3 monitor, ERR_MONLISTFULL: "The `<limit>` parameter is the maximum number of targets a client may
    have in their list, the `<targets>` parameter is the list of targets, as the client sent them, that cannot
    be added.\"; "Targets already in the list MUST NOT be added again.\""""
    h = make_harness(limits={"monitor": 2})
    h.register("alice")
    h.send("alice", "MONITOR + a1,a2,a3,a4")
    assert h.lines("alice") == [
        ":irc.test 734 alice 2 a3,a4 :Monitor list is full",
        ":irc.test 731 alice a1,a2",
    ]
    # nicks already watched do not count again
    h.send("alice", "MONITOR + a1")
    assert h.lines("alice") == []


def test_monitor_isupport(make_harness):
    """IRCv3 monitor: "This token takes an optional parameter, of the maximum amount of targets a client may
    have in their monitor list.\""""
    h = make_harness(limits={"monitor": 7})
    h.connect("a")
    h.send("a", "NICK alice")
    h.send("a", "USER a 0 * :A")
    assert any(" MONITOR=7 " in ln for ln in h.lines("a"))
