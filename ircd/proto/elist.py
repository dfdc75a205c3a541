"""LIST search terms (ISUPPORT ``ELIST=CMNTU``), parsed once per LIST command.

Modern IRC (ELIST parameter) defines the conditions; the time ones follow the
reading the Modern document settled on (ircdocs/modern-irc#171), which is also
InspIRCd's and Solanum's:

- ``M`` a mask (``#ch*``) lists the channels whose name matches it;
- ``N`` ``!mask`` leaves out the channels whose name matches it;
- ``U`` ``>n`` / ``<n``: more / fewer than n users;
- ``C`` ``C<n`` / ``C>n``: created less / more than n minutes ago;
- ``T`` ``T<n`` / ``T>n``: topic set less / more than n minutes ago (a channel
  without a topic never matches a T condition).

Plain channel names and masks add up (a channel matching any of them is
listed); every other condition must hold. A term that is none of these (a
malformed number) is ignored rather than refused, like other servers do.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ircd.proto.glob import Glob

__all__ = ["ListQuery", "parse_list_query"]

_RANGE = re.compile(r"^([CT]?)([<>])(-?\d+)$")


@dataclass(slots=True)
class ListQuery:
    names: list[str] = field(default_factory=list)  # plain names, as given
    folded_names: set[str] = field(default_factory=set)
    masks: list[Glob] = field(default_factory=list)
    not_masks: list[Glob] = field(default_factory=list)
    # (kind, op, value): kind "" users, "C" created minutes ago, "T" topic minutes ago
    ranges: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def only_names(self) -> bool:
        """Just channel names: look them up instead of scanning every channel."""
        return bool(self.names) and not (self.masks or self.not_masks or self.ranges)

    def matches(self, folded: str, users: int, created: float, topic_time: float, now: float) -> bool:
        """Whether a channel (by folded name and numbers) is listed."""
        if (self.masks or self.names) and not (
            folded in self.folded_names or any(m.matches(folded) for m in self.masks)
        ):
            return False
        if any(m.matches(folded) for m in self.not_masks):
            return False
        for kind, op, value in self.ranges:
            if kind == "":
                measured = float(users)
            elif kind == "C":
                measured = (now - created) / 60
            elif not topic_time:
                return False
            else:
                measured = (now - topic_time) / 60
            if (op == ">" and not measured > value) or (op == "<" and not measured < value):
                return False
        return True


def parse_list_query(params: list[str], casefold: Callable[[str], str]) -> ListQuery:
    """The terms of ``LIST [<term>{,<term>} [<term>{,<term>}]]`` (both parameters are read)."""
    query = ListQuery()
    for param in params[:2]:
        for term in param.split(","):
            if not term:
                continue
            match = _RANGE.match(term)
            if match:
                query.ranges.append((match.group(1), match.group(2), int(match.group(3))))
            elif term[0] == "!":
                query.not_masks.append(Glob(term[1:], casefold))
            elif "*" in term or "?" in term:
                query.masks.append(Glob(term, casefold))
            else:
                query.names.append(term)
                query.folded_names.add(casefold(term))
    return query
