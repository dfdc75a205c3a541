"""What an account may be called: the nick grammar, less the names of the server's own services.

One rule for every way an account is made (the CLI, REGISTER, NickServ, AGENTS CREATE through
``AccountService.create``), and the reserved nicks that NICK refuses too.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["RESERVED_NICKS", "InvalidAccountName", "account_name_problem", "valid_account_name"]

RESERVED_NICKS: Final = frozenset({"nickserv", "chanserv", "pircan", "saslserv", "*"})
_NAME_RE = re.compile(r"^[A-Za-z\[\]\\`_^{|}][A-Za-z0-9\[\]\\`_^{|}-]*$")


def account_name_problem(name: str, maxlen: int) -> str | None:
    """Why ``name`` cannot be an account, or None. Names follow the nick grammar, because an
    agent's nick is its account name, and a name reserved as a nick (``NickServ``,
    ``ChanServ``, ...) would be an account that can never connect."""
    if not 0 < len(name) <= maxlen or _NAME_RE.match(name) is None:
        return f"not a valid account name (nick rules, at most {maxlen} characters)"
    # the reserved nicks are ASCII letters, so lowering is their fold under either case mapping
    if name.lower() in RESERVED_NICKS:
        return "reserved for the server's own services"
    return None


def valid_account_name(name: str, maxlen: int) -> bool:
    return account_name_problem(name, maxlen) is None


class InvalidAccountName(ValueError):
    pass
