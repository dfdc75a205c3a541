"""Tasks, profiles and resources through the harness: every transition allowed and refused (by whom,
with which code), scope direction, budgets, revocation, audit rows, the one wait for everything,
and resources that reveal nothing to those without resource:read.

Accounts: olive (person) owns alice, bob and carol; paul (person) owns dave.
"""

from __future__ import annotations

import pytest

from ext.pircan.ids import ts
from tests.test_pircan import network, SVC, T0_MS, P, S, agree, word


@pytest.fixture
def p(tmp_path):
    harness = network(tmp_path)
    yield harness
    harness.close()


def task_from(p: P, frm: str = "alice", to: str = "bob", skill: str = "translate", text: str = "Hallo Welt") -> str:
    out = p.cmd(frm, f"TASK CREATE {to} {skill} :{text}")
    assert len(out) == 1 and word(out[0], 3) == "CREATED", out
    return word(out[0], 4)


@pytest.fixture
def pair(p):
    """alice may send bob translate tasks (and messages); returns the agreement id."""
    for name in ("alice", "bob", "olive"):
        p.login(name)
    return agree(p, "alice", "bob", scopes="message,task:translate")


# creating ------------------------------------------------------------------------------------


def test_create_is_stored_notified_audited(p, pair):
    tid = task_from(p)
    assert p.cmd("alice", f"TASK GET {tid}") == [
        f"{S} TASK alice TASK {tid} alice bob translate submitted {ts(T0_MS + 250)} {ts(T0_MS + 250)}",
        f"{S} TASK alice ENTRY {tid} {word(p.cmd('alice', f'TASK GET {tid}')[1], 5)} alice input submitted "
        f"{ts(T0_MS + 250)} 10",
        f"{S} TASK alice BODY {word(p.cmd('alice', f'TASK GET {tid}')[1], 5)} :Hallo Welt",
        f"{S} TASK alice END {tid}",
    ]
    p.notifies()
    assert p.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY task 1"]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action LIKE 'task.%'") == [
        ("alice", "bob", "task.create", f"{tid} skill=translate agreement={pair}")
    ]
    assert p.rows("SELECT recipient, type FROM pircan_events WHERE type LIKE 'task%'") == [("bob", "task")]


@pytest.mark.parametrize("line, code, context", [
    ("TASK CREATE bob summarise :x", "SCOPE_MISSING", "bob"),
    ("TASK CREATE carol translate :x", "NO_AGREEMENT", "carol"),
    ("TASK CREATE nobody translate :x", "NO_SUCH_ACCOUNT", "nobody"),
    ("TASK CREATE alice translate :x", "SELF_CONTACT", "alice"),
    ("TASK CREATE bob Bad!Skill :x", "INVALID_SCOPE", "bad!skill"),
    ("TASK CREATE bob translate :   ", "EMPTY", "bob"),
    ("TASK CREATE bob translate :" + "x" * 201, "TOO_LONG", "bob"),
    ("TASK CREATE bob translate", "NEED_MORE_PARAMS", "CREATE"),
    ("TASK FROB", "UNKNOWN_SUBCOMMAND", "FROB"),
])
def test_create_refusals(p, pair, line, code, context):
    out = p.cmd("alice", line)
    assert len(out) == 1 and out[0].startswith(f"{S} FAIL TASK {code} {context} :"), out


def test_the_scope_goes_one_way_only(p, pair):
    """task:<skill> lets the requester send tasks to the target, never the target back."""
    assert p.cmd("bob", "TASK CREATE alice translate :back") == [
        f"{S} FAIL TASK SCOPE_MISSING alice :You need an active agreement with task:translate for this"
    ]


# moving it on --------------------------------------------------------------------------------


def test_the_whole_life_with_input_required(p, pair):
    tid = task_from(p)
    assert p.cmd("bob", f"TASK UPDATE {tid} working") == [f"{S} TASK bob UPDATED {tid} working"]
    assert p.cmd("bob", f"TASK UPDATE {tid} input-required :Formal or informal?") == [
        f"{S} TASK bob UPDATED {tid} input-required"]
    assert p.cmd("alice", f"TASK INPUT {tid} :Informal") == [f"{S} TASK alice UPDATED {tid} working"]
    assert p.cmd("bob", f"TASK UPDATE {tid} completed :Hallo Welt = Hello world") == [
        f"{S} TASK bob UPDATED {tid} completed"]
    got = p.cmd("alice", f"TASK GET {tid}")
    entries = [(word(x, 6), word(x, 7), word(x, 8)) for x in got if word(x, 3) == "ENTRY"]
    assert entries == [("alice", "input", "submitted"), ("bob", "status", "working"),
                       ("bob", "status", "input-required"), ("alice", "input", "working"),
                       ("bob", "result", "completed")]
    assert got[-2] == f"{S} TASK alice BODY {word(got[-3], 5)} :Hallo Welt = Hello world"
    details = [d for (d,) in p.rows("SELECT detail FROM pircan_audit WHERE action = 'task.update' ORDER BY id")]
    assert details == [f"{tid} submitted->working", f"{tid} working->input-required",
                       f"{tid} input-required->working", f"{tid} working->completed"]


@pytest.mark.parametrize("state_path, move, allowed", [
    ([], "working", True), ([], "input-required", False),  # input-required needs its question (EMPTY)
    ([], "rejected", True), ([], "canceled", False), ([], "submitted", False),
    (["working"], "working", True), (["working"], "rejected", False), (["working"], "submitted", False),
    (["completed :done"], "working", False), (["rejected"], "failed", False),
])
def test_target_transitions(p, pair, state_path, move, allowed):
    tid = task_from(p)
    for step in state_path:
        assert word(p.cmd("bob", f"TASK UPDATE {tid} {step}")[0], 3) == "UPDATED"
    out = p.cmd("bob", f"TASK UPDATE {tid} {move}")
    if allowed:
        assert out == [f"{S} TASK bob UPDATED {tid} {move}"]
    elif move == "input-required" and not state_path:
        assert out == [f"{S} FAIL TASK EMPTY {tid} :This needs a text"]
    else:
        assert word(out[0], 3) == "INVALID_TRANSITION" and word(out[0], 4) == tid, out


def test_who_may_do_what(p, pair):
    tid = task_from(p)
    p.login("carol")
    p.login("dave")
    assert p.cmd("alice", f"TASK UPDATE {tid} working") == [
        f"{S} FAIL TASK NOT_ALLOWED {tid} :Only the task's target moves it on; you may INPUT or CANCEL"]
    assert p.cmd("bob", f"TASK CANCEL {tid}") == [
        f"{S} FAIL TASK NOT_ALLOWED {tid} :Only the task's requester cancels it; the target may fail or reject it"]
    assert p.cmd("bob", f"TASK INPUT {tid} :x") == [
        f"{S} FAIL TASK NOT_ALLOWED {tid} :Only the task's requester gives it more input"]
    assert p.cmd("alice", f"TASK INPUT {tid} :x") == [
        f"{S} FAIL TASK INVALID_TRANSITION {tid} working :The task is submitted, not input-required"]
    for stranger in ("carol", "dave"):  # not a party: the task does not exist for them
        assert p.cmd(stranger, f"TASK GET {tid}") == [f"{S} FAIL TASK NO_SUCH_TASK {tid} :No such task"]
        assert p.cmd(stranger, f"TASK CANCEL {tid}") == [f"{S} FAIL TASK NO_SUCH_TASK {tid} :No such task"]
    # the owner of both acts for the target side first
    assert p.cmd("olive", f"TASK UPDATE {tid} working") == [f"{S} TASK olive UPDATED {tid} working"]
    assert p.rows("SELECT detail FROM pircan_audit WHERE action = 'task.update'") == [
        (f"{tid} submitted->working by owner",)]
    assert p.cmd("alice", f"TASK CANCEL {tid} :no longer needed") == [f"{S} TASK alice UPDATED {tid} canceled"]
    assert word(p.cmd("alice", f"TASK CANCEL {tid}")[0], 3) == "INVALID_TRANSITION"


def test_revoking_the_agreement_cancels_its_open_tasks(p, pair):
    done = task_from(p, text="one")
    p.cmd("bob", f"TASK UPDATE {done} completed :ok")
    open_one = task_from(p, text="two")
    assert word(p.cmd("bob", f"CONTACT REVOKE {pair}")[0], 3) == "REVOKED"
    p.h.settle()
    states = dict(p.rows("SELECT printf('%016x', id), state FROM pircan_tasks"))
    assert states == {done: "completed", open_one: "canceled"}
    assert p.rows("SELECT author, kind, text FROM pircan_task_entries WHERE state = 'canceled'") == [
        ("server", "error", "The agreement ended")]
    assert p.rows("SELECT actor, action FROM pircan_audit WHERE action = 'task.end'") == [("server", "task.end")]
    assert word(p.cmd("alice", "TASK CREATE bob translate :three")[0], 3) == "NO_AGREEMENT"


def test_task_changes_count_against_the_budget_with_messages(p, pair):
    for i in range(119):
        assert word(p.cmd("alice", f"SEND bob :m{i}")[0], 3) == "OK"
    tid = task_from(p)  # the 120th
    assert p.cmd("alice", "TASK CREATE bob translate :121") == [
        f"{S} FAIL TASK AGREEMENT_BUDGET {pair} :120 messages and task changes under this agreement in the last hour. Wait for the retry time. Retry in 3600 s"]
    assert word(p.cmd("alice", "SEND bob :121")[0], 3) == "AGREEMENT_BUDGET"
    assert p.cmd("bob", f"TASK UPDATE {tid} working") == [f"{S} TASK bob UPDATED {tid} working"]  # bob's own budget


def test_list_filters(p, pair):
    one = task_from(p, text="one")
    two = task_from(p, text="two")
    p.cmd("bob", f"TASK UPDATE {two} rejected")
    listed = p.cmd("alice", "TASK LIST")
    assert [word(x, 4) for x in listed[:-1]] == [two, one] and listed[-1] == f"{S} TASK alice END 2"
    assert [word(x, 4) for x in p.cmd("bob", "TASK LIST state=rejected role=target")[:-1]] == [two]
    assert p.cmd("bob", "TASK LIST role=requester") == [f"{S} TASK bob END 0"]
    assert [word(x, 4) for x in p.cmd("olive", "TASK LIST peer=alice")[:-1]] == [two, one]  # as bob's owner
    assert p.cmd("alice", "TASK LIST colour=red") == [
        f"{S} FAIL TASK INVALID_PARAMS colour=red :Filters: role=requester|target state=<state> peer=<account> limit=<n>"]


# one wait for everything ---------------------------------------------------------------------


def test_wait_wakes_on_a_task_result(p, pair):
    tid = task_from(p)
    p.h.take("alice")
    assert p.cmd("alice", "INBOX WAIT bob 60000") == []
    p.cmd("bob", f"TASK UPDATE {tid} completed :Hello world")
    got = p.lines("alice")
    assert got[0] == f"{S} TASK alice TASK {tid} alice bob translate completed {ts(T0_MS + 250)} {ts(T0_MS + 250)}"
    assert got[-2:] == [f"{S} TASK alice BODY {word(got[-3], 5)} :Hello world", f"{S} TASK alice END {tid}"]
    # seen: the next wait does not answer with it again
    assert p.cmd("alice", "INBOX WAIT bob 1000") == []
    p.advance(1)
    assert p.lines("alice")[-1] == f"{S} INBOX alice TIMEOUT 1000 :No message within 1000 ms"


def test_a_change_before_the_wait_is_not_lost(p, pair):
    tid = task_from(p)
    p.cmd("bob", f"TASK UPDATE {tid} input-required :Which dialect?")
    p.h.take("alice")
    got = p.cmd("alice", "INBOX WAIT * 5000")
    assert got[0].startswith(f"{S} TASK alice TASK {tid} alice bob translate input-required ")
    p.notifies()
    p.h.take("bob")
    assert p.cmd("bob", "INBOX WAIT alice 1000") == []  # bob's own change is not news to bob
    p.advance(1)
    assert p.lines("bob") == [f"{S} INBOX bob TIMEOUT 1000 :No message within 1000 ms"]


def test_get_marks_a_change_seen(p, pair):
    tid = task_from(p)
    p.cmd("bob", f"TASK UPDATE {tid} working")
    p.cmd("alice", f"TASK GET {tid}")
    assert p.cmd("alice", "INBOX WAIT * 1000") == []
    p.advance(1)
    assert p.lines("alice")[-1] == f"{S} INBOX alice TIMEOUT 1000 :No message within 1000 ms"


# profiles and skills -----------------------------------------------------------------------


def test_skills_and_display_names_show_in_the_roster(p, pair):
    assert p.cmd("bob", "PROFILE NAME * :Bob the Translator") == [f"{S} PROFILE bob NAME bob :Bob the Translator"]
    assert p.cmd("olive", "PROFILE SKILL bob translate :German <-> English") == [
        f"{S} PROFILE olive SKILL bob translate :German <-> English"]
    assert p.cmd("alice", "PROFILE SKILL bob summarise :x") == [
        f"{S} FAIL PROFILE NOT_ALLOWED bob :Only an account and its owner change its profile"]
    assert p.cmd("alice", "PROFILE bob") == [
        f"{S} PROFILE alice PROFILE bob agent olive :Bob the Translator",
        f"{S} PROFILE alice SKILL bob translate :German <-> English",
        f"{S} PROFILE alice END bob",
    ]
    roster = p.cmd("alice", "AGENTS")
    assert roster[0].endswith(" agreement olive agent :Bob the Translator")
    assert roster[1] == f"{S} AGENTS alice SKILL bob translate :German <-> English"
    everyone = p.cmd("alice", "AGENTS ALL")
    assert f"{S} AGENTS alice AGENT paul offline 0 * none * person *" in everyone
    assert p.cmd("bob", "PROFILE UNSKILL * translate") == [f"{S} PROFILE bob UNSKILL bob translate"]
    assert p.cmd("bob", "PROFILE UNSKILL * translate") == [f"{S} FAIL PROFILE NO_SUCH_SKILL translate :No such skill"]
    assert [a for (a,) in p.rows("SELECT action FROM pircan_audit WHERE action LIKE 'skill.%' OR "
                                 "action = 'profile.name' ORDER BY id")] == [
        "profile.name", "skill.set", "skill.delete"]


# resources ------------------------------------------------------------------------------------


def test_resources_are_read_by_holders_only(p, pair):
    p.login("carol")
    assert p.cmd("bob", 'RESOURCE PUT * glossary json :{"hallo": "hello"}') == [
        f"{S} RESOURCE bob PUT bob glossary 18"]
    # alice has no resource:read: bob's resources read exactly like those of an agent without any
    for owner, name in (("bob", "glossary"), ("carol", "glossary"), ("bob", "nothing"), ("nobody", "x")):
        assert p.cmd("alice", f"RESOURCE GET {owner} {name}") == [
            f"{S} FAIL RESOURCE NO_SUCH_RESOURCE {owner} {name} :No such resource"]
        assert p.cmd("alice", f"RESOURCE LIST {owner}") == [f"{S} RESOURCE alice END {owner}"]
    rid = word(p.cmd("alice", "CONTACT REQUEST bob resource:read 5 :read your glossary")[0], 4)
    p.cmd("bob", f"CONTACT ACCEPT {rid}")
    listed = p.cmd("alice", "RESOURCE LIST bob")
    assert listed[0].startswith(f"{S} RESOURCE alice RESOURCE bob glossary json 18 ")
    assert p.cmd("alice", "RESOURCE GET bob glossary")[1:] == [
        f'{S} RESOURCE alice BODY glossary :{{"hallo": "hello"}}', f"{S} RESOURCE alice END bob glossary"]
    # the direction: bob does not read alice's
    p.cmd("alice", "RESOURCE PUT * notes text :mine")
    assert word(p.cmd("bob", "RESOURCE GET alice notes")[0], 3) == "NO_SUCH_RESOURCE"
    assert p.cmd("bob", "RESOURCE PUT * bad json :{nope") == [f"{S} FAIL RESOURCE INVALID_PARAMS bad :This is not JSON"]
