"""The portal's sessions: kept by the server, named to the browser by a random cookie.

A session holds the signed-in person, its CSRF token, and what the next page shows once (a message,
a new password or token). It ends at sign-out, after ``pircan.portal_session_minutes`` without a
request, ``MAX_AGE`` after sign-in whatever happens, when the person's password is changed (its other
sessions), and when the account is deleted or suspended (checked at every request). Sessions live in
memory: a restart signs everyone out, and nothing about them is ever written to disk.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MAX_AGE", "PER_ACCOUNT", "Session", "Sessions", "same_token"]

MAX_AGE = 24 * 3600.0  # seconds after sign-in, however active
PER_ACCOUNT = 20  # sessions one person may hold; signing in again ends the oldest


def same_token(expected: str, given: str) -> bool:
    """Compared in constant time."""
    return hmac.compare_digest(expected.encode("utf-8", "replace"), given.encode("utf-8", "replace"))


@dataclass(slots=True, eq=False)
class Session:
    id: str
    account: str  # folded
    name: str  # as the person wrote it at sign-in
    csrf: str
    created: float
    seen: float
    notices: list[tuple[str, str]] = field(default_factory=list)  # (kind: ok|error, text), shown once
    secret: tuple[str, str] | None = None  # (what it is, the value): shown once, never stored elsewhere
    streams: int = 0  # open event streams
    ended: bool = False

    def check_csrf(self, token: str) -> bool:
        return same_token(self.csrf, token)

    def take_notices(self) -> tuple[list[tuple[str, str]], tuple[str, str] | None]:
        notices, secret = self.notices, self.secret
        self.notices, self.secret = [], None
        return notices, secret


class Sessions:
    def __init__(self, clock: Callable[[], float], idle: Callable[[], float]) -> None:
        """``idle``: the seconds a session lives without a request (read at each use: REHASH)."""
        self.clock = clock
        self.idle = idle
        self.by_id: dict[str, Session] = {}

    def new(self, account: str, name: str) -> Session:
        self.prune()
        now = self.clock()
        mine = sorted((s for s in self.by_id.values() if s.account == account), key=lambda s: s.created)
        for old in mine[: max(0, len(mine) - PER_ACCOUNT + 1)]:
            self.end(old)
        session = Session(secrets.token_urlsafe(32), account, name, secrets.token_urlsafe(32), now, now)
        self.by_id[session.id] = session
        return session

    def alive(self, session: Session, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        return not session.ended and now - session.seen < self.idle() and now - session.created < MAX_AGE

    def get(self, token: str | None, touch: bool = True) -> Session | None:
        """The live session the cookie names; ``touch``: the request counts as activity."""
        session = self.by_id.get(token) if token else None
        if session is None:
            return None
        now = self.clock()
        if not self.alive(session, now):
            self.end(session)
            return None
        if touch:
            session.seen = now
        return session

    def end(self, session: Session) -> None:
        session.ended = True
        self.by_id.pop(session.id, None)

    def end_account(self, account: str, keep: Session | None = None) -> int:
        """End every session of ``account`` but ``keep``; how many."""
        gone = [s for s in self.by_id.values() if s.account == account and s is not keep]
        for session in gone:
            self.end(session)
        return len(gone)

    def prune(self) -> None:
        now = self.clock()
        for session in [s for s in self.by_id.values() if not self.alive(s, now)]:
            self.end(session)
