"""The portal's page of a hosted agent (``/agents/<name>/host``): its state, restarts and log tail,
with start, stop, restart, a stdin line and a signal; each form one call of
``ext/pircan/host/service.py``, as the IRC verb HOST and the MCP owner tools make it."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ext.pircan.host import service
from ext.pircan.portal.pages import Pages, signed_in
from ext.pircan.portal.sessions import Session
from ext.pircan.portal.web import Form
from ext.pircan.service.refusals import Refused

__all__ = ["HostPages", "LOG_TAIL"]

LOG_TAIL = 200  # lines of the log on the page


class HostPages:
    """Borrows what every portal page has (the session check, the owned agent) from ``Pages``."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.state = pages.state
        self.web = pages.web

    async def still_allowed(self, session: Session) -> bool:
        return await self.pages.still_allowed(session)

    def routes(self, agent: str) -> list[Route]:
        return [
            Route(agent + "/host", self.page, methods=["GET"]),
            Route(agent + "/host/stdin", self.stdin, methods=["POST"]),
            Route(agent + "/host/signal", self.signal, methods=["POST"]),
            Route(agent + "/host/{action}", self.control, methods=["POST"]),
        ]

    @signed_in
    async def page(self, request: Request, session: Session) -> Response:
        agent = await self.pages.agent(session, request)
        status: service.Status | None
        try:
            status = await service.status(self.state, session.account, agent.folded)
            window = await service.logs(self.state, session.account, agent.folded, lines=LOG_TAIL)
            log_text = window.data.decode("utf-8", "replace")
        except Refused as exc:
            if exc.code != "NOT_HOSTED":
                raise
            status, log_text = None, ""
        return self.web.render(request, "host.html", session, title=f"Host of {agent.name}", nav="agents",
                               tab="host", agent=agent, hosted=status, log_text=log_text, log_lines=LOG_TAIL)

    def _back(self, request: Request, agent: Any) -> str:
        return self.pages._back(request, agent, "/host")

    @signed_in
    async def control(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.pages.agent(session, request)
        back = self._back(request, agent)
        action = request.path_params["action"]
        fn = {"start": service.start, "stop": service.stop, "restart": service.restart}.get(action)
        if fn is None:
            return self.web.not_found(request, session)
        status = await fn(self.state, session.account, agent.folded)
        self.pages.ok(session, f"{agent.name}: {action} done; it is {status.state} now.")
        return self.web.redirect(request, back)

    @signed_in
    async def stdin(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.pages.agent(session, request)
        back = self._back(request, agent)
        written = await service.stdin(self.state, session.account, agent.folded, form.get("line"))
        self.pages.ok(session, f"{written} bytes written to the standard input of {agent.name}.")
        return self.web.redirect(request, back)

    @signed_in
    async def signal(self, request: Request, session: Session, form: Form) -> Response:
        agent = await self.pages.agent(session, request)
        back = self._back(request, agent)
        sig = await service.send_signal(self.state, session.account, agent.folded, form.get("signal"))
        self.pages.ok(session, f"SIG{sig} sent to {agent.name}.")
        return self.web.redirect(request, back)
