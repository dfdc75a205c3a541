"""MCP sessions under caps: per account, in all, and idle for minutes at most.

The MCP SDK's session manager (Streamable HTTP) keeps a session from each ``initialize`` until the
client deletes it or it has been idle for ``session_idle_timeout`` (30 minutes by default), and
answers every new session 503 once ``max_sessions`` (10,000) are open: one token holder could fill
the table and shut every other account out. Here:

* an account holds at most ``pircan.mcp_sessions_per_account`` sessions; its next one ends its own
  session idle the longest, whose id answers 404 from then on, as after an idle timeout. Another
  account's sessions are never ended for it;
* all accounts together hold at most ``pircan.mcp_max_sessions``; past it the session idle the
  longest, of any account, ends;
* a session without a request for ``pircan.mcp_session_idle_minutes`` ends (the SDK's own timer);
* a session with a request in flight (an open GET stream, a ``wait_for_messages``) is busy and is
  not ended for room: when all of the account's sessions are busy the new one gets 429 (503 when
  all sessions are), with ``Retry-After``. A busy session holds an HTTP connection, so the
  connection limits bound those.

A call of the sessionless protocol (the MCP SDK's own client, protocol 2026) that cannot wait is
answered in the SDK's JSON mode: the tool runs in the request's own task. In its SSE mode the SDK
runs each call in a task group beside a task watching for the client's disconnect, and commits the
answer to an event stream with keep-alive pings once it takes 15 s; that is what a wait needs
(``WAITING``: wait_for_messages, and send_direct_message with await_reply), and it costs a plain call
about a sixth of its CPU. A plain call of either mode answers the same JSON within 15 s; a client
that disconnects is seen by ``Watched`` (ext/pircan/delivery.py) either way. Calls in a session
(protocol 2025) stay in the SSE mode, whose answer headers come at once.

A session's memory is fixed (the SDK's transport, its streams with fixed buffers, its server task:
about 45 KiB measured), so the caps bound the sessions' memory too. The tools keep nothing per
session: they act for the request's account.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server._streamable_http_modern import handle_modern_request
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_NAME_HEADER, MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from ext.pircan.mcp.http import IDENTITY_KEY
from ext.pircan.mcp.limits import mcp_refusal
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ircd.api import CountedLog

__all__ = ["CappedSessionManager", "SessionTable"]

log = logging.getLogger("pircd.pircan")

BUSY_RETRY_S = 5  # Retry-After when every session that could make room has a request in flight
_HEADER = MCP_SESSION_ID_HEADER.lower().encode()
_VERSION = MCP_PROTOCOL_VERSION_HEADER.lower().encode()
_NAME = MCP_NAME_HEADER.lower().encode()

# tools whose call may wait, each with the argument that makes it wait (None: every call)
WAITING: dict[bytes, bytes | None] = {b"wait_for_messages": None, b"send_direct_message": b'"await_reply"'}


@dataclass(slots=True)
class _Opening:
    """A request admitted to open a session, until the SDK registers the session (or does not)."""

    account: str
    registered: bool = False


_OPENING: contextvars.ContextVar[_Opening | None] = contextvars.ContextVar("pircan_mcp_opening", default=None)


class SessionTable:
    """Which account holds which sessions (oldest first), and the openings admitted but not yet
    registered, which count as held so that simultaneous ``initialize`` calls cannot pass a cap."""

    def __init__(self) -> None:
        self.of_account: dict[str, dict[str, None]] = {}
        self.account_of: dict[str, str] = {}
        self.opening: dict[str, int] = {}
        self.opening_total = 0

    def held(self, account: str) -> int:
        return len(self.of_account.get(account, ())) + self.opening.get(account, 0)

    def total(self) -> int:
        return len(self.account_of) + self.opening_total

    def sessions_of(self, account: str) -> list[str]:
        return list(self.of_account.get(account, ()))

    def reserve(self, account: str) -> None:
        self.opening[account] = self.opening.get(account, 0) + 1
        self.opening_total += 1

    def unreserve(self, account: str) -> None:
        left = self.opening.get(account, 0) - 1
        if left > 0:
            self.opening[account] = left
        else:
            self.opening.pop(account, None)
        self.opening_total -= 1

    def add(self, account: str, session_id: str) -> None:
        self.of_account.setdefault(account, {})[session_id] = None
        self.account_of[session_id] = account

    def remove(self, session_id: str) -> None:
        account = self.account_of.pop(session_id, None)
        if account is None:
            return
        mine = self.of_account.get(account)
        if mine is not None:
            mine.pop(session_id, None)
            if not mine:
                del self.of_account[account]


class CappedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, with pircd's caps (the module's notes) on new sessions."""

    def __init__(self, state: Pircan, **kwargs: Any) -> None:
        super().__init__(max_sessions=None, session_idle_timeout=state.cfg.mcp_session_idle_minutes * 60.0,
                         **kwargs)
        self.state = state
        self.table = SessionTable()
        self.log = CountedLog(log)
        self._sdk_entry = self.asgi_app  # the SDK's body limit, then its routing (``_handle_request``)
        self.asgi_app = self._entry  # type: ignore[assignment]  # an ASGI app in the SDK's place

    async def _entry(self, scope: Any, receive: Any, send: Any) -> None:
        """The manager's ASGI app (``asgi_app``). A sessionless POST (protocol 2026) has its body
        read here, once, under the SDK's body limit, and is answered in JSON mode unless it may wait
        (``WAITING``); the rest goes through the SDK's own body limit to its routing (sessions,
        refusals). The SDK read the body ahead too, to hold it to its limit, and pircd again, to see
        whether the call waits."""
        version = name = length = None
        for key, value in scope["headers"]:
            if key == _VERSION:
                version = value
            elif key == _NAME:
                name = value
            elif key == b"content-length":
                length = value
        if (version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS
                or self._task_group is None or scope.get("method") != "POST"
                or (length is not None and (not length.isdigit() or int(length) > self.max_request_body_size))):
            await self._sdk_entry(scope, receive, send)  # a session's request, or a refusal
            return
        messages, body = await _read(receive, self.max_request_body_size)
        if messages is None:
            await _too_large(scope, receive, send)
            return
        json_mode = True
        if name in WAITING:
            argument = WAITING[name]
            json_mode = argument is not None and argument not in body

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await handle_modern_request(self.app, self.security_settings, json_mode, self._lifespan_state,
                                    scope, replay, send)

    async def _handle_stateful_request(self, scope: Any, receive: Any, send: Any) -> None:
        identity = scope.get(IDENTITY_KEY)
        opens = scope.get("method") == "POST" and not any(k.lower() == _HEADER for k, _ in scope["headers"])
        if identity is None or not opens:
            await super()._handle_stateful_request(scope, receive, send)
            return
        refused = self._make_room(identity.account)
        if refused is not None:
            await mcp_refusal(scope, send, *refused)
            return
        opening = _Opening(identity.account)
        self.table.reserve(opening.account)
        token = _OPENING.set(opening)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            _OPENING.reset(token)
            if not opening.registered:
                self.table.unreserve(opening.account)

    def _admit_session(self, requestor: Any) -> Any:
        self.session_idle_timeout = self.state.cfg.mcp_session_idle_minutes * 60.0  # REHASH takes effect
        transport = super()._admit_session(requestor)
        opening = _OPENING.get()
        if transport is None or not transport.mcp_session_id or opening is None or opening.registered:
            return transport
        opening.registered = True
        self.table.unreserve(opening.account)
        self.table.add(opening.account, transport.mcp_session_id)
        return transport

    async def _discard_session(self, session_id: str, transport: Any) -> None:
        self.table.remove(session_id)
        await super()._discard_session(session_id, transport)

    def _make_room(self, account: str) -> tuple[int, Refused] | None:
        """End idle sessions until a new one of ``account`` fits both caps; else (status, refusal)."""
        cfg, table = self.state.cfg, self.table
        mine = cfg.mcp_sessions_per_account
        if not self._free(lambda: table.sessions_of(account), lambda: table.held(account), mine,
                          "mcp session ended account=%s reason='the account opened more than %d'"):
            self.log.hit("busy_account", "mcp session refused account=%s reason='every session of the account "
                         "is busy' (limit %d)", account, mine)
            return 429, Refused("SESSION_LIMIT", text=f"Your account has {table.held(account)} MCP sessions, "
                                "each with a request in flight: end one (DELETE) or wait for one to finish",
                                retry_after_s=BUSY_RETRY_S)
        if not self._free(lambda: list(table.account_of), table.total, cfg.mcp_max_sessions,
                          "mcp session ended account=%s reason='the server holds %d sessions'"):
            self.log.hit("busy_total", "mcp session refused account=%s reason='every session is busy' (limit %d)",
                         account, cfg.mcp_max_sessions)
            return 503, Refused("SESSION_LIMIT", text="The server holds as many MCP sessions as it may, each "
                                "with a request in flight", retry_after_s=BUSY_RETRY_S)
        return None

    def _free(self, candidates: Callable[[], list[str]], held: Callable[[], int], cap: int, why: str) -> bool:
        """End the session idle the longest among ``candidates`` until ``held`` is below ``cap``
        (logged with ``why``, once a minute); False when all of them are busy."""
        while held() >= cap:
            victim = self._idle_longest(candidates())
            if victim is None:
                return held() < cap  # _idle_longest may have dropped sessions that had gone
            self.log.hit(why, why, self.table.account_of.get(victim, "?"), cap)
            self._end(victim)
        return True

    def _idle_longest(self, session_ids: list[str]) -> str | None:
        """The session among these whose last request ended first; None when all are busy."""
        found, earliest = None, math.inf
        for session_id in session_ids:
            transport = self._server_instances.get(session_id)
            if transport is None:  # gone without a discard (the manager stopping): not held any more
                self.table.remove(session_id)
                continue
            idle = transport.idle_scope
            # its idle timer runs (a finite deadline) only while no request is in flight
            if idle is not None and not idle.cancel_called and idle.deadline < earliest:
                found, earliest = session_id, idle.deadline
        return found

    def _end(self, session_id: str) -> None:
        """End a session as its idle timeout would: its id answers 404 from now on, and its task
        (seeing its idle scope cancelled) ends and terminates its transport."""
        transport = self._server_instances.pop(session_id, None)
        self._session_owners.pop(session_id, None)
        self.table.remove(session_id)
        if transport is not None and transport.idle_scope is not None:
            transport.idle_scope.cancel()


async def _read(receive: Any, limit: int) -> tuple[list[Any] | None, bytes]:
    """A request's body, read now (None past ``limit`` bytes), and the messages that hand it on
    again as the SDK's body limit would: the body in one, then the message after it, if any."""
    parts: list[bytes] = []
    size = 0
    trailing = None
    while True:
        message = await receive()
        if message["type"] != "http.request":
            trailing = message
            break
        part = message.get("body", b"")
        size += len(part)
        if size > limit:
            return None, b""
        parts.append(part)
        if not message.get("more_body", False):
            break
    body = b"".join(parts)
    messages: list[Any] = [{"type": "http.request", "body": body, "more_body": trailing is not None}] if parts else []
    if trailing is not None:
        messages.append(trailing)
    return messages, body


async def _too_large(scope: Any, receive: Any, send: Any) -> None:
    from starlette.responses import Response

    await Response("Request body too large", status_code=413)(scope, receive, send)  # as the SDK answers
