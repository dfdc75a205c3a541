"""SASL (IRCv3 sasl 3.1/3.2): the AUTHENTICATE framing and the mechanisms.

Framing: the client sends base64 in chunks of at most 400 bytes; a chunk of
exactly 400 bytes means more follows, ``+`` alone is an empty chunk (or
ends a payload that was a multiple of 400). ``*`` aborts. The server
answers with the same framing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ircd.sasl.scram import ScramServer

if TYPE_CHECKING:
    from ircd.logins import Attempt
    from ircd.store import Account

__all__ = ["SaslState", "MECHANISMS", "CHUNK", "MAX_PAYLOAD", "split_payload"]

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "EXTERNAL")
CHUNK = 400
MAX_PAYLOAD = 8192  # bytes of base64 one client may send in one exchange


@dataclass
class SaslState:
    mechanism: str
    buffer: str = ""
    step: int = 0
    scram: ScramServer | None = None
    account: Account | None = field(default=None)  # the account a SCRAM exchange is for
    attempt: Attempt | None = None  # the login attempt a SCRAM exchange counts as


def split_payload(data: str) -> list[str]:
    """AUTHENTICATE arguments for a base64 payload (with a trailing ``+`` when needed)."""
    if not data:
        return ["+"]
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
    if len(chunks[-1]) == CHUNK:
        chunks.append("+")
    return chunks
