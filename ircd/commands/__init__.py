"""Core command handlers, one module per protocol area.

Importing a module registers its verbs in ``ircd.dispatch.CORE_COMMANDS``.
"""

from __future__ import annotations

import importlib

MODULES = ("registration", "cap", "channel", "modes", "messaging", "query", "oper", "monitor", "help", "account",
           "nickserv", "multiline", "markread", "chathistory", "token", "rename", "redact", "metadata")

_loaded = False


def load() -> None:
    global _loaded
    if _loaded:
        return
    for name in MODULES:
        importlib.import_module(f"ircd.commands.{name}")
    _loaded = True
