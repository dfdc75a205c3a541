"""Webhooks, free of any transport: set, show, clear, rotate the secret, test, list and replay
dead letters. An account manages its own endpoint, and an owner its agents' endpoints; every
change is audited. The IRC verb WEBHOOK, the MCP tools and ``pircd webhook`` call these (the CLI
through the same store functions and rules, as the operator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ircd.api import Conn

from ext.pircan import store as db
from ext.pircan.ids import hexid, parse_id, ts
from ext.pircan.service.contact import managed_account
from ext.pircan.service.events import by_whom
from ext.pircan.service.refusals import Refused
from ext.pircan.state import Pircan
from ext.pircan.webhooks import rules, store
from ext.pircan.webhooks.sender import DestinationError, Outcome, check_url
from ext.pircan.webhooks.store import DeadLetter, Endpoint

__all__ = [
    "DEAD_MAX",
    "TEXT",
    "Status",
    "Tested",
    "clear",
    "clear_txn",
    "dead_letter_json",
    "dead_letters",
    "endpoint_json",
    "parse_delivery_ids",
    "replay",
    "replay_txn",
    "rotate",
    "rotate_txn",
    "set_txn",
    "set_webhook",
    "show",
    "test",
]

DEAD_MAX = 500

# the sentence of each refusal code particular to webhooks (docs/pircan.md, "Every FAIL code")
TEXT = {
    "INVALID_URL": "Not a usable webhook URL",
    "ADDRESS_NOT_ALLOWED": "The webhook URL resolves to an address the server may not send to",
    "NO_WEBHOOK": "No webhook is set for this account",
    "DISABLED": "The webhook was disabled after HTTP 410: set it again first",
    "NO_SUCH_DELIVERY": "No such dead letter for this account",
    "RATE_LIMITED": "A test of this webhook is already running",
}


@dataclass(frozen=True, slots=True)
class Status:
    endpoint: Endpoint
    pending: int
    dead: int


@dataclass(frozen=True, slots=True)
class Tested:
    account: str
    delivery_id: str
    outcome: Outcome


def _refused(code: str, *context: str, text: str | None = None) -> Refused:
    return Refused(code, *context, text=text or TEXT.get(code))


async def _account(state: Pircan, actor: str, name: str | None) -> str:
    """The account whose webhook ``actor`` manages: itself, or an agent it owns."""
    return await managed_account(state, actor, name, "An account manages its own webhook; an owner its agents'")


def _worker(state: Pircan) -> Any:
    return state.webhooks


# The *_txn functions run in one transaction each, on the server's writer thread or in
# ``pircd webhook`` (as the actor ``operator``).

# SET --------------------------------------------------------------------------------------------


def set_txn(conn: Conn, account: str, url: str, secret: str, now: int, actor: str, audit_id: int,
             by: str) -> tuple[Endpoint, bool]:
    endpoint, created = store.save_endpoint(conn, account, url, secret, now)
    db.audit(conn, audit_id, now, actor, account, "webhook.set", url + (" new secret" if created else "") + by)
    return endpoint, created


async def set_webhook(state: Pircan, actor: str, url: str, account_name: str | None = None,
                      *, via: str = "irc") -> tuple[Endpoint, str | None]:
    """Set the account's endpoint. A new endpoint gets a secret, returned here once; an existing one
    (also one disabled after HTTP 410) keeps its secret and is enabled with the new URL.
    Refusals: NO_SUCH_ACCOUNT, NOT_ALLOWED, INVALID_URL, ADDRESS_NOT_ALLOWED."""
    account = await _account(state, actor, account_name)
    try:
        await check_url(url, _worker(state).policy().allowed)
    except DestinationError as exc:
        raise _refused(exc.code, url, text=exc.text) from None
    secret = rules.new_secret()
    endpoint, created = await state.database.write(set_txn, account, url, secret, state.now_ms(), actor,
                                                   state.new_id(), by_whom(actor, account, via))
    _worker(state).endpoint_set(endpoint)
    return endpoint, secret if created else None


# SHOW, CLEAR, ROTATE -------------------------------------------------------------------------------


async def show(state: Pircan, actor: str, account_name: str | None = None) -> Status:
    account = await _account(state, actor, account_name)
    endpoint, pending, dead = await state.database.read(store.endpoint_counts, account)
    if endpoint is None:
        raise _refused("NO_WEBHOOK", account)
    return Status(endpoint, pending, dead)


def clear_txn(conn: Conn, account: str, now: int, actor: str, audit_id: int,
               by: str) -> int | None:
    found = store.delete_endpoint(conn, account)
    if found is None:
        return None
    endpoint, dropped = found
    db.audit(conn, audit_id, now, actor, account, "webhook.clear", f"{endpoint.url} dropped={dropped}" + by)
    return dropped


async def clear(state: Pircan, actor: str, account_name: str | None = None, *, via: str = "irc") -> tuple[str, int]:
    """Remove the account's endpoint; its pending deliveries are dropped (the events stay in the
    inbox; dead letters stay). (account, deliveries dropped)."""
    account = await _account(state, actor, account_name)
    dropped = await state.database.write(clear_txn, account, state.now_ms(), actor, state.new_id(),
                                         by_whom(actor, account, via))
    if dropped is None:
        raise _refused("NO_WEBHOOK", account)
    _worker(state).forget(account)
    await _worker(state).a2a_changed(account)  # its published A2A endpoint, if any, gets its events now
    return account, dropped


def rotate_txn(conn: Conn, account: str, secret: str, now: int, actor: str, audit_id: int,
                by: str) -> bool:
    if not store.rotate_secret(conn, account, secret, now, rules.SECRET_GRACE_MS):
        return False
    db.audit(conn, audit_id, now, actor, account, "webhook.rotate", "new secret" + by)
    return True


async def rotate(state: Pircan, actor: str, account_name: str | None = None, *, via: str = "irc") -> tuple[str, str]:
    """A new secret for the account's endpoint, returned once; for 24 hours deliveries are signed with
    the old one too. (account, secret)."""
    account = await _account(state, actor, account_name)
    secret = rules.new_secret()
    if not await state.database.write(rotate_txn, account, secret, state.now_ms(), actor, state.new_id(),
                                      by_whom(actor, account, via)):
        raise _refused("NO_WEBHOOK", account)
    return account, secret


# TEST -------------------------------------------------------------------------------------------------


async def test(state: Pircan, actor: str, account_name: str | None = None) -> Tested:
    """Send a signed ``test`` event to the endpoint now and report how it answered (nothing is queued,
    retried or disabled by it). One test per endpoint at a time (RATE_LIMITED)."""
    account = await _account(state, actor, account_name)
    endpoint = await state.database.read(store.get_endpoint, account)
    if endpoint is None:
        raise _refused("NO_WEBHOOK", account)
    worker = _worker(state)
    if account in worker.testing:
        raise _refused("RATE_LIMITED", account)
    worker.testing.add(account)
    try:
        delivery_id, outcome = await worker.test(endpoint)
    finally:
        worker.testing.discard(account)
    return Tested(account, delivery_id, outcome)


# dead letters ----------------------------------------------------------------------------------------


async def dead_letters(state: Pircan, actor: str, account_name: str | None = None,
                       limit: int = 50) -> tuple[str, list[DeadLetter]]:
    """The account's newest ``limit`` dead letters (at most 500), oldest first."""
    account = await _account(state, actor, account_name)
    return account, await state.database.read(store.dead_letters, account, max(1, min(limit, DEAD_MAX)))


def parse_delivery_ids(which: str | list[str]) -> list[int] | None:
    """``ALL`` (None) or delivery ids, comma-separated or a list; raises NO_SUCH_DELIVERY for a malformed one."""
    items = which.split(",") if isinstance(which, str) else which
    if len(items) == 1 and items[0].upper() == "ALL":
        return None
    ids = []
    for item in items:
        ident = parse_id(item)
        if ident is None:
            raise _refused("NO_SUCH_DELIVERY", item)
        ids.append(ident)
    if not ids:
        raise _refused("NO_SUCH_DELIVERY", "*")
    return ids


def replay_txn(conn: Conn, account: str, ids: list[int] | None, now: int, actor: str, audit_id: int,
               by: str) -> int:
    endpoint = store.get_endpoint(conn, account, None)  # the webhook, or the A2A endpoint that takes its place
    if endpoint is None:
        raise _refused("NO_WEBHOOK", account)
    if not endpoint.enabled:
        raise _refused("DISABLED", account)
    if ids is not None:
        found = store.dead_ids(conn, account, ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise _refused("NO_SUCH_DELIVERY", hexid(missing[0]))
    count = store.replay(conn, account, endpoint.id, ids, now)
    what = "all" if ids is None else ",".join(hexid(i) for i in ids)
    db.audit(conn, audit_id, now, actor, account, "webhook.replay", f"{count} dead letters ({what})" + by)
    return count


async def replay(state: Pircan, actor: str, which: str | list[str], account_name: str | None = None,
                 *, via: str = "irc") -> tuple[str, int]:
    """Queue dead letters (``ALL`` or delivery ids) again: same delivery ids and payloads, due now,
    with 12 tries and 3 days of their own. Refusals: NO_WEBHOOK, DISABLED, NO_SUCH_DELIVERY."""
    account = await _account(state, actor, account_name)
    ids = parse_delivery_ids(which)
    count = await state.database.write(replay_txn, account, ids, state.now_ms(), actor, state.new_id(),
                                       by_whom(actor, account, via))
    _worker(state).replayed(account)
    return account, count


# JSON (MCP) --------------------------------------------------------------------------------------------


def endpoint_json(status: Status) -> dict[str, Any]:
    ep = status.endpoint
    return {
        "account": ep.account,
        "url": ep.url,
        "enabled": ep.enabled,
        "created_at": ts(ep.created_at),
        "updated_at": ts(ep.updated_at),
        "disabled_at": None if ep.disabled_at is None else ts(ep.disabled_at),
        "disabled_reason": ep.disabled_reason,
        "pending": status.pending,
        "dead_letters": status.dead,
        "last_success_at": None if ep.last_success_at is None else ts(ep.last_success_at),
        "last_failure_at": None if ep.last_failure_at is None else ts(ep.last_failure_at),
        "last_error": ep.last_error,
    }


def dead_letter_json(dead: DeadLetter) -> dict[str, Any]:
    return {
        "delivery_id": hexid(dead.id),
        "event_id": hexid(dead.event_id),
        "type": dead.kind,
        "event_created_at": ts(dead.event_at),
        "url": dead.url,
        "queued_at": ts(dead.queued_at),
        "died_at": ts(dead.died_at),
        "tries": dead.tries,
        "reason": dead.reason,
        "last_status": dead.last_status,
        "last_error": dead.last_error,
    }
