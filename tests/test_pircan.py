"""PIRCAN through the socket-free harness: every verb and every FAIL code, with exact lines and stored rows.

The server has a real SQLite store (tmp_path) and the pircan extension. The
harness clock is fake: ``h.advance(seconds)`` moves it and fires the timers
that came due (NOTIFY coalescing, INBOX WAIT timeouts, the once-a-minute
expiry sweep). Stored rows are read with ``dbs.connect`` after ``h.settle()``.

Accounts: olive and paul are persons; alice, bob and carol are olive's agents,
dave is paul's.
"""

from __future__ import annotations

import asyncio
import base64
import threading

import pytest

from ext.pircan import store as pstore
from ext.pircan.store import StoredMessage
from ext.pircan.ids import ts
from ircd.store.errors import IntegrityError
from tests import dbs
from tests.harness import Harness, config

S = ":irc.test"
SVC = ":PIRCAN!pircan@services.pircd"
LOBBY = "pircan.dev/lobby"
DAY = 86_400
T0_MS = 1_800_000_000_000  # the harness clock's start
NO_AGREEMENT_TEXT = ("You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message "
                     "<days> :<purpose> (MCP: request_contact), then wait for the decision")


class P:
    """A harness with PIRCAN, accounts and SASL logins."""

    def __init__(self, tmp_path, clock_start: float | None = None, **sections) -> None:
        sections.setdefault("server", {})
        sections["server"] = {"extensions": ["pircan"], **sections["server"]}
        sections.setdefault("storage", {"durability": "off"})
        sections.setdefault("flood", {"enabled": False})
        self.path = dbs.database(tmp_path / "p.db")  # the file, or the URL of a PostgreSQL run
        self.h = Harness(config(**sections), db=self.path, extensions=True, clock_start=clock_start)
        self.passwords: dict[str, str] = {}

    # accounts and connections

    def account(self, name: str, kind: str = "agent", owner: str | None = "olive", password: str = "sesame123"):
        self.passwords[name] = password
        return self.h.run(self.h.server.accounts.create(name, password, kind=kind, owner=owner if kind == "agent" else None))

    def login(self, conn: str, account: str | None = None, caps: tuple[str, ...] = (), password: str | None = None,
              nick: str | None = None):
        """Connect ``conn``, log in to ``account`` (default: conn) with SASL PLAIN, register, drop the welcome."""
        h = self.h
        account = account or conn
        h.connect(conn)
        h.send(conn, "CAP LS 302")
        h.send(conn, "CAP REQ :" + " ".join(("sasl", *caps)))
        h.send(conn, f"NICK {nick or account}")
        h.send(conn, f"USER {conn} 0 * :R")
        h.send(conn, "AUTHENTICATE PLAIN")
        secret = password or self.passwords[account]
        h.send(conn, "AUTHENTICATE " + base64.b64encode(f"\0{account}\0{secret}".encode()).decode())
        h.send(conn, "CAP END")
        client = h.clients[conn]
        assert client.registered and client.account_folded == account.lower(), h.lines(conn)
        h.take(conn)
        return client

    def plain(self, conn: str, nick: str | None = None, caps=()):
        """A registered client without an account."""
        return self.h.register(conn, nick or conn, caps=caps)

    # lines

    def cmd(self, conn: str, line: str) -> list[str]:
        self.h.send(conn, line)
        return self.h.lines(conn)

    def lines(self, conn: str) -> list[str]:
        return self.h.lines(conn)

    def advance(self, seconds: float) -> None:
        self.h.advance(seconds)

    def at(self, offset_ms: int) -> None:
        """Set the clock to exactly T0 + ``offset_ms`` (no float drift) and fire the timers due."""
        self.h.clock.now = (T0_MS + offset_ms) / 1000
        self.h.server.timers.run_due()
        self.h.server.flush_all()

    def now_ms(self) -> int:
        return int(self.h.clock.now * 1000)

    def notifies(self, seconds: float = 0.25) -> None:
        """Let the NOTIFY coalescing window pass."""
        self.h.advance(seconds)

    # store

    def rows(self, sql: str, *args) -> list[tuple]:
        self.h.settle()
        conn = dbs.connect(self.path)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def close(self) -> None:
        self.h.close()


def network(tmp_path, **sections) -> P:
    """The usual accounts: olive and paul are persons; alice, bob and carol are olive's agents, dave is paul's."""
    harness = P(tmp_path, **sections)
    harness.account("olive", kind="person")
    harness.account("paul", kind="person")
    for name in ("alice", "bob", "carol"):
        harness.account(name)
    harness.account("dave", owner="paul")
    return harness


@pytest.fixture
def p(tmp_path):
    harness = network(tmp_path)
    yield harness
    harness.close()


def word(line: str, index: int) -> str:
    return line.split(" ")[index]


def request(p: P, frm: str, to: str, scopes: str = "message", days: int = 30, purpose: str = "talk") -> str:
    """CONTACT REQUEST; the request id."""
    out = p.cmd(frm, f"CONTACT REQUEST {to} {scopes} {days} :{purpose}")
    assert len(out) == 1 and word(out[0], 3) == "REQUESTED", out
    return word(out[0], 4)


def agree(p: P, frm: str, to: str, scopes: str = "message", days: int = 30, decider: str | None = None) -> str:
    """A request from ``frm`` accepted by ``to`` (or ``decider``); the agreement id."""
    rid = request(p, frm, to, scopes, days)
    out = p.cmd(decider or to, f"CONTACT ACCEPT {rid}")
    assert len(out) == 1 and word(out[0], 3) == "ACCEPTED", out
    p.notifies()
    for conn in list(p.h.clients):
        p.h.take(conn)
    return word(out[0], 5)


def send(p: P, frm: str, to: str, text: str = "hi", reply_to: str | None = None) -> list[str]:
    """SEND's reply lines (what ``frm`` had received before is dropped)."""
    middle = f" {reply_to}" if reply_to else ""
    p.h.take(frm)
    return p.cmd(frm, f"SEND {to}{middle} :{text}")


def sent_id(out: list[str]) -> str:
    assert len(out) == 1 and word(out[0], 3) == "OK", out
    return word(out[0], 4)


def expires(days: int, start_ms: int = T0_MS) -> str:
    return ts(start_ms + days * DAY * 1000)


# ACCOUNT_REQUIRED ------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["CONTACT LIST", "SEND bob :hi", "INBOX", "AGENTS", "AUDIT"])
def test_every_verb_needs_an_account(p, line):
    """PIRCAN.md: 'PIRCAN verbs need a logged-in account; otherwise FAIL <VERB> ACCOUNT_REQUIRED.'"""
    p.plain("x", "guest")
    verb = line.split()[0]
    assert p.cmd("x", line) == [
        f"{S} FAIL {verb} ACCOUNT_REQUIRED :You must be logged in to use PIRCAN: SASL (CAP REQ :sasl) or PRIVMSG NickServ :IDENTIFY <account> <password>"
    ]


# CONTACT REQUEST -------------------------------------------------------------------------------


def test_request_is_pending_stored_notified_and_audited(p):
    p.login("alice")
    p.login("bob", caps=(LOBBY,))
    p.login("olive")
    out = p.cmd("alice", "CONTACT REQUEST bob task:translate,message 30 :Translate my docs, please")
    rid = word(out[0], 4)
    assert out == [f"{S} CONTACT alice REQUESTED {rid} bob pending agent {ts(T0_MS + 7 * 86_400_000)}"]
    assert len(rid) == 16 and int(rid, 16)
    assert p.lines("bob") == []  # coalesced: not yet
    p.notifies()
    assert p.lines("bob") == [f"{S} NOTIFY bob request 1"]
    assert p.lines("olive") == [f"{SVC} NOTICE olive :NOTIFY request 1"]  # bob's owner, no capability
    assert p.lines("alice") == []
    assert p.rows("SELECT id, requester, target, scopes, days, purpose, state, created_at, decided_at, decided_by, "
                  "agreement_id FROM pircan_requests") == [
        (int(rid, 16), "alice", "bob", "message,task:translate", 30, "Translate my docs, please", "pending",
         T0_MS, None, None, None)
    ]
    assert p.rows("SELECT recipient, type, ref_id, created_at FROM pircan_events ORDER BY recipient") == [
        ("bob", "request", int(rid, 16), T0_MS),
        ("olive", "request", int(rid, 16), T0_MS),
    ]
    assert p.rows("SELECT at, actor, subject, action, detail FROM pircan_audit") == [
        (T0_MS, "alice", "bob", "contact.request", f"{rid} to bob scopes=message,task:translate days=30")
    ]


@pytest.mark.parametrize(
    "line, code, context, text",
    [
        ("CONTACT REQUEST bob message 30", "NEED_MORE_PARAMS", "REQUEST",
         "Syntax: CONTACT REQUEST <account> <scope>[,<scope>...] <days> :<purpose>"),
        ("CONTACT REQUEST bob message 30 :   ", "NEED_MORE_PARAMS", "REQUEST",
         "Syntax: CONTACT REQUEST <account> <scope>[,<scope>...] <days> :<purpose>"),
        ("CONTACT REQUEST nobody message 30 :hi", "NO_SUCH_ACCOUNT", "nobody", "No such account"),
        ("CONTACT REQUEST alice message 30 :hi", "SELF_CONTACT", "alice", "You cannot do this with yourself"),
        ("CONTACT REQUEST olive message 30 :hi", "NOT_ALLOWED", "olive", "Contact requests go to agent accounts"),
        ("CONTACT REQUEST bob message,gossip 30 :hi", "INVALID_SCOPE", "message,gossip",
         "Scopes are message, task:<skill> or resource:read, comma-separated; an acceptance may only narrow them"),
        ("CONTACT REQUEST bob message 0 :hi", "INVALID_DURATION", "0",
         "Durations are 1 to 365 days; an acceptance may only shorten them"),
        ("CONTACT REQUEST bob message 366 :hi", "INVALID_DURATION", "366",
         "Durations are 1 to 365 days; an acceptance may only shorten them"),
        ("CONTACT REQUEST bob message 1.5 :hi", "INVALID_DURATION", "1.5",
         "Durations are 1 to 365 days; an acceptance may only shorten them"),
        ("CONTACT FROB", "UNKNOWN_SUBCOMMAND", "FROB", "Unknown subcommand; see HELP"),
        ("CONTACT", "UNKNOWN_SUBCOMMAND", "*", "Unknown subcommand; see HELP"),
        ("CONTACT :", "UNKNOWN_SUBCOMMAND", "*", "Unknown subcommand; see HELP"),
        ("CONTACT :no such", "UNKNOWN_SUBCOMMAND", "NO_SUCH", "Unknown subcommand; see HELP"),
    ],
)
def test_request_refusals(p, line, code, context, text):
    p.login("alice")
    assert p.cmd("alice", line) == [f"{S} FAIL CONTACT {code} {context} :{text}"]
    assert p.rows("SELECT COUNT(*) FROM pircan_requests") == [(0,)]


def test_request_durations_1_and_365_days(p):
    p.login("alice")
    request(p, "alice", "bob", days=1)
    request(p, "alice", "carol", days=365)
    assert p.rows("SELECT target, days FROM pircan_requests ORDER BY target") == [("bob", 1), ("carol", 365)]


def test_request_target_is_case_insensitive(p):
    p.login("alice")
    rid = request(p, "alice", "BoB")
    assert p.rows("SELECT target FROM pircan_requests WHERE id = ?", int(rid, 16)) == [("bob",)]


def test_self_contact_is_audited(p):
    p.login("alice")
    p.cmd("alice", "CONTACT REQUEST alice message 30 :me")
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit") == [
        ("alice", "alice", "refused", "REQUEST SELF_CONTACT")
    ]


# abuse limits (seed section 2), with the harness clock ------------------------------------------


def many_agents(p: P, count: int, prefix: str = "ag") -> list[str]:
    names = [f"{prefix}{i}" for i in range(count)]
    for name in names:
        p.account(name)
    return names


def test_one_pending_request_per_target(p):
    p.login("alice")
    request(p, "alice", "bob")
    assert p.cmd("alice", "CONTACT REQUEST bob message 30 :again") == [
        f"{S} FAIL CONTACT PENDING_EXISTS bob :You already have a pending request to this account"
    ]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'refused'") == [
        ("alice", "bob", "refused", "REQUEST PENDING_EXISTS bob")
    ]
    assert p.rows("SELECT COUNT(*) FROM pircan_requests") == [(1,)]


def test_twenty_pending_requests_at_most(p):
    targets = many_agents(p, 21)
    p.login("alice")
    for i, target in enumerate(targets[:20]):
        if i and i % 10 == 0:
            p.advance(3600)  # stay under 10 requests per hour
        request(p, "alice", target)
    p.advance(3600)
    assert p.cmd("alice", f"CONTACT REQUEST {targets[20]} message 30 :one more") == [
        f"{S} FAIL CONTACT PENDING_LIMIT {targets[20]} :You have 20 pending requests; wait for decisions first"
    ]
    # a decision frees a slot
    p.login("ag0")
    p.cmd("ag0", "CONTACT DECLINE " + p.rows("SELECT printf('%016x', id) FROM pircan_requests WHERE target='ag0'")[0][0])
    request(p, "alice", targets[20])


def test_ten_requests_per_sliding_hour(p):
    targets = many_agents(p, 12)
    p.login("alice")
    for target in targets[:10]:
        request(p, "alice", target)
        p.advance(60)  # one a minute: the first at T0, the 10th at T0+9min
    # T0 + 10 min: the 11th inside the hour is refused
    assert p.cmd("alice", f"CONTACT REQUEST {targets[10]} message 30 :x") == [
        f"{S} FAIL CONTACT RATE_LIMITED {targets[10]} :At most 10 contact requests per hour"
    ]
    p.at(3600_000 - 1)  # T0 + 1h - 1ms
    assert word(p.cmd("alice", f"CONTACT REQUEST {targets[10]} message 30 :x")[0], 3) == "RATE_LIMITED"
    p.at(3600_000)  # the oldest is an hour old
    request(p, "alice", targets[10])
    assert word(p.cmd("alice", f"CONTACT REQUEST {targets[11]} message 30 :x")[0], 3) == "RATE_LIMITED"
    assert p.rows("SELECT COUNT(*) FROM pircan_audit WHERE action = 'refused'") == [(3,)]


def test_24_hours_before_asking_again_after_a_decline(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob")
    assert p.cmd("bob", f"CONTACT DECLINE {rid}") == [f"{S} CONTACT bob DECLINED {rid} alice"]
    p.at(DAY * 1000 - 1)
    p.h.take("alice")
    assert p.cmd("alice", "CONTACT REQUEST bob message 30 :please") == [
        f"{S} FAIL CONTACT COOLDOWN bob :This account declined you less than 24 hours ago"
    ]
    p.at(DAY * 1000)
    request(p, "alice", "bob")
    assert p.rows("SELECT detail FROM pircan_audit WHERE action = 'refused'") == [("REQUEST COOLDOWN bob",)]


def test_cooldown_is_per_target(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob")
    p.cmd("bob", f"CONTACT DECLINE {rid}")
    request(p, "alice", "carol")
    p.login("carol")
    assert word(p.cmd("carol", "CONTACT REQUEST bob message 30 :x")[0], 3) == "REQUESTED"


# ACCEPT / DECLINE ----------------------------------------------------------------------------------


def test_accept_creates_the_agreement(p):
    p.login("alice", caps=(LOBBY,))
    p.login("bob")
    rid = request(p, "alice", "bob", "message,task:translate", 30)
    p.advance(10)
    p.h.take("bob")
    out = p.cmd("bob", f"CONTACT ACCEPT {rid}")
    aid = word(out[0], 5)
    assert out == [f"{S} CONTACT bob ACCEPTED {rid} {aid} alice message,task:translate {ts(T0_MS + 10_000 + 30 * DAY * 1000)}"]
    p.notifies()
    assert p.lines("alice") == [f"{S} NOTIFY alice decision 1"]
    assert p.rows("SELECT id, request_id, requester, target, scopes, created_at, expires_at, revoked_at, revoked_by "
                  "FROM pircan_agreements") == [
        (int(aid, 16), int(rid, 16), "alice", "bob", "message,task:translate", T0_MS + 10_000,
         T0_MS + 10_000 + 30 * DAY * 1000, None, None)
    ]
    assert p.rows("SELECT state, decided_at, decided_by, agreement_id FROM pircan_requests") == [
        ("accepted", T0_MS + 10_000, "bob", int(aid, 16))
    ]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit ORDER BY id")[1:] == [
        ("bob", "bob", "contact.accept", f"{rid} from alice agreement={aid} scopes=message,task:translate")
    ]


def test_accept_may_narrow_scopes_and_shorten_days(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob", "message,task:a,resource:read", 30)
    out = p.cmd("bob", f"CONTACT ACCEPT {rid} resource:read,message 7")
    aid = word(out[0], 5)
    assert out == [f"{S} CONTACT bob ACCEPTED {rid} {aid} alice message,resource:read {expires(7)}"]
    assert p.rows("SELECT scopes, expires_at FROM pircan_agreements") == [("message,resource:read", T0_MS + 7 * DAY * 1000)]


def test_accept_scopes_only_keeps_the_days(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob", "message,task:a", 30)
    out = p.cmd("bob", f"CONTACT ACCEPT {rid} task:a")
    assert out == [f"{S} CONTACT bob ACCEPTED {rid} {word(out[0], 5)} alice task:a {expires(30)}"]


@pytest.mark.parametrize(
    "extra, code, context",
    [
        ("message,task:a", "INVALID_SCOPE", "message,task:a"),  # widening
        ("task:b", "INVALID_SCOPE", "task:b"),
        ("bogus", "INVALID_SCOPE", "bogus"),
        ("message 31", "INVALID_DURATION", "31"),  # longer
        ("message 0", "INVALID_DURATION", "0"),
        ("message x", "INVALID_DURATION", "x"),
    ],
)
def test_accept_never_widens(p, extra, code, context):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob", "message", 30)
    out = p.cmd("bob", f"CONTACT ACCEPT {rid} {extra}")
    assert len(out) == 1 and out[0].startswith(f"{S} FAIL CONTACT {code} {context} :")
    assert p.rows("SELECT state FROM pircan_requests") == [("pending",)]
    assert p.rows("SELECT COUNT(*) FROM pircan_agreements") == [(0,)]


def test_accept_and_decline_refusals(p):
    p.login("alice")
    p.login("bob")
    p.login("carol")
    rid = request(p, "alice", "bob")
    assert p.cmd("bob", "CONTACT ACCEPT") == [
        f"{S} FAIL CONTACT NEED_MORE_PARAMS ACCEPT :Syntax: CONTACT ACCEPT <request-id> [<scopes> [<days>]]"
    ]
    assert p.cmd("bob", "CONTACT DECLINE") == [
        f"{S} FAIL CONTACT NEED_MORE_PARAMS DECLINE :Syntax: CONTACT DECLINE <request-id>"
    ]
    for bad in ("0000000000000001", "nothex", "12345", rid.upper() + "0"):
        assert p.cmd("bob", f"CONTACT ACCEPT {bad}") == [
            f"{S} FAIL CONTACT NO_SUCH_REQUEST {bad} :No such contact request for you"
        ]
    assert p.cmd("alice", f"CONTACT ACCEPT {rid}") == [
        f"{S} FAIL CONTACT NOT_ALLOWED {rid} :Only the requested account (or its owner) decides"
    ]
    assert p.cmd("carol", f"CONTACT DECLINE {rid}") == [
        f"{S} FAIL CONTACT NO_SUCH_REQUEST {rid} :No such contact request for you"
    ]
    assert word(p.cmd("bob", f"CONTACT ACCEPT {rid}")[0], 3) == "ACCEPTED"
    for sub in ("ACCEPT", "DECLINE"):
        assert p.cmd("bob", f"CONTACT {sub} {rid}") == [
            f"{S} FAIL CONTACT NOT_PENDING {rid} :That request was already decided or has expired"
        ]


def test_decline_is_stored_and_notified(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob")
    p.notifies()
    p.h.take("bob")
    assert p.cmd("bob", f"CONTACT DECLINE {rid}") == [f"{S} CONTACT bob DECLINED {rid} alice"]
    p.notifies()
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY decision 1"]
    assert p.rows("SELECT state, decided_at, decided_by, agreement_id FROM pircan_requests") == [
        ("declined", T0_MS + 250, "bob", None)
    ]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'contact.decline'") == [
        ("bob", "bob", "contact.decline", f"{rid} from alice")
    ]


# POLICY ----------------------------------------------------------------------------------------------


def test_policy_show_and_set(p):
    p.login("bob")
    assert p.cmd("bob", "CONTACT POLICY") == [f"{S} CONTACT bob POLICY bob agent-decides"]
    for policy in ("owner-decides", "auto-accept", "deny", "agent-decides"):
        assert p.cmd("bob", f"CONTACT POLICY {policy}") == [f"{S} CONTACT bob POLICY bob {policy}"]
        assert p.rows("SELECT account, policy FROM pircan_policies") == [("bob", policy)]
    assert p.cmd("bob", "CONTACT POLICY bob DENY") == [f"{S} CONTACT bob POLICY bob deny"]
    assert p.cmd("bob", "CONTACT POLICY bob") == [f"{S} CONTACT bob POLICY bob deny"]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit") == [
        ("bob", "bob", "policy.set", "owner-decides"),
        ("bob", "bob", "policy.set", "auto-accept"),
        ("bob", "bob", "policy.set", "deny"),
        ("bob", "bob", "policy.set", "agent-decides"),
        ("bob", "bob", "policy.set", "deny"),
    ]


def test_policy_refusals(p):
    p.login("bob")
    assert p.cmd("bob", "CONTACT POLICY bob sometimes") == [
        f"{S} FAIL CONTACT INVALID_POLICY sometimes :Policies are agent-decides, owner-decides, auto-accept and deny"
    ]
    assert p.cmd("bob", "CONTACT POLICY nobody") == [f"{S} FAIL CONTACT NO_SUCH_ACCOUNT nobody :No such account"]
    assert p.cmd("bob", "CONTACT POLICY carol deny") == [
        f"{S} FAIL CONTACT NOT_ALLOWED carol :Only an agent and its owner see or set its policy"
    ]
    assert p.cmd("bob", "CONTACT POLICY carol") == [
        f"{S} FAIL CONTACT NOT_ALLOWED carol :Only an agent and its owner see or set its policy"
    ]
    p.login("paul")
    assert p.cmd("paul", "CONTACT POLICY bob deny") == [
        f"{S} FAIL CONTACT NOT_ALLOWED bob :Only an agent and its owner see or set its policy"
    ]
    assert p.rows("SELECT COUNT(*) FROM pircan_policies") == [(0,)]


def test_policy_survives_a_restart(tmp_path):
    first = P(tmp_path)
    first.account("olive", kind="person")
    first.account("bob")
    first.login("bob")
    first.cmd("bob", "CONTACT POLICY deny")
    first.close()
    again = P(tmp_path)
    again.passwords["bob"] = "sesame123"
    again.login("bob")
    assert again.cmd("bob", "CONTACT POLICY") == [f"{S} CONTACT bob POLICY bob deny"]
    again.close()


def test_owner_decides_only_the_owner_accepts(p):
    p.login("alice")
    p.login("bob")
    p.login("olive")
    p.cmd("bob", "CONTACT POLICY owner-decides")
    rid = request(p, "alice", "bob")
    for sub in ("ACCEPT", "DECLINE"):
        assert p.cmd("bob", f"CONTACT {sub} {rid}") == [
            f"{S} FAIL CONTACT NOT_ALLOWED {rid} :Your policy is owner-decides: your owner decides"
        ]
    out = p.cmd("olive", f"CONTACT ACCEPT {rid} message 3")
    aid = word(out[0], 5)
    assert out == [f"{S} CONTACT olive ACCEPTED {rid} {aid} alice message {expires(3)}"]
    assert p.rows("SELECT state, decided_by FROM pircan_requests") == [("accepted", "olive")]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'contact.accept'") == [
        ("olive", "bob", "contact.accept", f"{rid} from alice agreement={aid} scopes=message by owner")
    ]
    p.notifies()
    # the agent hears that its owner made an agreement for it; the requester hears the decision
    assert p.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY request 1", f"{SVC} NOTICE bob :NOTIFY agreement 1"]
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY decision 1"]


def test_a_pending_request_shows_who_decides_and_until_when_and_send_says_so(p):
    """The requester learns that a person must decide (owner-decides) and when the request expires:
    in the REQUESTED reply, in CONTACT LIST, and in SEND's and TASK's NO_AGREEMENT while it is pending."""
    p.login("alice")
    p.login("bob")
    p.cmd("bob", "CONTACT POLICY owner-decides")
    until = ts(T0_MS + 7 * 86_400_000)
    out = p.cmd("alice", "CONTACT REQUEST bob message,task:x 30 :talk")
    rid = word(out[0], 4)
    assert out == [f"{S} CONTACT alice REQUESTED {rid} bob pending owner {until}"]
    assert p.cmd("alice", "CONTACT LIST requests") == [
        f"{S} CONTACT alice REQUEST {rid} alice bob message,task:x 30 pending {ts(T0_MS)} owner {until} talk",
        f"{S} CONTACT alice END",
    ]
    waiting = (f":Your contact request {rid} is pending: its owner decides, until {until}. "
               "Wait for the decision (INBOX WAIT; MCP: wait_for_messages, list_requests)")
    assert send(p, "alice", "bob") == [f"{S} FAIL SEND NO_AGREEMENT bob {waiting}"]
    assert p.cmd("alice", "TASK CREATE bob x :do it") == [f"{S} FAIL TASK NO_AGREEMENT bob {waiting}"]
    p.cmd("bob", "CONTACT POLICY agent-decides")
    assert send(p, "alice", "bob") == [f"{S} FAIL SEND NO_AGREEMENT bob {waiting.replace('its owner', 'the agent')}"]
    p.at(7 * 86_400_000)  # expired: the way out is a new request again
    assert send(p, "alice", "bob") == [f"{S} FAIL SEND NO_AGREEMENT bob :{NO_AGREEMENT_TEXT}"]
    assert word(p.cmd("alice", "CONTACT LIST requests")[0], 9) == "expired"
    assert p.cmd("alice", "CONTACT LIST requests")[0].endswith(f" expired {ts(T0_MS)} * * talk")


def test_auto_accept_grants_only_message(p):
    p.login("alice")
    p.login("bob")
    p.cmd("bob", "CONTACT POLICY auto-accept")
    out = p.cmd("alice", "CONTACT REQUEST bob message,task:x,resource:read 10 :hello")
    rid, aid = word(out[0], 4), word(out[0], 5)
    assert out == [f"{S} CONTACT alice ACCEPTED {rid} {aid} bob message {expires(10)}"]
    assert p.rows("SELECT requester, target, scopes FROM pircan_agreements") == [("alice", "bob", "message")]
    assert p.rows("SELECT state, decided_by, agreement_id FROM pircan_requests") == [("accepted", "bob", int(aid, 16))]
    assert p.rows("SELECT action FROM pircan_audit WHERE subject = 'bob' ORDER BY id") == [
        ("policy.set",), ("contact.auto-accepted",)
    ]
    p.notifies()
    assert p.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY agreement 1"]
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY decision 1"]
    assert sent_id(send(p, "alice", "bob"))


def test_auto_accept_without_message_waits_like_agent_decides(p):
    p.login("alice")
    p.login("bob")
    p.cmd("bob", "CONTACT POLICY auto-accept")
    rid = request(p, "alice", "bob", "task:x")
    assert word(p.cmd("bob", f"CONTACT ACCEPT {rid}")[0], 3) == "ACCEPTED"


def test_deny_refuses_at_once_and_is_recorded(p):
    p.login("alice")
    p.login("bob")
    p.cmd("bob", "CONTACT POLICY deny")
    assert p.cmd("alice", "CONTACT REQUEST bob message 30 :hello") == [
        f"{S} FAIL CONTACT DENIED bob :This account does not accept contact requests"
    ]
    rows = p.rows("SELECT printf('%016x', id), requester, target, state, decided_at, decided_by FROM pircan_requests")
    assert rows == [(rows[0][0], "alice", "bob", "denied", T0_MS, "bob")]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'contact.denied'") == [
        ("alice", "bob", "contact.denied", f"{rows[0][0]} to bob scopes=message days=30")
    ]
    p.notifies()
    assert p.lines("bob") == []  # nothing to decide


def test_owner_may_decide_under_any_policy(p):
    p.login("alice")
    p.login("olive")
    rid = request(p, "alice", "bob")  # agent-decides
    assert word(p.cmd("olive", f"CONTACT DECLINE {rid}")[0], 3) == "DECLINED"
    assert p.rows("SELECT state, decided_by FROM pircan_requests") == [("declined", "olive")]
    assert p.rows("SELECT detail FROM pircan_audit WHERE action = 'contact.decline'") == [(f"{rid} from alice by owner",)]


# REVOKE --------------------------------------------------------------------------------------------


def test_revoke_by_either_party_takes_effect_at_once(p):
    p.login("alice")
    p.login("bob", caps=(LOBBY,))
    aid = agree(p, "alice", "bob")
    assert sent_id(send(p, "alice", "bob"))
    p.notifies()
    p.h.take("bob")
    assert p.cmd("alice", f"CONTACT REVOKE {aid}") == [f"{S} CONTACT alice REVOKED {aid} bob"]
    assert send(p, "alice", "bob") == [f"{S} FAIL SEND NO_AGREEMENT bob :You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    assert send(p, "bob", "alice") == [f"{S} FAIL SEND NO_AGREEMENT alice :You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    p.notifies()
    assert p.lines("bob") == [f"{S} NOTIFY bob agreement 1"]
    assert p.rows("SELECT revoked_at, revoked_by FROM pircan_agreements") == [(p.now_ms() - 250, "alice")]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'agreement.revoke'") == [
        ("alice", "alice", "agreement.revoke", f"{aid} with bob")
    ]
    assert p.cmd("bob", f"CONTACT REVOKE {aid}") == [
        f"{S} FAIL CONTACT NO_SUCH_AGREEMENT {aid} :No such agreement for you"
    ]


def test_send_is_refused_when_the_stored_agreement_was_revoked_behind_the_servers_back(p):
    """The agreement is checked again in the SEND's transaction (store.agreements_live): a
    revoke another process committed wins before the server has read it."""
    p.login("alice")
    p.login("bob")
    aid = agree(p, "alice", "bob")
    assert sent_id(send(p, "alice", "bob", "before"))
    p.h.settle()
    conn = dbs.connect(p.path)
    try:
        conn.execute("UPDATE pircan_agreements SET revoked_at = ?, revoked_by = 'bob'", (p.now_ms(),))
    finally:
        conn.close()
    assert send(p, "alice", "bob", "after") == [f"{S} FAIL SEND NO_AGREEMENT bob :{NO_AGREEMENT_TEXT}"]
    assert p.rows("SELECT body FROM pircan_messages") == [("before",)]
    assert p.h.run(p.h.server.store.read(pstore.agreements_live, {int(aid, 16)}, p.now_ms())) is False


def _one_agreement_gone_behind_the_servers_back(p) -> tuple[int, int]:
    """alice agreed with bob and with carol; carol's agreement revoked in the database only."""
    p.login("alice")
    p.login("bob")
    p.login("carol")
    live = int(agree(p, "alice", "bob"), 16)
    gone = int(agree(p, "alice", "carol"), 16)
    conn = dbs.connect(p.path)
    try:
        conn.execute("UPDATE pircan_agreements SET revoked_at = ?, revoked_by = 'carol' WHERE id = ?",
                     (p.now_ms(), gone))
    finally:
        conn.close()
    return live, gone


def test_a_send_batch_stores_all_three_rows_or_nothing_when_one_agreement_is_gone(p):
    """store.insert_sends, the writer's SEND statement(s): every message with its event and its
    audit entry, or (one agreement revoked behind the server's back) no row at all and False,
    so that the group commit can retry the SENDs one by one."""
    live, gone = _one_agreement_gone_behind_the_servers_back(p)
    at = p.now_ms()

    def row(ident, to, agreement, key):
        msg = StoredMessage(ident, "alice", to, agreement, 77, None, 0, at, f"text {ident}", None)
        return pstore.send_row(msg, key, ident + 100, ident + 200, f"detail {ident}")

    store = p.h.server.store
    before = p.rows("SELECT COUNT(*) FROM pircan_messages"), p.rows("SELECT COUNT(*) FROM pircan_audit")
    assert p.h.run(store.write(pstore.insert_sends, [row(11, "bob", live, None), row(12, "carol", gone, None)])) is False
    assert (p.rows("SELECT COUNT(*) FROM pircan_messages"), p.rows("SELECT COUNT(*) FROM pircan_audit")) == before
    assert p.h.run(store.write(pstore.insert_sends, [row(11, "bob", live, "k1"), row(13, "bob", 0, None)])) is True
    assert p.rows("SELECT id, sender, recipient, agreement_id, conversation_id, in_reply_to, hop_count, created_at, "
                  "body, read_at, idempotency_key FROM pircan_messages WHERE id IN (11, 13) ORDER BY id") == [
        (11, "alice", "bob", live, 77, None, 0, at, "text 11", None, "k1"),
        (13, "alice", "bob", 0, 77, None, 0, at, "text 13", None, None),
    ]
    assert p.rows("SELECT id, recipient, type, ref_id, created_at, notified_at FROM pircan_events "
                  "WHERE id IN (111, 113) ORDER BY id") == [
        (111, "bob", "message", 11, at, None), (113, "bob", "message", 13, at, None)]
    assert p.rows("SELECT id, at, actor, subject, action, detail FROM pircan_audit WHERE id IN (211, 213) ORDER BY id") == [
        (211, at, "alice", "bob", "message.send", "detail 11"), (213, at, "alice", "bob", "message.send", "detail 13")]


def test_a_send_batch_with_a_gone_agreement_stores_the_others_and_refuses_that_one(p):
    """The writer's SEND batch (service.messages): on SQLite, SENDs without keys are one statement
    without a transaction around it. One agreement revoked behind the server's back fails that
    statement whole; the batch then runs again in a transaction, SEND by SEND: the others are
    stored once, the one refused NO_AGREEMENT."""
    from ext.pircan.service import messages
    from ext.pircan.service.refusals import Refused

    live, gone = _one_agreement_gone_behind_the_servers_back(p)
    at = p.now_ms()
    items = []
    for ident, to, agreement in ((21, "bob", live), (22, "carol", gone), (23, "bob", live)):
        msg = StoredMessage(ident, "alice", to, agreement, ident, None, 0, at, f"text {ident}", None)
        items.append((msg, None, pstore.send_row(msg, None, ident + 100, ident + 200, f"detail {ident}")))
    asked: list[bool] = []
    alone = messages._SEND_WRITE.alone
    assert alone is not None
    store = p.h.server.store
    hold, holding = threading.Event(), threading.Event()

    def blocker(conn):
        holding.set()
        hold.wait(30)

    async def main():
        blocked = store.write(blocker)  # the three SENDs queue behind it: one batch
        assert await asyncio.to_thread(holding.wait, 30)
        sends = [store.write_batched(messages._SEND_WRITE, item) for item in items]
        hold.set()
        results = await asyncio.gather(*sends, return_exceptions=True)
        await blocked
        return results

    messages._SEND_WRITE.alone = lambda conn, batch: asked.append(alone(conn, batch)) or asked[-1]
    try:
        results = p.h.run(main())
    finally:
        messages._SEND_WRITE.alone = alone
    assert asked == [dbs.BACKEND == "sqlite"]
    assert results[0] == (items[0][0], True) and results[2] == (items[2][0], True)
    assert isinstance(results[1], Refused) and results[1].code == "NO_AGREEMENT"
    assert p.rows("SELECT id, recipient FROM pircan_messages WHERE id BETWEEN 21 AND 23 ORDER BY id") == [
        (21, "bob"), (23, "bob")]
    assert p.rows("SELECT id FROM pircan_events WHERE id BETWEEN 121 AND 123 ORDER BY id") == [(121,), (123,)]
    assert p.rows("SELECT id FROM pircan_audit WHERE id BETWEEN 221 AND 223 ORDER BY id") == [(221,), (223,)]


def test_revoke_refusals(p):
    p.login("alice")
    p.login("bob")
    p.login("dave")
    aid = agree(p, "alice", "bob")
    assert p.cmd("dave", f"CONTACT REVOKE {aid}") == [
        f"{S} FAIL CONTACT NO_SUCH_AGREEMENT {aid} :No such agreement for you"
    ]
    assert p.cmd("dave", "CONTACT REVOKE xyz") == [f"{S} FAIL CONTACT NO_SUCH_AGREEMENT xyz :No such agreement for you"]
    assert p.cmd("dave", "CONTACT REVOKE") == [
        f"{S} FAIL CONTACT NEED_MORE_PARAMS REVOKE :Syntax: CONTACT REVOKE <agreement-id>"
    ]
    assert p.rows("SELECT revoked_at FROM pircan_agreements") == [(None,)]


def test_revoke_stops_agreement_checked_privmsg(p):
    p.login("alice")
    p.login("bob")
    aid = agree(p, "alice", "bob")
    p.cmd("alice", "PRIVMSG bob :before")
    assert p.lines("bob") == [":alice!alice@127.0.0.1 PRIVMSG bob before"]
    p.cmd("bob", f"CONTACT REVOKE {aid}")
    assert p.cmd("alice", "PRIVMSG bob :after") == [
        f"{S} FAIL PRIVMSG NO_AGREEMENT bob :Agents need a message agreement to talk directly (CONTACT REQUEST)"
    ]


def test_owner_revokes_for_its_agent(p):
    p.login("alice")
    p.login("dave")
    p.login("olive")
    aid = agree(p, "dave", "alice")
    assert p.cmd("olive", f"CONTACT REVOKE {aid}") == [f"{S} CONTACT olive REVOKED {aid} dave"]
    assert send(p, "dave", "alice")[0].startswith(f"{S} FAIL SEND NO_AGREEMENT")
    assert p.rows("SELECT revoked_by FROM pircan_agreements") == [("olive",)]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'agreement.revoke'") == [
        ("olive", "alice", "agreement.revoke", f"{aid} with dave by owner")
    ]
    p.notifies()
    assert p.lines("dave") == [f"{SVC} NOTICE dave :NOTIFY agreement 1"]
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY agreement 1"]


# LIST --------------------------------------------------------------------------------------------------


def test_list_requests_and_agreements(p):
    p.login("alice")
    p.login("bob")
    aid = agree(p, "alice", "bob", "message,task:x", 30)
    rid1 = p.rows("SELECT printf('%016x', id) FROM pircan_requests")[0][0]
    p.advance(1)
    rid2 = request(p, "alice", "carol", "resource:read", 5, purpose="Read your notes")
    req1 = f"{S} CONTACT alice REQUEST {rid1} alice bob message,task:x 30 accepted {ts(T0_MS)} * * talk"
    req2 = f"{S} CONTACT alice REQUEST {rid2} alice carol resource:read 5 pending {ts(T0_MS + 1250)} agent {ts(T0_MS + 1250 + 7 * 86_400_000)} :Read your notes"
    agr = f"{S} CONTACT alice AGREEMENT {aid} alice bob message,task:x {ts(T0_MS)} {expires(30)} active"
    end = f"{S} CONTACT alice END"
    assert p.cmd("alice", "CONTACT LIST") == [req1, req2, agr, end]
    assert p.cmd("alice", "CONTACT LIST requests") == [req1, req2, end]
    assert p.cmd("alice", "CONTACT LIST AGREEMENTS") == [agr, end]
    assert p.cmd("alice", "CONTACT LIST bogus") == [
        f"{S} FAIL CONTACT UNKNOWN_SUBCOMMAND bogus :Syntax: CONTACT LIST [requests|agreements]"
    ]
    p.login("carol")
    assert p.cmd("carol", "CONTACT LIST") == [req2.replace("alice REQUEST", "carol REQUEST"), f"{S} CONTACT carol END"]
    p.login("dave")
    assert p.cmd("dave", "CONTACT LIST") == [f"{S} CONTACT dave END"]


def test_list_states_expired_revoked_declined(p):
    p.login("alice")
    p.login("bob")
    p.login("carol")
    aid = agree(p, "alice", "bob", days=1)
    rid_c = request(p, "alice", "carol")
    p.cmd("carol", f"CONTACT DECLINE {rid_c}")
    p.login("dave")
    aid2 = agree(p, "dave", "carol")
    p.cmd("dave", f"CONTACT REVOKE {aid2}")
    p.at(DAY * 1000)
    lines = p.cmd("alice", "CONTACT LIST")
    assert [(word(ln, 3), word(ln, 9) if word(ln, 3) == "REQUEST" else word(ln, 10)) for ln in lines[:-1]] == [
        ("REQUEST", "accepted"), ("REQUEST", "declined"), ("AGREEMENT", "expired")
    ]
    assert p.cmd("dave", "CONTACT LIST agreements") == [
        f"{S} CONTACT dave AGREEMENT {aid2} dave carol message {ts(T0_MS + 250)} {expires(30, T0_MS + 250)} revoked",
        f"{S} CONTACT dave END",
    ]
    assert aid


def test_list_is_one_batch_with_the_batch_capability(p):
    p.login("alice", caps=("batch",))
    lines = p.cmd("alice", "CONTACT LIST")
    ref = word(lines[0], 2)[1:]
    assert lines == [
        f"{S} BATCH +{ref} pircan/contacts",
        f"@batch={ref} {S} CONTACT alice END",
        f"{S} BATCH -{ref}",
    ]


# owners act for their agents ------------------------------------------------------------------------------


def test_owner_lists_its_agents_requests_and_agreements(p):
    p.login("olive")
    p.login("dave")
    p.login("alice")
    rid = request(p, "dave", "alice", purpose="hello alice")
    aid = agree(p, "dave", "bob", decider="olive")
    lines = p.cmd("olive", "CONTACT LIST")
    rid2 = p.rows("SELECT printf('%016x', id) FROM pircan_requests WHERE target = 'bob'")[0][0]
    assert lines == [
        f"{S} CONTACT olive REQUEST {rid} dave alice message 30 pending {ts(T0_MS)} agent {ts(T0_MS + 7 * 86_400_000)} :hello alice",
        f"{S} CONTACT olive REQUEST {rid2} dave bob message 30 accepted {ts(T0_MS)} * * talk",
        f"{S} CONTACT olive AGREEMENT {aid} dave bob message {ts(T0_MS)} {expires(30)} active",
        f"{S} CONTACT olive END",
    ]
    # paul (dave's owner) sees the same rows; an unrelated person sees nothing
    p.login("paul")
    assert len(p.cmd("paul", "CONTACT LIST")) == 4
    p.account("zoe", kind="person")
    p.login("zoe")
    assert p.cmd("zoe", "CONTACT LIST") == [f"{S} CONTACT zoe END"]


def test_owner_accepts_declines_and_sets_policy(p):
    p.login("olive")
    p.login("dave")
    rid = request(p, "dave", "alice")
    out = p.cmd("olive", f"CONTACT ACCEPT {rid}")
    assert word(out[0], 3) == "ACCEPTED" and word(out[0], 6) == "dave"
    rid2 = request(p, "dave", "bob")
    assert p.cmd("olive", f"CONTACT DECLINE {rid2}") == [f"{S} CONTACT olive DECLINED {rid2} dave"]
    assert p.cmd("olive", "CONTACT POLICY alice owner-decides") == [f"{S} CONTACT olive POLICY alice owner-decides"]
    assert p.cmd("olive", "CONTACT POLICY carol") == [f"{S} CONTACT olive POLICY carol agent-decides"]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE actor = 'olive' ORDER BY id") == [
        ("olive", "alice", "contact.accept",
         f"{rid} from dave agreement={word(out[0], 5)} scopes=message by owner"),
        ("olive", "bob", "contact.decline", f"{rid2} from dave by owner"),
        ("olive", "alice", "policy.set", "owner-decides by owner"),
    ]
    # paul does not own alice
    p.login("paul")
    rid3 = request(p, "dave", "carol")
    assert p.cmd("paul", f"CONTACT ACCEPT {rid3}") == [
        f"{S} FAIL CONTACT NOT_ALLOWED {rid3} :Only the requested account (or its owner) decides"
    ]
    p.account("zoe", kind="person")
    p.login("zoe")
    assert p.cmd("zoe", f"CONTACT ACCEPT {rid3}") == [
        f"{S} FAIL CONTACT NO_SUCH_REQUEST {rid3} :No such contact request for you"
    ]


# AGENTS ---------------------------------------------------------------------------------------------------


def test_owner_creates_an_agent_that_can_log_in(p):
    p.login("olive")
    out = p.cmd("olive", "AGENTS CREATE Robo")
    password = word(out[0], 5)
    assert out == [f"{S} AGENTS olive CREATED Robo {password} :Store this password now: it is not shown again"]
    assert len(password) >= 20
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit") == [
        ("olive", "robo", "agent.create", "by owner")
    ]
    p.login("robo", "Robo", password=password)
    assert p.h.clients["robo"].account_kind == "agent"
    assert p.cmd("olive", "AGENTS CREATE robo") == [f"{S} FAIL AGENTS ACCOUNT_EXISTS robo :That account already exists"]
    assert p.cmd("olive", "AGENTS CREATE 9lives") == [
        f"{S} FAIL AGENTS INVALID_NAME 9lives :That is not a valid account name"
    ]
    assert p.cmd("olive", "AGENTS CREATE") == [f"{S} FAIL AGENTS NEED_MORE_PARAMS CREATE :Syntax: AGENTS CREATE <name>"]
    assert p.cmd("olive", "AGENTS DESTROY x") == [f"{S} FAIL AGENTS UNKNOWN_SUBCOMMAND DESTROY :Unknown subcommand; see HELP"]
    assert p.cmd("robo", "AGENTS CREATE minion") == [
        f"{S} FAIL AGENTS NOT_ALLOWED minion :Only person accounts own agents"
    ]


def test_agents_roster_for_an_owner_and_for_an_agent(p):
    p.login("olive")
    p.login("alice")
    p.login("bob")
    p.login("dave")
    agree(p, "dave", "alice")
    p.cmd("bob", "AWAY :busy")
    p.advance(5)
    sent_id(send(p, "dave", "alice", "one"))
    sent_id(send(p, "dave", "alice", "two"))
    assert p.cmd("olive", "AGENTS") == [
        f"{S} AGENTS olive AGENT alice running 2 * owned olive agent *",
        f"{S} AGENTS olive AGENT bob idle 0 * owned olive agent *",
        f"{S} AGENTS olive AGENT carol offline 0 * owned olive agent *",
        f"{S} AGENTS olive END 3",
    ]
    assert p.cmd("alice", "AGENTS") == [
        f"{S} AGENTS alice AGENT dave running 2 {ts(T0_MS + 5250)} agreement paul agent *",
        f"{S} AGENTS alice END 1",
    ]
    assert p.cmd("dave", "AGENTS") == [
        f"{S} AGENTS dave AGENT alice running 0 * agreement olive agent *",
        f"{S} AGENTS dave END 1",
    ]


def test_the_roster_tells_running_idle_parked_and_offline(tmp_path):
    """running: connected and busy; idle: connected and waiting (or every connection away); parked:
    not connected, but a message wakes it (here: its events go to a webhook); offline: none of these."""
    p = network(tmp_path, pircan={"webhook_allowed_networks": ["127.0.0.0/8"]})
    try:
        p.login("olive")
        p.login("alice")
        p.login("bob")

        def statuses(conn: str = "olive", line: str = "AGENTS") -> dict[str, str]:
            return {word(x, 4): word(x, 5) for x in p.cmd(conn, line) if word(x, 3) == "AGENT"}

        assert statuses() == {"alice": "running", "bob": "running", "carol": "offline"}
        p.cmd("alice", "INBOX WAIT 60000")  # connected and waiting
        assert p.cmd("olive", "WEBHOOK SET carol http://127.0.0.1:9/hook")[0].split()[2:5] == [
            "olive", "SET", "carol"]
        assert statuses() == {"alice": "idle", "bob": "running", "carol": "parked"}
        assert statuses("bob", "AGENTS ALL") == {"alice": "idle", "carol": "parked", "dave": "offline",
                                                 "olive": "running", "paul": "offline"}
        p.advance(60)  # the wait ended: busy again
        assert p.lines("alice")[0].startswith(f"{S} INBOX alice TIMEOUT 60000")
        p.cmd("bob", "AWAY :lunch")  # its only connection away
        assert statuses() == {"alice": "running", "bob": "idle", "carol": "parked"}
        p.cmd("olive", "WEBHOOK CLEAR carol")
        p.login("carol")
        assert statuses() == {"alice": "running", "bob": "idle", "carol": "running"}
        p.h.disconnect("carol")
        assert statuses() == {"alice": "running", "bob": "idle", "carol": "offline"}
    finally:
        p.close()


# expiry: the once-a-minute sweep ------------------------------------------------------------------------


def test_request_expires_after_seven_days(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob")
    rid2 = request(p, "alice", "carol")
    p.notifies()
    p.h.take("bob")
    p.at(7 * DAY * 1000 - 1)  # the sweep ran: 1 ms short of 7 days, still pending
    assert p.rows("SELECT state FROM pircan_requests ORDER BY id") == [("pending",), ("pending",)]
    assert p.lines("alice") == []
    p.at(7 * DAY * 1000 + 60_000)  # the next sweep
    assert p.rows("SELECT state FROM pircan_requests ORDER BY id") == [("expired",), ("expired",)]
    p.notifies()
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY decision 2"]
    assert p.cmd("bob", f"CONTACT ACCEPT {rid}") == [
        f"{S} FAIL CONTACT NOT_PENDING {rid} :That request was already decided or has expired"
    ]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'contact.expire' ORDER BY id") == [
        ("server", "bob", "contact.expire", f"{rid} from alice"),
        ("server", "carol", "contact.expire", f"{rid2} from alice"),
    ]
    assert [word(ln, 7) for ln in p.cmd("alice", "AUDIT")[-3:-1]] == ["contact.expire", "contact.expire"]
    # an expired request is no longer pending: asking again is allowed
    request(p, "alice", "bob")


def test_request_at_exactly_seven_days_cannot_be_accepted(p):
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob")
    p.h.clock.now = (T0_MS + 7 * DAY * 1000) / 1000  # before any sweep
    assert p.cmd("bob", f"CONTACT ACCEPT {rid}") == [
        f"{S} FAIL CONTACT NOT_PENDING {rid} :That request was already decided or has expired"
    ]
    p.h.clock.now = (T0_MS + 7 * DAY * 1000 - 1) / 1000
    assert word(p.cmd("bob", f"CONTACT ACCEPT {rid}")[0], 3) == "ACCEPTED"


def test_agreement_expires_at_its_end(p):
    p.login("alice")
    p.login("bob", caps=(LOBBY,))
    aid = agree(p, "alice", "bob", days=1)
    end = T0_MS + DAY * 1000
    p.h.clock.now = (end - 1) / 1000
    assert sent_id(send(p, "alice", "bob"))
    p.h.clock.now = end / 1000
    assert send(p, "alice", "bob") == [f"{S} FAIL SEND NO_AGREEMENT bob :You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    p.h.take("bob")
    p.at(end - T0_MS + 60_000)
    p.notifies()
    assert p.lines("bob") == [f"{S} NOTIFY bob message 1", f"{S} NOTIFY bob agreement 1"]
    assert p.lines("alice") == [f"{SVC} NOTICE alice :NOTIFY agreement 1"]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'agreement.expire'") == [
        ("server", "alice", "agreement.expire", f"{aid} with bob")
    ]
    assert word(p.cmd("bob", "AUDIT")[-2], 7) == "agreement.expire"
    assert p.cmd("alice", f"CONTACT REVOKE {aid}") == [
        f"{S} FAIL CONTACT NO_SUCH_AGREEMENT {aid} :No such agreement for you"
    ]


# SEND ---------------------------------------------------------------------------------------------------


def test_send_receipt_after_storage_notified(p):
    p.login("alice")
    p.login("bob", caps=(LOBBY,))
    aid = agree(p, "alice", "bob")
    p.advance(2)
    out = send(p, "alice", "bob", "Hello Bob, shall we?")
    mid = sent_id(out)
    assert out == [f"{S} SEND alice OK {mid} bob delivered {mid} 0"]
    now = p.now_ms()
    assert p.rows("SELECT id, sender, recipient, agreement_id, conversation_id, in_reply_to, hop_count, created_at, "
                  "body, read_at, idempotency_key FROM pircan_messages") == [
        (int(mid, 16), "alice", "bob", int(aid, 16), int(mid, 16), None, 0, now, "Hello Bob, shall we?", None, None)
    ]
    assert p.rows("SELECT recipient, type, ref_id, created_at, notified_at FROM pircan_events WHERE type = 'message'") == [
        ("bob", "message", int(mid, 16), now, None)
    ]
    assert p.rows("SELECT actor, subject, action, detail FROM pircan_audit WHERE action = 'message.send'") == [
        ("alice", "bob", "message.send", f"{mid} conversation={mid} hop=0")
    ]
    assert p.lines("bob") == []  # coalescing
    p.notifies()
    assert p.lines("bob") == [f"{S} NOTIFY bob message 1"]
    assert p.rows("SELECT notified_at FROM pircan_events WHERE type = 'message'") == [(now + 250,)]


def test_send_receipt_queued_when_the_recipient_is_offline(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    p.h.send("bob", "QUIT :bye")
    out = send(p, "alice", "bob")
    mid = sent_id(out)
    assert out == [f"{S} SEND alice OK {mid} bob queued {mid} 0"]


def test_send_counts_code_points(p):
    """PIRCAN.md: 'IRC SEND at most 200 characters, counted as code points'."""
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    for text in ("é" * 200, "😀" * 200, "x" * 200):
        mid = sent_id(send(p, "alice", "bob", text))
        assert p.rows("SELECT body FROM pircan_messages WHERE id = ?", int(mid, 16)) == [(text,)]
    for text in ("é" * 201, "😀" * 201, "x" * 201):
        assert send(p, "alice", "bob", text) == [f"{S} FAIL SEND TOO_LONG bob :SEND text is at most 200 characters"]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages") == [(3,)]


def test_send_refusals(p):
    p.login("alice")
    p.login("bob")
    p.login("carol")
    p.login("dave")
    agree(p, "alice", "bob")
    agree(p, "alice", "carol", "task:translate")
    assert p.cmd("alice", "SEND bob") == [
        f"{S} FAIL SEND NEED_MORE_PARAMS :Syntax: SEND <account> [<in-reply-to>] :<text>"
    ]
    assert send(p, "alice", "bob", "   ") == [f"{S} FAIL SEND EMPTY bob :Empty message"]
    assert p.cmd("alice", "SEND bob :") == [f"{S} FAIL SEND EMPTY bob :Empty message"]
    assert send(p, "alice", "nobody") == [f"{S} FAIL SEND NO_SUCH_ACCOUNT nobody :No such account"]
    assert send(p, "alice", "alice") == [f"{S} FAIL SEND SELF_CONTACT alice :You cannot do this with yourself"]
    assert send(p, "alice", "dave") == [f"{S} FAIL SEND NO_AGREEMENT dave :You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"]
    assert send(p, "alice", "carol") == [
        f"{S} FAIL SEND SCOPE_MISSING carol :Your agreement with this account does not include the message scope"
    ]
    assert send(p, "carol", "alice") == [
        f"{S} FAIL SEND SCOPE_MISSING alice :Your agreement with this account does not include the message scope"
    ]
    assert send(p, "alice", "bob", "hi", reply_to="0000000000000001") == [
        f"{S} FAIL SEND NO_SUCH_MESSAGE 0000000000000001 :No such message for you"
    ]
    assert send(p, "alice", "bob", "hi", reply_to="zz") == [f"{S} FAIL SEND NO_SUCH_MESSAGE zz :No such message for you"]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages") == [(0,)]
    assert p.rows("SELECT detail FROM pircan_audit WHERE action = 'refused' ORDER BY id") == [
        ("SEND NO_AGREEMENT",), ("SEND SCOPE_MISSING",), ("SEND SCOPE_MISSING",)
    ]


def test_send_to_a_person_needs_an_agreement_too(p):
    p.login("alice")
    assert send(p, "alice", "paul") == [
        f"{S} FAIL SEND NO_AGREEMENT paul :You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"
    ]


def test_an_agent_and_its_owner_talk_without_an_agreement(p):
    """An owner needs no agreement with its own agents, either way; another owner's agent still does."""
    p.login("alice")
    p.login("olive")
    first = sent_id(send(p, "olive", "alice", "How is the report going?"))
    answer = sent_id(send(p, "alice", "olive", "Nearly done", reply_to=first))
    assert p.rows("SELECT sender, recipient, agreement_id, in_reply_to, hop_count FROM pircan_messages ORDER BY id") == [
        ("olive", "alice", 0, None, 0), ("alice", "olive", 0, int(first, 16), 1)
    ]
    assert p.rows("SELECT actor, subject, action FROM pircan_audit WHERE action = 'message.send' ORDER BY id") == [
        ("olive", "alice", "message.send"), ("alice", "olive", "message.send")
    ]
    assert answer
    p.login("dave")
    assert send(p, "olive", "dave") == [
        f"{S} FAIL SEND NO_AGREEMENT dave :You have no active agreement with this account. Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), then wait for the decision"
    ]


def test_reply_threading(p):
    p.login("alice")
    p.login("bob")
    p.login("carol")
    agree(p, "alice", "bob")
    agree(p, "alice", "carol")
    root = sent_id(send(p, "alice", "bob", "question"))
    out = send(p, "bob", "alice", "answer", reply_to=root)
    r1 = sent_id(out)
    assert out == [f"{S} SEND bob OK {r1} alice delivered {root} 1"]
    r2 = sent_id(send(p, "alice", "bob", "thanks", reply_to=r1))
    assert p.rows("SELECT printf('%016x', id), conversation_id, in_reply_to, hop_count FROM pircan_messages ORDER BY id") == [
        (root, int(root, 16), None, 0),
        (r1, int(root, 16), int(root, 16), 1),
        (r2, int(root, 16), int(r1, 16), 2),
    ]
    # "*" means no in-reply-to: a new conversation
    out = send(p, "alice", "bob", "new topic", reply_to="*")
    new = sent_id(out)
    assert out == [f"{S} SEND alice OK {new} bob delivered {new} 0"]
    # a reply must stay within the pair
    assert send(p, "carol", "alice", "me too", reply_to=root) == [
        f"{S} FAIL SEND NO_SUCH_MESSAGE {root} :No such message for you"
    ]


def test_hop_limit_at_the_ninth_hop(p):
    """Seed 3: 'A chain MUST NOT exceed 8 hops.'"""
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    parent = sent_id(send(p, "alice", "bob", "hop 0"))
    pair = ("bob", "alice")
    for hop in range(1, 9):
        frm, to = pair[(hop - 1) % 2], pair[hop % 2]
        out = send(p, frm, to, f"hop {hop}", reply_to=parent)
        parent = sent_id(out)
        assert word(out[0], -1) == str(hop)
    assert send(p, "bob", "alice", "hop 9", reply_to=parent) == [
        f"{S} FAIL SEND HOP_LIMIT {parent} :Reply chains stop at 8 hops. Start a new conversation: send without in-reply-to"
    ]
    assert p.rows("SELECT MAX(hop_count), COUNT(*) FROM pircan_messages") == [(8, 9)]
    assert p.rows("SELECT actor, detail FROM pircan_audit WHERE action = 'refused'") == [
        ("bob", f"SEND HOP_LIMIT {parent}")
    ]


def test_forty_messages_per_conversation_per_hour(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    start = p.now_ms() - T0_MS
    root = sent_id(send(p, "alice", "bob", "m0"))
    for i in range(1, 40):  # both directions count
        frm, to = ("bob", "alice") if i % 2 else ("alice", "bob")
        sent_id(send(p, frm, to, f"m{i}", reply_to=root))
    assert send(p, "alice", "bob", "m40", reply_to=root) == [
        f"{S} FAIL SEND CONVERSATION_RATE {root} :This conversation reached 40 messages in the last hour. Wait for the retry time, or end the exchange. Retry in 3600 s"
    ]
    p.at(start + 3600_000 - 1)
    assert send(p, "bob", "alice", "m40", reply_to=root)[0].endswith(" CONVERSATION_RATE " + root + (
        " :This conversation reached 40 messages in the last hour. Wait for the retry time, or end the exchange. "
        "Retry in 1 s"))  # a millisecond, rounded up
    p.at(start + 3600_000)  # the first 40 were all sent at the same ms: the window is empty again
    sent_id(send(p, "bob", "alice", "m40", reply_to=root))
    # other conversations of the pair were never limited
    assert p.rows("SELECT COUNT(*) FROM pircan_messages") == [(41,)]
    assert p.rows("SELECT actor, detail FROM pircan_audit WHERE action = 'refused'") == [
        ("alice", f"SEND CONVERSATION_RATE {root}"), ("bob", f"SEND CONVERSATION_RATE {root}")
    ]


def test_120_messages_per_sender_per_agreement_per_hour(p):
    p.login("alice")
    p.login("bob")
    aid = agree(p, "alice", "bob")
    for i in range(120):
        sent_id(send(p, "alice", "bob", f"n{i}"))
        if i % 10 == 9:
            p.advance(60)
    assert send(p, "alice", "bob", "n120") == [
        f"{S} FAIL SEND AGREEMENT_BUDGET {aid} :You sent 120 messages under this agreement in the last hour. Wait for the retry time. Retry in 2880 s"
    ]
    # the other party has its own budget
    sent_id(send(p, "bob", "alice", "mine"))
    p.at(3600_000 + 250)  # the first ten are an hour old
    sent_id(send(p, "alice", "bob", "n120"))
    assert p.rows("SELECT COUNT(*) FROM pircan_messages WHERE sender = 'alice'") == [(121,)]
    assert p.rows("SELECT actor, detail FROM pircan_audit WHERE action = 'refused'") == [
        ("alice", f"SEND AGREEMENT_BUDGET {aid}")
    ]


def test_idempotent_retry_with_the_same_label(p):
    p.login("alice", caps=("labeled-response",))
    p.login("bob")
    agree(p, "alice", "bob")
    first = p.cmd("alice", "@label=k1 SEND bob :exactly once")
    mid = word(first[0], 5)
    assert first == [f"@label=k1 {S} SEND alice OK {mid} bob delivered {mid} 0"]
    p.advance(3)
    assert p.cmd("alice", "@label=k1 SEND bob :exactly once") == first
    assert p.rows("SELECT printf('%016x', id), idempotency_key FROM pircan_messages") == [(mid, "k1")]
    assert p.rows("SELECT COUNT(*) FROM pircan_audit WHERE action = 'message.send'") == [(1,)]
    p.notifies()
    assert p.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY message 1"]
    # another label: another message
    assert word(p.cmd("alice", "@label=k2 SEND bob :exactly once")[0], 5) != mid


def test_idempotency_key_tag(p):
    p.login("alice", caps=("message-tags",))
    p.login("bob")
    agree(p, "alice", "bob")
    first = p.cmd("alice", "@+pircan.dev/key=abc SEND bob :once")
    assert p.cmd("alice", "@+pircan.dev/key=abc SEND bob :once") == first
    assert p.rows("SELECT idempotency_key FROM pircan_messages") == [("abc",)]


def test_a_reused_label_with_other_text_is_a_new_message(p):
    """Labels repeat (a client's counter starts again on every connection): only a retry of the
    same SEND (same recipient, in-reply-to and text) returns the first receipt; nothing is swallowed."""
    p.login("alice", caps=("labeled-response",))
    p.login("bob")
    agree(p, "alice", "bob")
    first = word(p.cmd("alice", "@label=1 SEND bob :good morning")[0], 5)
    p.advance(DAY)
    second = p.cmd("alice", "@label=1 SEND bob :good evening")
    mid = word(second[0], 5)
    assert mid != first
    assert p.cmd("alice", "@label=1 SEND bob :good evening") == second
    assert p.rows("SELECT body, idempotency_key FROM pircan_messages ORDER BY id") == [
        ("good morning", None), ("good evening", "1")
    ]


# INBOX ----------------------------------------------------------------------------------------------------


def three_messages(p: P) -> list[str]:
    """alice and dave each message bob: alice 'one', dave 'two', alice 'three' (one second apart)."""
    for name in ("alice", "bob", "dave"):
        p.login(name)
    agree(p, "alice", "bob")
    agree(p, "dave", "bob")
    ids = []
    for frm, text in (("alice", "one"), ("dave", "two"), ("alice", "three")):
        ids.append(sent_id(send(p, frm, "bob", text)))
        p.advance(1)
    p.h.take("bob")
    return ids


def header(mid: str, frm: str, at_ms: int, conv: str | None = None, parent: str = "*", hop: int = 0, size: int = 3,
           nick: str = "bob") -> str:
    return f"{S} INBOX {nick} MESSAGE {mid} {frm} {ts(at_ms)} {conv or mid} {parent} {hop} {size}"


def test_inbox_lists_unread_without_consuming(p):
    ids = three_messages(p)
    listing = [
        header(ids[0], "alice", T0_MS + 500) + " one",
        header(ids[1], "dave", T0_MS + 1500) + " two",
        header(ids[2], "alice", T0_MS + 2500, size=5) + " three",
        f"{S} INBOX bob UNREAD 3 :3 unread messages",
    ]
    assert p.cmd("bob", "INBOX") == listing
    assert p.cmd("bob", "INBOX") == listing
    assert p.rows("SELECT COUNT(*) FROM pircan_messages WHERE read_at IS NULL") == [(3,)]
    p.login("carol")
    assert p.cmd("carol", "INBOX") == [f"{S} INBOX carol UNREAD 0 :0 unread messages"]


def test_inbox_preview_is_one_line_and_the_list_pages(tmp_path):
    p = P(tmp_path, pircan={"inbox_page": 2})
    try:
        p.account("olive", kind="person")
        p.account("alice")
        p.account("bob")
        p.login("alice")
        p.login("bob")
        agree(p, "alice", "bob")
        for text in ("a", "b", "c"):
            send(p, "alice", "bob", text)
        lines = p.cmd("bob", "INBOX")
        assert [ln.split(" ", 11)[-1] for ln in lines[:-1]] == ["a", "b"]
        assert lines[-1] == f"{S} INBOX bob UNREAD 3 :3 unread messages"
        p.cmd("bob", "INBOX ACK ALL")
        store_message(p, 5, "alice", "bob", "line one\nline two\r " + "z" * 300)
        preview = p.cmd("bob", "INBOX")[0].split(" ", 11)[-1]
        assert preview == ":line one line two  " + "z" * 180 + "…"  # 200 characters on one line
    finally:
        p.close()


def test_sqlite_inbox_preview_drops_a_nul_an_earlier_version_stored(p):
    """No transport stores a NUL now (PostgreSQL cannot); SQLite files of earlier versions may hold one."""
    p.login("bob")
    store_message(p, 5, "alice", "bob", "nul\x00 here")
    assert p.cmd("bob", "INBOX")[0].split(" ", 11)[-1] == ":nul here"


def test_inbox_read_whole_message_without_consuming(p):
    ids = three_messages(p)
    assert p.cmd("bob", f"INBOX READ {ids[1]}") == [
        header(ids[1], "dave", T0_MS + 1500),
        f"{S} INBOX bob BODY {ids[1]} two",
        f"{S} INBOX bob END {ids[1]}",
    ]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages WHERE read_at IS NULL") == [(3,)]
    # the sender may read its own message; nobody else may
    assert p.cmd("dave", f"INBOX READ {ids[1]}")[0] == header(ids[1], "dave", T0_MS + 1500, nick="dave")
    assert p.cmd("alice", f"INBOX READ {ids[1]}") == [f"{S} FAIL INBOX NO_SUCH_MESSAGE {ids[1]} :No such message for you"]
    assert p.cmd("bob", "INBOX READ 0000000000000001") == [
        f"{S} FAIL INBOX NO_SUCH_MESSAGE 0000000000000001 :No such message for you"
    ]
    assert p.cmd("bob", "INBOX READ") == [f"{S} FAIL INBOX NEED_MORE_PARAMS READ :Syntax: INBOX READ <message-id>"]
    assert p.cmd("bob", "INBOX FROB") == [f"{S} FAIL INBOX UNKNOWN_SUBCOMMAND FROB :Unknown subcommand; see HELP"]


def store_message(p: P, ident: int, sender: str, recipient: str, body: str, agreement_id: int = 1) -> None:
    """Put a message straight into the store (bodies longer than SEND allows come from other transports)."""
    msg = StoredMessage(ident, sender, recipient, agreement_id, ident, None, 0, T0_MS, body, None)
    p.h.run(p.h.server.store.write(pstore.insert_message, msg, None))


def test_inbox_read_long_body_in_body_lines(p):
    """A body longer than 400 bytes comes as BODY then BODY+ lines of at most 400 bytes, split on code points;
    a newline in the body starts a new BODY line."""
    p.login("bob")
    body = "a" * 399 + "é" + "b" * 500 + "\n" + "second line\n\n" + "😀" * 101
    mid = 0x0123456789ABCDEF
    store_message(p, mid, "alice", "bob", body)
    hexid = "0123456789abcdef"
    assert p.cmd("bob", f"INBOX READ {hexid}") == [
        f"{S} INBOX bob MESSAGE {hexid} alice {ts(T0_MS)} {hexid} * 0 {len(body.encode())}",
        f"{S} INBOX bob BODY {hexid} {'a' * 399}",  # 'é' would pass 400 bytes: it starts the next piece
        f"{S} INBOX bob BODY+ {hexid} é{'b' * 398}",
        f"{S} INBOX bob BODY+ {hexid} {'b' * 102}",
        f"{S} INBOX bob BODY {hexid} :second line",
        f"{S} INBOX bob BODY {hexid} :",
        f"{S} INBOX bob BODY {hexid} {'😀' * 100}",
        f"{S} INBOX bob BODY+ {hexid} 😀",
        f"{S} INBOX bob END {hexid}",
    ]


def test_inbox_read_a_60000_byte_body(p):
    p.login("bob", caps=("batch",))
    body = "x" * 60_000
    store_message(p, 77, "alice", "bob", body)
    lines = p.cmd("bob", "INBOX READ 000000000000004d")
    ref = word(lines[0], 2)[1:]
    assert lines[0] == f"{S} BATCH +{ref} pircan/message 000000000000004d"
    assert lines[-1] == f"{S} BATCH -{ref}"
    bodies = [ln for ln in lines if " BODY" in ln]
    assert len(bodies) == 150
    assert "".join(word(ln, -1) for ln in bodies) == body
    assert all(len(ln.encode()) + 2 <= 512 + 20 for ln in lines)  # @batch=... tag aside, within IRC's line


def test_inbox_ack(p):
    ids = three_messages(p)
    assert p.cmd("bob", f"INBOX ACK {ids[0]},{ids[2]}") == [f"{S} INBOX bob ACKED 2"]
    assert p.cmd("bob", f"INBOX ACK {ids[0]}") == [f"{S} INBOX bob ACKED 0"]
    assert p.cmd("bob", "INBOX")[-1] == f"{S} INBOX bob UNREAD 1 :1 unread message"
    now = p.now_ms()
    assert p.rows("SELECT printf('%016x', id), read_at FROM pircan_messages ORDER BY id") == [
        (ids[0], now), (ids[1], None), (ids[2], now)
    ]
    # nobody acknowledges someone else's messages
    assert p.cmd("alice", f"INBOX ACK {ids[1]}") == [f"{S} INBOX alice ACKED 0"]
    assert p.cmd("bob", "INBOX ACK 12,zz") == [f"{S} FAIL INBOX NO_SUCH_MESSAGE 12 :No such message for you"]
    assert p.cmd("bob", "INBOX ACK") == [
        f"{S} FAIL INBOX NEED_MORE_PARAMS ACK :Syntax: INBOX ACK <id>[,<id>...] | INBOX ACK ALL"
    ]
    assert p.cmd("bob", "INBOX ACK all") == [f"{S} INBOX bob ACKED 1"]
    assert p.cmd("bob", "INBOX") == [f"{S} INBOX bob UNREAD 0 :0 unread messages"]


def test_inbox_take_oldest_with_sender_filter(p):
    ids = three_messages(p)
    assert p.cmd("bob", "INBOX TAKE dave") == [
        header(ids[1], "dave", T0_MS + 1500),
        f"{S} INBOX bob BODY {ids[1]} two",
        f"{S} INBOX bob END {ids[1]}",
    ]
    assert p.cmd("bob", "INBOX TAKE DAVE") == [f"{S} INBOX bob EMPTY :No unread messages from dave"]
    assert p.cmd("bob", "INBOX TAKE")[0] == header(ids[0], "alice", T0_MS + 500)
    assert p.cmd("bob", "INBOX TAKE *")[0] == header(ids[2], "alice", T0_MS + 2500, size=5)
    assert p.cmd("bob", "INBOX TAKE") == [f"{S} INBOX bob EMPTY :No unread messages"]
    assert p.rows("SELECT COUNT(*) FROM pircan_messages WHERE read_at IS NULL") == [(0,)]


# INBOX WAIT ----------------------------------------------------------------------------------------------


def waiting(p: P, caps=()) -> None:
    for name in ("alice", "dave"):
        p.login(name)
    p.login("bob", caps=caps)
    agree(p, "alice", "bob")
    agree(p, "dave", "bob")


def test_wait_answers_at_once_when_a_message_is_unread(p):
    waiting(p)
    mid = sent_id(send(p, "alice", "bob", "ready"))
    p.h.take("bob")
    assert p.cmd("bob", "INBOX WAIT") == [
        header(mid, "alice", T0_MS + 500, size=5),
        f"{S} INBOX bob BODY {mid} ready",
        f"{S} INBOX bob END {mid}",
    ]
    assert p.rows("SELECT read_at FROM pircan_messages") == [(T0_MS + 500,)]


def test_wait_answers_when_a_send_arrives_and_the_connection_keeps_working(p):
    waiting(p)
    assert p.cmd("bob", "INBOX WAIT * 60000") == []
    assert p.cmd("bob", "PING :still-here") == [f"{S} PONG irc.test still-here"]
    assert p.cmd("bob", "INBOX")[-1] == f"{S} INBOX bob UNREAD 0 :0 unread messages"
    p.advance(30)
    mid = sent_id(send(p, "alice", "bob", "wake up"))
    assert p.lines("bob") == [
        header(mid, "alice", T0_MS + 30_500, size=7),
        f"{S} INBOX bob BODY {mid} :wake up",
        f"{S} INBOX bob END {mid}",
    ]
    assert p.rows("SELECT read_at FROM pircan_messages") == [(T0_MS + 30_500,)]
    p.advance(60)  # the timer was cancelled
    # the NOTIFY for that message still comes (events are counted when committed; see docs/pircan.md)
    assert p.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY message 1"]


def test_wait_with_a_sender_filter(p):
    waiting(p)
    p.cmd("bob", "INBOX WAIT dave 0")
    first = sent_id(send(p, "alice", "bob", "not you"))
    assert p.lines("bob") == []
    mid = sent_id(send(p, "dave", "bob", "me"))
    assert p.lines("bob")[0] == header(mid, "dave", T0_MS + 500, size=2)
    assert p.rows("SELECT printf('%016x', id), read_at IS NULL FROM pircan_messages ORDER BY id") == [
        (first, 1), (mid, 0)
    ]


def test_wait_timeout_is_a_normal_reply_with_the_label(p):
    waiting(p, caps=("labeled-response", "batch"))
    assert p.cmd("bob", "@label=w1 INBOX WAIT * 5000") == []
    p.advance(4.999)
    assert p.lines("bob") == []
    p.advance(0.001)
    assert p.lines("bob") == [f"@label=w1 {S} INBOX bob TIMEOUT 5000 :No message within 5000 ms"]


def test_wait_answer_carries_the_label(p):
    waiting(p, caps=("labeled-response", "batch"))
    p.cmd("bob", "@label=w2 INBOX WAIT alice")
    mid = sent_id(send(p, "alice", "bob", "hello"))
    lines = p.lines("bob")
    outer, inner = word(lines[0], 3)[1:], word(lines[1], 3)[1:]
    assert lines == [
        f"@label=w2 {S} BATCH +{outer} labeled-response",
        f"@batch={outer} {S} BATCH +{inner} pircan/message {mid}",
        f"@batch={inner} " + header(mid, "alice", T0_MS + 500, size=5),
        f"@batch={inner} {S} INBOX bob BODY {mid} hello",
        f"@batch={inner} {S} INBOX bob END {mid}",
        f"@batch={outer} {S} BATCH -{inner}",
        f"{S} BATCH -{outer}",
    ]


@pytest.mark.parametrize("timeout", ["", "-5", "NaN", "soon"])
def test_wait_invalid_timeout_means_the_default(p, timeout):
    waiting(p)
    p.cmd("bob", f"INBOX WAIT * {timeout}".rstrip())
    p.advance(119.999)
    assert p.lines("bob") == []
    p.advance(0.001)
    assert p.lines("bob") == [f"{S} INBOX bob TIMEOUT 120000 :No message within 120000 ms"]


def test_wait_timeout_is_truncated_to_whole_ms(p):
    waiting(p)
    p.cmd("bob", "INBOX WAIT * 2.9")
    p.advance(0.002)
    assert p.lines("bob") == [f"{S} INBOX bob TIMEOUT 2 :No message within 2 ms"]
    p.cmd("bob", "INBOX WAIT * 0.5")
    p.advance(0.001)
    assert p.lines("bob") == [f"{S} INBOX bob TIMEOUT 1 :No message within 1 ms"]


def test_wait_zero_waits_forever(p):
    waiting(p)
    p.cmd("bob", "INBOX WAIT * 0")
    p.advance(10 * DAY)
    assert [ln for ln in p.lines("bob") if "INBOX" in ln] == []
    mid = sent_id(send(p, "alice", "bob", "finally"))
    assert p.lines("bob")[0].startswith(f"{S} INBOX bob MESSAGE {mid} alice")


def test_a_new_wait_cancels_the_old(p):
    waiting(p, caps=("labeled-response", "batch"))
    p.cmd("bob", "@label=old INBOX WAIT * 5000")
    assert p.cmd("bob", "@label=new INBOX WAIT * 10000") == [
        f"@label=old {S} INBOX bob CANCELLED :Replaced by a newer INBOX WAIT"
    ]
    p.advance(5)
    assert p.lines("bob") == []  # the old timer is gone
    p.advance(5)
    assert p.lines("bob") == [f"@label=new {S} INBOX bob TIMEOUT 10000 :No message within 10000 ms"]


def test_quit_ends_the_wait_and_the_message_stays_unread(p):
    waiting(p)
    p.cmd("bob", "INBOX WAIT * 0")
    p.h.send("bob", "QUIT :gone")
    mid = sent_id(send(p, "alice", "bob", "anyone?"))
    assert p.rows("SELECT printf('%016x', id), read_at FROM pircan_messages") == [(mid, None)]
    p.login("bob2", "bob")
    assert p.cmd("bob2", "INBOX TAKE")[0].startswith(f"{S} INBOX bob MESSAGE {mid}")


def test_wait_on_one_connection_take_on_another(p):
    """A person may have several connections; each may wait with its own filter."""
    p.login("dave")
    p.login("paul")
    p.login("olive")
    p.login("o2", "olive", nick="olive2")
    agree(p, "olive", "dave", decider="paul")
    p.account("erin", owner="paul")
    p.login("erin")
    agree(p, "olive", "erin", decider="paul")
    p.cmd("olive", "INBOX WAIT dave 0")
    p.cmd("o2", "INBOX WAIT erin 0")
    mid = sent_id(send(p, "erin", "olive", "for o2"))
    assert p.lines("olive") == []
    assert p.lines("o2")[0].startswith(f"{S} INBOX olive2 MESSAGE {mid} erin")
    mid = sent_id(send(p, "dave", "olive", "for o1"))
    assert p.lines("olive")[0].startswith(f"{S} INBOX olive MESSAGE {mid} dave")
    assert p.lines("o2") == []


# NOTIFY ---------------------------------------------------------------------------------------------------


def test_notify_merges_counts_per_type_and_never_carries_content(p):
    p.login("alice")
    p.login("dave")
    p.login("bob", caps=(LOBBY,))
    agree(p, "alice", "bob")
    agree(p, "dave", "bob")
    for text in ("secret one", "secret two"):
        sent_id(send(p, "alice", "bob", text))
    sent_id(send(p, "dave", "bob", "secret three"))
    request(p, "dave", "carol")  # not for bob
    p.login("carol")
    request(p, "carol", "bob")
    p.advance(0.249)
    assert p.lines("bob") == []
    p.advance(0.001)
    assert p.lines("bob") == [f"{S} NOTIFY bob message 3", f"{S} NOTIFY bob request 1"]
    assert p.rows("SELECT type, COUNT(*), MIN(notified_at), MAX(notified_at) FROM pircan_events "
                  "WHERE recipient = 'bob' AND created_at >= ? GROUP BY type ORDER BY type", T0_MS + 500) == [
        ("message", 3, T0_MS + 500 + 250, T0_MS + 500 + 250),
        ("request", 1, T0_MS + 500 + 250, T0_MS + 500 + 250),
    ]


def test_notify_marks_queued_together_are_one_update_each_event_keeping_its_first_time(p):
    """The announced marks of one group commit are written together (store.MARK_NOTIFIED);
    the result is what the marks one by one would give."""
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    p.h.send("bob", "QUIT")  # away: nothing is announced
    for text in ("one", "two", "three"):
        sent_id(send(p, "alice", "bob", text))
    p.h.settle()
    first, second, third = [row[0] for row in p.rows(
        "SELECT id FROM pircan_events WHERE recipient = 'bob' AND type = 'message' ORDER BY id")]
    marks = [[(first, 1000)], [(second, 1500)], [(third, 2000)], [(third, 900), (first, 900)], []]
    assert p.h.run(p.h.server.store.write(pstore._mark_notified_batch, marks)) == [None] * 5
    assert p.rows("SELECT id, notified_at FROM pircan_events WHERE recipient = 'bob' AND type = 'message' "
                  "ORDER BY id") == [(first, 1000), (second, 1500), (third, 2000)]


def test_notify_marks_wait_a_tenth_of_a_second_and_go_in_one_write(p):
    """What NOTIFY announced is marked in the database within MARKS_FLUSH_S, the marks of many
    NOTIFYs in one write, each with its own time; the store's flush and close take them along."""
    p.login("alice")
    p.login("bob", caps=(LOBBY,))
    p.login("carol", caps=(LOBBY,))
    agree(p, "alice", "bob")
    agree(p, "alice", "carol")
    start = p.now_ms()
    sent_id(send(p, "alice", "bob", "1"))
    p.advance(0.05)
    sent_id(send(p, "alice", "carol", "2"))
    p.advance(0.2)  # bob's NOTIFY (250 ms after his event)
    assert p.lines("bob") == [f"{S} NOTIFY bob message 1"]
    p.advance(0.05)  # carol's
    assert p.lines("carol") == [f"{S} NOTIFY carol message 1"]
    events = "SELECT recipient, notified_at FROM pircan_events WHERE type = 'message' ORDER BY id"
    p.h.run(p.h.server.store.db.flush())  # what is queued is committed; the marks are still held
    assert dbs.rows(p.path, events) == [("bob", None), ("carol", None)]
    p.advance(0.1)  # 100 ms after bob's NOTIFY: both marks, one write
    p.h.run(p.h.server.store.db.flush())
    assert dbs.rows(p.path, events) == [("bob", start + 250), ("carol", start + 300)]


def test_notify_marks_go_at_once_when_many_are_held(p):
    """At MARKS_MOST held marks, the one that reaches it queues them all, without waiting for
    the tenth of a second: a busy server writes its marks in pieces of that size."""
    from ext.pircan.state import MARKS_MOST

    state = next(fn.__self__ for fn in p.h.server.message_checks if type(fn.__self__).__name__ == "Pircan")
    assert state.marks_most == MARKS_MOST == 256
    state.marks_most = 3
    p.login("alice")
    for name in ("bob", "carol", "dave"):
        p.login(name, caps=(LOBBY,))
        agree(p, "alice", name)
    start = p.now_ms()
    for name in ("bob", "carol"):
        sent_id(send(p, "alice", name, "1"))
    p.advance(0.05)
    sent_id(send(p, "alice", "dave", "1"))
    p.advance(0.2)  # bob's and carol's NOTIFYs: two marks held, to be written 100 ms later
    assert [p.lines(name) for name in ("bob", "carol")] == [[f"{S} NOTIFY bob message 1"], [f"{S} NOTIFY carol message 1"]]
    events = "SELECT recipient, notified_at FROM pircan_events WHERE type = 'message' ORDER BY id"
    p.h.run(p.h.server.store.db.flush())
    assert dbs.rows(p.path, events) == [("bob", None), ("carol", None), ("dave", None)]
    p.advance(0.05)  # dave's NOTIFY is the third: all three queued at once
    assert p.lines("dave") == [f"{S} NOTIFY dave message 1"]
    p.h.run(p.h.server.store.db.flush())
    assert dbs.rows(p.path, events) == [("bob", start + 250), ("carol", start + 250), ("dave", start + 300)]


def test_notify_coalesces_bursts_while_online(p):
    p.login("alice")
    p.login("bob", caps=(LOBBY,))
    agree(p, "alice", "bob")
    sent_id(send(p, "alice", "bob", "1"))
    p.advance(0.1)
    sent_id(send(p, "alice", "bob", "2"))
    p.advance(0.15)  # 250 ms after the first event
    assert p.lines("bob") == [f"{S} NOTIFY bob message 2"]
    sent_id(send(p, "alice", "bob", "3"))
    p.advance(0.2)
    assert p.lines("bob") == []
    p.advance(0.05)
    assert p.lines("bob") == [f"{S} NOTIFY bob message 1"]


def test_notify_coalescing_window_is_configurable(tmp_path):
    p = P(tmp_path, pircan={"notify_coalesce_ms": 0})
    try:
        p.account("olive", kind="person")
        p.account("alice")
        p.account("bob")
        p.login("alice")
        p.login("bob", caps=(LOBBY,))
        agree(p, "alice", "bob")
        sent_id(send(p, "alice", "bob"))
        p.advance(0)
        assert p.lines("bob") == [f"{S} NOTIFY bob message 1"]
    finally:
        p.close()


def test_notify_is_held_while_offline_and_delivered_at_login(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    p.h.send("bob", "QUIT")
    for text in ("a", "b"):
        sent_id(send(p, "alice", "bob", text))
    rid = request(p, "alice", "carol")
    p.advance(3600)
    assert p.rows("SELECT COUNT(*) FROM pircan_events WHERE recipient = 'bob' AND notified_at IS NULL") == [(2,)]
    p.login("bob2", "bob", caps=(LOBBY,))
    assert p.lines("bob2") == []
    p.advance(0)  # delivered at login, without the coalescing delay
    assert p.lines("bob2") == [f"{S} NOTIFY bob message 2"]
    p.login("carol")
    p.advance(0)
    assert p.lines("carol") == [f"{SVC} NOTICE carol :NOTIFY request 1"]
    p.login("olive")  # the owner of bob and carol was told of both requests
    p.advance(0)
    assert p.lines("olive") == [f"{SVC} NOTICE olive :NOTIFY request 2"]
    assert rid


def test_notify_after_a_login_once_registered(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    p.h.send("bob", "QUIT")
    sent_id(send(p, "alice", "bob"))
    p.h.register("late", "someone")
    p.cmd("late", "PRIVMSG NickServ :IDENTIFY bob sesame123")
    p.advance(0)
    assert p.lines("late")[-1] == f"{SVC} NOTICE bob :NOTIFY message 1"


def test_notify_expires_after_24_hours(p):
    p.login("alice")
    p.login("bob")
    p.login("dave")
    agree(p, "alice", "bob")
    agree(p, "dave", "bob")
    p.h.send("bob", "QUIT")
    at = p.now_ms() - T0_MS
    sent_id(send(p, "alice", "bob", "old"))
    p.at(at + DAY * 1000 - 1000)
    sent_id(send(p, "dave", "bob", "newer"))
    p.at(at + DAY * 1000 + 1)  # the first is more than 24 h old
    p.login("bob2", "bob")
    p.advance(0)
    assert p.lines("bob2") == [f"{SVC} NOTICE bob :NOTIFY message 1"]
    # the messages themselves never expire
    assert p.cmd("bob2", "INBOX")[-1] == f"{S} INBOX bob UNREAD 2 :2 unread messages"


def test_notify_at_exactly_24_hours_is_still_delivered(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob")
    p.h.send("bob", "QUIT")
    at = p.now_ms() - T0_MS
    sent_id(send(p, "alice", "bob", "old"))
    p.at(at + DAY * 1000)
    p.login("bob2", "bob")
    p.advance(0)
    assert p.lines("bob2") == [f"{SVC} NOTICE bob :NOTIFY message 1"]


def test_notify_reaches_every_connection_of_the_account(p):
    p.login("dave")
    p.login("paul")
    p.login("olive", caps=(LOBBY,))
    p.login("o2", "olive", nick="olive2")
    agree(p, "olive", "dave", decider="paul")
    sent_id(send(p, "dave", "olive", "to all of you"))
    p.notifies()
    assert p.lines("olive") == [f"{S} NOTIFY olive message 1"]
    assert p.lines("o2") == [f"{SVC} NOTICE olive2 :NOTIFY message 1"]


def test_pending_notify_survives_a_restart(tmp_path):
    first = P(tmp_path)
    for name, kind in (("olive", "person"), ("alice", "agent"), ("bob", "agent")):
        first.account(name, kind=kind)
    first.login("alice")
    first.login("bob")
    agree(first, "alice", "bob")
    first.h.send("bob", "QUIT")
    sent_id(send(first, "alice", "bob"))
    first.close()
    again = P(tmp_path)
    again.passwords["bob"] = "sesame123"
    again.login("bob")
    again.advance(0)
    assert again.lines("bob") == [f"{SVC} NOTICE bob :NOTIFY message 1"]
    again.close()


def test_the_pircan_service_nick_cannot_be_taken(p):
    p.h.connect("x")
    assert p.cmd("x", "NICK PIRCAN") == [f"{S} 432 * PIRCAN :Erroneous nickname"]
    assert p.cmd("x", "NICK pircan") == [f"{S} 432 * pircan :Erroneous nickname"]


# the privmsg policy -------------------------------------------------------------------------------------

REFUSED = "Agents need a message agreement to talk directly (CONTACT REQUEST)"


@pytest.mark.parametrize("verb", ["PRIVMSG", "NOTICE", "TAGMSG"])
def test_agent_to_agent_needs_a_message_agreement(p, verb):
    p.login("alice", caps=("message-tags",))
    p.login("dave", caps=("message-tags",))
    line = f"@+typing=active {verb} dave" if verb == "TAGMSG" else f"{verb} dave :hello"
    assert p.cmd("alice", line) == [f"{S} FAIL {verb} NO_AGREEMENT dave :{REFUSED}"]
    assert p.lines("dave") == []
    p.login("paul")
    rid = request(p, "alice", "dave")
    p.cmd("paul", f"CONTACT ACCEPT {rid}")
    p.h.take("dave")
    assert p.cmd("alice", line) == []
    relayed = p.lines("dave")
    assert len(relayed) == 1 and f"{verb} dave" in relayed[0]


def test_a_task_only_agreement_is_not_enough(p):
    p.login("alice")
    p.login("bob")
    agree(p, "alice", "bob", "task:x")
    assert p.cmd("alice", "PRIVMSG bob :hi") == [f"{S} FAIL PRIVMSG SCOPE_MISSING bob :{REFUSED}"]


def test_owners_people_and_their_agents_are_exempt(p):
    p.login("alice")
    p.login("olive")
    p.login("paul")
    p.plain("guest")
    for frm, to in (("olive", "alice"), ("alice", "olive"), ("paul", "alice"), ("alice", "paul"),
                    ("guest", "alice"), ("alice", "guest"), ("olive", "paul")):
        p.h.take(to)
        assert p.cmd(frm, f"PRIVMSG {to} :hi") == [], (frm, to)
        assert len(p.lines(to)) == 1, (frm, to)


def test_channels_are_not_checked(p):
    p.login("alice")
    p.login("dave")
    p.cmd("alice", "JOIN #lobby")
    p.cmd("dave", "JOIN #lobby")
    p.h.take("alice")
    assert p.cmd("dave", "PRIVMSG #lobby :hello all") == []
    assert p.lines("alice") == [":dave!dave@127.0.0.1 PRIVMSG #lobby :hello all"]


def test_open_policy_lets_agents_talk(tmp_path):
    p = P(tmp_path, pircan={"privmsg_policy": "open"})
    try:
        p.account("olive", kind="person")
        p.account("alice")
        p.account("bob")
        p.login("alice")
        p.login("bob")
        assert p.cmd("alice", "PRIVMSG bob :hi") == []
        assert p.lines("bob") == [":alice!alice@127.0.0.1 PRIVMSG bob hi"]
    finally:
        p.close()


# AUDIT --------------------------------------------------------------------------------------------------------


def test_audit_own_trail_owner_sees_agents_others_not(p):
    p.login("alice")
    p.login("bob")
    p.login("olive")
    p.login("dave")
    aid = agree(p, "alice", "bob")
    mid = sent_id(send(p, "alice", "bob", "hi"))
    send(p, "alice", "dave", "hi")  # refused: no agreement
    p.cmd("olive", f"CONTACT REVOKE {aid}")
    rows = p.rows("SELECT printf('%016x', id), at, actor, action, subject, detail FROM pircan_audit ORDER BY id")
    rid = rows[0][5].split()[0]
    expected = [
        (rows[0][0], T0_MS, "alice", "contact.request", "bob", f"{rid} to bob scopes=message days=30"),
        (rows[1][0], T0_MS, "bob", "contact.accept", "bob", f"{rid} from alice agreement={aid} scopes=message"),
        (rows[2][0], T0_MS + 250, "alice", "message.send", "bob", f"{mid} conversation={mid} hop=0"),
        (rows[3][0], T0_MS + 250, "alice", "refused", "dave", "SEND NO_AGREEMENT"),
        (rows[4][0], T0_MS + 250, "olive", "agreement.revoke", "alice", f"{aid} with bob by owner"),
    ]
    assert rows == expected

    def entry(nick, row):
        return f"{S} AUDIT {nick} ENTRY {row[0]} {ts(row[1])} {row[2]} {row[3]} {row[4]} :{row[5]}"

    # alice's trail has the decision on her request and the revoke of her agreement
    assert p.cmd("alice", "AUDIT") == [entry("alice", r) for r in expected] + [f"{S} AUDIT alice END alice"]
    # bob's has the revoke by alice's owner: he is its other party
    assert p.cmd("bob", "AUDIT") == (
        [entry("bob", r) for r in expected[:3]] + [entry("bob", expected[4]), f"{S} AUDIT bob END bob"]
    )
    assert p.cmd("olive", "AUDIT alice 2") == [entry("olive", r) for r in expected[3:]] + [f"{S} AUDIT olive END alice"]
    assert p.cmd("olive", "AUDIT") == [entry("olive", expected[4]), f"{S} AUDIT olive END olive"]
    assert p.cmd("bob", "AUDIT 1 bob") == [entry("bob", expected[4]), f"{S} AUDIT bob END bob"]
    assert p.cmd("dave", "AUDIT")[0] == entry("dave", expected[3])
    for who, target in (("dave", "alice"), ("bob", "alice"), ("alice", "olive"), ("dave", "nobody")):
        assert p.cmd(who, f"AUDIT {target}") == [
            f"{S} FAIL AUDIT NOT_ALLOWED {target} :You see your own trail and your agents' trails"
        ]


def test_the_audit_table_is_append_only(p):
    p.login("alice")
    p.cmd("alice", "CONTACT POLICY deny")
    p.h.settle()
    conn = dbs.connect(p.path)
    try:
        with pytest.raises(IntegrityError, match="append-only"):
            conn.execute("UPDATE pircan_audit SET detail = 'forged'")
        with pytest.raises(IntegrityError, match="append-only"):
            conn.execute("DELETE FROM pircan_audit")
        conn.rollback()
        assert conn.execute("SELECT detail FROM pircan_audit").fetchall() == [("deny",)]
    finally:
        conn.close()


# ISUPPORT and HELP -----------------------------------------------------------------------------------------------


def test_isupport_advertises_pircan_and_its_limits(p):
    p.h.connect("x")
    p.h.send("x", "NICK x")
    p.h.send("x", "USER x 0 * :x")
    tokens = [t for ln in p.lines("x") if " 005 " in ln for t in ln.split(" :")[0].split()[3:]]
    for token in ("PIRCAN=0.1", "PIRCANSENDLEN=200", "PIRCANHOPS=8", "PIRCANCONVRATE=40", "PIRCANBUDGET=120"):
        assert token in tokens


@pytest.mark.parametrize("topic", ["CONTACT", "SEND", "INBOX", "AGENTS", "AUDIT", "NOTIFY", "PIRCAN"])
def test_help_for_every_pircan_verb(p, topic):
    p.plain("x")
    lines = p.cmd("x", f"HELP {topic}")
    assert lines[0].startswith(f"{S} 704 x {topic} :")
    assert lines[-1] == f"{S} 706 x {topic} :End of /HELP"
    assert len(lines) >= 4
    assert all(ln.startswith(f"{S} 705 x {topic} :") for ln in lines[1:-1])


def test_help_index_points_to_pircan(p):
    p.plain("x")
    lines = p.cmd("x", "HELP")
    assert f"{S} 705 x * :PIRCAN (agent network): HELP PIRCAN, HELP CONTACT, HELP SEND, HELP INBOX, HELP NOTIFY," in lines
    assert f"{S} 705 x * :  HELP AGENTS, HELP AUDIT, HELP UNINVITE (private channels #<account>/<name>), HELP TASK," in lines


def test_help_tells_one_connection_per_agent_and_the_433_before_sasl(p):
    """What tests/test_nick_ownership.py checks is what HELP NICK and HELP PIRCAN say: a new login of
    an agent takes its nick over, and a NICK sent before SASL completes may get 433 first."""
    p.plain("x")
    nick = [ln.split(" :", 1)[1] for ln in p.cmd("x", "HELP NICK")]
    assert "PIRCAN: an agent is one worker, so it has one IRC connection at a time: when it logs in again, the" in nick
    assert "connection still holds the nick, gets 433 * <nick> :Nickname is already in use: that is" in nick
    overview = [ln.split(" :", 1)[1] for ln in p.cmd("x", "HELP PIRCAN")]
    assert "One IRC connection per agent: a new login takes the nick over and closes the older connection; a" in overview


def test_ids_stay_unique_across_a_restart_with_the_clock_behind(tmp_path):
    """A restart must not hand out ids already stored, even when the clock is not past them
    (here the harness clock starts at the same instant again)."""
    first = P(tmp_path)
    for name, kind in (("olive", "person"), ("alice", "agent"), ("bob", "agent")):
        first.account(name, kind=kind)
    first.login("alice")
    first.login("bob")
    agree(first, "alice", "bob")
    old = sent_id(send(first, "alice", "bob", "one"))
    first.close()
    again = P(tmp_path)
    again.passwords.update(alice="sesame123")
    again.login("alice")
    new = sent_id(send(again, "alice", "bob", "two"))
    assert int(new, 16) > int(old, 16)
    assert word(again.cmd("alice", "CONTACT REQUEST bob task:x 3 :more")[0], 3) == "REQUESTED"
    assert again.rows("SELECT COUNT(*) FROM pircan_messages") == [(2,)]
    again.close()


def test_wait_with_only_a_timeout(p):
    """Account names never start with a digit or a sign, so 'INBOX WAIT 5000' means 5000 ms from anyone."""
    waiting(p)
    p.cmd("bob", "INBOX WAIT 5000")
    p.advance(5)
    assert p.lines("bob") == [f"{S} INBOX bob TIMEOUT 5000 :No message within 5000 ms"]
    p.cmd("bob", "INBOX WAIT 0")
    mid = sent_id(send(p, "alice", "bob", "any sender"))
    assert p.lines("bob")[0].startswith(f"{S} INBOX bob MESSAGE {mid} alice")


def test_logout_ends_the_wait(p):
    """A connection that logs out of the account no longer receives (and consumes) its messages."""
    p.login("dave")
    p.login("paul")
    p.login("olive", caps=("labeled-response",))
    agree(p, "olive", "dave", decider="paul")
    p.cmd("olive", "@label=w INBOX WAIT * 0")
    assert p.cmd("olive", "PRIVMSG NickServ :LOGOUT") == [
        f"@label=w {S} INBOX olive CANCELLED :You logged out",
        f"{S} 901 olive olive!olive@127.0.0.1 :You are now logged out",
        ":NickServ!NickServ@services.pircd NOTICE olive :You are now logged out.",
    ]
    mid = sent_id(send(p, "dave", "olive", "secret"))
    assert p.lines("olive") == []
    assert p.rows("SELECT printf('%016x', id), read_at FROM pircan_messages") == [(mid, None)]


@pytest.mark.parametrize("text", ["0x23456789abcdef", "1234_6789abcdef0", "+123456789abcdef", "-123456789abcdef",
                                  "123456789abcdeg"])
def test_ids_are_exactly_16_hex_digits(p, text):
    """Forms int(text, 16) would accept ('0x', '_', signs) are not ids; upper-case hex is."""
    p.login("alice")
    p.login("bob")
    rid = request(p, "alice", "bob")
    p.h.take("bob")
    assert p.cmd("bob", f"CONTACT ACCEPT {text}") == [
        f"{S} FAIL CONTACT NO_SUCH_REQUEST {text} :No such contact request for you"
    ]
    assert word(p.cmd("bob", f"CONTACT ACCEPT {rid.upper()}")[0], 3) == "ACCEPTED"
