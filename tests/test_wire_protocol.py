"""Protocol defects at the edges of the wire: CAP LS lines filled up to the line limit, CHATHISTORY around
a message that does not exist."""

from __future__ import annotations

import pytest

from ircd.caps import Capability
from ircd.proto.lines import parse_line
from tests.harness import Harness, config
from tests.test_history import CAPS, B, at, batch, expect, login, mid, talk, ts

HEAD = ":irc.test CAP * LS "


def _tokens(h: Harness) -> list[str]:
    return h.server.caps.ls_tokens(h.server, 302)


def _pad_to(h: Harness, total: int) -> None:
    """Add one capability with a value so that the CAP LS 302 list is ``total`` bytes long."""
    current = len(" ".join(_tokens(h)))
    filler = total - current - len(" x-pad=")
    assert filler > 0
    h.server.caps.add(Capability("x-pad", value="v" * filler))
    assert len(" ".join(_tokens(h))) == total


def _cap_ls(h: Harness, version: str = "302") -> list[str]:
    h.connect("c")
    h.send("c", f"CAP LS {version}".strip())
    return h.lines("c")


@pytest.fixture
def small(make_harness):
    """A server whose own list is short (no METADATA capabilities), for lists padded to a size."""
    return make_harness(metadata={"enabled": False})


@pytest.mark.parametrize("total", [401, 470, 512 - len(HEAD + ":\r\n")])
def test_cap_ls_that_fits_one_line_is_one_line(small, total):
    """IRCv3 capability-negotiation: the server sends "CAP * LS * :<caps>" continuation lines only "if the
    list of capabilities is too long to fit in a single line"; the line limit is 512 bytes with CR LF.
    A list of 401 to 489 bytes was cut at 400, and pydle, which reads only the first line, missed every
    capability on the second."""
    h = small
    _pad_to(h, total)
    lines = _cap_ls(h)
    assert lines == [HEAD + ":" + " ".join(_tokens(h))]
    assert len(lines[0].encode()) + 2 <= 512


def _chunks(h: Harness, lines: list[str], continued: bool) -> list[list[str]]:
    """The capability lists of CAP LS lines, checking the ``*`` marker on all but the last (302)."""
    out = []
    for i, line in enumerate(lines):
        params = parse_line(line.encode()).params
        last = i == len(lines) - 1
        if continued and not last:
            assert params[:3] == ["*", "LS", "*"], line
        else:
            assert params[:2] == ["*", "LS"] and len(params) == 3, line
        out.append(params[-1].split())
    return out


def test_one_byte_more_takes_a_second_line(small):
    h = small
    total = 512 - len(HEAD + ":\r\n") + 1
    _pad_to(h, total)
    lines = _cap_ls(h)
    chunks = _chunks(h, lines, continued=True)
    assert len(chunks) == 2
    assert sorted(t for chunk in chunks for t in chunk) == sorted(_tokens(h))
    assert {t for t in _tokens(h) if "/" not in t.partition("=")[0]} <= set(chunks[-1])


def test_the_last_cap_ls_line_carries_the_ratified_capabilities(h):
    """The server may split CAP LS 302 anywhere ("the server MAY send multiple lines"). pydle 1.0 takes
    the ``*`` of a continued line for the list, so it ends negotiation with nothing and then requests
    what the last line offers: that line holds every capability without a draft/ or vendor prefix."""
    lines = _cap_ls(h)
    assert len(lines) == 2  # the default list (656 bytes with both METADATA drafts) takes two
    chunks = _chunks(h, lines, continued=True)
    assert sorted(t for chunk in chunks for t in chunk) == sorted(_tokens(h))
    ratified = [t for t in _tokens(h) if "/" not in t.partition("=")[0]]
    assert "multi-prefix" in ratified
    assert chunks[-1][-len(ratified):] == ratified
    assert not [t for t in chunks[0] if "/" not in t.partition("=")[0]]


def test_long_cap_list_without_302_is_one_line(h):
    """capability-negotiation: "If the client supports CAP version 302, the server MAY send multiple
    lines in response to CAP LS and CAP LIST": a client without 302 gets one line of at most 512
    bytes, the capabilities that do not fit left out (drafts first)."""
    for i in range(60):
        h.server.caps.add(Capability(f"vendor.example/cap-{i:02d}", value=f"v{i}"))
    [line] = _cap_ls(h, "")
    assert len(line.encode()) + 2 <= 512
    shown = _chunks(h, [line], continued=False)[0]
    names = [t.partition("=")[0] for t in _tokens(h)]
    assert shown == [t for t in names if t in shown] and not [t for t in shown if t.startswith("draft/")]


def test_long_cap_list_lines_are_filled_and_within_the_limit(h):
    """Many capabilities: every line within 512 bytes, every line but the first as full as it can be (the
    capability before it would not have fitted), and together exactly the list (302: with ``*`` markers),
    the ratified ones on the last line."""
    version = "302"
    for i in range(60):
        h.server.caps.add(Capability(f"vendor.example/cap-{i:02d}", value=f"v{i}"))
    lines = _cap_ls(h, version)
    tokens = _tokens(h)
    chunks = _chunks(h, lines, continued=True)
    assert len(chunks) > 2
    assert sorted(t for chunk in chunks for t in chunk) == sorted(tokens)
    for i, line in enumerate(lines):
        assert len(line.encode()) + 2 <= 512
        if i > 0:  # the capability before this line would not have fitted into it
            assert len(line.encode()) + 2 + 1 + len(chunks[i - 1][-1].encode()) > 512


def test_cap_list_is_filled_too(h):
    """CAP LIST uses the same lines: with few capabilities enabled, one line."""
    h.connect("c")
    h.send("c", "CAP LS 302")
    h.send("c", "CAP REQ :batch labeled-response message-tags")
    h.take("c")
    h.send("c", "CAP LIST")
    assert h.lines("c") == [":irc.test CAP * LIST :batch cap-notify labeled-response message-tags"]


def test_cap_new_after_a_rehash_fits_the_line(make_harness):
    """cap-notify CAP NEW lines are separate messages (no ``*``) and each fits 512 bytes."""
    h = make_harness()
    h.register("alice", caps=["cap-notify"])
    for i in range(60):  # offered once the configuration says so
        h.server.caps.add(Capability(f"vendor.example/new-{i:02d}", value=f"v{i}",
                                     available=lambda server: server.config.history.max_query == 7))
    h.server.rehash(config(history={"max_query": 7}))
    h.server.flush_all()
    lines = h.lines("alice")
    assert len(lines) > 1
    assert all(len(ln.encode()) + 2 <= 512 and ln.startswith(":irc.test CAP alice NEW :") for ln in lines)
    assert [t for ln in lines for t in ln.split(" :", 1)[1].split()] == [
        f"vendor.example/new-{i:02d}=v{i}" for i in range(60)
    ]


# CHATHISTORY AROUND a message that does not exist ----------------------------------------------


@pytest.fixture
def hh(tmp_path):
    """A harness with a store (history on)."""
    cfg = config(storage={"durability": "off"}, flood={"enabled": False})
    harness = Harness(cfg, db=str(tmp_path / "h.db"))
    yield harness
    harness.close()


def _empty(target: str, now: int) -> list[str]:
    return [
        f"@time={ts(now)} :irc.test BATCH +REF chathistory {target}",
        f"@time={ts(now)} :irc.test BATCH -REF",
    ]


def test_around_a_msgid_that_is_not_a_message_of_the_target_is_an_empty_batch(hh):
    """IRCv3 chathistory AROUND: "Request a number of messages before and after the timestamp or msgid";
    around a message that is not there, there is nothing to return, and "If no content exists to return,
    the server SHOULD return an empty batch in order to avoid the client waiting for a reply." The answer
    was the target's lines around the time the id encodes. It is the same empty batch for an id nobody
    used, one of a channel the client is not in, and one of a private (hidden) channel, so it tells
    nothing about other targets; a real message of the target still gets its context."""
    hh.server.visibility.add_filter(
        lambda viewer, channel: channel.folded != "#secret" or viewer in channel.members
    )
    login(hh, "alice", CAPS)
    login(hh, "bob", CAPS)
    for name in ("alice", "bob"):
        hh.send(name, "JOIN #h")
    talk(hh, "bob", "#h", 5)  # m1..m5 at milliseconds 1..5
    at(hh, 6)
    hh.send("bob", "JOIN #secret")
    hh.send("bob", "PRIVMSG #secret :hush")  # millisecond 6
    at(hh, 7)
    hh.send("bob", "PRIVMSG alice :psst")  # a direct message, millisecond 7
    at(hh, 9)
    for name in ("alice", "bob"):
        hh.take(name)
    unused = "%016x" % (int(mid(3), 16) + 1)  # the second id of millisecond 3: nobody's
    for ref in (unused, mid(6), mid(7), "0000000000000000"):
        assert batch(hh, "alice", f"CHATHISTORY AROUND #h msgid={ref} 4")[1] == _empty("#h", 9), ref
        direct = ref if ref != mid(7) else mid(3)  # mid(7) is the conversation's own
        assert batch(hh, "alice", f"CHATHISTORY AROUND bob msgid={direct} 4")[1] == _empty("bob", 9), ref
    assert batch(hh, "alice", f"CHATHISTORY AROUND #h msgid={mid(3)} 3")[1] == expect([2, 3, 4], now=9)
    assert batch(hh, "alice", f"CHATHISTORY AROUND bob msgid={mid(7)} 3")[1] == [
        f"@time={ts(9)} :irc.test BATCH +REF chathistory bob",
        f"@msgid={mid(7)};time={ts(7)};batch=REF :{B} PRIVMSG alice psst",
        f"@time={ts(9)} :irc.test BATCH -REF",
    ]
    # the hidden channel: the same bytes as a channel nobody uses, real msgid or not
    hh.send("alice", f"CHATHISTORY AROUND #secret msgid={mid(6)} 4")
    hh.send("alice", f"CHATHISTORY AROUND #secret msgid={unused} 4")
    hh.send("alice", f"CHATHISTORY AROUND #nosuch msgid={mid(6)} 4")
    refused = f"@time={ts(9)} :irc.test FAIL CHATHISTORY INVALID_TARGET AROUND #secret"
    assert [ln.replace("#nosuch", "#secret") for ln in hh.lines("alice")] == [
        refused + " :Messages could not be retrieved"
    ] * 3
    # paging by a msgid keeps its place in the order: BEFORE an id no message has still pages on
    assert batch(hh, "alice", f"CHATHISTORY BEFORE #h msgid={unused} 10")[1] == expect([1, 2, 3], now=9)
