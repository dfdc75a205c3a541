"""Channel state. Methods change state and return results; they never send.

Member prefix modes are kept per member as a string in rank order (``"qov"``
subset), so ``NAMES`` with multi-prefix is a join and without it the first
character.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator

from ircd.proto.glob import Glob

if TYPE_CHECKING:
    from ircd.state.client import Client

__all__ = ["Channel", "ListEntry", "PREFIX_MODES", "PREFIX_CHARS", "normalize_mask", "prefix_of", "split_extban"]

# Prefix modes in rank order and their NAMES/WHO symbols.
PREFIX_MODES = "qov"
PREFIX_CHARS = {"q": "~", "o": "@", "v": "+"}
CHANNEL_TYPES = "#"
LIST_MODES = "beI"


def prefix_of(member_modes: str, multi: bool = False) -> str:
    if not member_modes:
        return ""
    if multi:
        return "".join(PREFIX_CHARS[m] for m in member_modes)
    return PREFIX_CHARS[member_modes[0]]


def sort_prefix_modes(modes: str) -> str:
    return "".join(m for m in PREFIX_MODES if m in modes)


# Extended masks (ISUPPORT EXTBAN=,am; no prefix character): ``a:<account mask>`` matches the
# account a client is logged in to, ``m:<mask>`` in the ban list is a mute (the mask, a hostmask or
# an ``a:`` one, may join and read but not speak). ``$a:`` is the account form of older versions.
EXTBAN_ACCOUNT = "a:"
EXTBAN_MUTE = "m:"
# which entries of a list Channel._matches_list looks at
PLAIN = 0  # not the mutes
MUTES = 1  # only the mutes (m:)
ANY = 2


def split_extban(mask: str) -> tuple[bool, bool, str]:
    """``(mute, account, pattern)`` of a list mask as stored."""
    mute = mask[:2] == EXTBAN_MUTE
    if mute:
        mask = mask[2:]
    if mask[:3] == "$a:":
        return mute, True, mask[3:]
    if mask[:2] == EXTBAN_ACCOUNT:
        return mute, True, mask[2:]
    return mute, False, mask


def normalize_mask(mask: str) -> str:
    """A list mask as stored: ``nick`` -> ``nick!*@*``, ``user@host`` -> ``*!user@host``; ``a:<account
    mask>`` as it is (``$a:`` becomes ``a:``); ``m:<mask>`` with its mask normalized the same way."""
    if mask[:2] == EXTBAN_MUTE:
        return EXTBAN_MUTE + _normalize_plain(mask[2:])
    return _normalize_plain(mask)


def _normalize_plain(mask: str) -> str:
    if mask[:3] == "$a:":
        return EXTBAN_ACCOUNT + mask[3:]
    if mask[:2] == EXTBAN_ACCOUNT or mask[:1] == "$":
        return mask
    if "!" not in mask and "@" not in mask:
        return mask + "!*@*"
    if "!" not in mask:
        return "*!" + mask
    if "@" not in mask:
        return mask + "@*"
    return mask


@dataclass(slots=True)
class ListEntry:
    """A ban, exception or invite mask: ``nick!user@host``, ``a:<account mask>``, or in the ban list
    a mute, ``m:`` before either."""

    mask: str
    set_by: str
    set_at: int
    _glob: Glob | None = field(default=None, repr=False)  # compiled at the first check
    mute: bool = field(default=False, init=False)
    account: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.mute, self.account, _ = split_extban(self.mask)

    def glob(self, casefold: Callable[[str], str]) -> Glob:
        glob = self._glob
        if glob is None:
            glob = self._glob = Glob(split_extban(self.mask)[2], casefold)
        return glob


class Channel:
    __slots__ = (
        "name",
        "folded",
        "members",
        "modes",
        "key",
        "limit",
        "topic",
        "topic_setter",
        "topic_time",
        "created",
        "lists",
        "invited",
        "owner_account",
        "ext",
        "shadows",
    )

    def __init__(self, name: str, folded: str, created: int) -> None:
        self.name = name
        self.folded = folded
        self.members: dict["Client", str] = {}
        self.modes: set[str] = set()
        self.key: str | None = None
        self.limit: int | None = None
        self.topic = ""
        self.topic_setter = ""
        self.topic_time = 0
        self.created = created
        self.lists: dict[str, list[ListEntry]] = {"b": [], "e": [], "I": []}
        self.invited: set[str] = set()  # folded nicks invited while +i
        self.owner_account: str | None = None
        self.ext: dict[str, object] | None = None
        # members that are further connections of a member's nick (ircd.sessions): not users
        self.shadows = 0

    def __repr__(self) -> str:
        return f"<Channel {self.name} {len(self.members)}>"

    # membership ----------------------------------------------------------

    def add_member(self, client: "Client", modes: str = "") -> None:
        """Add a member, with every connection that shares its nick (ircd.sessions)."""
        self.members[client] = modes
        client.channels[self.folded] = self
        group = client.group
        if group is not None:
            for other in group.members:
                if other is not client:
                    self.members[other] = modes
                    other.channels[self.folded] = self
                    self.shadows += 1

    def remove_member(self, client: "Client") -> None:
        """Remove a member, with every connection that shares its nick."""
        self.members.pop(client, None)
        client.channels.pop(self.folded, None)
        group = client.group
        if group is not None:
            for other in group.members:
                if other is not client and self.members.pop(other, None) is not None:
                    other.channels.pop(self.folded, None)
                    self.shadows -= 1

    def user_count(self) -> int:
        """Members, counting the connections that share a nick once."""
        return len(self.members) - self.shadows

    def member_modes(self, client: "Client") -> str | None:
        return self.members.get(client)

    def is_op(self, client: "Client") -> bool:
        modes = self.members.get(client)
        return bool(modes) and ("o" in modes or "q" in modes)  # type: ignore[operator]

    def set_prefix(self, client: "Client", mode: str, adding: bool) -> bool:
        """Give or take a prefix mode; returns whether anything changed."""
        current = self.members.get(client)
        if current is None:
            return False
        if adding:
            if mode in current:
                return False
            modes = sort_prefix_modes(current + mode)
        else:
            if mode not in current:
                return False
            modes = current.replace(mode, "")
        self.members[client] = modes
        group = client.group
        if group is not None:
            for other in group.members:
                if other in self.members:
                    self.members[other] = modes
        return True

    def iter_members(self) -> Iterator["Client"]:
        return iter(self.members)

    # access --------------------------------------------------------------

    def _matches_list(
        self, which: str, client: Client, casefold: Callable[[str], str], kind: int = PLAIN
    ) -> bool:
        """Whether an entry of the list matches ``client``: among its plain entries (``PLAIN``),
        its mutes (``MUTES``, the ``m:`` ones) or both (``ANY``)."""
        entries = self.lists[which]
        if not entries:
            return False
        shown = real = ""
        account = client.account_folded
        for entry in entries:
            if (kind == PLAIN and entry.mute) or (kind == MUTES and not entry.mute):
                continue
            glob = entry.glob(casefold)
            if entry.account:
                if account and glob.matches(account):
                    return True
                continue
            if not shown:
                shown = casefold(client.prefix)
                real = casefold(f"{client.nick}!{client.user}@{client.ip}")
            if glob.matches(shown) or glob.matches(real):
                return True
        return False

    def is_banned(self, client: "Client", casefold: Callable[[str], str]) -> bool:
        """Banned from joining: a ban (not a mute) matches and no exception does."""
        return self._matches_list("b", client, casefold) and not self._matches_list(
            "e", client, casefold
        )

    def is_silenced(self, client: Client, casefold: Callable[[str], str]) -> bool:
        """May not speak: a ban matches and no exception does, or a mute (``m:``) matches and no
        exception does, a mute exception (``e m:<mask>``) included. Voice or a higher prefix
        speaks through both (the caller checks)."""
        if self._matches_list("b", client, casefold) and not self._matches_list("e", client, casefold):
            return True
        return self._matches_list("b", client, casefold, MUTES) and not self._matches_list(
            "e", client, casefold, ANY
        )

    def is_invex(self, client: "Client", casefold: Callable[[str], str]) -> bool:
        return self._matches_list("I", client, casefold)

    def add_list_entry(self, which: str, mask: str, set_by: str, now: int, casefold) -> bool:
        folded = casefold(mask)
        for entry in self.lists[which]:
            if casefold(entry.mask) == folded:
                return False
        self.lists[which].append(ListEntry(mask, set_by, now))
        return True

    def remove_list_entry(self, which: str, mask: str, casefold) -> str | None:
        folded = casefold(mask)
        entries = self.lists[which]
        for i, entry in enumerate(entries):
            if casefold(entry.mask) == folded:
                del entries[i]
                return entry.mask
        return None

    def mode_string(self, show_key: bool) -> tuple[str, list[str]]:
        flags = "".join(sorted(m for m in self.modes))
        params: list[str] = []
        if self.key is not None:
            flags += "k"
            if show_key:
                params.append(self.key)
        if self.limit is not None:
            flags += "l"
            params.append(str(self.limit))
        return "+" + flags, params
