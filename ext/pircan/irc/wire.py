"""How PIRCAN lines look on IRC (server to client). docs/pircan.md is the reference."""

from __future__ import annotations

from ircd.api import ReplyBuffer

from ext.pircan.ids import hexid, ts
from ext.pircan.rules import Limits
from ext.pircan.store import Agreement, AuditEntry, Request, StoredMessage

__all__ = [
    "hexid", "ts", "preview", "message_header", "body_chunks", "full_message", "request_line",
    "agreement_line", "audit_line", "pending_fields", "BODY_CHUNK", "PREVIEW_CHARS",
]

BODY_CHUNK = 400  # bytes of body text per BODY line
PREVIEW_CHARS = 200


def preview(body: str) -> str:
    text = " ".join(body.split("\n")).replace("\r", " ").replace("\x00", "")
    if len(text) > PREVIEW_CHARS:
        text = text[: PREVIEW_CHARS - 1] + "…"
    return text or " "


def message_header(reply: ReplyBuffer, nick: str, msg: StoredMessage, with_preview: bool,
                   with_read: bool = False) -> None:
    """A MESSAGE line; ``with_read`` (HISTORY and SEARCH, which list read and unread messages alike)
    adds ``read`` or ``unread``, whether its recipient has read it, before the preview."""
    params = [
        "INBOX",
        nick,
        "MESSAGE",
        hexid(msg.id),
        msg.sender,
        ts(msg.created_at),
        hexid(msg.conversation_id),
        hexid(msg.in_reply_to),
        str(msg.hop_count),
        str(len(msg.body.encode("utf-8"))),
    ]
    if with_read:
        params.append("unread" if msg.read_at is None else "read")
    if with_preview:
        params.append(preview(msg.body))
    reply.send(*params)


def body_chunks(body: str) -> list[tuple[bool, str]]:
    """(continues_previous_line, text) pieces of at most BODY_CHUNK bytes, split on code points."""
    out: list[tuple[bool, str]] = []
    for line in body.split("\n"):
        line = line.replace("\r", "").replace("\x00", "")
        data = line.encode("utf-8")
        if not data:
            out.append((False, ""))
            continue
        first = True
        while data:
            cut = min(len(data), BODY_CHUNK)
            while cut < len(data) and (data[cut] & 0xC0) == 0x80:  # do not split a code point
                cut -= 1
            out.append((not first, data[:cut].decode("utf-8")))
            data = data[cut:]
            first = False
    return out


def full_message(reply: ReplyBuffer, nick: str, msg: StoredMessage) -> None:
    """MESSAGE header, BODY/BODY+ lines and END, in a pircan/message batch for clients with batch."""
    ref = reply.start_batch("pircan/message", hexid(msg.id))
    message_header(reply, nick, msg, with_preview=False)
    for continues, text in body_chunks(msg.body):
        reply.send("INBOX", nick, "BODY+" if continues else "BODY", hexid(msg.id), text)
    reply.send("INBOX", nick, "END", hexid(msg.id))
    reply.end_batch(ref)


def pending_fields(req: Request, state: str, policy: str | None) -> tuple[str, str]:
    """(decider, expires) of a request: while it is pending, who decides it (``owner`` under the
    policy owner-decides, else ``agent``) and when it expires undecided; ``*`` ``*`` after."""
    if state != "pending":
        return "*", "*"
    return ("owner" if policy == "owner-decides" else "agent"), ts(req.created_at + Limits.request_ttl_ms)


def request_line(reply: ReplyBuffer, nick: str, req: Request, state: str, policy: str | None = None) -> None:
    reply.send(
        "CONTACT", nick, "REQUEST", hexid(req.id), req.requester, req.target, ",".join(req.scopes),
        str(req.days), state, ts(req.created_at), *pending_fields(req, state, policy), req.purpose or " ",
    )


def agreement_line(reply: ReplyBuffer, nick: str, agr: Agreement, state: str) -> None:
    reply.send(
        "CONTACT", nick, "AGREEMENT", hexid(agr.id), agr.requester, agr.target, ",".join(agr.scopes),
        ts(agr.created_at), ts(agr.expires_at), state,
    )


def audit_line(reply: ReplyBuffer, nick: str, entry: AuditEntry) -> None:
    reply.send(
        "AUDIT", nick, "ENTRY", hexid(entry.id), ts(entry.at), entry.actor, entry.action, entry.subject,
        entry.detail or " ",
    )
