"""INBOX WAIT on every event kind, through the harness: each kind the network queues for an account
wakes a wait; the kinds filter; every waiting connection of the account is told, a message taken
once; the oldest and new modes; a wait for an account that does not exist; the NOTIFY a connection
gets at login for unread messages announced before.

Accounts as in test_pircan: olive and paul are persons; alice, bob and carol are olive's agents,
dave is paul's.
"""

from __future__ import annotations

from typing import Any

import pytest

from ext.pircan import store as pstore
from ext.pircan.ids import hexid, ts
from ext.pircan.rules import DAY_MS, Limits
from tests.test_pircan import SVC, P, S, agree, header, network, request, send, sent_id, word


@pytest.fixture
def p(tmp_path):
    harness = network(tmp_path)
    yield harness
    harness.close()


def pircan(p: P) -> Any:
    """PIRCAN's live state (its message check is one of its methods)."""
    return next(fn.__self__ for fn in p.h.server.message_checks if type(fn.__self__).__name__ == "Pircan")


def pair(p: P) -> None:
    p.login("alice")
    p.login("bob")


# each kind wakes a wait ------------------------------------------------------------------------------


def test_a_contact_request_wakes_the_targets_wait(p):
    pair(p)
    assert p.cmd("bob", "INBOX WAIT * 60000") == []
    at = p.now_ms()
    rid = request(p, "alice", "bob", purpose="weekly report")
    assert p.lines("bob") == [
        f"{S} INBOX bob EVENT request {rid} alice bob message pending agent {ts(at + Limits.request_ttl_ms)} "
        ":weekly report"]
    p.notifies()  # the event is also announced as ever: it was not consumed
    assert p.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY request 1"]


def test_a_decision_wakes_the_requesters_wait(p):
    pair(p)
    rid = request(p, "alice", "bob")
    assert p.cmd("alice", "INBOX WAIT bob 60000") == []
    aid = word(p.cmd("bob", f"CONTACT ACCEPT {rid}")[0], 5)
    assert p.lines("alice") == [f"{S} INBOX alice EVENT decision {rid} alice bob message accepted {aid} talk"]
    rid2 = request(p, "alice", "carol", purpose="other")
    p.login("carol")
    p.cmd("alice", "INBOX WAIT * 60000")
    p.cmd("carol", f"CONTACT DECLINE {rid2}")
    assert p.lines("alice") == [f"{S} INBOX alice EVENT decision {rid2} alice carol message declined * other"]


def test_an_agreement_change_wakes_the_other_party_revoke_and_expiry(p):
    pair(p)
    accepted = p.now_ms()
    aid = agree(p, "alice", "bob")
    assert p.cmd("bob", "INBOX WAIT * 0") == []
    p.cmd("alice", f"CONTACT REVOKE {aid}")
    assert p.lines("bob") == [f"{S} INBOX bob EVENT agreement {aid} alice bob message revoked "
                              f"{ts(accepted + 30 * DAY_MS)} :Revoked by alice"]
    accepted = p.now_ms()
    short = agree(p, "alice", "bob", days=1)
    assert p.cmd("bob", "INBOX WAIT * 0") == []
    p.advance(DAY_MS / 1000 + 60)  # the once-a-minute sweep records the end
    assert p.lines("bob")[0] == (f"{S} INBOX bob EVENT agreement {short} alice bob message expired "
                                 f"{ts(accepted + DAY_MS)} Expired")


def test_a_new_task_and_its_changes_wake_waits_whole(p):
    pair(p)
    agree(p, "alice", "bob", scopes="message,task:sum")
    assert p.cmd("bob", "INBOX WAIT * 5000") == []
    tid = word(p.cmd("alice", "TASK CREATE bob sum :the text")[0], 4)
    assert p.lines("bob")[0].split(" ")[3:9] == ["TASK", tid, "alice", "bob", "sum", "submitted"]
    assert p.cmd("alice", "INBOX WAIT * 5000") == []
    p.cmd("bob", f"TASK UPDATE {tid} working :on it")
    assert p.lines("alice")[0].split(" ")[3:9] == ["TASK", tid, "alice", "bob", "sum", "working"]


def test_a_webhook_notice_wakes_the_accounts_wait(p):
    pair(p)
    state = pircan(p)
    assert p.cmd("bob", "INBOX WAIT * 5000") == []
    audit_id, event_id, now = state.new_id(), state.new_id(), state.now_ms()

    def disabled(conn: Any) -> None:  # what the webhook worker writes when an endpoint answers 410
        pstore.audit(conn, audit_id, now, "server", "bob", "webhook.disable", "HTTP 410 from https://hooks.example/")
        pstore.queue_event(conn, event_id, "bob", "webhook", audit_id, now)

    p.h.run(state.database.write(disabled))
    state.event_committed("bob", "webhook", event_id, now)
    p.h.server.flush_all()
    assert p.lines("bob") == [f"{S} INBOX bob EVENT webhook {hexid(audit_id)} bob webhook.disable "
                              ":HTTP 410 from https://hooks.example/"]


# filters and modes -----------------------------------------------------------------------------------


def test_the_kinds_filter_lets_only_those_kinds_end_the_wait(p):
    pair(p)
    p.login("carol")
    agree(p, "alice", "bob")
    assert p.cmd("alice", "INBOX WAIT * 5000 kinds=decision") == []
    send(p, "bob", "alice", "not this")
    request(p, "bob", "alice", "task:x")  # a request is not a decision either
    assert [ln for ln in p.lines("alice") if " INBOX " in ln] == []
    rid = request(p, "alice", "carol")
    p.cmd("carol", f"CONTACT DECLINE {rid}")
    assert [ln for ln in p.lines("alice") if " INBOX " in ln] == [
        f"{S} INBOX alice EVENT decision {rid} alice carol message declined * talk"]


def test_bad_kinds_and_options_are_refused(p):
    pair(p)
    assert p.cmd("bob", "INBOX WAIT * 5000 kinds=message,gossip") == [
        f"{S} FAIL INBOX INVALID_PARAMS gossip :Kinds are message, request, decision, agreement, task, "
        "task-update, webhook"]
    assert p.cmd("bob", "INBOX WAIT * 5000 mode=latest") == [
        f"{S} FAIL INBOX INVALID_PARAMS latest :The mode is oldest or new"]
    assert p.cmd("bob", "INBOX WAIT * 5000 soon=yes") == [
        f"{S} FAIL INBOX INVALID_PARAMS soon=yes :INBOX WAIT options: kinds=<kind>[,...] mode=oldest|new "
        "tasks=<task-id>[,...] channels=<channel>[,...]"]


def test_mode_new_passes_over_what_was_unread_before_the_wait(p):
    pair(p)
    agree(p, "alice", "bob")
    at = p.now_ms()
    old = sent_id(send(p, "alice", "bob", "old"))
    p.h.take("bob")
    assert p.cmd("bob", "INBOX WAIT * 5000 mode=new") == []
    p.advance(1)
    new = sent_id(send(p, "alice", "bob", "new"))
    assert [ln for ln in p.lines("bob") if " INBOX " in ln][0] == header(new, "alice", at + 1000, size=3)
    assert p.rows("SELECT printf('%016x', id), read_at IS NULL FROM pircan_messages ORDER BY id") == [
        (old, 1), (new, 0)]
    # the oldest mode (the default) answers the old one at once
    assert p.cmd("bob", "INBOX WAIT * 5000 mode=oldest")[0] == header(old, "alice", at, size=3)


def test_a_wait_for_an_account_that_does_not_exist_is_refused(p):
    pair(p)
    assert p.cmd("bob", "INBOX WAIT alice,nobody 5000") == [
        f"{S} FAIL INBOX NO_SUCH_ACCOUNT nobody :No such account: a wait for it would never end"]
    p.advance(5)
    assert p.lines("bob") == []  # nothing waits


def test_an_event_not_yet_announced_answers_the_next_wait_once(p):
    """The oldest mode answers an event nothing announced yet (here: within NOTIFY's coalescing
    window); a later wait does not get it again. A request decided since is no longer news."""
    pair(p)
    rid = request(p, "alice", "bob")
    aid = word(p.cmd("bob", f"CONTACT ACCEPT {rid}")[0], 5)
    assert p.cmd("alice", "INBOX WAIT * 5000") == [
        f"{S} INBOX alice EVENT decision {rid} alice bob message accepted {aid} talk"]
    assert p.cmd("bob", "INBOX WAIT * 5000") == []  # bob decided the request himself
    assert p.cmd("alice", "INBOX WAIT * 5000") == []
    p.advance(5)
    assert p.lines("alice")[-1] == f"{S} INBOX alice TIMEOUT 5000 :No message within 5000 ms"


# every connection of the account ----------------------------------------------------------------------


def owner_and_dave(p: P) -> None:
    """olive (a person, two connections may be hers) and dave, paul's agent, with an agreement."""
    for name in ("olive", "dave", "paul"):
        p.login(name)
    p.login("o2", "olive", nick="olive2")
    agree(p, "olive", "dave", decider="paul")


def test_every_waiting_connection_is_told_and_a_message_is_taken_once(p):
    owner_and_dave(p)
    at = p.now_ms()
    assert p.cmd("olive", "INBOX WAIT * 5000") == []
    assert p.cmd("o2", "INBOX WAIT * 5000") == []
    mid = sent_id(send(p, "dave", "olive", "one copy"))
    assert p.lines("olive")[0] == header(mid, "dave", at, size=8, nick="olive")
    assert p.lines("o2") == [
        f"{S} INBOX olive2 EVENT message {mid} dave {mid} taken :Another wait of your account took this message"]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages WHERE read_at IS NOT NULL") == [(1,)]
    # an event is told to both, and consumed by neither: a request to carol, an agent olive owns
    assert p.cmd("olive", "INBOX WAIT * 5000") == []
    assert p.cmd("o2", "INBOX WAIT * 5000") == []
    rid = request(p, "dave", "carol")
    told = f"EVENT request {rid} dave carol message pending agent {ts(at + Limits.request_ttl_ms)} talk"
    assert p.lines("olive") == [f"{S} INBOX olive {told}"]
    assert p.lines("o2") == [f"{S} INBOX olive2 {told}"]


# NOTIFY at login --------------------------------------------------------------------------------------


def test_a_login_hears_of_unread_messages_announced_to_an_earlier_connection(p):
    owner_and_dave(p)
    p.h.send("o2", "QUIT")
    send(p, "dave", "olive", "one")
    send(p, "dave", "olive", "two")
    p.notifies()
    assert p.lines("olive") == [f"{SVC} NOTICE olive :NOTIFY message 2"]
    p.h.send("olive", "QUIT :later")
    send(p, "dave", "olive", "three")  # while olive is away: not announced yet
    p.h.settle()
    p.login("olive")
    p.advance(0)
    assert p.lines("olive") == [f"{SVC} NOTICE olive :NOTIFY message 3"]  # two told before, one new
    p.h.settle()
    p.login("o2", "olive", nick="olive2")  # another connection: the three are unread and were announced
    p.advance(0)
    assert p.lines("o2") == [f"{SVC} NOTICE olive2 :NOTIFY message 3"]
    assert p.lines("olive") == []
    p.cmd("olive", "INBOX ACK ALL")
    p.login("o3", "olive", nick="olive3")
    p.advance(0)
    assert p.lines("o3") == []  # nothing unread: nothing to say


# receipts ---------------------------------------------------------------------------------------------


def receipt_word(out: list[str]) -> str:
    """The delivery word of a SEND's receipt: SEND <you> OK <id> <account> <word> <conversation> <hop>."""
    assert len(out) == 1 and word(out[0], 3) == "OK", out
    return word(out[0], 6)


def test_the_receipt_says_woken_delivered_or_queued(p):
    """woken: a wait of the recipient took it; delivered: a connection of it was told; queued:
    nobody there (pushed and revived: tests/test_a2a_push.py, tests/test_host.py)."""
    pair(p)
    p.login("carol")
    agree(p, "alice", "bob")
    assert p.cmd("bob", "INBOX WAIT alice 5000") == []
    assert receipt_word(send(p, "alice", "bob", "one")) == "woken"
    assert receipt_word(send(p, "alice", "bob", "two")) == "delivered"  # the wait ended with the first
    p.h.take("bob")
    assert p.cmd("bob", "INBOX WAIT carol 5000 mode=new") == []  # a wait for someone else does not take it
    assert receipt_word(send(p, "alice", "bob", "three")) == "delivered"
    p.h.send("bob", "QUIT :away")
    assert receipt_word(send(p, "alice", "bob", "four")) == "queued"


# task filters and the snapshot ------------------------------------------------------------------------


def two_tasks(p: P) -> tuple[str, str]:
    pair(p)
    agree(p, "alice", "bob", scopes="message,task:sum")
    first = word(p.cmd("alice", "TASK CREATE bob sum :first")[0], 4)
    second = word(p.cmd("alice", "TASK CREATE bob sum :second")[0], 4)
    p.h.take("bob")
    return first, second


def test_a_wait_for_tasks_answers_only_their_changes(p):
    first, second = two_tasks(p)
    assert p.cmd("alice", f"INBOX WAIT 5000 tasks={second}") == []
    send(p, "bob", "alice", "not a task")
    p.cmd("bob", f"TASK UPDATE {first} working")
    assert [ln for ln in p.lines("alice") if " INBOX " in ln or " TASK " in ln] == []
    p.cmd("bob", f"TASK UPDATE {second} working :started")
    assert p.lines("alice")[0].split(" ")[3:9] == ["TASK", second, "alice", "bob", "sum", "working"]
    # with a sender too, both legs count: bob's message (still unread) answers at once
    assert word(p.cmd("alice", f"INBOX WAIT bob 5000 tasks={second}")[0], 3) == "MESSAGE"


def test_a_wait_for_a_task_that_is_not_yours_is_refused(p):
    first, _ = two_tasks(p)
    p.login("carol")
    for ident in (first, "0123456789abcdef", "nonsense"):
        assert p.cmd("carol", f"INBOX WAIT 5000 tasks={ident}") == [
            f"{S} FAIL INBOX NO_SUCH_TASK {ident} :No such task of yours: a wait for it would never end"]


def test_a_wait_for_finished_tasks_has_nothing_to_wait_for(p):
    first, second = two_tasks(p)
    p.cmd("bob", f"TASK UPDATE {first} completed :done")
    p.cmd("bob", f"TASK UPDATE {second} rejected :no")
    assert word(p.cmd("alice", f"INBOX WAIT 5000 tasks={first},{second}")[0], 3) == "TASK"  # unseen: news first
    p.h.take("alice")
    p.cmd("alice", f"TASK GET {second}")  # alice has now seen both
    assert p.cmd("alice", f"INBOX WAIT 5000 tasks={first},{second}") == [
        f"{S} INBOX alice NOTHING :Nothing to wait for: task {first} is completed, task {second} is rejected"]
    # a live sender keeps the wait alive
    assert p.cmd("alice", f"INBOX WAIT bob 5000 tasks={first}") == []


def test_task_snapshot_shows_finished_and_running_tasks(p):
    first, second = two_tasks(p)
    p.advance(1)
    p.cmd("bob", f"TASK UPDATE {first} completed :done")
    out = p.cmd("alice", "TASK SNAPSHOT")
    assert [ln.split(" ")[3:9] for ln in out[:-1]] == [
        ["COMPLETED", first, "alice", "bob", "sum", "completed"],
        ["RUNNING", second, "alice", "bob", "sum", "submitted"]]
    assert out[-1] == f"{S} TASK alice SNAPSHOT 1 1 :1 finished, 1 still running"
    assert p.cmd("bob", f"TASK SNAPSHOT {second}")[-1] == f"{S} TASK bob SNAPSHOT 0 1 :0 finished, 1 still running"
    p.login("carol")
    assert p.cmd("carol", f"TASK SNAPSHOT {first}") == [f"{S} FAIL TASK NO_SUCH_TASK {first} :No such task"]
    assert p.cmd("carol", "TASK SNAPSHOT")[-1] == f"{S} TASK carol SNAPSHOT 0 0 :0 finished, 0 still running"


# SEND and await -----------------------------------------------------------------------------------------


def test_send_and_await_answers_with_the_reply_in_that_conversation(p):
    pair(p)
    agree(p, "alice", "bob")
    at = p.now_ms()
    out = p.cmd("alice", "SEND bob * 5000 :Deploy?")
    mid = sent_id(out)
    assert out == [f"{S} SEND alice OK {mid} bob delivered {mid} 0"]
    p.advance(1)
    other = sent_id(send(p, "bob", "alice", "another matter"))  # a new conversation: not the reply
    assert [ln for ln in p.lines("alice") if " INBOX " in ln] == []
    p.advance(1)
    reply = sent_id(send(p, "bob", "alice", "Deploying", reply_to=mid))
    assert [ln for ln in p.lines("alice") if "NOTIFY" not in ln] == [
        header(reply, "bob", at + 2000, conv=mid, parent=mid, hop=1, size=9, nick="alice"),
                                f"{S} INBOX alice BODY {reply} Deploying", f"{S} INBOX alice END {reply}"]
    assert p.rows("SELECT printf('%016x', id), read_at IS NULL FROM pircan_messages WHERE recipient = 'alice' "
                  "ORDER BY id") == [(other, 1), (reply, 0)]


def test_send_and_await_without_a_reply_is_a_normal_answer(p):
    pair(p)
    agree(p, "alice", "bob")
    mid = sent_id(p.cmd("alice", "SEND bob * 1500 :Anyone?"))
    p.advance(1.5)
    assert p.lines("alice") == [f"{S} SEND alice NOREPLY {mid} timeout :No reply within 1500 ms"]
    p.h.send("bob", "QUIT :away")
    out = p.cmd("alice", "SEND bob * 0 :Still?")  # 0: until the reply comes, but none can come
    assert out[1] == (f"{S} SEND alice NOREPLY {sent_id(out[:1])} nothing :Nothing to wait for: bob is not on "
                      "the network, not hosted and without a push endpoint")


def test_a_bad_await_time_is_refused_and_nothing_is_sent(p):
    pair(p)
    agree(p, "alice", "bob")
    assert p.cmd("alice", "SEND bob * soon :hi") == [
        f"{S} FAIL SEND INVALID_PARAMS soon :The await time is a whole number of milliseconds (0: until the reply "
        "comes). Syntax: SEND <account> <in-reply-to|*> <await-ms> :<text>"]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages") == [(0,)]


# channel messages (opt-in) ------------------------------------------------------------------------------


def test_a_wait_watching_a_channel_is_told_of_others_posts(p):
    pair(p)
    p.login("carol")
    for conn in ("alice", "bob"):
        p.cmd(conn, "JOIN #room")
    p.h.take("alice")
    assert p.cmd("bob", "INBOX WAIT 5000 channels=#ROOM mode=new") == []  # any case names the channel
    p.cmd("bob", "PRIVMSG #room :my own words")  # one's own post is not news
    assert [ln for ln in p.lines("bob") if " INBOX " in ln] == []
    p.h.send("alice", "PRIVMSG #Room :standup in five")
    told = [ln for ln in p.lines("bob") if " INBOX " in ln]
    stored = p.rows("SELECT printf('%016x', id) FROM history WHERE text = 'standup in five'")
    assert told == [f"{S} INBOX bob EVENT channel {stored[0][0]} #room alice alice :standup in five"]
    assert p.cmd("carol", "INBOX WAIT 5000 channels=#room") == [
        f"{S} FAIL INBOX NOT_MEMBER #room :You are not a member of this channel. Join it first: JOIN <channel> "
        "(MCP: join_channel)"]
    assert p.cmd("carol", "INBOX WAIT 5000 channels=#nowhere") == [
        f"{S} FAIL INBOX NO_SUCH_CHANNEL #nowhere :No such channel"]
