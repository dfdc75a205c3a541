"""The owner's oversight of its agents in the portal: their conversations in both directions, by
thread, whole, with read state, their tasks, search, and writing to one's own agent.

scout is olive's agent; helper and rival are oscar's. A real server on port 0; IRC clients
synchronise with PING/PONG, HTTP calls wait for their answers.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from ext.pircan import store as db
from ext.pircan.service import messages, tasks
from tests.portal import add_agent, add_person, irc, irc_login, make_server, portal_of, run, sign_in

LONG = "First line of the weekly report.\n" + "The numbers are in. " * 60 + "\nLast line: the summary."


@pytest.fixture
def srv(tmp_path):
    server = make_server(tmp_path)
    add_person(server, "olive")
    add_person(server, "oscar")
    add_agent(server, "scout", "olive")
    add_agent(server, "helper", "oscar")
    add_agent(server, "rival", "oscar")
    yield server
    server.stop()


def state_of(srv: Any) -> Any:
    return portal_of(srv).state


def agree(srv: Any, clients: list, asker: str, target: str, scopes: str = "message") -> tuple[Any, Any]:
    a, b = irc_login(srv, asker, clients=clients), irc_login(srv, target, clients=clients)
    rid = irc(a, f"CONTACT REQUEST {target} {scopes} 30 :notes")[0][2]
    assert irc(b, f"CONTACT ACCEPT {rid}")[0][1] == "ACCEPTED"
    return a, b


def cards(page: str) -> list[tuple[str, str, str]]:
    """(id, classes, text without tags) of each message card, in page order."""
    out = []
    for classes, ident, inner in re.findall(r'<article class="message ([^"]*)" id="message-([0-9a-f]{16})">(.*?)</article>',
                                            page, re.DOTALL):
        out.append((ident, classes, html.unescape(re.sub(r"<[^>]+>", "", inner))))
    return out


def test_the_owner_reads_its_agents_conversations_threaded_whole_with_read_state(srv, clients):
    helper, scout = agree(srv, clients, "helper", "scout", "message,task:summarise")
    state = state_of(srv)
    first = run(srv, messages.send_message(state, "helper", "scout", LONG)).message
    reply = irc(scout, f"SEND helper {first.id:016x} :Thanks, reading it now")[0][2]
    assert irc(scout, f"INBOX ACK {first.id:016x}") == [["scout", "ACKED", "1"]]
    other = irc(helper, "SEND scout :A second topic")[0][2]
    task = run(srv, tasks.create_task(state, "helper", "scout", "summarise", "Summarise the report"))
    client, _ = sign_in(srv, "olive")
    page = client.get("/portal/agents/scout/messages")
    assert page.status_code == 200
    shown = cards(page.text)
    # the newest conversation first; each oldest first; the reply one level in
    assert [(i, c) for i, c, _ in shown] == [(other, "depth-0"), (f"{first.id:016x}", "depth-0"),
                                            (reply, "depth-1 mine")]
    assert LONG in html.unescape(page.text)  # the whole body, its lines as written
    assert "read by scout" in shown[1][2] and "unread" in shown[2][2] and "unread" in shown[0][2]
    assert f"reply to {first.id:016x}, hop 1" in shown[2][2]
    assert f"<code>{task.id:016x}</code>" in page.text and "Summarise" not in page.text.split('id="tasks"')[0]
    assert re.search(r'data-label="Skill"><code>summarise</code>', page.text)
    # the whole conversation on its own page
    whole = client.get(f"/portal/agents/scout/conversations/{first.id:016x}")
    assert [i for i, _, _ in cards(whole.text)] == [f"{first.id:016x}", reply]
    # another owner's agent, or a conversation the agent is no party of: 404
    assert client.get("/portal/agents/helper/messages").status_code == 404
    assert client.get(f"/portal/agents/helper/conversations/{first.id:016x}").status_code == 404
    agree(srv, clients, "rival", "helper")
    theirs = run(srv, messages.send_message(state, "helper", "rival", "Between the two of us")).message
    assert client.get(f"/portal/agents/scout/conversations/{theirs.id:016x}").status_code == 404
    oscar, _ = sign_in(srv, "oscar")
    assert oscar.get("/portal/agents/scout/messages").status_code == 404


def test_the_owner_writes_to_its_own_agent_which_sees_it_from_its_owner(srv, clients):
    client, csrf = sign_in(srv, "olive")
    scout = irc_login(srv, "scout", clients=clients)
    sent = client.post("/portal/agents/scout/messages", data={"csrf": csrf, "body": "Please file the report\r\nby Friday"})
    assert (sent.status_code, sent.headers["location"]) == (303, "/portal/agents/scout/messages")
    page = client.get("/portal/agents/scout/messages").text
    notice = re.search(r'<p class="notice ok" role="status">(.*?)</p>', page).group(1)
    message_id = re.fullmatch(r"Message ([0-9a-f]{16}) sent to scout \(it is online and was told\)\.", notice).group(1)
    inbox = irc(scout, "INBOX")
    assert inbox[0][:4] == ["scout", "MESSAGE", message_id, "olive"]  # from its owner's account
    assert irc(scout, f"INBOX READ {message_id}")[1:3] == [["scout", "BODY", message_id, "Please file the report"],
                                                          ["scout", "BODY", message_id, "by Friday"]]
    rows = run(srv, state_of(srv).database.read(db.all_audit, "scout", 50))
    assert [(e.actor, e.action, e.subject, e.detail) for e in rows if e.action == "message.send"] == [
        ("olive", "message.send", "scout", f"{message_id} conversation={message_id} hop=0 through the portal")]
    # the agent answers its owner without an agreement; the owner replies from the conversation page
    answer = irc(scout, f"SEND olive {message_id} :Will do")[0]
    assert answer[:2] == ["scout", "OK"]
    thread = client.get(f"/portal/agents/scout/conversations/{message_id}").text
    assert f'name="in_reply_to" value="{answer[2]}"' in thread
    again = client.post("/portal/agents/scout/messages", data={"csrf": csrf, "body": "Thanks",
                                                               "in_reply_to": answer[2], "conversation": message_id})
    assert again.headers["location"] == f"/portal/agents/scout/conversations/{message_id}"
    assert [i for i, _, _ in cards(client.get(f"/portal/agents/scout/conversations/{message_id}").text)][:2] == [
        message_id, answer[2]]
    stored = run(srv, state_of(srv).database.read(db.messages_of, "scout", 10, None))
    assert [(m.sender, m.hop_count, m.agreement_id) for m in stored] == [("olive", 2, 0), ("scout", 1, 0), ("olive", 0, 0)]
    # another owner's agent: 404, nothing stored; an empty message is refused with the service's code
    assert client.post("/portal/agents/rival/messages", data={"csrf": csrf, "body": "hi"}).status_code == 404
    client.post("/portal/agents/scout/messages", data={"csrf": csrf, "body": "   "})
    assert "(EMPTY)" in client.get("/portal/agents/scout/messages").text
    assert len(run(srv, state_of(srv).database.read(db.messages_of, "rival", 10, None))) == 0


def test_the_owner_searches_its_agents_messages_and_nobody_elses(srv, clients):
    agree(srv, clients, "helper", "scout")
    state = state_of(srv)
    ids = [run(srv, messages.send_message(state, "helper", "scout", text)).message.id
           for text in ("The weekly report is late", "Budget figures attached", "Reporting lines changed")]
    agree(srv, clients, "rival", "helper")
    run(srv, messages.send_message(state, "helper", "rival", "The secret weekly report"))  # not scout's
    client, _ = sign_in(srv, "olive")
    page = client.get("/portal/agents/scout/messages", params={"q": "report*"}).text
    assert [i for i, _, _ in cards(page)] == [f"{ids[2]:016x}", f"{ids[0]:016x}"]
    assert cards(client.get("/portal/agents/scout/messages", params={"q": "secret"}).text) == []
    assert "No message of scout has that." in client.get("/portal/agents/scout/messages", params={"q": "secret"}).text
    bad = client.get("/portal/agents/scout/messages", params={"q": "report OR"}).text
    assert "The search ends in the middle." in bad and "(INVALID_PARAMS)" in bad
    assert client.get("/portal/agents/rival/messages", params={"q": "secret"}).status_code == 404
    oscar, _ = sign_in(srv, "oscar")
    assert cards(oscar.get("/portal/agents/rival/messages", params={"q": "secret"}).text)[0][2].strip().startswith("helper to rival")
