"""PIRCAN: the agent-network layer of pircd.

Agents are accounts with owners. They agree on contact (CONTACT), exchange
durable direct messages (SEND) under agreements, pull them (INBOX), get
content-free NOTIFY lines, and every decision is audited. This package
reaches the core only through ``ircd.api``; all of its SQL is in
``store.py`` on its own migration track.
"""

from __future__ import annotations

import functools
from typing import Any

from ircd.api import (
    Capability,
    CommandContext,
    ExtensionAPI,
    LoggedIn,
    LoggedOut,
    Message,
    Quit,
    Registered,
    Rehashed,
)

from ext.pircan.channels import handle_uninvite
from ext.pircan.channels import install as install_channels
from ext.pircan.config import PircanConfig
from ext.pircan.irc import help as help_text
from ext.pircan.irc.contact import handle_contact
from ext.pircan.irc.intro import handle_intro
from ext.pircan.irc.messages import handle_inbox, handle_send
from ext.pircan.irc.profile import handle_profile, handle_resource
from ext.pircan.irc.roster import handle_agents, handle_audit
from ext.pircan.irc.tasks import handle_task
from ext.pircan.rules import Limits
from ext.pircan.service.contact import sweep
from ext.pircan.service.intro import ensure_signing_key
from ext.pircan.service import waits
from ext.pircan.service.lifecycle import reconcile
from ext.pircan.service.tasks import end_tasks_of
from ext.pircan.state import NOTIFY_CAP_NAME, Pircan
from ext.pircan import webhooks

__all__ = ["setup", "schema_migrations", "schema_tracks", "VERSION"]

VERSION = "0.1"


def schema_migrations() -> dict[str, list[Any]]:
    """PIRCAN's schema tracks and their steps (``pircd migrate-store`` makes the tables it copies into)."""
    from ext.pircan import store
    from ext.pircan.a2a import store as a2a_store
    from ext.pircan.host import store as host_store
    from ext.pircan.webhooks import store as webhook_store

    return {module.TRACK: list(module.MIGRATIONS) for module in (store, a2a_store, webhook_store, host_store)}


def schema_tracks() -> dict[str, int]:
    """PIRCAN's schema tracks and their newest versions (``pircd restore`` refuses a newer one)."""
    return {track: len(steps) for track, steps in schema_migrations().items()}


def setup(api: ExtensionAPI) -> Pircan:
    cfg = api.config(PircanConfig)
    state = Pircan(api, cfg)
    state.notify_cap = api.capability(Capability(NOTIFY_CAP_NAME))

    def verb(fn):
        return functools.partial(fn, state)  # calling it makes the handler's coroutine directly

    for name, fn, text in (
        ("CONTACT", handle_contact, help_text.CONTACT),
        ("SEND", handle_send, help_text.SEND),
        ("INBOX", handle_inbox, help_text.INBOX),
        ("AGENTS", handle_agents, help_text.AGENTS),
        ("AUDIT", handle_audit, help_text.AUDIT),
        ("TASK", handle_task, help_text.TASK),
        ("PROFILE", handle_profile, help_text.PROFILE),
        ("RESOURCE", handle_resource, help_text.RESOURCE),
        ("INTRO", handle_intro, help_text.INTRO),
    ):
        syntax, _, rest = text.partition("\n")
        api.command(name, verb(fn), syntax=syntax, help=rest)
    chans = install_channels(state)
    state.private_channels = chans

    async def uninvite(ctx: CommandContext, msg: Message) -> None:
        await handle_uninvite(state, chans, ctx, msg)

    syntax, _, rest = help_text.UNINVITE.partition("\n")
    api.command("UNINVITE", uninvite, syntax=syntax, help=rest)
    api.help_topic("NOTIFY", help_text.NOTIFY.splitlines())
    api.help_topic("PIRCAN", help_text.OVERVIEW)
    api.help_footer("PIRCAN (agent network): HELP PIRCAN, HELP CONTACT, HELP SEND, HELP INBOX, HELP NOTIFY,")
    api.help_footer("  HELP AGENTS, HELP AUDIT, HELP UNINVITE (private channels #<account>/<name>), HELP TASK,")
    api.help_footer("  HELP PROFILE, HELP RESOURCE, HELP INTRO (direct A2A)")
    api.help_note("JOIN", help_text.JOIN_NOTE)
    api.help_note("MODE", help_text.MODE_NOTE)
    api.help_note("NICK", help_text.NICK_NOTE)

    # ISUPPORT names are letters and digits only (RPL_ISUPPORT drafts), hence no separators
    api.isupport("PIRCAN", VERSION)
    api.isupport("PIRCANSENDLEN", Limits.send_chars)
    api.isupport("PIRCANHOPS", Limits.max_hops)
    api.isupport("PIRCANCONVRATE", Limits.conversation_per_hour)
    api.isupport("PIRCANBUDGET", Limits.sender_per_agreement_per_hour)
    api.isupport("PIRCANTASKLEN", Limits.send_chars)

    api.message_check(state.privmsg_check)
    api.subscribe(LoggedIn, state.on_account_seen)
    api.subscribe(Registered, state.on_account_seen)
    api.subscribe(Quit, state.on_quit)

    def logged_out(event: LoggedOut) -> None:
        state.client_gone(event.client, "You logged out")
        state.client_left(event.client, event.account)

    api.subscribe(LoggedOut, logged_out)

    def rehashed(event: Rehashed) -> None:  # REHASH / SIGHUP: take the new [pircan] section
        state.cfg = api.config(PircanConfig)

    api.subscribe(Rehashed, rehashed)
    waits.install(state)
    state.sweep_hooks.append(lambda: api.spawn(sweep(state)))
    state.agreement_end_hooks.append(lambda agreement, now: api.spawn(end_tasks_of(state, agreement, now)))

    started = False

    async def start() -> None:
        nonlocal started
        if api.database is None:
            raise RuntimeError("PIRCAN needs the server's store")
        await state.start()
        await chans.load()
        await reconcile(state, chans)  # accounts deleted while the server was down
        started = True

    async def accounts_changed() -> None:
        if started:
            await reconcile(state, chans)

    api.on_accounts_changed(accounts_changed)

    async def stop() -> None:
        state.stop()

    async def signing_key() -> None:  # intro tokens (IRC's INTRO too) are signed with it
        await ensure_signing_key(state)

    api.on_startup(signing_key)
    if api.http_enabled():  # else their libraries are not even imported
        from ext.pircan import a2a, mcp, portal

        a2a.install(state, mcp.install(state))
        portal.install(state)
    api.on_startup(start)
    if api.node is not None:  # a node of a cluster: the other nodes hear of PIRCAN's changes
        from ext.pircan import cluster

        cluster.install(state)  # after start: what it loads is not news
    api.on_shutdown(stop)
    webhooks.install(state)  # after start: its tables and trigger need PIRCAN's
    from ext.pircan import host

    host.install(state)  # after start too: its audit rows are PIRCAN's
    from ext.pircan import metrics

    metrics.install(state)
    return state


