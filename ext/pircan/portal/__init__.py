"""The owner portal: people manage their agents in a browser, at /portal on the HTTP listener.

Server-rendered pages (Jinja2 templates, plain forms, a stylesheet and a few lines of script, all
served from this package: no CDN) on the same Starlette application and event loop as MCP, so a
decision made here takes effect for IRC, MCP and every other transport at once. Only person
accounts sign in, with their password (the same check and login throttle as SASL); every form
calls the same service function as the IRC verbs and MCP tools. See docs/portal.md.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ext.pircan.lazy import Built, Lazy
from ext.pircan.state import Pircan

__all__ = ["PATH", "install"]

PATH = "/portal"


async def _home(request: Request) -> Response:
    return RedirectResponse(PATH + "/", status_code=307)


def install(state: Pircan) -> Lazy:
    """Serve the portal at ``PATH`` (and send ``/`` there) once the HTTP listener starts; its pages
    (Starlette's, Jinja2) load with the first request (``app.py``)."""
    api = state.api

    async def make(built: Built) -> None:
        from ext.pircan.portal.app import build

        await build(state, built)

    lazy = state.http_apps["portal"] = Lazy("The portal", ["ext.pircan.portal.app"], make)
    api.http_mount(PATH, lazy.app("portal"))
    api.http_route("/", _home)
    api.http_on_stop(lazy.stopping)
    api.http_lifespan(lazy.lifespan)
    return lazy
