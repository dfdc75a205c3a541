"""A deleted account's PIRCAN state ends, and nothing of it passes to a new account of the same name.

olive (person) owns alice and carl; paul (person) owns dave. carl and alice agree, talk, and carl has
a pending request to dave; then carl is deleted (by the operator's CLI in another process, or in the
server) and made again under paul.
"""

from __future__ import annotations


import pytest

from tests import dbs
from tests.test_pircan import P, S, SVC, agree, request, send, sent_id, word


@pytest.fixture
def p(tmp_path):
    harness = P(tmp_path)
    harness.account("olive", kind="person")
    harness.account("paul", kind="person")
    harness.account("alice")
    harness.account("carl")
    harness.account("dave", owner="paul")
    yield harness
    harness.close()


def carl_talks(p: P) -> tuple[str, str, str]:
    for name in ("alice", "carl", "dave"):
        p.login(name)
    aid = agree(p, "alice", "carl")
    mid = sent_id(send(p, "alice", "carl", "for the old carl"))
    rid = request(p, "carl", "dave")
    p.cmd("carl", "PROFILE NAME * :Old Carl")
    p.notifies()
    for conn in ("alice", "carl", "dave"):
        p.h.take(conn)
    return aid, mid, rid


def delete_from_another_process(p: P, name: str) -> None:
    """What `pircd account del` does: another connection to the file, then the server notices."""
    p.h.settle()
    conn = dbs.connect(p.path)
    with conn:
        conn.execute("DELETE FROM accounts WHERE folded = ?", (name,))
    conn.close()
    p.h.run(p.h.server.accounts.poll_external_changes())
    p.h.settle()


@pytest.mark.parametrize("how", ["cli", "server"])
def test_deleting_an_account_ends_its_agreements_and_requests(p, how):
    aid, _, rid = carl_talks(p)
    if how == "cli":
        delete_from_another_process(p, "carl")
    else:
        assert p.h.run(p.h.server_api("pircan").delete_account("carl")) is True
        p.h.settle()
    p.notifies()
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY agreement 1"]
    assert p.rows("SELECT state FROM pircan_requests WHERE printf('%016x', id) = ?", rid) == [("expired",)]
    assert p.rows("SELECT revoked_by FROM pircan_agreements WHERE printf('%016x', id) = ?", aid) == [("server",)]
    assert [a for (a,) in p.rows("SELECT action FROM pircan_audit WHERE actor = 'server' ORDER BY id")] == [
        "agreement.end", "contact.end"]
    assert word(p.cmd("alice", "SEND carl :anyone?")[0], 3) == "NO_SUCH_ACCOUNT"


def test_a_new_account_of_the_same_name_inherits_nothing(p):
    aid, mid, rid = carl_talks(p)
    delete_from_another_process(p, "carl")
    p.h.run(p.h.server.accounts.create("carl", "sesame123", kind="agent", owner="paul"))
    p.h.run(p.h.server.accounts.refresh())
    p.login("carl2", "carl")
    assert p.cmd("carl2", "CONTACT LIST") == [f"{S} CONTACT carl END"]
    assert p.cmd("carl2", "INBOX") == [f"{S} INBOX carl UNREAD 0 :0 unread messages"]
    assert p.cmd("carl2", f"INBOX READ {mid}") == [f"{S} FAIL INBOX NO_SUCH_MESSAGE {mid} :No such message for you"]
    assert p.cmd("carl2", "INBOX HISTORY alice") == [f"{S} INBOX carl HISTORY alice 0 * :0 messages"]
    assert p.cmd("carl2", "AUDIT") == [f"{S} AUDIT carl END carl"]
    assert word(p.cmd("carl2", "SEND alice :hi, it's me again")[0], 3) == "NO_AGREEMENT"
    assert p.cmd("carl2", "PROFILE") == [f"{S} PROFILE carl PROFILE carl agent paul *", f"{S} PROFILE carl END carl"]
    assert p.cmd("carl2", f"CONTACT REVOKE {aid}") == [
        f"{S} FAIL CONTACT NO_SUCH_AGREEMENT {aid} :No such agreement for you"]
    # alice still has her side of the old conversation, with the old carl named as such
    history = p.cmd("alice", "INBOX HISTORY " + mid)
    assert word(history[0], 5) == "alice" and history[-1].split(" ")[3:6] == ["HISTORY", mid, "1"]
    tomb = p.rows("SELECT recipient FROM pircan_messages")[0][0]
    assert tomb.startswith("carl~")


def test_deletion_while_the_server_is_down_is_found_at_start_up(tmp_path):
    first = P(tmp_path)
    first.account("olive", kind="person")
    first.account("alice")
    first.account("carl")
    first.login("alice")
    first.login("carl")
    agree(first, "alice", "carl")
    first.close()
    conn = dbs.connect(tmp_path / "p.db")
    with conn:
        conn.execute("DELETE FROM accounts WHERE folded = 'carl'")
    conn.close()
    again = P(tmp_path)
    try:
        assert again.rows("SELECT revoked_by FROM pircan_agreements") == [("server",)]
        assert again.rows("SELECT requester, target FROM pircan_agreements")[0][1].startswith("carl~")
    finally:
        again.close()


@pytest.mark.parametrize("how", ["cli", "server"])
def test_a_deleted_accounts_open_tasks_end_with_an_event_naming_the_change(p, how):
    """Like every other change of a task, the cancel at deletion is an event naming its entry (the change)."""
    for name in ("alice", "carl"):
        p.login(name)
    agree(p, "alice", "carl", scopes="message,task:translate")
    out = p.cmd("alice", "TASK CREATE carl translate :Hallo Welt")
    assert word(out[0], 3) == "CREATED", out
    tid = word(out[0], 4)
    assert word(p.cmd("carl", f"TASK UPDATE {tid} working :on it")[0], 3) == "UPDATED"
    if how == "cli":
        delete_from_another_process(p, "carl")
    else:
        assert p.h.run(p.h.server_api("pircan").delete_account("carl")) is True
        p.h.settle()
    events = p.rows(
        "SELECT e.state, e.text FROM pircan_events v JOIN pircan_task_entries e ON e.id = v.ref_id"
        " WHERE v.recipient = 'alice' AND v.type = 'task-update' ORDER BY v.id")
    assert events == [("working", "on it"), ("canceled", "carl was deleted")]
    assert p.rows("SELECT state FROM pircan_tasks WHERE printf('%016x', id) = ?", tid) == [("canceled",)]
