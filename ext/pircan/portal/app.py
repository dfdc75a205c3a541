"""The owner portal's ASGI application (``Portal``), built with the first request to /portal
(``ext/pircan/lazy.py``). See ``__init__.py`` and docs/portal.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ext.pircan.lazy import Built
from ext.pircan.portal.host import HostPages
from ext.pircan.portal.live import PER_SESSION, Streams
from ext.pircan.portal.pages import Pages
from ext.pircan.portal.sessions import Sessions
from ext.pircan.portal.web import Web
from ext.pircan.service import owner
from ext.pircan.state import Pircan

__all__ = ["Portal", "build"]

HERE = Path(__file__).resolve().parent


class _Asgi:
    """A bound method served as a raw ASGI app (a Route calls a plain method with a Request)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await self.fn(scope, receive, send)


class Portal:
    """The ASGI application mounted at ``PATH``."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.sessions = Sessions(state.api.now, lambda: state.cfg.portal_session_minutes * 60.0)
        self.web = Web(self.sessions)
        self.pages = Pages(state, self.web)
        self.streams = Streams()
        p = self.pages
        get, post = ["GET"], ["POST"]
        agent = "/agents/{name}"
        routes = [
            Route("/", p.agents, methods=get),
            Route("/signin", p.signin_page, methods=get),
            Route("/signin", p.signin, methods=post),
            Route("/signout", p.signout, methods=post),
            Route("/agents", p.create_agent, methods=post),
            Route(agent, p.agent_page, methods=get),
            Route(agent + "/policy", p.set_policy, methods=post),
            Route(agent + "/requests/{request}/accept", p.accept, methods=post),
            Route(agent + "/requests/{request}/decline", p.decline, methods=post),
            Route(agent + "/agreements/{agreement}/revoke", p.revoke_page, methods=get),
            Route(agent + "/agreements/{agreement}/revoke", p.revoke, methods=post),
            Route(agent + "/suspend", p.suspend, methods=post),
            Route(agent + "/password", p.password_page, methods=get),
            Route(agent + "/password", p.reset_password, methods=post),
            Route(agent + "/delete", p.delete_page, methods=get),
            Route(agent + "/delete", p.delete, methods=post),
            Route(agent + "/messages", p.messages_page, methods=get),
            Route(agent + "/messages", p.send_message, methods=post),
            Route(agent + "/conversations/{conversation}", p.conversation_page, methods=get),
            Route(agent + "/tokens", p.tokens, methods=get),
            Route(agent + "/tokens", p.add_token, methods=post),
            Route(agent + "/tokens/{label}/revoke", p.revoke_token_page, methods=get),
            Route(agent + "/tokens/{label}/revoke", p.revoke_token, methods=post),
            Route(agent + "/profile", p.profile_page, methods=get),
            Route(agent + "/profile/name", p.set_name, methods=post),
            Route(agent + "/profile/skills", p.set_skill, methods=post),
            Route(agent + "/profile/skills/{skill}/delete", p.delete_skill, methods=post),
            Route(agent + "/profile/resources", p.put_resource, methods=post),
            Route(agent + "/profile/resources/{resource}/delete", p.delete_resource, methods=post),
            Route(agent + "/webhook", p.webhook, methods=get),
            Route(agent + "/webhook", p.set_webhook, methods=post),
            Route(agent + "/webhook/rotate", p.rotate_page, methods=get),
            Route(agent + "/webhook/rotate", p.rotate_webhook, methods=post),
            Route(agent + "/webhook/test", p.test_webhook, methods=post),
            Route(agent + "/webhook/clear", p.clear_page, methods=get),
            Route(agent + "/webhook/clear", p.clear_webhook, methods=post),
            Route(agent + "/webhook/replay", p.replay, methods=post),
            *HostPages(p).routes(agent),
            Route("/audit", p.audit, methods=get),
            Route("/account", p.account, methods=get),
            Route("/account/password", p.change_password, methods=post),
            Route("/events", _Asgi(self.events), methods=get),
            Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
        ]
        app = Starlette(routes=routes)
        app.add_exception_handler(404, self._not_found)
        app.add_exception_handler(405, self._not_found)
        self.app = Web.secured(app)
        state.event_hooks.append(self.streams.on_event)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    async def _not_found(self, request: Request, exc: Exception) -> Response:
        return self.web.not_found(request, self.web.session(request))

    async def events(self, scope: dict, receive: Any, send: Any) -> None:
        """The page's live updates (server-sent events), for the signed-in person and its agents."""
        request = Request(scope, receive)
        session = self.web.session(request)
        refusal: Response | None = None
        if session is None or not await self.pages.still_allowed(session):
            refusal = Response("Sign in first\n", status_code=401, media_type="text/plain")
        elif session.streams >= PER_SESSION:
            refusal = Response("Too many open pages\n", status_code=429, media_type="text/plain")
        if refusal is not None or session is None:
            await (refusal or Response(status_code=401))(scope, receive, send)
            return
        accounts = {session.account, *(a.folded for a in await owner.agents_of(self.state, session.account))}
        session.streams += 1
        try:
            await self.streams.serve(accounts, lambda: self.sessions.alive(session), scope, receive, send)
        finally:
            session.streams -= 1


async def build(state: Pircan, built: Built) -> None:
    portal = Portal(state)
    built.apps["portal"] = portal
    built.stop.append(portal.streams.stop_all)
