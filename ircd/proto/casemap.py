"""Case mapping of nicks and channel names.

Every name is stored under its folded form and shown under its display form.
The whole server uses one ``casefold`` chosen from the config at start-up, so
``Alice`` and ``alice`` (and, under rfc1459, ``[a]`` and ``{a}``) are one name.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["CASEMAPPINGS", "casefold_ascii", "casefold_rfc1459", "get_casefold"]

_ASCII = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_RFC1459 = str.maketrans(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZ[]\\~", "abcdefghijklmnopqrstuvwxyz{}|^"
)


# str.translate looks every character up in its table, which made folding a
# nick cost more than the rest of finding it. For ASCII names (nearly all of
# them) str.lower() does the same mapping of A-Z in one pass; rfc1459 then
# only needs the table when one of its four extra characters is present.


def casefold_ascii(name: str) -> str:
    if name.isascii():
        return name.lower()
    return name.translate(_ASCII)


def casefold_rfc1459(name: str) -> str:
    if name.isascii():
        name = name.lower()
        if name.isalnum():  # letters and digits only (most nicks): one pass, no search
            return name
        if "[" in name or "]" in name or "\\" in name or "~" in name:
            return name.translate(_RFC1459)
        return name
    return name.translate(_RFC1459)


CASEMAPPINGS: dict[str, Callable[[str], str]] = {
    "ascii": casefold_ascii,
    "rfc1459": casefold_rfc1459,
}


def get_casefold(name: str) -> Callable[[str], str]:
    try:
        return CASEMAPPINGS[name]
    except KeyError:
        raise ValueError(f"unknown casemapping {name!r}") from None
