"""The owner portal in a real browser: headless Chromium (Debian's ``chromium``) driven by Playwright.

The scenario of the portal's issue: an owner signs in, creates an agent, sets owner-decides; an IRC
agent asks for contact and the request appears on the open page without a reload; the owner
accepts with fewer scopes and a shorter duration; the IRC agent is notified and can SEND; the owner
revokes from the page and the next SEND fails. Another owner's agents are 404 by URL. The same run
visits every other page (tokens, profile, audit log, account, deletion) and takes the screenshots
of docs/portal.md: set PIRCD_PORTAL_SCREENSHOTS=docs/portal to write them there (otherwise they go
to a temporary directory).

Chromium must be installed (``apt-get install chromium``; .ci/run does): without it these tests
fail, they are not skipped. Waiting is Playwright's own (for an element or a navigation); the IRC
side synchronises with PING/PONG.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.portal import PASSWORD, add_agent, add_person, irc, irc_login, make_server, portal_of
from tests.webhook_receiver import Receiver

CHROMIUM = os.environ.get("PIRCD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
DESKTOP = {"width": 1200, "height": 900}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"Chromium is missing at {CHROMIUM}: the portal's browser tests need it "
                    "(apt-get install chromium, or set PIRCD_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    where = os.environ.get("PIRCD_PORTAL_SCREENSHOTS")
    path = Path(where) if where else tmp_path / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def srv(tmp_path):
    server = make_server(tmp_path, server={"name": "irc.example"},
                         pircan={"notify_coalesce_ms": 0, "webhook_allowed_networks": ["127.0.0.0/8"]})
    add_person(server, "olive")
    add_person(server, "oscar")
    add_agent(server, "helper", "oscar")
    add_agent(server, "rival", "oscar")
    yield server
    server.stop()


def shoot(page: Any, shots: Path, name: str) -> None:
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)


def notice(page: Any) -> str:
    return page.locator(".notice.ok, .notice.error").first.inner_text()


def test_the_owner_decides_a_live_request_in_the_browser(srv, browser, shots, clients):
    base = srv.http_url + "/portal"
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    console_errors: list[str] = []
    page.on("console", lambda msg: console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda error: console_errors.append(str(error)))

    # sign in
    page.goto(srv.http_url + "/")
    assert page.url == base + "/signin"
    page.fill("#name", "olive")
    page.fill("#password", PASSWORD)
    shoot(page, shots, "signin")
    page.click("button:has-text('Sign in')")
    assert page.url == base + "/"
    assert page.locator("h1").inner_text() == "My agents"

    # create an agent: its password is shown once, and works over IRC
    page.fill("#new-agent", "scout")
    page.click("button:has-text('Create')")
    assert page.url == base + "/agents/scout"
    password = page.locator("#secret").inner_text()
    assert notice(page) == "Agent scout created."
    shoot(page, shots, "agent-created")
    scout = irc_login(srv, "scout", password, clients=clients)

    # owner-decides
    page.check("input[name=policy][value=owner-decides]")
    page.click("button:has-text('Save policy')")
    assert notice(page) == "The contact policy of scout is now owner-decides."
    assert portal_of(srv).state.policies["scout"] == "owner-decides"

    # an IRC agent asks; the open page shows the request without a reload
    page.wait_for_selector("body[data-live-state=open]")
    page.evaluate("window.stillTheSamePage = true")
    helper = irc_login(srv, "helper", clients=clients)
    answer = irc(helper, "CONTACT REQUEST scout message,task:summarise 30 :Compare notes on the weekly report")
    assert answer[0][:2] == ["helper", "REQUESTED"]
    request_id = answer[0][2]
    card = page.locator(f"#request-{request_id}")
    card.wait_for()
    assert page.evaluate("window.stillTheSamePage") is True
    assert "Compare notes on the weekly report" in card.inner_text()
    assert "Asks for\nmessage, task:summarise for 30 days" in card.inner_text()
    shoot(page, shots, "request-live")
    phone = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    phone.add_cookies(context.cookies())
    phone_page = phone.new_page()
    phone_page.goto(base + "/agents/scout")
    width = phone_page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"]  # nothing wider than the screen: tables scroll inside their box
    shoot(phone_page, shots, "phone-request")
    phone.close()

    # the agent itself may not decide under owner-decides
    assert irc(scout, f"CONTACT ACCEPT {request_id}")[0][:2] == ["CONTACT", "NOT_ALLOWED"]

    # accept with fewer scopes and fewer days
    card.locator("input[value='task:summarise']").uncheck()
    card.locator("input[name=days]").fill("7")
    card.locator("button:has-text('Accept')").click()
    assert notice(page).startswith("Accepted the request of helper: agreement ")
    assert "grants message until" in notice(page)
    row = page.locator("#agreements tbody tr")
    assert row.count() == 1
    assert row.locator("td").nth(0).inner_text().startswith("helper")
    assert row.locator("td").nth(1).inner_text() == "message"
    shoot(page, shots, "agreement")

    # the IRC agent is told, and may SEND
    told = helper.sync()
    assert [m.params for m in told if m.command == "NOTICE"] == [["helper", "NOTIFY decision 1"]]
    agreements = [p for p in irc(helper, "CONTACT LIST agreements") if p[1] == "AGREEMENT"]
    assert [p[3:6] + [p[8]] for p in agreements] == [["helper", "scout", "message", "active"]]
    agreement_id = agreements[0][2]
    created, expires = agreements[0][6], agreements[0][7]
    assert _days_between(created, expires) == 7
    assert irc(helper, "SEND scout :Here are my notes")[0][:2] == ["helper", "OK"]

    # the owner revokes from the page; the next SEND fails
    page.locator(f"a[href$='/agreements/{agreement_id}/revoke']").click()  # asks first
    assert page.locator("h1").inner_text() == "Revoke the agreement with helper?"
    page.click("button:has-text('Revoke the agreement with helper')")
    assert notice(page) == f"Revoked agreement {agreement_id} with helper."
    assert irc(helper, "SEND scout :One more thing")[0][:3] == ["SEND", "NO_AGREEMENT", "scout"]
    assert page.locator("#agreements").inner_text().endswith("No active agreements.")

    assert console_errors == []  # no script error, nothing the Content-Security-Policy refused

    # another owner's agent is not reachable by URL: 404, as for a name nobody has
    for path in ("/agents/rival", "/agents/rival/tokens", "/agents/nobody"):
        response = page.goto(base + path)
        assert response is not None and response.status == 404
        assert page.locator("h1").inner_text() == "Not found"
    csrf = portal_of(srv).sessions.by_id[context.cookies()[0]["value"]].csrf
    forged = page.request.post(base + "/agents/rival/policy", form={"csrf": csrf, "policy": "deny"},
                               max_redirects=0)
    assert forged.status == 404
    assert portal_of(srv).state.policies.get("rival") is None
    assert console_errors == ["Failed to load resource: the server responded with a status of 404 (Not Found)"] * 3
    console_errors.clear()

    # the other pages, each with its screenshot
    page.goto(base + "/agents/scout/tokens")
    page.fill("#label", "laptop")
    page.click("button:has-text('Make token')")
    token = page.locator("#secret").inner_text()
    assert re.fullmatch(r"pircd_[0-9a-f]{16}_\S+", token)
    shoot(page, shots, "tokens")

    page.goto(base + "/agents/scout/profile")
    page.fill("#display", "Scout, the note taker")
    page.click("button:has-text('Save')")
    page.fill("#skill", "summarise")
    page.fill("#description", "Short summaries of long reports")
    page.click("button:has-text('Add or change skill')")
    page.fill("#resource", "menu")
    page.select_option("#type", "json")
    page.fill("#body", '{"soup": "tomato"}')
    page.click("button:has-text('Publish')")
    assert notice(page) == "Resource menu published."
    shoot(page, shots, "profile")

    hook = Receiver()  # a real receiver on port 0
    try:
        page.goto(base + "/agents/scout/webhook")
        page.fill("#url", hook.url)
        page.click("button:has-text('Set webhook')")
        assert notice(page) == f"Webhook set to {hook.url}."
        assert page.locator("#secret").inner_text().startswith("whsec_")
        page.click("button:has-text('Send a test event')")
        assert re.fullmatch(r"Test event test-[0-9a-f]{16} answered HTTP 200 in \d+ ms\.", notice(page))
        assert hook.wait_for(1)[0].headers["pircan-event"] == "test"
        shoot(page, shots, "webhook")
    finally:
        hook.close()

    page.goto(base + "/audit")
    page.select_option("#f-agent", "scout")
    page.select_option("#f-kind", "contact")
    page.click("button:has-text('Show')")
    details = page.locator("table.audit tbody tr td:nth-child(5)").all_inner_texts()
    assert details[0] == f"{request_id} from helper agreement={agreement_id} scopes=message by owner, through the portal"
    assert details[1].startswith(f"{request_id} to scout scopes=message,task:summarise days=30")
    shoot(page, shots, "audit")

    page.goto(base + "/account")
    shoot(page, shots, "account")

    page.goto(base + "/")
    assert page.locator("#agents tbody tr").count() == 1
    shoot(page, shots, "agents")

    # delete, after a clear warning
    page.goto(base + "/agents/scout")
    page.click("text=Delete scout…")
    assert "This cannot be undone." in page.locator(".warning").inner_text()
    shoot(page, shots, "delete")
    page.fill("#confirm", "scout")
    page.click("button:has-text('Delete scout for good')")
    assert notice(page) == "Agent scout deleted."
    assert page.locator("#agents").inner_text() == "You have no agents yet."
    assert console_errors == []
    context.close()


def test_a_page_without_javascript_still_works(srv, browser, clients):
    """Every page is plain HTML forms and redirects: with JavaScript off, a reload shows the request."""
    add_agent(srv, "scout", "olive")
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    page = context.new_page()
    page.goto(srv.http_url + "/portal/signin")
    page.fill("#name", "olive")
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.goto(srv.http_url + "/portal/agents/scout")
    helper = irc_login(srv, "helper", clients=clients)
    request_id = irc(helper, "CONTACT REQUEST scout message 30 :hello")[0][2]
    page.reload()
    page.locator(f"#request-{request_id} button:has-text('Decline')").click()
    assert notice(page) == "Declined the request of helper."
    assert next(p for p in irc(helper, "CONTACT LIST requests") if p[1] == "REQUEST")[7] == "declined"
    # what cannot be undone asks first, on a page of its own
    page.goto(srv.http_url + "/portal/agents/scout/tokens")
    page.fill("#label", "laptop")
    page.click("button:has-text('Make token')")
    page.click("a:has-text('Revoke…')")
    assert page.locator("h1").inner_text() == "Revoke the token laptop of scout?"
    page.click("button:has-text('Revoke laptop')")
    assert notice(page) == "Token laptop revoked: it is refused from its next request on."
    context.close()


def test_every_page_fits_a_390_pixel_phone(srv, browser, shots, clients, receiver):
    """At 390 px nothing scrolls sideways (the document is no wider than the screen) and every
    button of a table row is on the screen; each page is screenshotted (phone-*.png)."""
    add_agent(srv, "scout", "olive")
    helper = irc_login(srv, "helper", clients=clients)
    irc(helper, "PROFILE NAME * :Helper, who reads long reports and writes short summaries")
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True)
    page = context.new_page()
    page.goto(srv.http_url + "/portal/signin")
    page.fill("#name", "olive")
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")
    base = srv.http_url + "/portal/agents/scout"
    # content for every page: an agreement, a pending request, messages, a token, a webhook, a skill
    first = irc(helper, "CONTACT REQUEST scout message,task:summarise 30 :Compare notes on the weekly report")[0][2]
    page.goto(base)
    page.locator(f"#request-{first} button:has-text('Accept')").click()
    rival = irc_login(srv, "rival", clients=clients)
    irc(rival, "CONTACT REQUEST scout message,resource:read 90 :A long purpose " + "with many words " * 12)
    for n in range(3):
        irc(helper, f"SEND scout :Note {n}: https://example.com/a/very/long/address/that/does/not/break/{n * 10 ** 20}")
    page.goto(base + "/messages")
    page.fill("#body", "Please summarise the notes by Friday")
    page.click("button:has-text('Send to scout')")
    page.goto(base + "/tokens")
    page.fill("#label", "a-rather-long-token-name-for-the-laptop")
    page.click("button:has-text('Make token')")
    page.goto(base + "/profile")
    page.fill("#skill", "summarise")
    page.fill("#description", "Short summaries of long reports")
    page.click("button:has-text('Add or change skill')")
    page.goto(base + "/webhook")
    page.fill("#url", receiver.url + "/with/a/long/path/for/the/receiver")
    page.click("button:has-text('Set webhook')")
    agreement = page.goto(base).url and page.locator("#agreements a.button").first.get_attribute("href")
    pages = {"agents": "/portal/", "agent": "/portal/agents/scout", "messages": "/portal/agents/scout/messages",
             "search": "/portal/agents/scout/messages?q=note*", "tokens": "/portal/agents/scout/tokens",
             "profile": "/portal/agents/scout/profile", "webhook": "/portal/agents/scout/webhook",
             "delete": "/portal/agents/scout/delete", "audit": "/portal/audit", "account": "/portal/account",
             "confirm": agreement.removeprefix(srv.http_url) if agreement else "/portal/"}
    for name, path in pages.items():
        page.goto(srv.http_url + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], (name, width)
        for box in (b.bounding_box() for b in page.locator("td .button, td button").all()):
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (name, box)
        shoot(page, shots, f"phone-{name}")
    page.goto(srv.http_url + "/portal/agents/scout")
    revoke = page.locator("#agreements a.button:has-text('Revoke')")
    box = revoke.bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]  # on the screen, not off to the side
    context.close()


def test_a_request_above_the_view_gets_a_cue(srv, browser, clients):
    """A request that arrives while the person has scrolled down is announced where they are."""
    add_agent(srv, "scout", "olive")
    context = browser.new_context(viewport={"width": 1200, "height": 400})
    page = context.new_page()
    page.goto(srv.http_url + "/portal/signin")
    page.fill("#name", "olive")
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.goto(srv.http_url + "/portal/agents/scout")
    page.wait_for_selector("body[data-live-state=open]")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    assert page.locator("#new-above").is_hidden()
    helper = irc_login(srv, "helper", clients=clients)
    request_id = irc(helper, "CONTACT REQUEST scout message 30 :Are you there?")[0][2]
    page.locator(f"#request-{request_id}").wait_for(state="attached")
    cue = page.locator("#new-above")
    cue.wait_for(state="visible")
    box = cue.bounding_box()
    assert box is not None and 0 <= box["y"] < 400  # in view, though the request is above it
    assert cue.locator("a").get_attribute("href") == f"#request-{request_id}"
    cue.locator("a").click()
    assert cue.is_hidden()
    assert page.locator(f"#request-{request_id}").bounding_box()["y"] > -1  # scrolled to it
    context.close()


def _days_between(start: str, end: str) -> float:
    from datetime import datetime

    def parse(text: str) -> datetime:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")

    return (parse(end) - parse(start)).total_seconds() / 86400
