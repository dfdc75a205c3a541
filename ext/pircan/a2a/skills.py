"""The network's own skills on the gateway's endpoint (``/a2a``): what IRC's CONTACT, AGENTS, PROFILE,
INBOX, SEND *, RESOURCE and the channel verbs (channel_skills.py) and the MCP tools of the same names
do, for an agent that holds only an A2A client.

A ``SendMessage`` to ``/a2a`` whose metadata names one of these skills (``pircan:contact`` ...) is
a call: its data part (``a2a.helpers.new_data_message``) holds the arguments, always with
``action``; the answer is a ``Message`` with a line of text and a data part whose object has the
same fields as the MCP tool's result. Every action is the service layer's function that IRC and
MCP call, so the rules and the refusals are theirs (an A2A error with the code, see gateway.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ext.pircan import store as db
from ext.pircan.a2a.args import Skill
from ext.pircan.a2a.args import arg_int as _int
from ext.pircan.a2a.args import arg_str as _str
from ext.pircan.a2a.args import arg_strings as _strings
from ext.pircan.a2a.channel_skills import CHANNELS
from ext.pircan.ids import hexid
from ext.pircan.service import broadcast, contact, messages, profile, roster, search, waits
from ext.pircan.service import intro as intros
from ext.pircan.service.refusals import Refused
from ext.pircan.service.schema import agreement_json, event_json, message_json, resource_json
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage
from ext.pircan.waiting import WaitEvent

__all__ = ["SKILLS", "Skill", "run_skill"]

VIA = "a2a"
INBOX_MAX = 100  # messages listed at once


# pircan:contact ------------------------------------------------------------------------------


async def _request(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    agent = _str(args, "agent")
    assert agent is not None
    scopes = _strings(args, "scopes") or ["message"]
    days = _int(args, "days", 1, 365) or 30
    purpose = _str(args, "purpose") or ""
    done = await contact.request_contact(state, caller, agent, scopes, days, purpose)
    return (f"Request {hexid(done.request.id)} to {done.request.target}: {done.outcome}",
            {"outcome": done.outcome, "request": contact.request_view(state, done.request, done.outcome),
             "agreement": None if done.agreement is None else agreement_json(done.agreement)})


async def _accept(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rid = _str(args, "request_id")
    assert rid is not None
    req, agr = await contact.accept(state, caller, rid, _strings(args, "scopes"), _int(args, "days", 1, 365), via=VIA)
    return (f"Accepted {hexid(req.id)}: agreement {hexid(agr.id)}",
            {"request": contact.request_view(state, req, "accepted"),
             "agreement": agreement_json(agr, "active")})


async def _decline(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rid = _str(args, "request_id")
    assert rid is not None
    req = await contact.decline(state, caller, rid, via=VIA)
    return f"Declined {hexid(req.id)}", {"request": contact.request_view(state, req, "declined")}


async def _list(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    which = _str(args, "which", required=False) or "all"
    requests, agreements = await contact.contacts(state, caller, which)
    return (f"{len(requests)} requests, {len(agreements)} agreements",
            {"requests": [contact.request_view(state, r, s) for r, s in requests],
             "agreements": [agreement_json(a, s) for a, s in agreements]})


async def _revoke(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    aid = _str(args, "agreement_id")
    assert aid is not None
    agr, other = await contact.revoke(state, caller, aid, via=VIA)
    ended = await state.database.read(db.get_agreement, agr.id) or agr
    return (f"Agreement {hexid(agr.id)} with {other} revoked",
            {"agreement": agreement_json(ended, contact.agreement_state(ended, state.now_ms()))})


async def _policy(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    account, now_policy = await contact.policy(state, caller, _str(args, "account", required=False),
                                               _str(args, "policy", required=False), via=VIA)
    return f"{account}: {now_policy}", {"account": account, "policy": now_policy}


# pircan:agents and pircan:profile -------------------------------------------------------------------


async def _agents(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    everyone = args.get("everyone", True)
    if not isinstance(everyone, bool):
        raise Refused("INVALID_PARAMS", "everyone", text="'everyone' is true or false")
    entries = await roster.roster(state, caller, everyone=everyone)
    return f"{len(entries)} accounts", {"agents": [roster.entry_json(e) for e in entries]}


async def _profile_json(state: Pircan, account: str) -> dict[str, Any]:
    shown = (await profile.profiles(state, [account]))[account]
    return {"account": account, "display_name": shown.display_name,
            "skills": [{"name": s, "description": d} for s, d in shown.skills],
            "a2a_endpoint": await profile.endpoint_of(state, account)}


async def _show_profile(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    account = await contact.managed_account(state, caller, _str(args, "account", required=False),
                                            "Only an agent and its owner see its whole profile")
    return f"The profile of {account}", await _profile_json(state, account)


async def _set_profile(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    account = _str(args, "account", required=False)
    name = args.get("display_name")
    if name is not None:
        await profile.set_display_name(state, caller, account, _str(args, "display_name", required=False) or "",
                                       via=VIA)
    skills = args.get("add_skills") or {}
    if not isinstance(skills, dict) or not all(isinstance(v, str) for v in skills.values()):
        raise Refused("INVALID_PARAMS", "add_skills", text="'add_skills' maps a skill to its description")
    for skill, description in skills.items():
        await profile.set_skill(state, caller, account, skill, description, via=VIA)
    for skill in _strings(args, "remove_skills") or []:
        await profile.delete_skill(state, caller, account, skill, via=VIA)
    if "a2a_endpoint" in args:
        await profile.set_endpoint(state, caller, account, _str(args, "a2a_endpoint", required=False) or "",
                                   via=VIA)
    who = await contact.managed_account(state, caller, account, "Only an agent and its owner see its whole profile")
    return f"The profile of {who}", await _profile_json(state, who)


# pircan:inbox -----------------------------------------------------------------------------------


async def _inbox(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    found, unread = await messages.inbox(state, caller, _str(args, "sender", required=False), None,
                                         _int(args, "limit", 1, INBOX_MAX))
    return f"{len(found)} of {unread} unread", {"messages": [message_json(m) for m in found], "unread": unread}


async def _ack(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    ids = _strings(args, "message_ids")
    if ids is None:
        raise Refused("NEED_MORE_PARAMS", "message_ids", text="Name the messages read: 'message_ids'")
    changed = await messages.acknowledge(state, caller, ids)
    return f"{changed} marked read", {"marked_read": changed}


async def _take(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The oldest unread message, marked read at once (INBOX TAKE)."""
    taken = await messages.take(state, caller, _str(args, "sender", required=False))
    if taken is None:
        return "No unread message", {"message": None}
    return f"From {taken.sender}", {"message": {**message_json(taken), "read": True}}


async def _inbox_read(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """One whole message the caller sent or received, its read state unchanged (INBOX READ)."""
    mid = _str(args, "message_id")
    assert mid is not None
    item = await messages.read_message(state, caller, mid)
    return f"From {item.sender}", {"message": message_json(item)}


async def _inbox_history(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The messages with an account, or of a conversation, both directions (INBOX HISTORY)."""
    peer = _str(args, "with")
    assert peer is not None
    limit = _int(args, "limit", 1, messages.HISTORY_MAX) or 50
    what, items = await messages.history(state, caller, peer, limit, _str(args, "before", required=False))
    more = hexid(items[0].id) if len(items) == limit else None
    return f"{len(items)} messages with {what}", {"with": what, "messages": [message_json(m) for m in items],
                                                 "more": more}


async def _inbox_search(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The caller's messages (or an owned agent's) whose body matches ``query`` (INBOX SEARCH)."""
    query = _str(args, "query")
    assert query is not None
    found = await search.search_messages(state, caller, query, account=_str(args, "account", required=False),
                                         limit=_int(args, "limit", 1, search.SEARCH_MAX) or search.SEARCH_PAGE,
                                         before=_str(args, "before", required=False))
    return f"{len(found.messages)} found", {"account": found.account,
                                            "messages": [message_json(m) for m in found.messages],
                                            "more": found.more}


async def _wait(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The next thing for the caller, as MCP wait_for_messages answers (``kinds``, ``mode``), waiting
    up to ``wait_ms`` (at most ``pircan.a2a_wait_ms``). A message stays unread until acknowledged
    (``ack``), so an answer that never reached the caller (a client that gave up) loses nothing; a
    task change is seen; an event (a request, a decision, an agreement change) is told, not consumed."""
    sender = _str(args, "sender", required=False)
    wait_ms = min(_int(args, "wait_ms", 1, 3_600_000) or state.cfg.a2a_wait_ms, state.cfg.a2a_wait_ms)
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[Any] = loop.create_future()

    def got(item: Any) -> None:
        if not outcome.done():
            outcome.set_result(item)

    def ended(kind: str, detail: str) -> None:
        if not outcome.done():
            outcome.set_result((kind, detail))

    waiter = await waits.start_wait(state, caller, None if sender is None else [sender], wait_ms, got, ended,
                                    kinds=waits.kinds_of(_strings(args, "kinds")),
                                    mode=_str(args, "mode", required=False) or "oldest",
                                    tasks=_strings(args, "tasks"))
    try:
        item = await outcome
    finally:
        if not outcome.done():  # the request was cancelled: the wait ends with it
            state.finish_wait(waiter, "cancelled", "the request ended")
    if isinstance(item, tuple):
        detail = {"detail": item[1]} if item[1] else {}  # who left (gone), why nothing can come (nothing)
        return f"Nothing arrived ({item[0]})", {"message": None, "ended": item[0], **detail}
    if isinstance(item, StoredMessage):
        await state.database.write(db.unread_again, item.id)  # the wait took it: unread until acknowledged
        return f"From {item.sender}", {"message": {**message_json(item), "read": False}}
    if isinstance(item, WaitEvent):
        return f"Event {item.kind} {item.ref}", {"message": None, "event": event_json(item)}
    return f"Task {hexid(item.id)} changed", {"message": None, "task_id": hexid(item.id), "state": item.state}


async def _broadcast(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """SEND * and MCP broadcast_message: the body to every live agent of the caller's message agreements."""
    body = args.get("body")
    if not isinstance(body, str):
        raise Refused("NEED_MORE_PARAMS", "body", text="The call needs 'body', the message's text")
    done = await broadcast.broadcast(state, caller, body, key=_str(args, "idempotency_key", required=False),
                                     via=VIA)
    return (f"Sent to {done.sent}, refused for {done.refused}, {len(done.skipped)} not live and skipped",
            broadcast.broadcast_json(done))


# pircan:resources and pircan:introspect ---------------------------------------------------------


async def _resources(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    owner = _str(args, "owner", required=False)
    found = (await profile.readable_resources(state, caller) if owner is None
             else await profile.list_resources(state, caller, owner))
    return f"{len(found)} resources", {"resources": [resource_json(r, with_body=False) for r in found]}


async def _read(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    owner, name = _str(args, "owner"), _str(args, "name")
    assert owner is not None and name is not None
    res = await profile.read_resource(state, caller, owner, name)
    return f"{res.account}/{res.name}", {"resource": resource_json(res)}


async def _put(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name, body = _str(args, "name"), args.get("body")
    assert name is not None
    if not isinstance(body, str):
        raise Refused("NEED_MORE_PARAMS", "body", text="The call needs 'body', the resource's text")
    res = await profile.put_resource(state, caller, _str(args, "account", required=False), name,
                                     _str(args, "content_type", required=False) or "text", body, via=VIA)
    return f"{res.account}/{res.name} published", {"resource": resource_json(res, with_body=False)}


async def _delete(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = _str(args, "name")
    assert name is not None
    await profile.delete_resource(state, caller, _str(args, "account", required=False), name, via=VIA)
    return f"{name} withdrawn", {"deleted": name}


async def _introspect(state: Pircan, caller: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    token = _str(args, "token")
    assert token is not None
    found = await intros.introspect(state, caller, token)
    return f"The token is {found['status']}", found


SKILLS: dict[str, Skill] = {s.id: s for s in (
    Skill("pircan:agents", "The roster", "The network's accounts you may find: action 'list' (data 'everyone': "
          "false for only those you own or have agreements with), as IRC AGENTS and MCP list_agents.",
          {"list": _agents}),
    Skill("pircan:contact", "Agreements", "Ask for, decide, list and end agreements, as IRC CONTACT: action "
          "'request' (agent, scopes, days, purpose), 'accept' (request_id; scopes and days may be fewer), "
          "'decline' (request_id), 'list' (which: all, requests, agreements), 'revoke' (agreement_id), 'policy' "
          "(policy to set it; account for an agent you own).",
          {"request": _request, "accept": _accept, "decline": _decline, "list": _list, "revoke": _revoke,
           "policy": _policy}),
    Skill("pircan:profile", "Your profile", "What the roster shows of you and where your own A2A server "
          "listens, as IRC PROFILE and MCP set_profile: action 'show', or 'set' (display_name, add_skills: "
          "{skill: description}, remove_skills, a2a_endpoint: a URL, or '' to withdraw it; account for an "
          "agent you own).",
          {"show": _show_profile, "set": _set_profile}),
    Skill("pircan:inbox", "Your inbox (the pull)", "Messages and events for you, for an agent without an endpoint "
          "of its own: action 'list' (the oldest unread, unchanged; sender, limit), 'wait' (the next thing for "
          "you, waiting up to wait_ms, at most pircan.a2a_wait_ms: a message, which stays unread; a task change; "
          "or an event such as a contact request, a decision or an agreement change; kinds: the event kinds "
          "wanted, mode: oldest or new, sender, tasks: task ids to watch), 'ack' "
          "(message_ids: mark them read once handled), 'take' (the oldest unread, marked read at once), "
          "'read' (message_id: one whole message you sent or received, its read state unchanged), 'history' "
          "(with: an account or a conversation id; both directions, the newest limit, oldest first; before: "
          "the 'more' of the page before), 'search' (query; limit, before, account: an agent you own), as "
          "IRC INBOX READ, HISTORY and SEARCH.",
          {"list": _inbox, "wait": _wait, "ack": _ack, "take": _take, "read": _inbox_read,
           "history": _inbox_history, "search": _inbox_search}),
    Skill("pircan:broadcast", "Broadcast", "One direct message to every agent you hold an active agreement "
          "with the message scope with and that is live now (running or idle), as IRC SEND * and MCP "
          "broadcast_message: action 'send' (body; idempotency_key). Each recipient is a message of its "
          "own under its own agreement: per recipient a receipt or a refusal (status 'refused', error); "
          "parked and offline agents are skipped (a message by name wakes one); nobody live is sent 0, "
          "not an error.",
          {"send": _broadcast}),
    Skill("pircan:resources", "Resources", "Resources, as IRC RESOURCE and MCP's resources: action 'list' "
          "(owner; without it every one you may read), 'read' (owner, name), 'put' (name, body, content_type: text or json; "
          "account for an agent you own), 'delete' (name). Reading another's needs resource:read toward it.",
          {"list": _resources, "read": _read, "put": _put, "delete": _delete}),
    Skill("pircan:introspect", "Intro token introspection", "Is an intro token valid now (RFC 7662's answer: "
          "active; status valid, revoked, expired or unknown; its claims and the agreement's parties, scopes and "
          "end): action 'check' (token), for the token's requester or target. Also POST /a2a/introspect.",
          {"check": _introspect}),
    CHANNELS,
)}


async def run_skill(state: Pircan, caller: str, skill_id: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Call a network skill; (a line of text, the result's object)."""
    skill = SKILLS[skill_id]
    action = args.get("action")
    if action is None and len(skill.actions) == 1:
        action = next(iter(skill.actions))
    handler = skill.actions.get(action) if isinstance(action, str) else None
    if handler is None:
        known = ", ".join(skill.actions)
        raise Refused("INVALID_PARAMS", "action", text=f"{skill_id} takes the actions {known} (data 'action')")
    return await handler(state, caller, args)
