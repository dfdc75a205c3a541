"""The owner portal over plain HTTP (no browser): sign-in and its throttle, sessions and their
expiry, CSRF, 404 for another owner's agents, the audit trail of every decision, the live event
stream, and the pages' HTML. The browser scenario is in test_portal_browser.py.

A real server on port 0 (tests/live.py); IRC clients synchronise with PING/PONG, HTTP calls wait
for their answers, and time passes only by moving a session's clock back: nothing sleeps.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import threading
from typing import Any

import httpx
import pytest

from ext.pircan import store as db
from tests.live import IRCClient
from tests.portal import (
    PASSWORD,
    add_agent,
    add_person,
    csrf_of,
    html_problems,
    irc,
    irc_login,
    make_server,
    portal_of,
    run,
    sign_in,
)
from tests.webhook_receiver import Receiver


@pytest.fixture
def srv(tmp_path):
    server = make_server(tmp_path, accounts={"login_attempts": 3},
                         pircan={"webhook_allowed_networks": ["127.0.0.0/8"]})  # receivers on loopback
    add_person(server, "olive")
    add_person(server, "oscar")
    add_agent(server, "scout", "olive")
    add_agent(server, "rival", "oscar")
    add_agent(server, "helper", "oscar")
    yield server
    server.stop()


def state_of(srv: Any) -> Any:
    return portal_of(srv).state


def audit_rows(srv: Any, account: str) -> list[tuple[str, str, str, str]]:
    """(actor, action, subject, detail) of the account's trail, oldest first."""
    entries = run(srv, state_of(srv).database.read(db.all_audit, account, 500))
    return [(e.actor, e.action, e.subject, e.detail) for e in entries]


# sign-in ---------------------------------------------------------------------------------------


def test_pages_need_a_session_and_the_sign_in_page_is_served(srv):
    c = httpx.Client(base_url=srv.http_url, follow_redirects=False)
    assert c.get("/").headers["location"] == "/portal/"
    assert c.get("/portal/").headers["location"] == "/portal/signin"
    for path in ("/agents/scout", "/audit", "/account"):  # sign-in comes back to the page asked for
        answer = c.get("/portal" + path)
        assert (answer.status_code, answer.headers["location"]) == (303, "/portal/signin?next=" + path.replace("/", "%2F"))
    page = c.get("/portal/signin")
    assert page.status_code == 200
    assert "<h1>Sign in</h1>" in page.text
    cookie = page.headers["set-cookie"]
    assert "pircd_portal_signin=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert "Path=/portal/" in cookie and "Secure" not in cookie  # plain HTTP here
    assert c.get("/healthz").text == "ok\n"


def test_every_answer_carries_a_strict_content_security_policy(srv):
    client, _ = sign_in(srv, "olive")
    for path in ("/portal/", "/portal/signin", "/portal/static/portal.css", "/portal/nothing-here"):
        headers = client.get(path).headers
        assert headers["content-security-policy"] == (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
    page = client.get("/portal/").text
    assert "<script>" not in page and "style=" not in page and " on" + "click" not in page
    assert '<script src="/portal/static/portal.js" defer></script>' in page


def test_a_person_signs_in_with_its_password_and_gets_a_server_side_session(srv):
    client, csrf = sign_in(srv, "olive")
    cookie = client.cookies.get("pircd_portal")
    sessions = portal_of(srv).sessions
    assert list(sessions.by_id) == [cookie]
    session = sessions.by_id[cookie]
    assert (session.account, session.csrf) == ("olive", csrf)
    assert "scout" in client.get("/portal/").text


def test_a_wrong_password_an_agent_and_a_suspended_person_do_not_sign_in(srv):
    c = httpx.Client(base_url=srv.http_url, follow_redirects=False)

    def attempt(name: str, password: str) -> httpx.Response:
        page = c.get("/portal/signin")
        return c.post("/portal/signin", data={"csrf": csrf_of(page.text), "name": name, "password": password})

    wrong = attempt("olive", "nope")
    assert wrong.status_code == 401
    assert "Invalid account name or password" in wrong.text
    agent = attempt("scout", PASSWORD)
    assert agent.status_code == 403
    assert "Agents do not sign in here; their owner does" in agent.text
    run(srv, portal_of(srv).state.api.set_suspended("oscar", True))
    suspended = attempt("oscar", PASSWORD)
    assert suspended.status_code == 401
    assert "Account suspended" in suspended.text
    assert portal_of(srv).sessions.by_id == {}


def test_sign_in_is_throttled_like_sasl_and_shares_its_counts(srv, clients):
    """operations.md: the portal's password checks are SASL's (accounts.login_attempts = 3 here)."""
    c = httpx.Client(base_url=srv.http_url, follow_redirects=False)

    def attempt(password: str) -> httpx.Response:
        page = c.get("/portal/signin")
        return c.post("/portal/signin", data={"csrf": csrf_of(page.text), "name": "olive", "password": password})

    assert [attempt("wrong").status_code for _ in range(3)] == [401, 401, 401]
    held = attempt(PASSWORD)  # the right password, refused without a check while the source waits
    assert held.status_code == 401
    assert re.search(r"Too many failed attempts; try again in \d+ seconds", held.text)
    assert "pircd_portal=" not in held.headers.get("set-cookie", "")
    # the same throttle as SASL: olive's IRC login from the same address waits too
    irc_client = IRCClient(srv.port)
    clients.append(irc_client)
    irc_client.send("CAP REQ :sasl")
    irc_client.send("NICK olive")
    irc_client.send("USER olive 0 * :olive")
    irc_client.send("AUTHENTICATE PLAIN")
    irc_client.read_until(lambda m: m.command == "AUTHENTICATE")
    irc_client.send("AUTHENTICATE " + base64.b64encode(f"\0olive\0{PASSWORD}".encode()).decode())
    refused = irc_client.read_until(lambda m: m.command in ("903", "904"))[-1]
    assert refused.command == "904"
    assert refused.params[-1] == "SASL authentication failed: Too many failed attempts; try again in 60 seconds"


def test_a_signed_out_deep_link_returns_to_its_page_after_sign_in(srv):
    c = httpx.Client(base_url=srv.http_url, follow_redirects=False)
    asked = c.get("/portal/audit", params={"agent": "scout", "kind": "contact"})
    assert asked.headers["location"] == "/portal/signin?next=%2Faudit%3Fagent%3Dscout%26kind%3Dcontact"
    page = c.get(asked.headers["location"])
    assert '<input type="hidden" name="next" value="/audit?agent=scout&amp;kind=contact">' in page.text
    wrong = c.post("/portal/signin", data={"csrf": csrf_of(page.text), "name": "olive", "password": "nope",
                                           "next": "/audit?agent=scout&kind=contact"})
    assert wrong.status_code == 401 and 'name="next" value="/audit?agent=scout&amp;kind=contact"' in wrong.text
    done = c.post("/portal/signin", data={"csrf": csrf_of(wrong.text), "name": "olive", "password": PASSWORD,
                                          "next": "/audit?agent=scout&kind=contact"})
    assert (done.status_code, done.headers["location"]) == (303, "/portal/audit?agent=scout&kind=contact")
    # only a page of the portal: another site, or a scheme, goes to the first page
    for elsewhere in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "agents", "/signin"):
        other = httpx.Client(base_url=srv.http_url, follow_redirects=False)
        form = other.get("/portal/signin")
        answer = other.post("/portal/signin", data={"csrf": csrf_of(form.text), "name": "olive",
                                                    "password": PASSWORD, "next": elsewhere})
        assert answer.headers["location"] == "/portal/", elsewhere


def test_sign_out_ends_the_session(srv):
    client, csrf = sign_in(srv, "olive")
    answer = client.post("/portal/signout", data={"csrf": csrf})
    assert (answer.status_code, answer.headers["location"]) == (303, "/portal/signin")
    assert portal_of(srv).sessions.by_id == {}
    assert client.get("/portal/").headers["location"] == "/portal/signin"


def test_a_session_expires_after_its_idle_time(srv):
    """pircan.portal_session_minutes (60 by default): a session unused that long is over."""
    client, csrf = sign_in(srv, "olive")
    portal = portal_of(srv)
    session = next(iter(portal.sessions.by_id.values()))
    session.seen -= 60 * 60 - 5  # five seconds to go: still alive, and this request renews it
    assert client.get("/portal/").status_code == 200
    session.seen -= 60 * 60 + 1
    assert client.get("/portal/").headers["location"] == "/portal/signin"
    answer = client.post("/portal/agents/scout/policy", data={"csrf": csrf, "policy": "deny"})
    assert (answer.status_code, answer.headers["location"]) == (303, "/portal/signin")
    assert portal.state.policies.get("scout") is None
    assert portal.sessions.by_id == {}


def test_a_session_ends_24_hours_after_sign_in_however_busy(srv):
    client, _ = sign_in(srv, "olive")
    session = next(iter(portal_of(srv).sessions.by_id.values()))
    session.created -= 24 * 3600
    assert client.get("/portal/").headers["location"] == "/portal/signin"


# CSRF ------------------------------------------------------------------------------------------


def test_a_form_without_the_sessions_csrf_token_is_refused_with_403(srv):
    client, csrf = sign_in(srv, "olive")
    before = audit_rows(srv, "scout")
    for data in ({"policy": "deny"}, {"policy": "deny", "csrf": ""}, {"policy": "deny", "csrf": csrf[:-1] + "x"}):
        answer = client.post("/portal/agents/scout/policy", data=data)
        assert answer.status_code == 403
        assert "did not carry a valid token" in answer.text
    _, other_csrf = sign_in(srv, "oscar")  # a token of another session is no better
    assert client.post("/portal/agents/scout/policy", data={"policy": "deny", "csrf": other_csrf}).status_code == 403
    assert client.post("/portal/agents", data={"name": "sneaky"}).status_code == 403
    assert client.post("/portal/signout", data={}).status_code == 403
    assert portal_of(srv).state.policies.get("scout") is None
    assert audit_rows(srv, "scout") == before
    assert run(srv, srv.server.store.get_account("sneaky")) is None
    crowded = {"policy": "deny", "csrf": csrf, **{f"f{i}": "x" for i in range(200)}}  # more fields than any form
    assert client.post("/portal/agents/scout/policy", data=crowded).status_code == 403
    anon = httpx.Client(base_url=srv.http_url, follow_redirects=False)
    anon.get("/portal/signin")
    assert anon.post("/portal/signin", data={f"f{i}": "x" for i in range(201)}).status_code == 403
    ok = client.post("/portal/agents/scout/policy", data={"policy": "deny", "csrf": csrf})
    assert (ok.status_code, ok.headers["location"]) == (303, "/portal/agents/scout")
    assert portal_of(srv).state.policies["scout"] == "deny"


def test_the_sign_in_form_needs_its_own_token(srv):
    c = httpx.Client(base_url=srv.http_url, follow_redirects=False)
    answer = c.post("/portal/signin", data={"name": "olive", "password": PASSWORD})
    assert answer.status_code == 403
    c.get("/portal/signin")  # the cookie alone is not enough: the form must carry its value
    answer = c.post("/portal/signin", data={"csrf": "guess", "name": "olive", "password": PASSWORD})
    assert answer.status_code == 403
    assert portal_of(srv).sessions.by_id == {}


# another owner's agents ------------------------------------------------------------------------


def test_another_owners_agent_is_404_on_every_page_and_form(srv):
    client, csrf = sign_in(srv, "olive")
    gets = ["", "/tokens", "/profile", "/webhook", "/delete"]
    for name in ("rival", "nobody", "olive"):
        for page in gets:
            answer = client.get(f"/portal/agents/{name}{page}")
            assert answer.status_code == 404, (name, page)
            assert "There is nothing here, or it is not yours to see." in answer.text
    posts = ["/policy", "/suspend", "/password", "/delete", "/tokens", "/profile/name", "/profile/skills",
             "/profile/resources", "/tokens/x/revoke", "/requests/161d64a315000000/accept",
             "/agreements/161d64a315000000/revoke", "/webhook", "/webhook/rotate", "/webhook/test",
             "/webhook/clear", "/webhook/replay"]
    for page in posts:
        answer = client.post(f"/portal/agents/rival{page}",
                             data={"csrf": csrf, "policy": "deny", "suspend": "1", "confirm": "rival", "scope": "message"})
        assert answer.status_code == 404, page
    # the same bytes for an agent that exists elsewhere and for a name nobody has
    assert client.get("/portal/agents/rival").text == client.get("/portal/agents/nobody").text
    assert client.get("/portal/audit?agent=rival").status_code == 404
    assert portal_of(srv).state.policies.get("rival") is None
    assert run(srv, srv.server.store.get_account("rival")).suspended is False
    assert audit_rows(srv, "rival") == []


# decisions, audited "by owner, through the portal" -----------------------------------------------


def test_the_owner_decides_in_the_portal_and_every_decision_is_audited(srv, clients):
    client, csrf = sign_in(srv, "olive")
    assert client.post("/portal/agents/scout/policy", data={"csrf": csrf, "policy": "owner-decides"}).status_code == 303
    helper = irc_login(srv, "helper", clients=clients)
    requested = irc(helper, "CONTACT REQUEST scout message,resource:read 30 :Share the weekly report")
    request_id = requested[0][2]
    page = client.get("/portal/agents/scout").text
    assert "Share the weekly report" in page and f"request {request_id}" in page
    # the agent itself may not decide under owner-decides
    scout = irc_login(srv, "scout", clients=clients)
    assert irc(scout, f"CONTACT ACCEPT {request_id}")[0][:3] == ["CONTACT", "NOT_ALLOWED", request_id]
    # wider than asked is refused by the service, shown as a message
    wider = client.post(f"/portal/agents/scout/requests/{request_id}/accept",
                        data={"csrf": csrf, "scope": "message", "days": "31"})
    assert wider.status_code == 303
    assert "INVALID_DURATION" in client.get("/portal/agents/scout").text
    none = client.post(f"/portal/agents/scout/requests/{request_id}/accept", data={"csrf": csrf, "days": "7"})
    assert none.status_code == 303
    assert "Grant at least one scope, or decline the request (INVALID_SCOPE)" in client.get("/portal/agents/scout").text
    accepted = client.post(f"/portal/agents/scout/requests/{request_id}/accept",
                           data={"csrf": csrf, "scope": "message", "days": "7"})
    assert (accepted.status_code, accepted.headers["location"]) == (303, "/portal/agents/scout")
    listed = irc(helper, "CONTACT LIST agreements")
    assert listed[0][:6] == ["helper", "AGREEMENT", listed[0][2], "helper", "scout", "message"]
    agreement_id = listed[0][2]
    assert irc(helper, "SEND scout :hello")[0][1] == "OK"
    revoked = client.post(f"/portal/agents/scout/agreements/{agreement_id}/revoke", data={"csrf": csrf})
    assert revoked.status_code == 303
    assert irc(helper, "SEND scout :again")[0][:3] == ["SEND", "NO_AGREEMENT", "scout"]
    decided = [row for row in audit_rows(srv, "scout") if row[0] == "olive"]
    assert decided == [
        ("olive", "policy.set", "scout", "owner-decides by owner, through the portal"),
        ("olive", "contact.accept", "scout",
         f"{request_id} from helper agreement={agreement_id} scopes=message by owner, through the portal"),
        ("olive", "agreement.revoke", "scout", f"{agreement_id} with helper by owner, through the portal"),
    ]


def test_a_decline_from_the_portal_tells_the_requester(srv, clients):
    client, csrf = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    request_id = irc(helper, "CONTACT REQUEST scout message 3 :hello")[0][2]
    assert client.post(f"/portal/agents/scout/requests/{request_id}/decline", data={"csrf": csrf}).status_code == 303
    assert next(p for p in irc(helper, "CONTACT LIST requests") if p[1] == "REQUEST")[7] == "declined"
    assert audit_rows(srv, "scout")[-1] == ("olive", "contact.decline", "scout",
                                            f"{request_id} from helper by owner, through the portal")


def test_a_request_card_shows_who_asks_what_for_and_until_when(srv, clients):
    helper = irc_login(srv, "helper", clients=clients)
    assert irc(helper, "PROFILE NAME * :Helper, the reader")[0][0] == "helper"
    assert irc(helper, "PROFILE SKILL * summarise :Short summaries")[0][0] == "helper"
    request_id = irc(helper, "CONTACT REQUEST scout message,task:summarise 30 :Compare notes on the report")[0][2]
    client, _ = sign_in(srv, "olive")
    page = client.get("/portal/agents/scout").text
    card = page.split(f'id="request-{request_id}"', 1)[1].split("</article>", 1)[0]
    text = " ".join(re.sub(r"<[^>]+>", " ", card).split())
    assert text.startswith("> From helper “Helper, the reader” Who")
    assert "Who An agent owned by oscar" in text
    assert "Skills summarise (Short summaries)" in text
    assert "Purpose Compare notes on the report" in text
    assert "Asks for message, task:summarise for 30 days" in text
    assert re.search(r"Expires \d{4}-\d\d-\d\d \d\d:\d\d UTC, if nobody decides \(asked ", text)
    # Accept and Decline sit together, in one form: Decline posts to its own address
    assert card.count("<form") == 1
    assert re.search(r'<div class="decision">\s*<button type="submit">Accept</button>\s*<button type="submit" '
                     rf'class="secondary" formaction="/portal/agents/scout/requests/{request_id}/decline" '
                     r'formnovalidate>Decline</button>', card)


def test_what_cannot_be_undone_asks_first_on_a_page_that_needs_no_script(srv, clients, receiver):
    client, csrf = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    request_id = irc(helper, "CONTACT REQUEST scout message 30 :hi")[0][2]
    client.post(f"/portal/agents/scout/requests/{request_id}/accept", data={"csrf": csrf, "scope": "message"})
    agreement_id = next(p for p in irc(helper, "CONTACT LIST agreements") if p[1] == "AGREEMENT")[2]
    client.post("/portal/agents/scout/tokens", data={"csrf": csrf, "label": "laptop"})
    client.post("/portal/agents/scout/webhook", data={"csrf": csrf, "url": receiver.url})
    pages = {
        f"/agreements/{agreement_id}/revoke": ("Revoke the agreement with helper?", "Revoke the agreement with helper",
                                               ""),
        "/tokens/laptop/revoke": ("Revoke the token laptop of scout?", "Revoke laptop", "/tokens"),
        "/password": ("Give scout a new password?", "Make a new password", ""),
        "/webhook/rotate": ("A new webhook secret for scout?", "Make a new secret", "/webhook"),
        "/webhook/clear": ("Remove the webhook of scout?", "Remove the webhook", "/webhook"),
    }
    shown = {path: client.get("/portal/agents/scout").text + client.get("/portal/agents/scout/tokens").text
             + client.get("/portal/agents/scout/webhook").text for path in ("all",)}["all"]
    for path, (title, button, back) in pages.items():
        # the pages link to the question; no form there acts at once
        assert f'href="/portal/agents/scout{path}"' in shown, path
        assert f'action="/portal/agents/scout{path}"' not in shown, path
        page = client.get("/portal/agents/scout" + path)
        assert page.status_code == 200 and f"<h1>{title}</h1>" in page.text
        assert re.search(rf'<form method="post" action="/portal/agents/scout{path}">\s*<input type="hidden" '
                         rf'name="csrf" value="{csrf}">\s*<button type="submit" class="danger">{button}</button>',
                         page.text), path
        assert f'<a class="button secondary" href="/portal/agents/scout{back}">Cancel: keep it as it is</a>' in page.text
    # asking changed nothing
    assert next(p for p in irc(helper, "CONTACT LIST agreements") if p[1] == "AGREEMENT")[8] == "active"
    assert [t.name for t in run(srv, state_of(srv).api.list_tokens("olive", "scout"))] == ["laptop"]
    assert [a[1] for a in audit_rows(srv, "scout") if a[1] in ("agent.password", "webhook.rotate", "webhook.clear",
                                                                  "token.revoke", "agreement.revoke")] == []
    # a question about nothing, or about another owner's agent, is 404
    for path in ("/portal/agents/scout/agreements/1111111111111111/revoke", "/portal/agents/scout/tokens/nope/revoke",
                 "/portal/agents/rival/password", "/portal/agents/rival/webhook/clear"):
        assert client.get(path).status_code == 404, path
    client.post("/portal/agents/scout/webhook/clear", data={"csrf": csrf})
    assert client.get("/portal/agents/scout/webhook/rotate").status_code == 404  # no webhook any more
    # answering the question acts
    revoked = client.post(f"/portal/agents/scout/agreements/{agreement_id}/revoke", data={"csrf": csrf})
    assert revoked.headers["location"] == "/portal/agents/scout"
    assert irc(helper, "SEND scout :again")[0][:3] == ["SEND", "NO_AGREEMENT", "scout"]


def test_the_delete_warning_names_the_webhook_and_the_unread_inbox(srv, clients, receiver):
    client, csrf = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    request_id = irc(helper, "CONTACT REQUEST scout message 30 :hi")[0][2]
    client.post(f"/portal/agents/scout/requests/{request_id}/accept", data={"csrf": csrf, "scope": "message"})
    page = client.get("/portal/agents/scout/delete").text
    assert "<li>no webhook (it has none);</li>" in page and "<li>its inbox: no unread messages" in page
    for n in range(3):
        assert irc(helper, f"SEND scout :note {n}")[0][1] == "OK"
    client.post("/portal/agents/scout/webhook", data={"csrf": csrf, "url": receiver.url})
    text = " ".join(re.sub(r"<[^>]+>", " ", client.get("/portal/agents/scout/delete").text).split())
    assert f"its webhook to {receiver.url} , with its " in text
    assert "its inbox: 3 unread messages it will never read (the senders keep their copies);" in text


def test_the_small_things_of_the_account_and_webhook_pages(srv, receiver):
    client, csrf = sign_in(srv, "olive")
    page = client.get("/portal/").text
    assert '<a href="/portal/account">My account (olive)</a>' in page
    account = client.get("/portal/account").text
    assert ('<input id="username" name="username" type="text" autocomplete="username" value="olive" readonly>'
            in account)  # a password manager knows whose password changes
    receiver.default = 500
    client.post("/portal/agents/scout/webhook", data={"csrf": csrf, "url": receiver.url})
    client.post("/portal/agents/scout/webhook/test", data={"csrf": csrf})
    failed = re.search(r'<p class="notice error" role="alert">(.*?)</p>', client.get("/portal/agents/scout/webhook").text)
    assert re.fullmatch(r"Test event test-[0-9a-f]{16} failed after \d+ ms: HTTP 500\.", failed.group(1))


def test_a_nul_in_a_form_or_an_address_is_refused_with_its_reason(srv):
    """As over MCP and A2A: a NUL in a form's field, a query or the address is INVALID_PARAMS with its
    reason (a form's on the next page, an address's on its own 400 page), and nothing changes."""
    c = httpx.Client(base_url=srv.http_url, follow_redirects=False)
    token = csrf_of(c.get("/portal/signin").text)
    answer = c.post("/portal/signin", data={"csrf": token, "name": "oli\x00ve", "password": PASSWORD})
    assert answer.status_code == 400 and "A text cannot contain NUL characters (INVALID_PARAMS)" in answer.text
    client, csrf = sign_in(srv, "olive")
    answer = client.post("/portal/agents/scout/profile/name", data={"csrf": csrf, "display": "a\x00b"})
    assert (answer.status_code, answer.headers["location"]) == (303, "/portal/")
    notice = re.search(r'<p class="notice error" role="alert">(.*?)</p>', client.get("/portal/").text)
    assert notice.group(1) == "A text cannot contain NUL characters (INVALID_PARAMS)"
    for path in ("/portal/agents/scout/messages?q=a%00b", "/portal/agents/sc%00out"):
        page = client.get(path)
        assert (page.status_code, "A text cannot contain NUL characters (INVALID_PARAMS)" in page.text) == (400, True)
    assert run(srv, state_of(srv).database.read(
        lambda conn: conn.execute("SELECT COUNT(*) FROM pircan_profiles").fetchone())) == (0,)


# agents: create, suspend, new password, tokens, delete --------------------------------------------


def test_an_agent_made_in_the_portal_logs_in_with_the_password_shown_once(srv, clients):
    client, csrf = sign_in(srv, "olive")
    made = client.post("/portal/agents", data={"csrf": csrf, "name": "Courier"})
    assert (made.status_code, made.headers["location"]) == (303, "/portal/agents/Courier")
    page = client.get("/portal/agents/Courier").text
    password = re.search(r'<code id="secret">([^<]+)</code>', page).group(1)
    assert "shown once" in page
    assert 'id="secret"' not in client.get("/portal/agents/Courier").text  # once
    irc_login(srv, "courier", password, clients=clients)
    assert audit_rows(srv, "courier")[0] == ("olive", "agent.create", "courier", "by owner, through the portal")
    taken = client.post("/portal/agents", data={"csrf": csrf, "name": "rival"})
    assert taken.status_code == 303
    assert "That account already exists (ACCOUNT_EXISTS)" in client.get("/portal/").text


def test_suspending_an_agent_closes_its_connection_and_refuses_its_tokens(srv, clients):
    client, csrf = sign_in(srv, "olive")
    scout = irc_login(srv, "scout", clients=clients)
    _, token = run(srv, srv.server.tokens.create(None, "scout", "laptop"))
    assert client.post("/portal/agents/scout/suspend", data={"csrf": csrf, "suspend": "1"}).status_code == 303
    assert any("Account suspended" in line for line in scout.read_all_until_close())
    assert run(srv, srv.server.tokens.verify(token, "127.0.0.9")) is None
    assert "suspended" in client.get("/portal/agents/scout").text
    assert client.post("/portal/agents/scout/suspend", data={"csrf": csrf, "suspend": "0"}).status_code == 303
    assert run(srv, srv.server.tokens.verify(token, "127.0.0.9")).account == "scout"
    actions = [row[1:] for row in audit_rows(srv, "scout")]
    assert actions == [("agent.suspend", "scout", "by owner, through the portal"),
                       ("agent.unsuspend", "scout", "by owner, through the portal")]


def test_a_new_agent_password_replaces_the_old_one(srv, clients):
    client, csrf = sign_in(srv, "olive")
    assert client.post("/portal/agents/scout/password", data={"csrf": csrf}).status_code == 303
    password = re.search(r'<code id="secret">([^<]+)</code>', client.get("/portal/agents/scout").text).group(1)
    irc_login(srv, "scout", password, clients=clients)
    assert isinstance(run(srv, srv.server.accounts.check_password("127.0.0.5", "scout", PASSWORD, "test")), str)


def test_tokens_made_in_the_portal_work_and_revoked_ones_do_not(srv):
    client, csrf = sign_in(srv, "olive")
    assert client.post("/portal/agents/scout/tokens", data={"csrf": csrf, "label": "laptop"}).status_code == 303
    page = client.get("/portal/agents/scout/tokens").text
    token = re.search(r'<code id="secret">(pircd_[^<]+)</code>', page).group(1)
    assert '<td data-label="Name">laptop</td>' in page
    identity = run(srv, srv.server.tokens.verify(token, "127.0.0.9"))
    assert (identity.account, identity.name) == ("scout", "laptop")
    assert client.post("/portal/agents/scout/tokens/laptop/revoke", data={"csrf": csrf}).status_code == 303
    assert run(srv, srv.server.tokens.verify(token, "127.0.0.9")) is None
    assert [row[1:] for row in audit_rows(srv, "scout")] == [
        ("token.create", "scout", "laptop by owner, through the portal"),
        ("token.revoke", "scout", "laptop by owner, through the portal"),
    ]


def test_deleting_an_agent_warns_first_then_ends_its_state(srv, clients):
    client, csrf = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    request_id = irc(helper, "CONTACT REQUEST scout message 30 :hi")[0][2]
    client.post(f"/portal/agents/scout/requests/{request_id}/accept", data={"csrf": csrf, "scope": "message"})
    warning = client.get("/portal/agents/scout/delete").text
    assert "This cannot be undone." in warning
    assert "its 1 active agreement: revoked, and the other parties told (helper)" in warning
    unconfirmed = client.post("/portal/agents/scout/delete", data={"csrf": csrf, "confirm": "scou"})
    assert unconfirmed.headers["location"] == "/portal/agents/scout/delete"
    assert run(srv, srv.server.store.get_account("scout")) is not None
    deleted = client.post("/portal/agents/scout/delete", data={"csrf": csrf, "confirm": "scout"})
    assert (deleted.status_code, deleted.headers["location"]) == (303, "/portal/")
    assert run(srv, srv.server.store.get_account("scout")) is None
    assert client.get("/portal/agents/scout").status_code == 404
    assert irc(helper, "SEND scout :still there?")[0][:2] == ["SEND", "NO_SUCH_ACCOUNT"]
    trail = [row[:2] for row in audit_rows(srv, "olive")]
    assert trail[-1] == ("olive", "agent.delete")


def test_a_person_changes_its_password_and_its_other_sessions_end(srv):
    client, csrf = sign_in(srv, "olive")
    other, _ = sign_in(srv, "olive")
    short = client.post("/portal/account/password", data={"csrf": csrf, "current": PASSWORD, "new": "abc",
                                                           "repeat": "abc"})
    assert short.status_code == 303
    assert "at least 8 characters (WEAK_PASSWORD)" in client.get("/portal/account").text
    wrong = client.post("/portal/account/password", data={"csrf": csrf, "current": "nope", "new": "a new secret",
                                                           "repeat": "a new secret"})
    assert wrong.status_code == 303
    assert "The current password is wrong (INVALID_PASSWORD)" in client.get("/portal/account").text
    done = client.post("/portal/account/password", data={"csrf": csrf, "current": PASSWORD, "new": "a new secret",
                                                          "repeat": "a new secret"})
    assert done.status_code == 303
    assert "Password changed. 1 other session(s) signed out." in client.get("/portal/account").text
    assert other.get("/portal/").headers["location"] == "/portal/signin"
    sign_in(srv, "olive", "a new secret")
    assert audit_rows(srv, "olive")[-1] == ("olive", "account.password", "olive", "through the portal")


# the webhook ------------------------------------------------------------------------------------


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


def test_the_owner_manages_its_agents_webhook_in_the_portal(srv, clients, receiver, tmp_path):
    """Set (secret shown once), test, 410 and its dead letter, replay, new secret, remove: the
    service functions of WEBHOOK, each audited "by owner, through the portal"."""
    client, csrf = sign_in(srv, "olive")
    page = "/portal/agents/scout/webhook"
    assert "scout has no webhook." in client.get(page).text
    refused = client.post(page, data={"csrf": csrf, "url": "http://10.0.0.1/hook"})
    assert (refused.status_code, refused.headers["location"]) == (303, page)
    assert "(ADDRESS_NOT_ALLOWED)" in client.get(page).text
    assert client.post(page, data={"csrf": csrf, "url": receiver.url}).status_code == 303
    shown = client.get(page).text
    secret = re.search(r'<code id="secret">(whsec_[^<]+)</code>', shown).group(1)
    assert f"Webhook set to {receiver.url}." in shown
    assert '<span class="badge online">active</span>' in shown
    assert 'id="secret"' not in client.get(page).text  # once
    # a test event, signed with that secret (checked here with hmac, not with the server's code)
    assert client.post(page + "/test", data={"csrf": csrf}).status_code == 303
    tested = receiver.wait_for(1)[0]
    stamp = tested.headers["pircan-timestamp"]
    assert tested.headers["pircan-event"] == "test"
    assert tested.headers["pircan-signature"] == "v1=" + hmac.new(
        secret.encode(), stamp.encode() + b"." + tested.body, hashlib.sha256).hexdigest()
    assert f"Test event {tested.headers['pircan-delivery']} answered HTTP 200 in " in client.get(page).text
    # HTTP 410: the webhook is disabled, the owner told, the delivery a dead letter
    olive = irc_login(srv, "olive", clients=clients)
    helper = irc_login(srv, "helper", clients=clients)
    receiver.script = [410]
    irc(helper, "CONTACT REQUEST scout message 3 :hi")
    gone = receiver.wait_for(2)[1]
    dead_id = gone.headers["pircan-delivery"]
    olive.read_until(lambda m: m.command == "NOTICE" and m.params[-1] == "NOTIFY webhook 1")
    disabled = client.get(page).text
    assert '<span class="badge suspended">disabled</span> after HTTP 410' in disabled
    assert f'<td data-label="Delivery"><code>{dead_id}</code></td>\n    <td data-label="Event">request</td>' in disabled
    assert html_problems({"webhook": disabled}, tmp_path) == {"webhook": []}
    client.post(page + "/replay", data={"csrf": csrf, "which": dead_id})
    assert "The webhook was disabled after HTTP 410: set it again first (DISABLED)" in client.get(page).text
    # set again: enabled with the same secret; the dead letter replayed with its id and bytes
    client.post(page, data={"csrf": csrf, "url": receiver.url})
    again = client.get(page).text
    assert "Its secret is unchanged." in again and 'id="secret"' not in again
    receiver.hang()  # the replayed delivery stays pending until the webhook is removed below
    client.post(page + "/replay", data={"csrf": csrf, "which": "ALL"})
    assert "1 dead letter queued again." in client.get(page).text
    replayed = receiver.wait_for(3)[2]
    assert (replayed.headers["pircan-delivery"], replayed.body) == (dead_id, gone.body)
    client.post(page + "/rotate", data={"csrf": csrf})
    rotated = client.get(page).text
    assert "The new webhook secret of scout" in rotated
    assert re.search(r'<code id="secret">(whsec_[^<]+)</code>', rotated).group(1) != secret
    client.post(page + "/clear", data={"csrf": csrf})
    receiver.release()
    cleared = client.get(page).text
    assert "Webhook removed; 1 pending delivery dropped." in cleared and "scout has no webhook." in cleared
    assert [row for row in audit_rows(srv, "scout") if row[1].startswith("webhook.")] == [
        ("olive", "webhook.set", "scout", f"{receiver.url} new secret by owner, through the portal"),
        ("server", "webhook.disable", "scout", f"HTTP 410 from {receiver.url}; 1 dead letter"),
        ("olive", "webhook.set", "scout", f"{receiver.url} by owner, through the portal"),
        ("olive", "webhook.replay", "scout", "1 dead letters (all) by owner, through the portal"),
        ("olive", "webhook.rotate", "scout", "new secret by owner, through the portal"),
        ("olive", "webhook.clear", "scout", f"{receiver.url} dropped=1 by owner, through the portal"),
    ]


# the audit log's filters ---------------------------------------------------------------------------


def test_the_audit_log_filters_by_agent_kind_and_date(srv, clients):
    client, csrf = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    client.post("/portal/agents/scout/policy", data={"csrf": csrf, "policy": "deny"})
    client.post("/portal/agents", data={"csrf": csrf, "name": "second"})
    assert irc(helper, "CONTACT REQUEST scout message 3 :hi")[0][:2] == ["CONTACT", "DENIED"]

    def actions(query: str) -> list[str]:
        page = client.get("/portal/audit" + query)
        assert page.status_code == 200
        return re.findall(r'<td data-label="Action"><code>([a-z.-]+)</code></td>', page.text)

    assert actions("") == ["contact.denied", "agent.create", "policy.set"]
    assert actions("?agent=scout") == ["contact.denied", "policy.set"]
    assert actions("?agent=second") == ["agent.create"]
    assert actions("?kind=contact") == ["contact.denied"]
    assert actions("?kind=policy&agent=scout") == ["policy.set"]
    assert actions("?from=2000-01-01&to=2000-12-31") == []
    assert actions("?from=2000-01-01") == ["contact.denied", "agent.create", "policy.set"]
    assert "Dates are written YYYY-MM-DD." in client.get("/portal/audit?from=yesterday").text
    assert "Kinds of entry:" in client.get("/portal/audit?kind=everything").text
    for before in ("ffffffffffffffff", "8000000000000000", "0x00000000000001", "-000000000000001", "zz"):
        page = client.get("/portal/audit?before=" + before)  # ids as PIRCAN parses them everywhere
        assert (page.status_code, "That is not an entry id." in page.text) == (200, True), before


# live updates ---------------------------------------------------------------------------------------


def test_the_event_stream_tells_a_page_of_a_request_to_its_agent(srv, clients):
    client, _ = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    with client.stream("GET", "/portal/events") as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"] == "text/event-stream; charset=utf-8"
        lines = stream.iter_lines()
        assert next(lines) == "retry: 3000"
        assert next(lines) == ""
        irc(helper, "CONTACT REQUEST scout message 3 :hi")
        assert [next(lines), next(lines)] == ["event: change", "data: request"]
    anonymous = httpx.get(srv.http_url + "/portal/events")
    assert anonymous.status_code == 401


def test_a_stream_ends_when_the_session_does(srv, clients):
    client, _ = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    portal = portal_of(srv)
    with client.stream("GET", "/portal/events") as stream:
        lines = stream.iter_lines()
        assert next(lines) == "retry: 3000"
        session = next(iter(portal.sessions.by_id.values()))
        assert session.streams == 1
        portal.sessions.end(session)
        irc(helper, "CONTACT REQUEST scout message 3 :hi")
        assert list(lines) == [""]  # the stream is over: nothing more after the retry line
    # the server's task ended right after its last write; a call on its loop runs after that
    assert srv.call(lambda: session.streams) == 0


# HTML -------------------------------------------------------------------------------------------------


def test_every_page_is_valid_html(srv, clients, tmp_path):
    """The Nu Html Checker finds nothing to say about any page, filled or empty."""
    client, csrf = sign_in(srv, "olive")
    helper = irc_login(srv, "helper", clients=clients)
    irc(helper, "CONTACT REQUEST scout message,task:summarise,resource:read 30 :Swap <notes> & \"reports\"")
    other_id = irc(helper, "CONTACT REQUEST Courier message 3 :x")  # no such agent yet: refused
    assert other_id[0][1] == "NO_SUCH_ACCOUNT"
    client.post("/portal/agents/scout/tokens", data={"csrf": csrf, "label": "laptop"})
    client.post("/portal/agents/scout/profile/name", data={"csrf": csrf, "display": "Scout <the first>"})
    client.post("/portal/agents/scout/profile/skills", data={"csrf": csrf, "skill": "summarise",
                                                               "description": "Short & sweet"})
    client.post("/portal/agents/scout/profile/resources", data={"csrf": csrf, "resource": "menu", "type": "json",
                                                                  "body": '{"soup": 1}'})
    scout_page = client.get("/portal/agents/scout").text
    request_id = re.search(r"request ([0-9a-f]{16})", scout_page).group(1)
    pages = {"agent with a request": scout_page}
    client.post(f"/portal/agents/scout/requests/{request_id}/accept", data={"csrf": csrf, "scope": "message"})
    first = irc(helper, 'SEND scout :Notes <b>& "quotes"')[0][2]
    scout = irc_login(srv, "scout", clients=clients)
    irc(scout, f"SEND helper {first} :Thanks")
    client.post("/portal/agents/scout/messages", data={"csrf": csrf, "body": "From the owner\r\non two lines"})
    for path in ("/portal/", "/portal/agents/scout", "/portal/agents/scout/tokens", "/portal/agents/scout/profile",
                 "/portal/agents/scout/messages", "/portal/agents/scout/messages?q=notes",
                 "/portal/agents/scout/messages?q=nothing", f"/portal/agents/scout/conversations/{first}",
                 "/portal/agents/scout/password", "/portal/agents/scout/tokens/laptop/revoke",
                 "/portal/agents/scout/webhook", "/portal/agents/scout/delete", "/portal/audit",
                 "/portal/audit?agent=scout&kind=contact", "/portal/account", "/portal/agents/rival"):
        pages[path] = client.get(path).text
    pages["sign-in"] = httpx.get(srv.http_url + "/portal/signin").text
    pages["csrf refusal"] = client.post("/portal/agents/scout/policy", data={}).text
    assert html_problems(pages, tmp_path) == {name: [] for name in pages}
    assert "Swap &lt;notes&gt; &amp; &#34;reports&#34;" in pages["agent with a request"]


def test_an_open_stream_ends_cleanly_when_the_server_stops(tmp_path):
    """api.http_on_stop: the stream ends before uvicorn waits for open responses, so the browser gets a
    complete response (not a connection cut after the grace period) and the shutdown does not wait."""
    server = make_server(tmp_path)
    add_person(server, "olive")
    client, _ = sign_in(server, "olive")
    with client.stream("GET", "/portal/events") as stream:
        lines = stream.iter_lines()
        assert next(lines) == "retry: 3000"
        stopper = threading.Thread(target=server.stop)
        stopper.start()
        assert list(lines) == [""]  # the last chunk came: httpx raises on a cut chunked body
        stopper.join(10)
    assert not stopper.is_alive()
