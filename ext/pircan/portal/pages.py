"""The portal's pages and forms: each a thin adapter over ``ext/pircan/service``.

A GET renders what the service functions return; a POST checks the CSRF token, calls one service
function with ``via="portal"`` (so its audit row says "by owner, through the portal"), keeps the
outcome as a message for the next page, and redirects (303) to the page it came from. No rule of
the network lives here: a refusal is the service's ``Refused``, shown with its code.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from ext.pircan import rules
from ext.pircan.ids import hexid, parse_id
from ext.pircan.portal.sessions import Session, same_token
from ext.pircan.portal.web import SESSION_COOKIE, SIGNIN_COOKIE, Form, NotFound, Web
from ext.pircan.service import contact, oversight, owner, profile, roster, search, webhooks
from ext.pircan.service.refusals import Refused, refuse_nul
from ext.pircan.state import Pircan

__all__ = ["POLICY_TEXT", "Pages"]

VIA = "portal"
POLICY_TEXT = {
    "agent-decides": "The agent decides requests itself (you may still decide them here).",
    "owner-decides": "Only you decide, here in the portal; the agent cannot accept or decline.",
    "auto-accept": "Requests for the message scope are accepted at once (with that scope only).",
    "deny": "Every request is refused at once.",
}
DEAD_SHOWN = 50  # the newest dead letters on the webhook page
# a message's receipt (its delivery word, service.waits.delivery_word) as the page says it
RECEIPTS = {
    "woken": "it was waiting and took it",
    "delivered": "it is online and was told",
    "revived": "it was parked and is being started",
    "pushed": "handed to its webhook or A2A endpoint",
    "queued": "queued until it looks",
}
BODY_MAX = 60_000  # characters a message written in the portal may have (the network allows 60,000 bytes)
Handler = Callable[..., Awaitable[Response]]


def signed_in(fn: Handler) -> Handler:
    """A page for a signed-in person: the session (else to the sign-in page); for a POST also
    the form, refused with 403 without the session's CSRF token. ``NotFound`` becomes 404, and a
    ``Refused`` of a POST a message on the page it redirects to."""

    @functools.wraps(fn)
    async def endpoint(self: Pages, request: Request) -> Response:
        web = self.web
        session = web.session(request)
        if session is not None and not await self.still_allowed(session):
            session = None
        if session is None:
            return web.redirect(request, "/signin" + _come_back(request))
        form: Form | None = None
        if request.method == "POST":
            form = await web.form(request)
            if not session.check_csrf(form.get("csrf")):
                return web.csrf_refused(request, session)
        try:
            refuse_nul(_brought(request, form))
            if form is None:
                return await fn(self, request, session)
            return await fn(self, request, session, form)
        except NotFound:
            return web.not_found(request, session)
        except Refused as exc:
            if form is None:  # a page's own refusals are on the page; this is the address's
                return web.render(request, "error.html", session, 400, title="Refused", text=web.refusal_text(exc))
            session.notices.append(("error", web.refusal_text(exc)))
            # the page the form was on, once the handler knows it (a refusal before: the first page)
            return web.redirect(request, getattr(request.state, "back", "/"))

    return endpoint


def _brought(request: Request, form: Form | None) -> list[dict[str, str]]:
    """What a request brought, field by field (for ``refuse_nul``): the address's parts, its query
    and the form."""
    pairs = [*request.path_params.items(), *request.query_params.multi_items(), *(form.pairs if form else [])]
    return [{key: value} for key, value in pairs]


def _come_back(request: Request) -> str:
    """``?next=<the page>`` for a signed-out GET of a page other than the first: sign-in returns there."""
    path = request.url.path.removeprefix(Web.base(request))
    if request.method != "GET" or path in ("", "/"):
        return ""
    if request.url.query:
        path += "?" + request.url.query
    return "?" + urlencode({"next": path})


def _next_page(text: str) -> str:
    """A page of the portal to go to after sign-in: a path of its own, nothing elsewhere."""
    if not text.startswith("/") or text.startswith("//") or "\\" in text or any(ord(c) < 33 for c in text):
        return "/"
    return "/" if text.split("?", 1)[0] in ("/signin", "/signout") else text


def _day_ms(text: str, end: bool) -> int | None:
    """``YYYY-MM-DD`` (UTC) as ms: its first millisecond, or (``end``) the first of the next day."""
    try:
        day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(day.timestamp() * 1000) + (86_400_000 if end else 0)


class Pages:
    def __init__(self, state: Pircan, web: Web) -> None:
        self.state = state
        self.api = state.api
        self.web = web

    async def still_allowed(self, session: Session) -> bool:
        """The account still exists, is a person's and is not suspended (else the session ends)."""
        row: Any = await self.api.get_account(session.account)
        if row is None or row.kind != "person" or row.suspended:
            self.web.sessions.end(session)
            return False
        return True

    async def agent(self, session: Session, request: Request) -> Any:
        """The agent the URL names, if it is the signed-in person's (else 404, as for no agent)."""
        try:
            return await owner.owned_agent(self.state, session.account, request.path_params["name"])
        except Refused:
            raise NotFound() from None

    def ok(self, session: Session, text: str) -> None:
        session.notices.append(("ok", text))

    # sign-in -----------------------------------------------------------------------------------

    async def signin_page(self, request: Request, error: str | None = None, status: int = 200,
                          name: str = "", next_page: str | None = None) -> Response:
        web = self.web
        if next_page is None:
            next_page = _next_page(request.query_params.get("next", "/"))
        if error is None and web.session(request) is not None:
            return web.redirect(request, next_page)
        token = web.new_signin_token()
        response = web.render(request, "signin.html", None, status, title="Sign in", csrf=token, error=error,
                              name=name, next_page=next_page)
        web.set_cookie(request, response, SIGNIN_COOKIE, token, 3600)
        return response

    async def signin(self, request: Request) -> Response:
        web = self.web
        form = await web.form(request)
        expected = request.cookies.get(SIGNIN_COOKIE, "")
        token = form.get("csrf")
        if not expected or not same_token(expected, token):
            return web.csrf_refused(request, None)
        try:
            refuse_nul(_brought(request, form))
        except Refused as exc:
            return await self.signin_page(request, web.refusal_text(exc), 400, "", _next_page("/"))
        name, password = form.get("name").strip(), form.get("password")
        next_page = _next_page(form.get("next", "/"))
        ip = request.client.host if request.client is not None else "?"
        checked: Any = await self.api.check_password(ip, name, password, "portal")
        if isinstance(checked, str):
            return await self.signin_page(request, checked, 401, name, next_page)
        if checked.kind != "person":
            return await self.signin_page(request, "Agents do not sign in here; their owner does", 403, name,
                                          next_page)
        session = web.sessions.new(checked.folded, checked.name)
        self.api.log.info("portal sign-in account=%s ip=%s", checked.folded, ip)
        response = web.redirect(request, next_page)
        web.set_cookie(request, response, SESSION_COOKIE, session.id, None)
        web.clear_cookie(request, response, SIGNIN_COOKIE)
        return response

    @signed_in
    async def signout(self, request: Request, session: Session, form: Form) -> Response:
        self.web.sessions.end(session)
        response = self.web.redirect(request, "/signin")
        self.web.clear_cookie(request, response, SESSION_COOKIE)
        return response

    # my agents ---------------------------------------------------------------------------------

    @signed_in
    async def agents(self, request: Request, session: Session) -> Response:
        state, me = self.state, session.account
        agents = await owner.agents_of(state, me)
        entries = {e.name: e for e in await roster.roster(state, me) if e.relation == "owned"}
        requests, _ = await contact.contacts(state, me, "requests")
        pending = Counter(r.target for r, now_state in requests if now_state == "pending")
        rows = []
        for agent in agents:
            entry = entries.get(agent.folded)
            _, policy_now = await contact.policy(state, me, agent.folded)
            rows.append({"agent": agent, "status": "suspended" if agent.suspended else
                         (entry.status if entry else "offline"), "unread": entry.unread if entry else 0,
                         "pending": pending[agent.folded], "policy": policy_now,
                         "display": entry.display_name if entry else ""})
        return self.web.render(request, "agents.html", session, title="My agents", nav="agents", rows=rows)

    @signed_in
    async def create_agent(self, request: Request, session: Session, form: Form) -> Response:
        request.state.back = "/"
        name, password = await roster.create_agent(self.state, session.account, "person",
                                                   form.get("name").strip(), via=VIA)
        session.secret = (f"The password of {name}", password)
        self.ok(session, f"Agent {name} created.")
        return self.web.redirect(request, f"/agents/{self.web.env.filters['q'](name)}")

    # one agent ---------------------------------------------------------------------------------

    def _back(self, request: Request, agent: Any, page: str = "") -> str:
        back = f"/agents/{self.web.env.filters['q'](agent.name)}{page}"
        request.state.back = back
        return back

    async def _agent_view(self, session: Session, agent: Any) -> dict[str, Any]:
        state, me = self.state, session.account
        _, policy_now = await contact.policy(state, me, agent.folded)
        requests, agreements = await contact.contacts(state, me)
        entry = next((e for e in await roster.roster(state, me) if e.name == agent.folded), None)
        now = state.now_ms()
        incoming = [r for r, s in requests if r.target == agent.folded and s == "pending"]
        return {
            "agent": agent, "policy": policy_now, "policies": POLICY_TEXT,
            "agent_status": "suspended" if agent.suspended else (entry.status if entry else "offline"),
            "unread": entry.unread if entry else 0,
            "incoming": incoming, "requesters": await self._requesters([r.requester for r in incoming]),
            "outgoing": [r for r, s in requests if r.requester == agent.folded and s == "pending"],
            "agreements": [a for a, s in agreements if agent.folded in (a.requester, a.target) and s == "active"],
            "expires": lambda r: r.created_at + rules.Limits.request_ttl_ms, "now": now,
        }

    async def _requesters(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """What a person judges a request by: the requester's kind, owner, display name and skills
        (what every roster shows of it)."""
        public = await profile.profiles(self.state, sorted(set(names)))
        out: dict[str, dict[str, Any]] = {}
        for name, shown in public.items():
            row: Any = await self.api.get_account(name)
            out[name] = {"kind": row.kind if row is not None else "gone", "owner": row.owner if row is not None else None,
                         "display": shown.display_name, "skills": shown.skills}
        return out

    @signed_in
    async def agent_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        view = await self._agent_view(session, agent)
        return self.web.render(request, "agent.html", session, title=agent.name, nav="agents", tab="contact", **view)

    @signed_in
    async def set_policy(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent)
        _, now_policy = await contact.policy(self.state, session.account, agent.folded, form.get("policy"), via=VIA)
        self.ok(session, f"The contact policy of {agent.name} is now {now_policy}.")
        return self.web.redirect(request, back)

    @signed_in
    async def accept(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent)
        days = form.get("days").strip() or None
        req, agreement = await contact.accept(self.state, session.account, request.path_params["request"],
                                              form.all("scope"), days, via=VIA)
        self.ok(session, f"Accepted the request of {req.requester}: agreement {hexid(agreement.id)} grants "
                         f"{', '.join(agreement.scopes)} until {self.web.env.filters['when'](agreement.expires_at)}.")
        return self.web.redirect(request, back)

    @signed_in
    async def decline(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent)
        req = await contact.decline(self.state, session.account, request.path_params["request"], via=VIA)
        self.ok(session, f"Declined the request of {req.requester}.")
        return self.web.redirect(request, back)

    @signed_in
    async def revoke(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent)
        agreement, other = await contact.revoke(self.state, session.account, request.path_params["agreement"],
                                                via=VIA)
        self.ok(session, f"Revoked agreement {hexid(agreement.id)} with {other}.")
        return self.web.redirect(request, back)

    def _confirm(self, request: Request, session: Session, agent: Any, title: str, action: str, button: str,
                 facts: list[str], back: str) -> Response:
        """A page that asks before something that cannot be undone: a form to ``action`` and a way back."""
        here = f"/agents/{self.web.env.filters['q'](agent.name)}"
        return self.web.render(request, "confirm.html", session, title=title, nav="agents", agent=agent,
                               action=here + action, button=button, facts=facts, back=here + back)

    @signed_in
    async def revoke_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        view = await self._agent_view(session, agent)
        ident = parse_id(request.path_params["agreement"])
        agreement = next((a for a in view["agreements"] if a.id == ident), None)
        if agreement is None:
            raise NotFound()
        other, ends = agreement.other(agent.folded), self.web.env.filters["when"](agreement.expires_at)
        facts = [
            (f"{other} and {agent.name} lose {', '.join(agreement.scopes)} at once, on every transport; "
             f"it would have ended {ends}."),
            f"{other} is told. Their open tasks under it are canceled.",
            "Talking again takes a new contact request and a new decision.",
        ]
        return self._confirm(request, session, agent, f"Revoke the agreement with {other}?",
                             f"/agreements/{hexid(agreement.id)}/revoke", f"Revoke the agreement with {other}", facts, "")

    @signed_in
    async def revoke_token_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        label = request.path_params["label"]
        token = next((t for t in await owner.tokens_of(self.state, session.account, agent.name) if t.name == label), None)
        if token is None:
            raise NotFound()
        facts = [
            (f"Whatever uses the token {label} is refused from its next request on, and its requests in flight "
             "are canceled."),
            "A revoked token cannot be brought back: make a new one and put it where the old one was.",
        ]
        return self._confirm(request, session, agent, f"Revoke the token {label} of {agent.name}?",
                             f"/tokens/{self.web.env.filters['q'](label)}/revoke", f"Revoke {label}", facts, "/tokens")

    @signed_in
    async def password_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        facts = [
            (f"The password {agent.name} logs in with now stops working at its next login; connections already "
             "logged in stay."),
            "The new one is shown once, on the next page: put it where the agent reads it.",
            "Its tokens are not changed.",
        ]
        return self._confirm(request, session, agent, f"Give {agent.name} a new password?", "/password",
                             "Make a new password", facts, "")

    async def _hook(self, session: Session, agent: Any) -> webhooks.Status:
        try:
            return await webhooks.show(self.state, session.account, agent.folded)
        except Refused:
            raise NotFound() from None

    @signed_in
    async def rotate_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        hook = await self._hook(session, agent)
        facts = [
            f"Deliveries to {hook.endpoint.url} are signed with a new secret, shown once on the next page.",
            ("For 24 hours they carry a signature with the old secret too, so the receiver can switch over; "
             "after that the old secret is gone for good."),
        ]
        return self._confirm(request, session, agent, f"A new webhook secret for {agent.name}?", "/webhook/rotate",
                             "Make a new secret", facts, "/webhook")

    @signed_in
    async def clear_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        hook = await self._hook(session, agent)
        pending, dead = hook.pending, hook.dead
        facts = [
            f"Nothing more is posted to {hook.endpoint.url}.",
            (f"Its {pending} pending deliver{'y is' if pending == 1 else 'ies are'} dropped; the events stay in "
             f"{agent.name}'s inbox, and its {dead} dead letter{' stays' if dead == 1 else 's stay'}."),
            "Its secret is gone: a webhook set again gets a new one.",
        ]
        return self._confirm(request, session, agent, f"Remove the webhook of {agent.name}?", "/webhook/clear",
                             "Remove the webhook", facts, "/webhook")

    @signed_in
    async def suspend(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent)
        suspended = form.get("suspend") == "1"
        await owner.set_suspended(self.state, session.account, agent.name, suspended, via=VIA)
        self.ok(session, f"{agent.name} is {'suspended' if suspended else 'active again'}.")
        return self.web.redirect(request, back)

    @signed_in
    async def reset_password(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent)
        password = await owner.reset_password(self.state, session.account, agent.name, via=VIA)
        session.secret = (f"The new password of {agent.name}", password)
        return self.web.redirect(request, back)

    @signed_in
    async def delete_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        view = await self._agent_view(session, agent)
        tokens = await owner.tokens_of(self.state, session.account, agent.name)
        resources = await profile.list_resources(self.state, session.account, agent.folded)
        skills = (await profile.profiles(self.state, [agent.folded]))[agent.folded].skills
        try:
            hook: webhooks.Status | None = await webhooks.show(self.state, session.account, agent.folded)
        except Refused:
            hook = None
        return self.web.render(request, "delete.html", session, title=f"Delete {agent.name}", nav="agents",
                               tokens=tokens, resources=resources, skills=skills, hook=hook, **view)

    @signed_in
    async def delete(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        self._back(request, agent, "/delete")
        if form.get("confirm").strip() != agent.name:
            raise Refused("NOT_CONFIRMED", text=f"Type the name {agent.name} to confirm the deletion")
        name = await owner.delete_agent(self.state, session.account, agent.name, via=VIA)
        self.ok(session, f"Agent {name} deleted.")
        return self.web.redirect(request, "/")

    # messages: the owner's oversight -----------------------------------------------------------

    @signed_in
    async def messages_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        state, me, query = self.state, session.account, request.query_params
        words, problems = query.get("q", "").strip(), []
        found: search.Found | None = None
        threads: oversight.Threads | None = None
        try:
            if words:
                found = await search.search_messages(state, me, words, account=agent.folded,
                                                     before=query.get("before") or None)
            else:
                threads = await oversight.conversations(state, me, agent.folded, before=query.get("older") or None)
        except Refused as exc:
            problems.append(self.web.refusal_text(exc))
        tasks = await oversight.tasks_of(state, me, agent.folded)
        return self.web.render(request, "messages.html", session, title=f"Messages of {agent.name}", nav="agents",
                               tab="messages", agent=agent, words=words, found=found, threads=threads,
                               problems=problems, tasks=tasks, body_max=BODY_MAX)

    @signed_in
    async def conversation_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        try:
            whole = await oversight.thread(self.state, session.account, agent.folded,
                                           request.path_params["conversation"])
        except Refused:
            raise NotFound() from None
        return self.web.render(request, "conversation.html", session, title=f"A conversation of {agent.name}",
                               nav="agents", tab="messages", agent=agent, thread=whole, body_max=BODY_MAX)

    @signed_in
    async def send_message(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        reply_to = form.get("in_reply_to").strip()
        conversation = parse_id(form.get("conversation"))
        back = self._back(request, agent, f"/conversations/{hexid(conversation)}" if conversation else "/messages")
        sent = await oversight.send_to_agent(self.state, session.account, agent.folded,
                                             form.get("body").replace("\r\n", "\n"), reply_to or None, via=VIA)
        self.ok(session, f"Message {hexid(sent.message.id)} sent to {agent.name} "
                         f"({RECEIPTS.get(sent.status, sent.status)}).")
        return self.web.redirect(request, back)

    # tokens ------------------------------------------------------------------------------------

    @signed_in
    async def tokens(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        rows = await owner.tokens_of(self.state, session.account, agent.name)
        return self.web.render(request, "tokens.html", session, title=f"Tokens of {agent.name}", nav="agents",
                               tab="tokens", agent=agent, tokens=rows, mcp_url=self.api.http_base_url + "/mcp")

    @signed_in
    async def add_token(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/tokens")
        row, text = await owner.add_token(self.state, session.account, agent.name, form.get("label").strip(), via=VIA)
        session.secret = (f"Token {row.name} of {agent.name}", text)
        return self.web.redirect(request, back)

    @signed_in
    async def revoke_token(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/tokens")
        label = request.path_params["label"]
        await owner.revoke_token(self.state, session.account, agent.name, label, via=VIA)
        self.ok(session, f"Token {label} revoked: it is refused from its next request on.")
        return self.web.redirect(request, back)

    # profile: display name, skills, resources ---------------------------------------------------

    @signed_in
    async def profile_page(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        public = (await profile.profiles(self.state, [agent.folded]))[agent.folded]
        resources = await profile.list_resources(self.state, session.account, agent.folded)
        return self.web.render(request, "profile.html", session, title=f"Profile of {agent.name}", nav="agents",
                               tab="profile", agent=agent, profile=public, resources=resources)

    @signed_in
    async def set_name(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/profile")
        _, name = await profile.set_display_name(self.state, session.account, agent.folded, form.get("display"),
                                                 via=VIA)
        self.ok(session, f"Display name set to {name}." if name else "Display name removed.")
        return self.web.redirect(request, back)

    @signed_in
    async def set_skill(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/profile")
        _, skill = await profile.set_skill(self.state, session.account, agent.folded, form.get("skill").strip(),
                                           form.get("description"), via=VIA)
        self.ok(session, f"Skill {skill} saved.")
        return self.web.redirect(request, back)

    @signed_in
    async def delete_skill(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/profile")
        _, skill = await profile.delete_skill(self.state, session.account, agent.folded,
                                              request.path_params["skill"], via=VIA)
        self.ok(session, f"Skill {skill} withdrawn.")
        return self.web.redirect(request, back)

    @signed_in
    async def put_resource(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/profile")
        res = await profile.put_resource(self.state, session.account, agent.folded, form.get("resource").strip(),
                                         form.get("type", "text"), form.get("body").replace("\r\n", "\n"), via=VIA)
        self.ok(session, f"Resource {res.name} published.")
        return self.web.redirect(request, back)

    @signed_in
    async def delete_resource(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/profile")
        name = await profile.delete_resource(self.state, session.account, agent.folded,
                                             request.path_params["resource"], via=VIA)
        self.ok(session, f"Resource {name} deleted.")
        return self.web.redirect(request, back)

    # webhook -------------------------------------------------------------------------------------

    @signed_in
    async def webhook(self, request: Request, session: Session) -> Response:
        agent = await self.agent(session, request)
        try:
            status: webhooks.Status | None = await webhooks.show(self.state, session.account, agent.folded)
        except Refused as exc:
            if exc.code != "NO_WEBHOOK":
                raise
            status = None
        _, letters = await webhooks.dead_letters(self.state, session.account, agent.folded, DEAD_SHOWN)
        return self.web.render(request, "webhook.html", session, title=f"Webhook of {agent.name}", nav="agents",
                               tab="webhook", agent=agent, hook=status, letters=list(reversed(letters)),
                               dead_shown=DEAD_SHOWN)

    @signed_in
    async def set_webhook(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/webhook")
        endpoint, secret = await webhooks.set_webhook(self.state, session.account, form.get("url").strip(),
                                                      agent.folded, via=VIA)
        if secret is not None:
            session.secret = (f"The webhook secret of {agent.name}", secret)
        self.ok(session, f"Webhook set to {endpoint.url}." + (" Its secret is unchanged." if secret is None else ""))
        return self.web.redirect(request, back)

    @signed_in
    async def rotate_webhook(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/webhook")
        _, secret = await webhooks.rotate(self.state, session.account, agent.folded, via=VIA)
        session.secret = (f"The new webhook secret of {agent.name}", secret)
        self.ok(session, "New secret made; the old one also signs deliveries for 24 hours.")
        return self.web.redirect(request, back)

    @signed_in
    async def test_webhook(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/webhook")
        done = await webhooks.test(self.state, session.account, agent.folded)
        out = done.outcome
        if out.ok:
            self.ok(session, f"Test event {done.delivery_id} answered HTTP {out.status} in {out.elapsed_ms} ms.")
        else:
            answer = out.error or (f"HTTP {out.status}" if out.status is not None else "no answer")
            session.notices.append(("error", f"Test event {done.delivery_id} failed after {out.elapsed_ms} ms: {answer}."))
        return self.web.redirect(request, back)

    @signed_in
    async def clear_webhook(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/webhook")
        _, dropped = await webhooks.clear(self.state, session.account, agent.folded, via=VIA)
        self.ok(session, f"Webhook removed; {dropped} pending deliver{'y' if dropped == 1 else 'ies'} dropped.")
        return self.web.redirect(request, back)

    @signed_in
    async def replay(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.agent(session, request)
        back = self._back(request, agent, "/webhook")
        _, count = await webhooks.replay(self.state, session.account, form.get("which").strip(), agent.folded,
                                         via=VIA)
        self.ok(session, f"{count} dead letter{'' if count == 1 else 's'} queued again.")
        return self.web.redirect(request, back)

    # audit log -----------------------------------------------------------------------------------

    @signed_in
    async def audit(self, request: Request, session: Session) -> Response:
        state, me, query = self.state, session.account, request.query_params
        agents = await owner.agents_of(state, me)
        agent_name = query.get("agent", "") or None
        family = query.get("kind", "") or None
        since_text, until_text = query.get("from", ""), query.get("to", "")
        problems = []
        since = _day_ms(since_text, False) if since_text else 0
        until = _day_ms(until_text, True) if until_text else (1 << 63) - 1
        if since is None or until is None:
            problems.append("Dates are written YYYY-MM-DD.")
        before = query.get("before", "")
        before_id = parse_id(before) if before else None
        if before and before_id is None:
            problems.append("That is not an entry id.")
        entries: list[Any] = []
        if not problems:
            try:
                entries = await owner.audit_search(state, me, agent_name, family, since or 0,
                                                   until or (1 << 63) - 1, 100, before_id)
            except Refused as exc:
                if exc.code == "NO_SUCH_ACCOUNT":
                    raise NotFound() from None
                problems.append(self.web.refusal_text(exc))
        more = dict(query)
        if len(entries) == 100:
            more["before"] = hexid(entries[-1].id)
        return self.web.render(request, "audit.html", session, title="Audit log", nav="audit", agents=agents,
                               entries=entries, families=owner.AUDIT_FAMILIES, chosen_agent=agent_name or "",
                               chosen_kind=family or "", since=since_text, until=until_text, problems=problems,
                               more=more if len(entries) == 100 else None)

    # my account ---------------------------------------------------------------------------------

    @signed_in
    async def account(self, request: Request, session: Session) -> Response:
        row: Any = await self.api.get_account(session.account)
        return self.web.render(request, "account.html", session, title="My account", nav="account", account=row,
                               min_length=self.api.min_password_length)

    @signed_in
    async def change_password(self, request: Request, session: Session, form: Form) -> Response:
        request.state.back = "/account"
        new = form.get("new")
        if new != form.get("repeat"):
            raise Refused("INVALID_PARAMS", text="The two new passwords differ")
        ip = request.client.host if request.client is not None else "?"
        await owner.change_password(self.state, session.account, ip, form.get("current"), new, via=VIA)
        ended = self.web.sessions.end_account(session.account, keep=session)
        self.ok(session, "Password changed." + (f" {ended} other session(s) signed out." if ended else ""))
        return self.web.redirect(request, "/account")
