"""Registrations waiting for their email code (``accounts.email_required``).

IRCv3 account-registration: "REGISTER VERIFICATION_REQUIRED <account> <message>" when further action
is needed, then "VERIFY <account> <code>" completes it. A pending registration holds what the account
will be made of (name, address, the password's hashes: the password itself is not kept) and a code
sent to the address. Nothing is written to the database until VERIFY gives the right code, so a
registration nobody completes leaves nothing behind; pending registrations live in memory and a
restart forgets them (the client registers again).

Bounds: a code is valid for ``accounts.email_code_lifetime`` seconds and for ``MAX_TRIES`` wrong
guesses from the source that registered (another source's guesses are counted by the login throttle
and cannot cancel someone else's registration); each source address (IPv4, or an IPv6 /64) and each
email address may have ``accounts.email_codes_per_hour`` codes sent in any hour, counted before the
code is made (mail is a cost to the receiver: a server must not be a way to bomb an inbox); at most
``MAX_PENDING`` registrations wait at once. A newer REGISTER of the same name (by whoever holds that nick
now) replaces the older one.
"""

from __future__ import annotations

import hmac
import re
import secrets
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ircd.store import ScramKeys

__all__ = ["MAX_PENDING", "MAX_TRIES", "Pending", "Verifications", "valid_email"]

MAX_TRIES = 5
MAX_PENDING = 10000
_CODE_CHARS = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: codes are typed by people
_CODE_LENGTH = 8  # 40 bits
_HOUR = 3600.0
# local@domain: no spaces, quotes or brackets in the local part, a dotted DNS name (letters,
# digits, hyphens; an IDN in its xn-- form) as the domain, 254 characters in all (RFC 5321 4.5.3.1)
_EMAIL_RE = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9-]{1,63}(\.[A-Za-z0-9-]{1,63})+$")


def valid_email(address: str) -> bool:
    return len(address) <= 254 and _EMAIL_RE.match(address) is not None


def new_code() -> str:
    return "".join(secrets.choice(_CODE_CHARS) for _ in range(_CODE_LENGTH))


@dataclass(slots=True)
class Pending:
    name: str
    folded: str
    email: str
    password_hash: str
    keys: ScramKeys
    code: str
    expires: float
    source: str  # where the REGISTER came from (ircd.logins.source_of): only its wrong guesses count
    tries: int = 0


class Verifications:
    def __init__(self) -> None:
        self.pending: dict[str, Pending] = {}  # folded account name -> its registration
        # "s:<source>" or "e:<address>" -> times codes were sent for it
        self._sent: dict[str, deque[float]] = {}

    def reserve(self, source: str, address: str, now: float, per_hour: int) -> bool:
        """Count a code for ``source`` and for the email ``address`` now, before it is made and
        sent (so simultaneous REGISTERs count too), or False when either had ``per_hour`` codes
        in the last hour or too many registrations wait."""
        if len(self.pending) >= MAX_PENDING:
            return False
        keys = ("s:" + source, "e:" + address.lower())
        for key in keys:
            times = self._sent.get(key)
            if times is not None:
                while times and times[0] <= now - _HOUR:
                    times.popleft()
                if len(times) >= per_hour:
                    return False
        for key in keys:
            self._sent.setdefault(key, deque()).append(now)
        return True

    def add(self, pending: Pending) -> None:
        """A code went out: the registration waits for it."""
        self.pending[pending.folded] = pending

    def take(self, folded: str, code: str, now: float, source: str) -> Pending | None:
        """The registration if ``code`` is its code (it is then no longer pending), else None; a
        wrong guess from the registering ``source`` counts, and the registration is dropped at
        ``MAX_TRIES``."""
        pending = self.pending.get(folded)
        if pending is None:
            return None
        if pending.expires <= now:
            del self.pending[folded]
            return None
        if not hmac.compare_digest(pending.code.encode(), code.strip().upper().encode()):
            if source == pending.source:
                pending.tries += 1
                if pending.tries >= MAX_TRIES:
                    del self.pending[folded]
            return None
        del self.pending[folded]
        return pending

    def sweep(self, now: float) -> None:
        """Forget expired registrations and send records older than an hour (once a minute)."""
        for folded in [f for f, p in self.pending.items() if p.expires <= now]:
            del self.pending[folded]
        for source in [s for s, times in self._sent.items() if not times or times[-1] <= now - _HOUR]:
            del self._sent[source]
