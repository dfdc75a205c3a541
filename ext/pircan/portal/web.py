"""The portal's plumbing: security headers, sessions and their cookie, CSRF, forms, templates.

Every response carries a Content-Security-Policy that allows scripts, styles and connections from
the portal itself only (no inline script or style), and is never cached or framed. Every POST must
carry the session's CSRF token (the sign-in form: the token of its own short cookie), or it is
refused with 403 before anything else is looked at. A page about an agent that is not the signed-in
person's is 404, exactly as for a name nobody has.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from datetime import UTC
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined, pass_context, select_autoescape
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from ext.pircan.ids import hexid
from ext.pircan.portal.sessions import Session, Sessions
from ext.pircan.service.refusals import Refused

__all__ = ["CSP", "REFRESH_HEADER", "SESSION_COOKIE", "SIGNIN_COOKIE", "Form", "NotFound", "Web"]

HERE = Path(__file__).resolve().parent
SESSION_COOKIE = "pircd_portal"
SIGNIN_COOKIE = "pircd_portal_signin"
REFRESH_HEADER = "x-portal-refresh"  # a live page fetching itself again: not activity, shows nothing once
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" would make the Origin of a form "null"
    (b"cross-origin-opener-policy", b"same-origin"),
]


class NotFound(Exception):
    """Answer 404 (an agent that is not the person's, a request or page that does not exist)."""


class Form:
    """A submitted ``application/x-www-form-urlencoded`` form."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs

    def get(self, key: str, default: str = "") -> str:
        for k, v in self.pairs:
            if k == key:
                return v
        return default

    def all(self, key: str) -> list[str]:
        return [v for k, v in self.pairs if k == key]


def when(ms: int | None) -> str:
    """A time for people: ``2026-12-01 14:59 UTC``."""
    if ms is None:
        return "never"
    from datetime import datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


@pass_context
def _csrf_field(context: Any) -> Markup:
    """The hidden CSRF input of every form: the session's token (the sign-in form: its own)."""
    session = context.get("session")
    token = session.csrf if session is not None else context.get("csrf", "")
    return Markup('<input type="hidden" name="csrf" value="%s">') % escape(token)


class Web:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions
        self.env = Environment(loader=FileSystemLoader(str(HERE / "templates")),
                               autoescape=select_autoescape(["html"]), undefined=StrictUndefined,
                               trim_blocks=True, lstrip_blocks=True)
        self.env.filters["when"] = when
        self.env.filters["hexid"] = hexid
        self.env.filters["q"] = lambda text: quote(str(text), safe="")
        self.env.globals["csrf_field"] = _csrf_field

    # ASGI: the headers every response carries --------------------------------------------

    @staticmethod
    def secured(app: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        async def wrapped(scope: dict, receive: Any, send: Any) -> None:
            async def send_with_headers(message: dict) -> None:
                if message["type"] == "http.response.start":
                    headers = [h for h in message.get("headers", []) if h[0].lower() not in dict(_HEADERS)]
                    message = {**message, "headers": [*headers, *_HEADERS]}
                await send(message)

            await app(scope, receive, send_with_headers if scope["type"] == "http" else send)

        return wrapped

    # pages ----------------------------------------------------------------------------------

    @staticmethod
    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def render(self, request: Request, template: str, session: Session | None, status: int = 200,
               **values: Any) -> HTMLResponse:
        notices: list[tuple[str, str]] = []
        secret = None
        if session is not None and request.headers.get(REFRESH_HEADER) != "1":
            notices, secret = session.take_notices()
        values.setdefault("nav", "")
        values.setdefault("tab", "")
        html = self.env.get_template(template).render(
            base=self.base(request), session=session, notices=notices, secret=secret, **values)
        response = HTMLResponse(html, status_code=status)
        response.headers["cache-control"] = "no-store"
        return response

    def redirect(self, request: Request, path: str) -> RedirectResponse:
        """303 to a page of the portal (after a POST: the browser GETs it)."""
        return RedirectResponse(self.base(request) + path, status_code=303)

    def not_found(self, request: Request, session: Session | None) -> HTMLResponse:
        return self.render(request, "error.html", session, 404, title="Not found",
                           text="There is nothing here, or it is not yours to see.")

    # sessions ----------------------------------------------------------------------------------

    def session(self, request: Request) -> Session | None:
        touch = request.headers.get(REFRESH_HEADER) != "1"
        return self.sessions.get(request.cookies.get(SESSION_COOKIE), touch=touch)

    @staticmethod
    def secure(request: Request) -> bool:
        return request.url.scheme == "https"

    def set_cookie(self, request: Request, response: Response, name: str, value: str, max_age: int | None) -> None:
        response.set_cookie(name, value, max_age=max_age, path=self.base(request) + "/", httponly=True,
                            samesite="strict", secure=self.secure(request))

    def clear_cookie(self, request: Request, response: Response, name: str) -> None:
        response.delete_cookie(name, path=self.base(request) + "/", httponly=True, samesite="strict",
                               secure=self.secure(request))

    @staticmethod
    def new_signin_token() -> str:
        return secrets.token_urlsafe(32)

    # forms -------------------------------------------------------------------------------------

    @staticmethod
    async def form(request: Request) -> Form:
        body = await request.body()
        try:
            fields = parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=200)
        except ValueError:  # more fields than any form of ours has: nothing, so its CSRF check refuses it
            fields = []
        return Form(fields)

    def csrf_refused(self, request: Request, session: Session | None) -> HTMLResponse:
        return self.render(request, "error.html", session, 403, title="Refused",
                           text="This form did not carry a valid token (it may be from an older page, or "
                                "from another site). Go back, reload the page and try again.")

    @staticmethod
    def refusal_text(exc: Refused) -> str:
        return f"{exc.text} ({exc.code})"
