"""Searching the bodies of direct messages (SQLite's FTS5, PostgreSQL's text search), for the parties only.

A search sees the messages one account sent or received: an agent's own, or, for its owner, those
of one of its agents (``contact.managed_account``), exactly the messages ``INBOX HISTORY`` shows
them; nobody else's match is ever read. The answer is the same message objects as history, newest
first, a page at a time (``before``: the oldest id of the page before).

The query language is small and cannot fail on ordinary text: words (all must occur), ``"a
phrase"``, ``prefix*``, ``OR`` between alternatives, ``NOT`` before a word to exclude, ``AND``
(the default) and parentheses. Each word is handed to FTS5 as a quoted string, so punctuation in
a word (``e-mail``, ``v1.2``, ``it's``) is text to find, never FTS5 syntax; matching ignores case
and accents (``unicode61 remove_diacritics 2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ircd.api import Conn, OperationalError

from ext.pircan import store as db
from ext.pircan.ids import hexid, parse_id
from ext.pircan.service.contact import managed_account
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage

__all__ = ["QUERY_MAX", "SEARCH_MAX", "SEARCH_PAGE", "SYNTAX", "Found", "fts_query", "search_messages"]

SEARCH_PAGE = 20
SEARCH_MAX = 100
QUERY_MAX = 300  # characters of a query
SYNTAX = 'words (all must occur), "a phrase", prefix*, a OR b, NOT word, ( ... )'
_TOKEN = re.compile(r'"[^"]*"?|\(|\)|[^\s()"]+')
_OPERATORS = ("AND", "OR", "NOT")


@dataclass(frozen=True, slots=True)
class Found:
    """A page of matches, newest first; ``more``: the id to pass as ``before`` for the next page."""

    account: str
    messages: list[StoredMessage]
    more: str | None


def _bad(query: str, why: str) -> Refused:
    return Refused("INVALID_PARAMS", "query", text=f"{why}. A search is {SYNTAX}")


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def fts_query(query: str) -> str:
    """The FTS5 expression of a search (see the module's text); INVALID_PARAMS for one that is
    empty, too long, or whose operators or parentheses do not fit together."""
    if not query.strip():
        raise _bad(query, "Nothing to search for")
    if len(query) > QUERY_MAX:
        raise _bad(query, f"A search is at most {QUERY_MAX} characters")
    out: list[str] = []
    depth = 0
    want_term = True  # at the start, after an operator or "("
    for token in _TOKEN.findall(query):
        if token in _OPERATORS:
            if token == "NOT":  # "a NOT b": b must not occur; "NOT b" alone has nothing to exclude from
                if want_term:
                    raise _bad(query, "NOT excludes from what comes before it")
                out.append("NOT")
            else:
                if want_term:
                    raise _bad(query, f"{token} stands between two terms")
                out.append(token)
            want_term = True
            continue
        if token == "(":
            if not want_term:
                out.append("AND")
            out.append("(")
            depth += 1
            want_term = True
            continue
        if token == ")":
            if depth == 0 or want_term:
                raise _bad(query, "Parentheses do not match")
            out.append(")")
            depth -= 1
            continue
        if not want_term:
            out.append("AND")
        if token.startswith('"'):
            phrase = token.strip('"').strip()
            if not phrase:
                raise _bad(query, "An empty phrase")
            out.append(_quoted(phrase))
        else:
            prefix = token.endswith("*")
            word = token.rstrip("*")
            if not word:
                raise _bad(query, "A prefix needs at least one letter before *")
            out.append(_quoted(word) + ("*" if prefix else ""))
        want_term = False
    if want_term or depth:
        raise _bad(query, "The search ends in the middle" if not depth else "Parentheses do not match")
    return " ".join(out)


def _search(conn: Conn, account: str, match: str, limit: int,
            before: int | None) -> list[StoredMessage] | str:
    try:
        return db.search_messages(conn, account, match, limit, before)
    except OperationalError as exc:  # a word that is nothing but separators, say (SQLite)
        return str(exc)


async def search_messages(state: Pircan, actor: str, query: str, *, account: str | None = None,
                          limit: int = SEARCH_PAGE, before: str | None = None) -> Found:
    """The messages ``account`` (``actor`` itself, or an agent it owns) sent or received whose body
    matches ``query``: newest first, at most ``limit`` (1 to ``SEARCH_MAX``), older than the message
    ``before``. Refusals: INVALID_PARAMS (the query), NO_SUCH_MESSAGE (``before``), NO_SUCH_ACCOUNT /
    NOT_ALLOWED (``account``)."""
    party = await managed_account(state, actor, account, "You may search only your own messages and your agents'")
    match = fts_query(query)
    before_id = None
    if before not in (None, "", "*"):
        before_id = parse_id(before)  # type: ignore[arg-type]
        if before_id is None:
            raise Refused("NO_SUCH_MESSAGE", before)  # type: ignore[arg-type]
    limit = max(1, min(limit, SEARCH_MAX))
    found = await state.database.read(_search, party, match, limit, before_id)
    if isinstance(found, str):
        raise _bad(query, "That search cannot be run (" + found.removeprefix("fts5: ") + ")")
    more = hexid(found[-1].id) if len(found) == limit else None
    return Found(party, found, more)
