"""PIRCAN across the nodes of a cluster (docs/scaling.md, "PIRCAN across nodes").

Every node keeps PIRCAN's whole live state (``state.Pircan``) for the whole network, as it keeps
the whole IRC network: the agreements cache, the contact policies and display names, the budget
and conversation windows, the pending NOTIFY counts, who is present on MCP or A2A, the private
channels' invitations. The database is the truth for what is durable; what a node changes in
memory it tells the others here, under the ``pircan.*`` kinds of ``ExtensionAPI.publish``, and
what another node tells it is applied as if it had happened here, without being told on.

Each node serves its own connections: NOTIFY goes to this node's connections of the account
(``Pircan.flush_notify``), a wait is answered on the node where it waits. A committed message,
task change or event reaches every node, which wakes its own waits and runs its own event hooks
(live pages, the webhook worker, the agent host decide for themselves what is theirs).

Installed only on a node of a cluster (``api.node`` set); a server on its own loads none of it.
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
from typing import Any

from ext.pircan import store as db
from ext.pircan import store_tasks as tdb
from ext.pircan.rules import SlidingWindow
from ext.pircan.service.waits import wake_task_waiters, wake_waiters
from ext.pircan.state import Pircan
from ext.pircan.store import Agreement, StoredMessage
from ircd.api import LoggedIn, LoggedOut, Quit, Registered

__all__ = ["NodeLink", "install"]

log = logging.getLogger("pircd.pircan.cluster")

# the kinds this module publishes (ExtensionAPI.publish) and listens to
AGREEMENT = "pircan.agreement"  # {"a": the Agreement's fields} known, or {"gone": id} forgotten
POLICY = "pircan.policy"  # {"account", "policy"}
NAME = "pircan.name"  # {"account", "name"} ("" clears it)
EVENT = "pircan.event"  # {"to", "kind", "id", "at"}: an event row committed
MESSAGE = "pircan.message"  # {"m": the StoredMessage's fields}: a message committed
TASK = "pircan.task"  # {"t": the Task's fields, "e": the TaskEntry's}: a task change committed
NOTIFIED = "pircan.notified"  # {"to", "ids"}: events announced (NOTIFY, a wait) on the sender's node
PRESENCE = "pircan.presence"  # {"account", "d": +1|-1}, or {"counts": {account: n}} (all of the node's)
ACCESS = "pircan.access"  # {"chan", "invited", "members"}: a private channel's access list as it is now
ACCOUNT = "pircan.account"  # {"account", "up"}: an IRC connection of it logged in (up) or closed here


_NAMES: dict[type, tuple[str, ...]] = {}


def _row(item: Any) -> list[Any]:
    """A dataclass's fields in order, for JSON (``dataclasses.astuple`` deep-copies: ten times the
    time, on every SEND)."""
    kind = type(item)
    names = _NAMES.get(kind)
    if names is None:
        names = _NAMES[kind] = tuple(f.name for f in dataclasses.fields(item))
    return [getattr(item, name) for name in names]


def _add_in_order(window: SlidingWindow, at: int) -> None:
    """A time another node counted: in order (the window drops its oldest first)."""
    times = window.times
    if not times or times[-1] <= at:
        times.append(at)
    else:
        bisect.insort(times, at)


class NodeLink:
    """What this node tells the others, and what it takes from them."""

    def __init__(self, state: Pircan) -> None:
        self.state = state
        self.api = state.api
        self.applying = False  # taking another node's change: nothing is told on
        self.local: dict[str, int] = {}  # this node's MCP/A2A presence counts
        self.remote: dict[str, dict[str, int]] = {}  # node -> its presence counts
        # while the cached rows are read again (``reload``): what other nodes changed meanwhile,
        # newer than what the read may return
        self.changed: set[tuple[str, Any]] | None = None

    def _tell(self, kind: str, data: dict[str, Any], node: str | None = None) -> None:
        if not self.applying:
            self.api.publish(kind, data, node)

    # what this node changed (called by state.Pircan, the services and channels.py) ----------------

    def agreement_known(self, agreement: Agreement) -> None:
        self._changed(AGREEMENT, agreement.id)
        self._tell(AGREEMENT, {"a": _row(agreement)})

    def agreement_gone(self, ident: int) -> None:
        self._changed(AGREEMENT, ident)
        self._tell(AGREEMENT, {"gone": ident})

    def policy_set(self, account: str, policy: str) -> None:
        self._changed(POLICY, account)
        self._tell(POLICY, {"account": account, "policy": policy})

    def display_name_set(self, account: str, name: str) -> None:
        self._changed(NAME, account)
        self._tell(NAME, {"account": account, "name": name})

    def notified(self, account: str, ids: list[int]) -> None:
        self._tell(NOTIFIED, {"to": account, "ids": ids})

    def presence(self, account: str, delta: int) -> None:
        if self.applying:
            return
        count = self.local.get(account, 0) + delta
        if count > 0:
            self.local[account] = count
        else:
            self.local.pop(account, None)
        self._tell(PRESENCE, {"account": account, "d": delta})

    def access_changed(self, channel: str, invited: set[str], members: set[str]) -> None:
        self._tell(ACCESS, {"chan": channel, "invited": sorted(invited), "members": sorted(members)})

    def event_committed(self, recipient: str, kind: str, event_id: int, at: int) -> None:
        self._tell(EVENT, {"to": recipient, "kind": kind, "id": event_id, "at": at})

    def message_committed(self, msg: StoredMessage) -> None:
        self._tell(MESSAGE, {"m": _row(msg)})

    def task_committed(self, task: tdb.Task, entry: tdb.TaskEntry) -> None:
        self._tell(TASK, {"t": _row(task), "e": _row(entry)})

    # what another node changed -----------------------------------------------------------------

    def _apply(self, handler: Any) -> Any:
        def apply(node: str, data: dict[str, Any]) -> None:
            self.applying = True
            try:
                handler(node, data)
            except Exception:
                log.exception("pircan cluster message failed from=%s data=%r", node, data)
            finally:
                self.applying = False
        return apply

    def _changed(self, kind: str, key: Any) -> None:
        if self.changed is not None:
            self.changed.add((kind, key))

    def _agreement(self, node: str, data: dict[str, Any]) -> None:
        if "gone" in data:
            self._changed(AGREEMENT, data["gone"])
            self.state.forget_agreement(data["gone"])
            return
        fields = list(data["a"])
        self._changed(AGREEMENT, fields[0])
        fields[4] = tuple(fields[4])  # the scopes (a list in JSON)
        self.state.forget_agreement(fields[0])  # the pair may have changed with it (never, today)
        self.state.remember_agreement(Agreement(*fields))

    def _policy(self, node: str, data: dict[str, Any]) -> None:
        self._changed(POLICY, data["account"])
        self.state.policies[data["account"]] = data["policy"]

    def _name(self, node: str, data: dict[str, Any]) -> None:
        self._changed(NAME, data["account"])
        if data["name"]:
            self.state.display_names[data["account"]] = data["name"]
        else:
            self.state.display_names.pop(data["account"], None)

    def _event(self, node: str, data: dict[str, Any]) -> None:
        self.state.event_committed(data["to"], data["kind"], data["id"], data["at"])

    def _message(self, node: str, data: dict[str, Any]) -> None:
        state = self.state
        msg = StoredMessage(*data["m"])
        state.remember_message(msg)
        # the network's limits count every node's sends (within the time the news takes to arrive)
        _add_in_order(state.conversation_window(msg.conversation_id), msg.created_at)
        _add_in_order(state.budget_window(msg.sender, msg.agreement_id), msg.created_at)
        state.last_active[msg.sender] = max(state.last_active.get(msg.sender, 0), msg.created_at)
        wake_waiters(state, msg)  # the take is settled in the database: one wait of all nodes gets it
        state.message_committed(msg)

    def _task(self, node: str, data: dict[str, Any]) -> None:
        state = self.state
        task, entry = tdb.Task(*data["t"]), tdb.TaskEntry(*data["e"])
        if entry.author == "server":  # the agreement ended: both sides hear
            wake_task_waiters(state, task, task.requester)
            wake_task_waiters(state, task, task.target)
        else:
            _add_in_order(state.budget_window(entry.author, task.agreement_id), entry.at)
            if task.version == 1:
                wake_task_waiters(state, task, task.target, "task")
            else:
                wake_task_waiters(state, task, task.other(entry.author))
        state.task_committed(task, entry)

    def _notified(self, node: str, data: dict[str, Any]) -> None:
        """Events another node announced: this node no longer counts them, unless a connection of
        the account is here too (this node tells it of them itself)."""
        account = data["to"]
        pending = self.state.pending.get(account)
        if pending is None or self.api.local_clients_for_account(account):
            return
        ids = set(data["ids"])
        for kind, events in list(pending.events.items()):
            for item in [e for e in events if e[1] in ids]:
                events.remove(item)
            if not events:
                del pending.events[kind]
        if not pending.events:
            del self.state.pending[account]

    def _presence(self, node: str, data: dict[str, Any]) -> None:
        if "counts" in data:  # the node's whole presence (it joined): it replaces what was known
            self._drop_presence(node)
            for account, count in data["counts"].items():
                for _ in range(count):
                    self._count(node, account, 1)
        else:
            self._count(node, data["account"], data["d"])

    def _count(self, node: str, account: str, delta: int) -> None:
        counts = self.remote.setdefault(node, {})
        count = counts.get(account, 0) + delta
        if count < 0:
            return  # a departure of an arrival this node never heard of
        if count:
            counts[account] = count
        else:
            counts.pop(account, None)
        if delta > 0:
            self.state.arrived_elsewhere(account)
        else:
            self.state.left_elsewhere(account)

    def _drop_presence(self, node: str) -> None:
        for account, count in self.remote.pop(node, {}).items():
            for _ in range(count):
                self.state.left_elsewhere(account)

    def _account(self, node: str, data: dict[str, Any]) -> None:
        """A connection of another node logged in or closed: its waits' peers watch or are gone
        (the core's own news of the user, sent before this on the same stream, is applied)."""
        if data["up"]:
            self.state.account_arrived(data["account"])
        else:
            self.state.account_departed(data["account"])

    def connection(self, account: str | None, up: bool) -> None:
        if account is not None:
            self._tell(ACCOUNT, {"account": account, "up": up})

    def _access(self, node: str, data: dict[str, Any]) -> None:
        chans = self.state.private_channels
        if chans is not None:
            chans.take_access(data["chan"], set(data["invited"]), set(data["members"]))

    def node_changed(self, node: str, up: bool) -> None:
        """A node joined (it hears this node's presence; what it changed while the two were apart
        is read from the database) or was given up (its presence ends)."""
        if up:
            self.api.publish(PRESENCE, {"counts": dict(self.local)}, node)
            if self.changed is None:
                self.api.spawn(self.reload())
        else:
            self.applying = True
            try:
                self._drop_presence(node)
            finally:
                self.applying = False


    async def reload(self) -> None:
        """Read the agreements, policies and display names again: a node apart from this one (NATS
        away, a cut, a restart) may have changed some, and its news of them was lost. A change told
        while the rows are read is newer than what the read returns, so it stays."""
        state = self.state
        self.changed = set()
        try:
            agreements = await state.database.read(db.live_agreements, state.now_ms())
            policies = await state.database.read(db.all_policies)
            names = await state.database.read(tdb.display_names)
        finally:
            changed, self.changed = self.changed, None
        self.applying = True  # what the database says is not news to the others
        try:
            live = {a.id for a in agreements}
            for ident in [i for i in state.agreements if i not in live and (AGREEMENT, i) not in changed]:
                state.forget_agreement(ident)
            for agreement in agreements:
                if (AGREEMENT, agreement.id) not in changed:
                    state.forget_agreement(agreement.id)
                    state.remember_agreement(agreement)
            _replace(state.policies, policies, {key for kind, key in changed if kind == POLICY})
            _replace(state.display_names, names, {key for kind, key in changed if kind == NAME})
        finally:
            self.applying = False
        chans = state.private_channels
        if chans is not None:
            await chans.load()
        log.info("pircan state read again after a node joined agreements=%d policies=%d names=%d",
                 len(agreements), len(policies), len(names))


def _replace(cache: dict[str, str], rows: dict[str, str], keep: set[str]) -> None:
    """``cache`` as the database's ``rows``, except the keys in ``keep`` (changed meanwhile)."""
    for key in [k for k in cache if k not in rows and k not in keep]:
        del cache[key]
    cache.update({k: v for k, v in rows.items() if k not in keep})


def install(state: Pircan) -> NodeLink:
    """Listen to the other nodes at once; tell them of changes once PIRCAN's state is loaded
    (``state.cluster`` is set after ``Pircan.start``: loading is not news)."""
    api = state.api
    link = NodeLink(state)
    for kind, handler in ((AGREEMENT, link._agreement), (POLICY, link._policy), (NAME, link._name),
                          (EVENT, link._event), (MESSAGE, link._message), (TASK, link._task),
                          (NOTIFIED, link._notified), (PRESENCE, link._presence), (ACCESS, link._access),
                          (ACCOUNT, link._account)):
        api.on_node_message(kind, link._apply(handler))
    api.on_node_change(link.node_changed)
    state.event_hooks.append(link.event_committed)
    state.message_hooks.append(link.message_committed)
    state.task_hooks.append(link.task_committed)
    # this node's IRC connections (the core tells extensions of its own users only)
    api.subscribe(Registered, lambda ev: link.connection(ev.client.account_folded, True))
    api.subscribe(LoggedIn, lambda ev: link.connection(ev.client.account_folded, True))
    api.subscribe(Quit, lambda ev: link.connection(ev.client.account_folded, False))
    api.subscribe(LoggedOut, lambda ev: link.connection(ev.account, False))

    async def ready() -> None:
        state.cluster = link

    api.on_startup(ready)
    return link
