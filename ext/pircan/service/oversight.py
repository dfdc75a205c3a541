"""What an owner sees of its agents' conversations: their messages in both directions, by thread,
whole, with their read state, and their tasks.

An owner reads everything its agents sent and received (it answers for them), and nothing of
anyone else's: every function here first checks that the agent is the actor's
(``owner.owned_agent``: NO_SUCH_ACCOUNT otherwise, as for a name nobody has). Writing to one's own
agent is an ordinary SEND (``messages.send_message``): an agent and its owner need no agreement, and
the agent sees the message from its owner's account. The portal's agent pages call these; an IRC
verb or an MCP tool would call the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.ids import hexid, parse_id
from ext.pircan.service import messages
from ext.pircan.service.owner import owned_agent
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.store import StoredMessage
from ext.pircan.store_tasks import Task

__all__ = ["PAGE", "TASKS_SHOWN", "Thread", "Threads", "conversations", "send_to_agent", "tasks_of", "thread"]

PAGE = 100  # messages a page of conversations holds
TASKS_SHOWN = 50
MAX_DEPTH = 4  # replies deeper than this are shown at this depth


@dataclass(frozen=True, slots=True)
class Thread:
    """One conversation of the agent: the other party, its messages oldest first with the depth of
    each reply (0 for a message that answers none shown here)."""

    conversation_id: int
    other: str
    messages: list[tuple[StoredMessage, int]]
    complete: bool  # the page holds the conversation's first message


@dataclass(frozen=True, slots=True)
class Threads:
    agent: str
    threads: list[Thread]  # the thread with the newest message first
    more: str | None  # the id to pass as ``before`` for older messages


def _depths(items: list[StoredMessage]) -> list[tuple[StoredMessage, int]]:
    depth: dict[int, int] = {}
    out = []
    for msg in items:
        level = depth.get(msg.in_reply_to, -1) + 1 if msg.in_reply_to is not None else 0
        depth[msg.id] = level
        out.append((msg, min(level, MAX_DEPTH)))
    return out


def _thread(agent: str, conversation_id: int, items: list[StoredMessage]) -> Thread:
    first = items[0]
    other = first.recipient if first.sender == agent else first.sender
    return Thread(conversation_id, other, _depths(items), first.id == conversation_id)


async def conversations(state: Pircan, actor: str, agent_name: str, limit: int = PAGE,
                        before: str | None = None) -> Threads:
    """The newest ``limit`` messages the agent sent or received (older than ``before``), by
    conversation: the conversation with the newest message first, each oldest first."""
    agent = str((await owned_agent(state, actor, agent_name)).folded)
    before_id = None
    if before not in (None, "", "*"):
        before_id = parse_id(before)  # type: ignore[arg-type]
        if before_id is None:
            raise Refused("NO_SUCH_MESSAGE", before)  # type: ignore[arg-type]
    limit = max(1, min(limit, messages.HISTORY_MAX))
    newest = await state.database.read(db.messages_of, agent, limit, before_id)
    by_conversation: dict[int, list[StoredMessage]] = {}
    for msg in newest:  # newest first: the first seen of a conversation orders the threads
        by_conversation.setdefault(msg.conversation_id, []).append(msg)
    threads = [_thread(agent, conv, list(reversed(items))) for conv, items in by_conversation.items()]
    more = hexid(newest[-1].id) if len(newest) == limit else None
    return Threads(agent, threads, more)


async def thread(state: Pircan, actor: str, agent_name: str, conversation_id: str) -> Thread:
    """One whole conversation of the agent (both directions), oldest first; NO_SUCH_MESSAGE when the
    agent is no party of it."""
    agent = str((await owned_agent(state, actor, agent_name)).folded)
    items = await messages.conversation(state, agent, conversation_id)
    return _thread(agent, items[0].conversation_id, items)


async def send_to_agent(state: Pircan, actor: str, agent_name: str, body: str, in_reply_to: str | None = None,
                        *, via: str = "irc") -> messages.Sent:
    """The owner writes to its own agent: a SEND without an agreement, audited with how it came."""
    agent = await owned_agent(state, actor, agent_name)
    return await messages.send_message(state, actor, str(agent.folded), body, in_reply_to or None, via=via)


async def tasks_of(state: Pircan, actor: str, agent_name: str, limit: int = TASKS_SHOWN) -> list[Task]:
    """The agent's tasks (either side), newest first."""
    agent = str((await owned_agent(state, actor, agent_name)).folded)
    return await state.database.read(tdb.tasks_of, [agent], None, None, None, max(1, min(limit, TASKS_SHOWN)))
