"""What every network skill (``pircan:...`` on the gateway's endpoint, skills.py) shares: its
declaration, and the reading of its arguments from the call's data part, with the refusals a
bad argument gets (NEED_MORE_PARAMS, INVALID_PARAMS naming the key)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan

__all__ = ["Action", "Skill", "arg_int", "arg_str", "arg_strings"]

# an action: (state, the caller's account, the data part's object) -> (a line of text, the result's object)
Action = Callable[[Pircan, str, dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]]


@dataclass(frozen=True, slots=True)
class Skill:
    id: str
    name: str
    description: str
    actions: dict[str, Action]


def arg_str(args: dict[str, Any], key: str, required: bool = True) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        if required:
            raise Refused("NEED_MORE_PARAMS", key, text=f"The call needs '{key}' in its data part")
        return None
    if not isinstance(value, str):
        raise Refused("INVALID_PARAMS", key, text=f"'{key}' is a string")
    return value


def arg_int(args: dict[str, Any], key: str, low: int, high: int) -> int | None:
    value = args.get(key)
    if value is None:
        return None
    # a data part's numbers arrive as floats (google.protobuf.Value)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
            or not low <= int(value) <= high:
        raise Refused("INVALID_PARAMS", key, text=f"'{key}' is a whole number, {low}-{high}")
    return int(value)


def arg_strings(args: dict[str, Any], key: str) -> list[str] | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Refused("INVALID_PARAMS", key, text=f"'{key}' is a list of strings")
    return list(value)
