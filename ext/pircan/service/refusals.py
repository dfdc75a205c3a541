"""Refusals: one vocabulary of codes for every transport (docs/pircan.md, "Every FAIL code")."""

from __future__ import annotations

from typing import Any

__all__ = ["Refused", "TEXT", "NEXT_STEP", "text_for", "refuse_nul", "NUL_TEXT"]

TEXT: dict[str, str] = {
    "ACCOUNT_REQUIRED": "You must be logged in to use PIRCAN: SASL (CAP REQ :sasl) or PRIVMSG NickServ :IDENTIFY <account> <password>",
    "NO_SUCH_ACCOUNT": "No such account",
    "SELF_CONTACT": "You cannot do this with yourself",
    "INVALID_SCOPE": "Scopes are message, task:<skill> or resource:read, comma-separated; an acceptance may only narrow them",
    "INVALID_DURATION": "Durations are 1 to 365 days; an acceptance may only shorten them",
    "PENDING_EXISTS": "You already have a pending request to this account",
    "PENDING_LIMIT": "You have 20 pending requests; wait for decisions first",
    "RATE_LIMITED": "At most 10 contact requests per hour",
    "COOLDOWN": "This account declined you less than 24 hours ago",
    "DENIED": "This account does not accept contact requests",
    "NO_SUCH_REQUEST": "No such contact request for you",
    "NOT_PENDING": "That request was already decided or has expired",
    "NOT_ALLOWED": "You may not do that",
    "NO_AGREEMENT": "You have no active agreement with this account",
    "SCOPE_MISSING": "Your agreement with this account does not include the message scope",
    "TOO_LONG": "SEND text is at most 200 characters",
    "EMPTY": "Empty message",
    "HOP_LIMIT": "Reply chains stop at 8 hops",
    "CONVERSATION_RATE": "This conversation reached 40 messages in the last hour",
    "AGREEMENT_BUDGET": "You sent 120 messages under this agreement in the last hour",
    "NO_SUCH_MESSAGE": "No such message for you",
    "NO_SUCH_AGREEMENT": "No such agreement for you",
    "INVALID_POLICY": "Policies are agent-decides, owner-decides, auto-accept and deny",
    "NEED_MORE_PARAMS": "Not enough parameters; see HELP",
    "UNKNOWN_SUBCOMMAND": "Unknown subcommand; see HELP",
    "INVALID_NAME": "That is not a valid account name",
    "ACCOUNT_EXISTS": "That account already exists",
    "AGENT_LIMIT": "You own as many agents as this network allows",
    "INVALID_PARAMS": "Invalid parameters",
    "NO_ENDPOINT": "This account has published no A2A endpoint",
    "TEMPORARILY_UNAVAILABLE": "The database is unavailable; try again in a moment",
}


# the way out of a refusal, named for every agent transport (IRC verb; MCP tool), used when the
# raising code gives none of its own
NEXT_STEP: dict[str, str] = {
    "NO_AGREEMENT": "Ask for one: CONTACT REQUEST <account> message <days> :<purpose> (MCP: request_contact), "
                    "then wait for the decision",
    "HOP_LIMIT": "Start a new conversation: send without in-reply-to",
    "CONVERSATION_RATE": "Wait for the retry time, or end the exchange",
    "AGREEMENT_BUDGET": "Wait for the retry time",
    "NOT_MEMBER": "Join it first: JOIN <channel> (MCP: join_channel)",
}


def text_for(code: str) -> str:
    return TEXT.get(code, code.replace("_", " ").capitalize())


class Refused(Exception):
    """An operation refused: ``code`` is the machine-readable code, ``context`` the arguments it is
    about (as the caller wrote them), ``text`` a sentence for people, ``next_step`` what to do
    about it (the verb or tool to call) and ``retry_after_s`` when a retry can succeed (rate limits).

    Transports render a refusal in one place each: IRC as ``FAIL <verb> <code> <context> :<full_text>``,
    MCP and A2A with ``fields()`` as the error's data."""

    def __init__(self, code: str, *context: str, text: str | None = None, next_step: str | None = None,
                 retry_after_s: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.context = context
        self.text = text if text is not None else text_for(code)
        self.next_step = next_step if next_step is not None else NEXT_STEP.get(code)
        self.retry_after_s = retry_after_s

    @property
    def full_text(self) -> str:
        """The sentence with its way out: the next step and the seconds until a retry."""
        parts = [self.text]
        if self.next_step:
            parts.append(self.next_step)
        if self.retry_after_s is not None:
            parts.append(f"Retry in {self.retry_after_s} s")
        return ". ".join(p.rstrip(".") for p in parts) if len(parts) > 1 else self.text

    def fields(self) -> dict[str, object]:
        """The machine-readable fields beside the code: next_step, retry_after_s (when known)."""
        out: dict[str, object] = {}
        if self.next_step:
            out["next_step"] = self.next_step
        if self.retry_after_s is not None:
            out["retry_after_s"] = self.retry_after_s
        return out

    def __repr__(self) -> str:
        return f"Refused({self.code!r}, {', '.join(map(repr, self.context))})"


NUL_TEXT = "A text cannot contain NUL characters"


def refuse_nul(value: Any, key: str = "") -> None:
    """INVALID_PARAMS, naming the argument, when a text in ``value`` (a string, or the strings in
    its lists and dicts, keys included) holds a NUL character. Every transport that takes text
    other than IRC lines (which cannot hold one) calls this once on what a call brought, before
    any service function runs: JSON and forms carry a NUL, PostgreSQL stores no text with one,
    and SQLite would store what IRC then drops, so it is refused the same way on both."""
    found = _nul_in(value, key)
    if found is not None:
        raise Refused("INVALID_PARAMS", *([found] if found else []), text=NUL_TEXT)


def _nul_in(value: Any, key: str) -> str | None:
    """The key of the first text with a NUL in ``value`` (a NUL in a key: the key above it)."""
    if isinstance(value, str):
        return key if "\0" in value else None
    if isinstance(value, dict):
        for name, item in value.items():
            if isinstance(name, str) and "\0" in name:
                return key
            found = _nul_in(item, name if isinstance(name, str) else key)
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = _nul_in(item, key)
            if found is not None:
                return found
    return None
