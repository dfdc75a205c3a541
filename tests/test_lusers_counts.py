"""LUSERS keeps running counts (it is part of every registration): they must stay exact."""

from __future__ import annotations

from ircd.state.channel import Channel


def lusers(h, who):
    h.send(who, "LUSERS")
    return [ln for ln in h.lines(who) if " 251 " in ln or " 253 " in ln or " 255 " in ln]


def test_counts_follow_registration_modes_and_quits(h):
    h.register("a")
    h.register("b")
    h.connect("pending")  # connected, not registered: an unknown connection
    assert lusers(h, "a") == [
        ":irc.test 251 a :There are 2 users and 0 invisible on 1 servers",
        ":irc.test 253 a 1 :unknown connection(s)",
        ":irc.test 255 a :I have 2 clients and 0 servers",
    ]
    h.send("b", "MODE b +i")
    h.send("b", "MODE b +i")  # no change, no double count
    assert lusers(h, "a")[0] == ":irc.test 251 a :There are 1 users and 1 invisible on 1 servers"
    h.send("b", "QUIT")
    h.disconnect("pending")
    assert lusers(h, "a") == [
        ":irc.test 251 a :There are 1 users and 0 invisible on 1 servers",
        ":irc.test 253 a 0 :unknown connection(s)",
        ":irc.test 255 a :I have 1 clients and 0 servers",
    ]
    h.register("c")
    h.send("c", "MODE c +i")
    h.send("c", "MODE c -i")
    h.disconnect("c")
    assert lusers(h, "a")[0] == ":irc.test 251 a :There are 1 users and 0 invisible on 1 servers"


def formed(h, who):
    """The number in ``who``'s 254 (RPL_LUSERCHANNELS)."""
    h.send(who, "LUSERS")
    (line,) = [ln for ln in h.lines(who) if " 254 " in ln]
    assert line.endswith(" :channels formed"), line
    return int(line.split()[-3])


def test_channels_formed_follow_joins_and_the_last_part_quit_and_kick(h):
    """RFC 2812 5.1: "254 RPL_LUSERCHANNELS "<integer> :channels formed"": a channel is formed
    while someone is in it; the last PART, QUIT or KICK ends it."""
    for name in ("a", "b", "c"):
        h.register(name)
    assert formed(h, "a") == 0
    h.send("a", "JOIN #one,#two")
    h.send("b", "JOIN #one,#three")
    assert formed(h, "c") == 3
    h.send("a", "PART #two")  # its last member
    h.send("b", "PART #one")  # not its last member
    assert formed(h, "c") == 2
    h.send("b", "QUIT :gone")  # the last member of #three
    assert formed(h, "a") == 1
    h.send("c", "JOIN #one,#four")
    h.send("a", "KICK #one c")  # not the last member
    h.send("c", "KICK #four c")  # the last one, kicking itself
    assert formed(h, "c") == 1
    h.send("a", "JOIN 0")
    assert formed(h, "c") == 0
    h.send("c", "JOIN #one")  # formed anew
    assert formed(h, "a") == 1


def test_state_counts_channels_that_entered_it_unformed(h):
    """A channel can enter the state before its first member (a JOIN creating it, a cluster
    node's channel before its users) or with an owner and no one in it (a registered channel
    restored at start-up): counted only once it has either."""
    state = h.server.state
    told: list[str] = []
    state.channel_added.append(lambda ch: told.append("+" + ch.folded))
    state.channel_removed.append(lambda ch: told.append("-" + ch.folded))
    h.register("a")
    empty = state.create_channel("#empty", 0)
    assert (state.channels_formed(), len(state.all_channels())) == (0, 1)
    empty.add_member(h.clients["a"])
    assert state.channels_formed() == 1
    empty.remove_member(h.clients["a"])
    h.server.drop_channel_if_empty(empty)
    assert (state.channels_formed(), len(state.all_channels())) == (0, 0)
    owned = Channel("#owned", "#owned", 0)
    owned.owner_account = "a"
    state.add_channel(owned)
    unowned = Channel("#unowned", "#unowned", 0)
    state.add_channel(unowned)
    assert (state.channels_formed(), len(state.all_channels())) == (1, 2)
    state.remove_channel(unowned)
    state.remove_channel(owned)
    assert state.channels_formed() == 0
    assert told == ["+#empty", "-#empty", "+#owned", "+#unowned", "-#unowned", "-#owned"]
