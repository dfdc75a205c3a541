"""PIRCAN through the harness: INBOX HISTORY, waits that end when the awaited peer leaves,
strict ids on every verb, the refusal audit limit and the database's body limit.

Accounts as in test_pircan: olive and paul are persons; alice, bob and carol are olive's
agents, dave is paul's.
"""

from __future__ import annotations


import pytest

from ext.pircan.ids import ts
from ircd.store.errors import IntegrityError
from tests import dbs
from tests.proc import cli
from tests.test_pircan import network, SVC, T0_MS, P, S, agree, header, request, send, sent_id, word


@pytest.fixture
def p(tmp_path):
    harness = network(tmp_path)
    yield harness
    harness.close()


def conversation_of_four(p: P) -> list[str]:
    """alice and bob: alice 'one' (root), bob 'two' (reply), alice 'three' (reply), bob 'new' (a new
    conversation); one second apart. Ids in that order."""
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    ids = [sent_id(send(p, "alice", "bob", "one"))]
    p.advance(1)
    ids.append(sent_id(send(p, "bob", "alice", "two", reply_to=ids[0])))
    p.advance(1)
    ids.append(sent_id(send(p, "alice", "bob", "three", reply_to=ids[1])))
    p.advance(1)
    ids.append(sent_id(send(p, "bob", "alice", "new")))
    for conn in ("alice", "bob"):
        p.h.take(conn)
    return ids


# INBOX HISTORY -----------------------------------------------------------------------------------


def test_history_with_a_peer_shows_both_directions_read_and_unread(p):
    ids = conversation_of_four(p)
    assert p.cmd("bob", "INBOX TAKE")[0].startswith(f"{S} INBOX bob MESSAGE {ids[0]}")  # read now
    assert p.cmd("bob", "INBOX HISTORY alice") == [
        header(ids[0], "alice", T0_MS + 250) + " read one",
        header(ids[1], "bob", T0_MS + 1250, conv=ids[0], parent=ids[0], hop=1) + " unread two",
        header(ids[2], "alice", T0_MS + 2250, conv=ids[0], parent=ids[1], hop=2, size=5) + " unread three",
        header(ids[3], "bob", T0_MS + 3250) + " unread new",
        f"{S} INBOX bob HISTORY alice 4 * :4 messages",
    ]
    # nothing changed: the unread one is still unread
    assert p.rows("SELECT printf('%016x', id) FROM pircan_messages WHERE read_at IS NULL ORDER BY id") == [
        (ids[1],), (ids[2],), (ids[3],)
    ]
    # the state is the recipient's: bob sees that alice has read his reply once she acknowledged it
    assert p.cmd("alice", f"INBOX ACK {ids[1]}") == [f"{S} INBOX alice ACKED 1"]
    assert p.cmd("bob", "INBOX HISTORY alice 3")[0] == header(
        ids[1], "bob", T0_MS + 1250, conv=ids[0], parent=ids[0], hop=1) + " read two"


def test_history_of_a_conversation_and_paging(p):
    ids = conversation_of_four(p)
    assert p.cmd("alice", f"INBOX HISTORY {ids[0]} 2") == [
        header(ids[1], "bob", T0_MS + 1250, conv=ids[0], parent=ids[0], hop=1, nick="alice") + " unread two",
        header(ids[2], "alice", T0_MS + 2250, conv=ids[0], parent=ids[1], hop=2, size=5, nick="alice")
        + " unread three",
        f"{S} INBOX alice HISTORY {ids[0]} 2 {ids[1]} :2 messages; older ones: INBOX HISTORY {ids[0]} 2 {ids[1]}",
    ]
    assert p.cmd("alice", f"INBOX HISTORY {ids[0]} 2 {ids[1]}") == [
        header(ids[0], "alice", T0_MS + 250, nick="alice") + " unread one",
        f"{S} INBOX alice HISTORY {ids[0]} 1 * :1 message",
    ]


def test_history_in_a_batch_with_the_batch_capability(p):
    ids = conversation_of_four(p)
    p.h.send("bob", "QUIT")
    p.login("bob2", "bob", caps=("batch",))
    out = p.cmd("bob2", "INBOX HISTORY alice 1")
    ref = word(out[0], 2)[1:]
    assert out[0] == f"{S} BATCH +{ref} pircan/history alice"
    assert out[1] == f"@batch={ref} " + header(ids[3], "bob", T0_MS + 3250) + " unread new"
    assert out[2:] == [
        f"@batch={ref} {S} INBOX bob HISTORY alice 1 {ids[3]} :1 message; older ones: INBOX HISTORY alice 1 {ids[3]}",
        f"{S} BATCH -{ref}",
    ]


def test_history_refusals_reveal_nothing_of_others(p):
    ids = conversation_of_four(p)
    p.login("carol")
    # a conversation carol is not part of reads exactly like one that does not exist
    for ident in (ids[0], "1111111111111111"):
        assert p.cmd("carol", f"INBOX HISTORY {ident}") == [
            f"{S} FAIL INBOX NO_SUCH_MESSAGE {ident} :No such conversation for you"
        ]
    assert p.cmd("carol", "INBOX HISTORY alice") == [f"{S} INBOX carol HISTORY alice 0 * :0 messages"]
    assert p.cmd("carol", "INBOX HISTORY nobody") == [f"{S} FAIL INBOX NO_SUCH_ACCOUNT nobody :No such account"]
    assert p.cmd("carol", "INBOX HISTORY alice 5 zzzz") == [
        f"{S} FAIL INBOX NO_SUCH_MESSAGE zzzz :No such message for you"
    ]
    assert p.cmd("carol", "INBOX HISTORY") == [
        f"{S} FAIL INBOX NEED_MORE_PARAMS HISTORY :Syntax: INBOX HISTORY <account|conversation-id> [<limit>] "
        "[<before-id>]"
    ]


def test_history_prefers_an_account_named_like_an_id(p):
    """An account name may be 16 hex digits (the nick grammar allows 'abcdef0123456789')."""
    p.account("abcdef0123456789")
    p.login("alice")
    p.login("abcdef0123456789")
    agree(p, "alice", "abcdef0123456789")
    mid = sent_id(send(p, "alice", "abcdef0123456789", "hex"))
    out = p.cmd("alice", "INBOX HISTORY abcdef0123456789")
    assert out[0].startswith(f"{S} INBOX alice MESSAGE {mid} alice ")
    assert out[-1] == f"{S} INBOX alice HISTORY abcdef0123456789 1 * :1 message"


def test_help_inbox_names_history(p):
    p.login("alice")
    text = "\n".join(p.cmd("alice", "HELP INBOX"))
    assert "INBOX HISTORY <account|conversation-id> [<limit>] [<before-id>]" in text


# waits and departures ----------------------------------------------------------------------------


def test_wait_for_a_peer_that_leaves_reports_it(p):
    """A WAIT for one peer ends when that peer's last connection closes, instead of running out."""
    p.login("alice")
    p.login("bob", caps=("labeled-response",))
    agree(p, "alice", "bob")
    assert p.cmd("bob", "@label=w INBOX WAIT alice 60000") == []
    p.h.send("alice", "QUIT :done")
    assert p.lines("bob") == [
        f"@label=w {S} INBOX bob GONE alice :alice left the network before sending you a message"
    ]
    p.advance(60)
    assert p.lines("bob") == []  # the timer is gone too


def test_wait_for_several_peers_ends_only_when_all_left(p):
    p.login("alice")
    p.login("dave")
    p.login("bob")
    agree(p, "alice", "bob")
    agree(p, "dave", "bob")
    assert p.cmd("bob", "INBOX WAIT alice,dave 60000") == []
    p.h.send("alice", "QUIT :done")
    assert p.lines("bob") == []
    mid = sent_id(send(p, "dave", "bob", "still here"))
    assert p.lines("bob")[0] == header(mid, "dave", T0_MS + 500, size=10)


def test_wait_for_a_peer_not_on_the_network_answers_nothing_at_once(p):
    """Nothing can come from a peer that is not on the network, not hosted and has no push
    endpoint: the wait says so at once instead of running to its timeout. Once the peer is
    there, a wait runs, and its departure ends it."""
    p.login("bob")
    p.login("alice")
    agree(p, "alice", "bob")
    p.h.send("alice", "QUIT :bye")
    assert p.cmd("bob", "INBOX WAIT alice 5000") == [
        f"{S} INBOX bob NOTHING :Nothing to wait for: alice is not on the network, not hosted and without a push "
        "endpoint"]
    p.login("alice2", "alice")
    assert p.cmd("bob", "INBOX WAIT alice 5000") == []
    p.h.send("alice2", "QUIT :bye again")
    assert p.lines("bob") == [f"{S} INBOX bob GONE alice :alice left the network before sending you a message"]


def test_wait_for_anyone_is_not_ended_by_departures(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    assert p.cmd("bob", "INBOX WAIT * 5000") == []
    p.h.send("alice", "QUIT :bye")
    assert p.lines("bob") == []
    p.advance(5)
    assert p.lines("bob") == [f"{S} INBOX bob TIMEOUT 5000 :No message within 5000 ms"]


# strict ids everywhere -------------------------------------------------------------------------


@pytest.mark.parametrize("ident", ["8000000000000000", "ffffffffffffffff", "²²²²²²²²²²²²²²²²", "１２３４５６７８９０１２３４５６"])
def test_ids_out_of_range_or_in_other_scripts_name_nothing(p, ident):
    """Ids at or above 2**63 do not fit SQLite's INTEGER; digits of other scripts are not hex digits."""
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    nothing = {
        f"SEND bob {ident} :hi": f"{S} FAIL SEND NO_SUCH_MESSAGE {ident} :No such message for you",
        f"INBOX READ {ident}": f"{S} FAIL INBOX NO_SUCH_MESSAGE {ident} :No such message for you",
        f"INBOX ACK {ident}": f"{S} FAIL INBOX NO_SUCH_MESSAGE {ident} :No such message for you",
        f"CONTACT ACCEPT {ident}": f"{S} FAIL CONTACT NO_SUCH_REQUEST {ident} :No such contact request for you",
        f"CONTACT DECLINE {ident}": f"{S} FAIL CONTACT NO_SUCH_REQUEST {ident} :No such contact request for you",
        f"CONTACT REVOKE {ident}": f"{S} FAIL CONTACT NO_SUCH_AGREEMENT {ident} :No such agreement for you",
        f"INBOX HISTORY alice 5 {ident}": f"{S} FAIL INBOX NO_SUCH_MESSAGE {ident} :No such message for you",
    }
    for line, answer in nothing.items():
        who = "alice" if line.startswith("SEND") else "bob"
        assert p.cmd(who, line) == [answer], line


@pytest.mark.parametrize("count", ["²", "-3"])
def test_audit_counts_in_other_forms_are_names(p, count):
    p.login("alice")
    assert p.cmd("alice", f"AUDIT {count}") == [
        f"{S} FAIL AUDIT NOT_ALLOWED {count} :You see your own trail and your agents' trails"
    ]


def test_audit_count_is_clamped(p):
    p.login("alice")
    assert p.cmd("alice", "AUDIT " + "9" * 40) == [f"{S} AUDIT alice END alice"]


# the refusal audit limit ----------------------------------------------------------------------


def test_refusal_audit_rows_are_limited_per_minute_and_summarised(tmp_path):
    p = P(tmp_path, pircan={"audit_refusals_per_minute": 3})
    try:
        p.account("olive", kind="person")
        for name in ("alice", "bob"):
            p.account(name)
        p.login("alice")
        for _ in range(8):
            assert word(p.cmd("alice", "SEND bob :hi")[0], 3) == "NO_AGREEMENT"
        rows = p.rows("SELECT action, detail FROM pircan_audit WHERE actor = 'alice' ORDER BY id")
        assert rows == [("refused", "SEND NO_AGREEMENT")] * 3
        p.advance(61)  # the sweep writes what the minute held back
        rows = p.rows("SELECT at, action, detail FROM pircan_audit WHERE actor = 'alice' ORDER BY id")
        assert rows[3:] == [(rows[3][0], "refused.summary", "5 more refusals in the minute from 2027-01-15T08:00:00.000Z")]
        assert p.cmd("alice", "SEND bob :again")[0].split()[3] == "NO_AGREEMENT"
        assert p.rows("SELECT COUNT(*) FROM pircan_audit WHERE action = 'refused'") == [(4,)]
    finally:
        p.close()


def test_refusal_rows_may_be_deleted_and_nothing_else(p):
    p.login("alice")
    p.cmd("alice", "SEND bob :no agreement")
    p.cmd("alice", "CONTACT POLICY deny")
    p.h.settle()
    conn = dbs.connect(p.path)
    try:
        assert conn.execute("DELETE FROM pircan_audit WHERE action = 'refused'").rowcount == 1
        with pytest.raises(IntegrityError, match="append-only"):
            conn.execute("DELETE FROM pircan_audit")
        conn.commit()
        assert conn.execute("SELECT action FROM pircan_audit").fetchall() == [("policy.set",)]
    finally:
        conn.close()


# the body limit, in the database itself ------------------------------------------------------


def test_the_database_refuses_a_body_over_60000_bytes(p):
    p.login("alice")
    p.h.settle()
    conn = dbs.connect(p.path)
    try:
        insert = ("INSERT INTO pircan_messages (id, sender, recipient, agreement_id, conversation_id, hop_count, "
                  "created_at, body) VALUES (?, 'alice', 'bob', 1, ?, 0, 0, ?)")
        conn.execute(insert, (1, 1, "é" * 30_000))  # 60,000 bytes
        with pytest.raises(IntegrityError, match="at most 60000 bytes"):
            conn.execute(insert, (2, 2, "é" * 30_000 + "x"))
    finally:
        conn.close()


def test_requests_are_still_refused_by_the_service_not_the_database(p):
    """The IRC adapter passes the 200-character limit; the service answers TOO_LONG before storing."""
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    assert p.cmd("alice", "SEND bob :" + "x" * 201) == [f"{S} FAIL SEND TOO_LONG bob :SEND text is at most 200 characters"]
    rid = request(p, "bob", "carol")
    assert len(rid) == 16


# discoverability from the server alone ------------------------------------------------------------


def help_text(p: P, conn: str, topic: str) -> list[str]:
    return [line.split(" :", 1)[1] for line in p.cmd(conn, f"HELP {topic}")]


def test_help_pircan_names_every_verb_login_private_channels_and_isupport(p):
    p.plain("x")
    text = "\n".join(help_text(p, "x", "PIRCAN"))
    for needle in ("AGENTS", "AUDIT", "UNINVITE", "INBOX HISTORY", "CAP REQ :sasl", "NickServ :IDENTIFY",
                   "#<you>/<name>", "PIRCANSENDLEN", "PIRCANHOPS", "PIRCANCONVRATE", "PIRCANBUDGET"):
        assert needle in text, needle


def test_help_join_and_mode_explain_private_channels(p):
    p.plain("x")
    join = help_text(p, "x", "JOIN")
    assert join[-4:-1] == [
        "PIRCAN: channels are for logged-in accounts (477 otherwise, unless the server lets guests join).",
        "#<account>/<name> is the private namespace of <account>: only that account creates channels there,",
        "they start private (+P, invisible to non-members), and only it invites. See HELP UNINVITE.",
    ]
    assert "channel mode +P (private)" in "\n".join(help_text(p, "x", "MODE"))


def test_a_guest_is_told_how_to_log_in(p):
    p.plain("x")
    assert p.cmd("x", "JOIN #lobby") == [
        f"{S} 477 x #lobby :You need to be logged in to an account to join channels: SASL (CAP REQ :sasl) or "
        "PRIVMSG NickServ :IDENTIFY <account> <password>; accounts are made by the server's operator "
        "(ADMIN says who that is)"
    ]
    assert p.cmd("x", "INBOX") == [
        f"{S} FAIL INBOX ACCOUNT_REQUIRED :You must be logged in to use PIRCAN: SASL (CAP REQ :sasl) or "
        "PRIVMSG NickServ :IDENTIFY <account> <password>"
    ]


# an agreement that ends while the server is down -------------------------------------------------


def test_an_agreement_that_ended_while_the_server_was_down_is_recorded_after_the_next_start(tmp_path):
    first = P(tmp_path)
    first.account("olive", kind="person")
    for name in ("alice", "bob"):
        first.account(name)
    first.login("alice")
    first.login("bob")
    aid = agree(first, "alice", "bob", days=1)
    first.close()
    later = T0_MS / 1000 + 3 * 86_400  # two days after the agreement's end
    again = P(tmp_path, clock_start=later)
    again.passwords.update({"alice": "sesame123", "bob": "sesame123"})
    again.login("bob")
    assert again.rows("SELECT action FROM pircan_audit WHERE action = 'agreement.expire'") == []
    again.advance(60)  # the first sweep
    expected_end = ts(T0_MS + 86_400_000)  # accepted at once after the request
    assert again.rows("SELECT actor, action, detail FROM pircan_audit WHERE action = 'agreement.expire'") == [
        ("server", "agreement.expire", f"{aid} with bob ended {expected_end}")
    ]
    again.notifies()
    assert again.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY agreement 1"]
    assert again.rows("SELECT recipient FROM pircan_events WHERE type = 'agreement' ORDER BY recipient") == [
        ("alice",), ("bob",)
    ]
    again.advance(60)  # recorded once
    assert again.rows("SELECT COUNT(*) FROM pircan_audit WHERE action = 'agreement.expire'") == [(1,)]
    again.close()


def test_the_operator_prunes_old_refusal_rows_only(p):
    p.login("alice")
    p.cmd("alice", "SEND bob :no agreement")
    p.cmd("alice", "CONTACT POLICY deny")
    p.h.settle()
    conn = dbs.connect(p.path)
    with conn:  # an old refusal and an old decision; the ones above are recent
        conn.execute("INSERT INTO pircan_audit (id, at, actor, subject, action, detail) "
                     "VALUES (1, 1000, 'alice', 'bob', 'refused', 'SEND NO_AGREEMENT')")
        conn.execute("INSERT INTO pircan_audit (id, at, actor, subject, action, detail) "
                     "VALUES (2, 1000, 'alice', 'alice', 'policy.set', 'deny')")
    conn.close()
    result = cli("audit", "--db", p.path, "--prune-refusals", "30")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "deleted 1 refusal row older than 30 days\n"
    assert p.rows("SELECT id < 100, action FROM pircan_audit ORDER BY id") == [
        (1, "policy.set"), (0, "refused"), (0, "policy.set")
    ]
