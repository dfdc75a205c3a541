"""Helpers every PIRCAN verb uses: the login gate, FAIL replies, id parsing, owner checks."""

from __future__ import annotations

import re
from typing import Any

from ircd.api import CommandContext

from ext.pircan.state import Pircan

FAIL_TEXT = {
    "ACCOUNT_REQUIRED": "You must be logged in to an account (SASL) to use PIRCAN",
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
}


def fail(ctx: CommandContext, verb: str, code: str, *context: str, text: str | None = None) -> None:
    ctx.reply.fail(verb, code, *context, text or FAIL_TEXT.get(code, code))


def account_of(ctx: CommandContext, verb: str) -> str | None:
    """The caller's folded account, or None after answering ACCOUNT_REQUIRED."""
    account = ctx.client.account_folded
    if account is None:
        fail(ctx, verb, "ACCOUNT_REQUIRED")
    return account


_HEX_ID = re.compile(r"[0-9a-fA-F]{16}")


def parse_hex_id(text: str) -> int | None:
    """An id written as 16 hex digits (int() alone would also take '0x...', spaces, '_' and signs)."""
    return int(text, 16) if _HEX_ID.fullmatch(text) else None


async def owns(state: Pircan, owner: str, agent: str) -> bool:
    """Whether ``owner`` is the owner of the agent account ``agent``."""
    account: Any = await state.api.get_account(agent)
    return account is not None and account.owner == owner


async def acts_for(state: Pircan, actor: str, account: str) -> bool:
    """``actor`` may act for ``account``: itself, or its owner."""
    return actor == account or await owns(state, actor, account)
