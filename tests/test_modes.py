"""MODE: every channel mode, list replies, prefix modes and user modes."""

from __future__ import annotations

A = "alice!alice@127.0.0.1"
B = "bob!bob@127.0.0.1"


def test_channel_mode_query(room):
    """RFC 2812 3.2.3 / Modern IRC: RPL_CHANNELMODEIS (324) answers MODE <channel>, followed by
    RPL_CREATIONTIME (329)."""
    h = room
    h.send("bob", "MODE #a")
    assert h.lines("bob") == [":irc.test 324 bob #a +nt", ":irc.test 329 bob #a 1800000000"]
    h.send("alice", "MODE #a +kl sesame 10")
    h.send("bob", "MODE #a")
    assert h.lines("bob") == [
        f":{A} MODE #a +kl sesame 10",
        ":irc.test 324 bob #a +ntkl sesame 10",
        ":irc.test 329 bob #a 1800000000",
    ]
    # non-members do not learn the key
    h.register("carol")
    h.send("carol", "MODE #a")
    assert h.lines("carol") == [":irc.test 324 carol #a +ntkl 10", ":irc.test 329 carol #a 1800000000"]
    h.send("carol", "MODE #nope")
    assert h.lines("carol") == [":irc.test 403 carol #nope :No such channel"]


def test_flag_modes_are_announced_once(room):
    """RFC 2811 4: channel flags i m n s t; a change that changes nothing is not announced."""
    h = room
    h.send("alice", "MODE #a +imnst")
    assert h.lines("alice") == [f":{A} MODE #a +ims"]
    assert h.lines("bob") == [f":{A} MODE #a +ims"]
    h.send("alice", "MODE #a -i+i-n")
    assert h.lines("alice") == [f":{A} MODE #a -i+i-n"]
    h.send("alice", "MODE #a -n")
    assert h.lines("alice") == []


def test_only_operators_change_modes(room):
    """RFC 2812 ERR_CHANOPRIVSNEEDED: "Any command requiring 'chanop' privileges (such as MODE messages)
    MUST return this error if the client making the attempt is not a chanop on the specified channel.\""""
    h = room
    h.send("bob", "MODE #a +m")
    h.send("bob", "MODE #a +o bob")
    assert h.lines("bob") == [
        ":irc.test 482 bob #a :You're not channel operator",
        ":irc.test 482 bob #a :You're not channel operator",
    ]
    # reading the lists needs no privilege
    h.send("bob", "MODE #a +b")
    assert h.lines("bob") == [":irc.test 368 bob #a :End of channel ban list"]


def test_unknown_mode_472(room):
    """RFC 2812 ERR_UNKNOWNMODE: "<char> :is unknown mode char to me for <channel>\""""
    h = room
    h.send("alice", "MODE #a +xm")
    assert h.lines("alice") == [":irc.test 472 alice x :is unknown mode char to me", f":{A} MODE #a +m"]


def test_key_mode(room):
    """RFC 2811 4.2.3: "When a channel key is set (by using the mode 'k'), servers MUST reject their
    JOIN messages unless the key provided is correct.\""""
    h = room
    h.register("carol")
    h.send("alice", "MODE #a +k sesame")
    assert h.lines("bob") == [f":{A} MODE #a +k sesame"]
    h.send("carol", "JOIN #a")
    h.send("carol", "JOIN #a wrong")
    assert h.lines("carol") == [
        ":irc.test 475 carol #a :Cannot join channel (+k)",
        ":irc.test 475 carol #a :Cannot join channel (+k)",
    ]
    h.send("carol", "JOIN #a sesame")
    assert h.numerics("carol") == ["JOIN", "353", "366"]
    h.take("alice")
    h.send("alice", "MODE #a -k whatever")
    assert h.lines("alice") == [f":{A} MODE #a -k *"]
    h.send("alice", "MODE #a +k")
    assert h.lines("alice") == [":irc.test 525 alice #a :Key is not well-formed"]


def test_limit_mode(room):
    """RFC 2811 4.2.9: "A user limit may be set on channels by using the channel flag 'l'. When the limit
    is reached, servers MUST forbid their local users to join the channel.\""""
    h = room
    h.register("carol")
    h.send("alice", "MODE #a +l 2")
    assert h.lines("alice") == [f":{A} MODE #a +l 2"]
    h.send("carol", "JOIN #a")
    assert h.lines("carol") == [":irc.test 471 carol #a :Cannot join channel (+l)"]
    h.send("alice", "MODE #a +l nonsense")
    h.send("alice", "MODE #a +l -3")
    assert h.lines("alice") == [
        ":irc.test 696 alice #a l nonsense :Invalid limit",
        ":irc.test 696 alice #a l -3 :Invalid limit",
    ]
    h.send("alice", "MODE #a -l")
    assert h.lines("alice") == [f":{A} MODE #a -l"]
    h.send("carol", "JOIN #a")
    assert h.numerics("carol") == ["JOIN", "353", "366"]


def test_invite_only_mode(room):
    """RFC 2811 4.2.2: "When the channel flag 'i' is set, new members are only accepted if their mask
    matches Invite-list (See section 4.3.2) or they have been invited by a channel operator.\""""
    h = room
    h.register("carol")
    h.register("dave")
    h.send("alice", "MODE #a +iI carol!*@*")
    h.send("carol", "JOIN #a")
    h.send("dave", "JOIN #a")
    assert h.numerics("carol") == ["JOIN", "353", "366"]
    assert h.lines("dave") == [":irc.test 473 dave #a :Cannot join channel (+i)"]


def test_moderated_mode(room):
    """RFC 2811 4.2.3: "When the channel flag 'm' is set, ... only channel operators and members with the
    voice privilege can send messages to the channel.\""""
    h = room
    h.send("alice", "MODE #a +m")
    h.take("bob")
    h.send("bob", "PRIVMSG #a :hello?")
    assert h.lines("bob") == [":irc.test 404 bob #a :Cannot send to channel (+m)"]
    assert h.lines("alice") == [f":{A} MODE #a +m"]
    h.send("alice", "MODE #a +v bob")
    h.take("bob")
    h.send("bob", "PRIVMSG #a :hello!")
    assert h.lines("alice") == [f":{A} MODE #a +v bob", f":{B} PRIVMSG #a hello!"]


def test_no_external_messages_mode(room):
    """RFC 2811 4.2.5: "When the channel flag 'n' is set, only channel members MAY send messages to the
    channel.\""""
    h = room
    h.register("carol")
    h.send("carol", "PRIVMSG #a :from outside")
    assert h.lines("carol") == [":irc.test 404 carol #a :Cannot send to channel (+n)"]
    h.send("alice", "MODE #a -n")
    h.take("alice")
    h.send("carol", "PRIVMSG #a :from outside")
    assert h.lines("carol") == []
    assert h.lines("alice") == [":carol!carol@127.0.0.1 PRIVMSG #a :from outside"]


def test_secret_mode_hides_channel(room):
    """RFC 2811 4.2.6: "the server will act as if the channel does not exist for queries like the TOPIC,
    LIST, NAMES commands.\""""
    h = room
    h.register("carol")
    h.send("alice", "MODE #a +s")
    h.send("carol", "LIST")
    h.send("carol", "NAMES #a")
    assert h.lines("carol") == [
        ":irc.test 321 carol Channel :Users  Name",
        ":irc.test 323 carol :End of /LIST",
        ":irc.test 366 carol #a :End of /NAMES list",
    ]
    h.send("carol", "WHOIS bob")
    assert ":irc.test 319 carol bob :#a" not in h.lines("carol")


def test_topic_lock_mode(room):
    """RFC 2811 4.2.8: "The channel flag 't' is used to restrict the usage of the TOPIC command to channel
    operators.\""""
    h = room
    h.send("bob", "TOPIC #a :x")
    assert h.lines("bob") == [":irc.test 482 bob #a :You're not channel operator"]
    h.send("alice", "MODE #a -t")
    h.take("bob")
    h.send("bob", "TOPIC #a :x")
    assert h.lines("bob") == [f":{B} TOPIC #a x"]


def test_ban_list_and_enforcement(room):
    """RFC 2811 4.3.1: "A user who is banned from a channel and who carries an invitation sent by a channel
    operator is allowed to join the channel." (and otherwise may not join)."""
    h = room
    h.register("carol")
    h.send("alice", "MODE #a +b carol")
    assert h.lines("alice") == [f":{A} MODE #a +b carol!*@*"]
    h.send("carol", "JOIN #a")
    assert h.lines("carol") == [":irc.test 474 carol #a :Cannot join channel (+b)"]
    h.send("alice", "MODE #a +b")
    assert h.lines("alice") == [
        f":irc.test 367 alice #a carol!*@* {A} 1800000000",
        ":irc.test 368 alice #a :End of channel ban list",
    ]
    h.send("alice", "INVITE carol #a")
    h.send("carol", "JOIN #a")
    assert h.numerics("carol") == ["INVITE", "JOIN", "353", "366"]
    # a banned member cannot speak
    h.send("carol", "PRIVMSG #a :hi")
    assert h.lines("carol") == [":irc.test 404 carol #a :Cannot send to channel (+b)"]
    h.take("alice")
    h.send("alice", "MODE #a -b CAROL!*@*")
    assert h.lines("alice") == [f":{A} MODE #a -b carol!*@*"]
    h.send("alice", "MODE #a b")
    assert h.lines("alice") == [":irc.test 368 alice #a :End of channel ban list"]


def test_mask_normalisation(room):
    """Masks given as nick, user@host or nick!user are completed to nick!user@host."""
    h = room
    h.send("alice", "MODE #a +bbb dave *@evil.example x!y")
    assert h.lines("alice") == [f":{A} MODE #a +bbb dave!*@* *!*@evil.example x!y@*"]


def test_exception_list(room):
    """RFC 2811 4.3.1 (ban exceptions, +e): a user matching an exception mask is not affected by bans."""
    h = room
    h.register("carol")
    h.send("alice", "MODE #a +be *!*@127.0.0.1 carol!*@*")
    h.send("carol", "JOIN #a")
    assert h.numerics("carol") == ["JOIN", "353", "366"]
    h.take("alice")
    h.send("alice", "MODE #a e")
    assert h.lines("alice") == [
        f":irc.test 348 alice #a carol!*@* {A} 1800000000",
        ":irc.test 349 alice #a :End of channel exception list",
    ]


def test_invite_exception_list(room):
    """RFC 2811 4.3.2 (invitation list, +I)."""
    h = room
    h.send("alice", "MODE #a +I *!*@trusted.example")
    h.take("alice")
    h.send("alice", "MODE #a +I")
    assert h.lines("alice") == [
        f":irc.test 346 alice #a *!*@trusted.example {A} 1800000000",
        ":irc.test 347 alice #a :End of channel invite list",
    ]


def test_all_lists_in_one_query(room):
    """Each list mode without a parameter lists that list once."""
    h = room
    h.send("alice", "MODE #a +beIb")
    assert h.lines("alice") == [
        ":irc.test 368 alice #a :End of channel ban list",
        ":irc.test 349 alice #a :End of channel exception list",
        ":irc.test 347 alice #a :End of channel invite list",
    ]


def test_list_full_478(make_harness):
    """Modern IRC ERR_BANLISTFULL: "Returned when a channel access list (i.e. ban list etc) is full and
    cannot be added to.\""""
    h = make_harness(limits={"list_entries": 2})
    h.register("alice")
    h.send("alice", "JOIN #a")
    h.take("alice")
    h.send("alice", "MODE #a +bbb a b c")
    assert h.lines("alice") == [
        ":irc.test 478 alice #a c!*@* :Channel list is full",
        f":{A} MODE #a +bb a!*@* b!*@*",
    ]


def test_modes_per_line_limit(room):
    """ISUPPORT MODES: "the maximum number of channel modes with parameter allowed per MODE command.\""""
    h = room
    h.send("alice", "MODE #a +bbbbbbb a b c d e f g")
    assert h.lines("alice") == [f":{A} MODE #a +bbbbbb a!*@* b!*@* c!*@* d!*@* e!*@* f!*@*"]


def test_op_and_voice(room):
    """RFC 2811 4.1: "The channel operators ... 'o' ... voice privilege 'v'"; shown as @ and + prefixes."""
    h = room
    h.send("alice", "MODE #a +ov bob bob")
    assert h.lines("bob") == [f":{A} MODE #a +ov bob bob"]
    h.send("bob", "NAMES #a")
    assert h.lines("bob") == [
        ":irc.test 353 bob = #a :@alice @bob",
        ":irc.test 366 bob #a :End of /NAMES list",
    ]
    h.send("bob", "MODE #a -o alice")
    assert h.lines("alice") == [f":{A} MODE #a +ov bob bob", f":{B} MODE #a -o alice"]
    h.send("bob", "MODE #a +o nobody")
    h.register("carol")
    h.send("bob", "MODE #a +v carol")
    h.send("bob", "MODE #a +o")
    assert h.lines("bob") == [
        f":{B} MODE #a -o alice",
        ":irc.test 401 bob nobody :No such nick/channel",
        ":irc.test 441 bob carol #a :They aren't on that channel",
        ":irc.test 461 bob MODE :Not enough parameters",
    ]


def test_owner_mode_needs_owner(room):
    """Only a channel owner (~, mode q) gives owner status."""
    h = room
    h.send("alice", "MODE #a +q bob")
    assert h.lines("alice") == [":irc.test 482 alice #a :You must be the channel owner"]


def test_user_modes(room):
    """RFC 2812 3.1.5: "The user MODE's are typically changes which affect either how the client is seen
    by others or what 'extra' messages the client is sent.\""""
    h = room
    h.send("alice", "MODE alice")
    assert h.lines("alice") == [":irc.test 221 alice +"]
    h.send("alice", "MODE alice +iwB")
    assert h.lines("alice") == [f":{A} MODE alice +iwB"]
    h.send("alice", "MODE Alice")
    assert h.lines("alice") == [":irc.test 221 alice +Biw"]
    h.send("alice", "MODE alice -w+x")
    assert h.lines("alice") == [":irc.test 501 alice :Unknown MODE flag", f":{A} MODE alice -w"]
    h.send("alice", "MODE alice -wi")
    assert h.lines("alice") == [f":{A} MODE alice -i"]


def test_user_mode_o_cannot_be_self_granted(room):
    """RFC 2812 3.1.5: "If a user attempts to make themselves an operator using the "+o" or "+O" flag, the
    attempt SHOULD be ignored as users could bypass the authentication mechanisms of the OPER command.\""""
    h = room
    h.send("alice", "MODE alice +o")
    assert h.lines("alice") == []
    assert not h.clients["alice"].is_oper


def test_user_mode_of_someone_else_502(room):
    """RFC 2812 ERR_USERSDONTMATCH: "Error sent to any user trying to view or change the user mode for a
    user other than themselves.\""""
    h = room
    h.send("alice", "MODE bob +i")
    h.send("alice", "MODE bob")
    h.send("alice", "MODE nobody")
    assert h.lines("alice") == [
        ":irc.test 502 alice :Can't change mode for other users",
        ":irc.test 502 alice :Can't change mode for other users",
        ":irc.test 401 alice nobody :No such nick/channel",
    ]


def test_default_user_modes(make_harness):
    """server.default_user_modes are set at registration and announced after the welcome burst."""
    h = make_harness(server={"default_user_modes": "iw"})
    h.connect("a")
    h.send("a", "NICK alice")
    h.send("a", "USER al 0 * :Alice")
    assert h.lines("a")[-1] == ":alice MODE alice +iw"
