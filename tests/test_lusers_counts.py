"""LUSERS keeps running counts (it is part of every registration): they must stay exact."""

from __future__ import annotations


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
