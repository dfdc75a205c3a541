"""Webhooks: every event queued for an account, delivered to its HTTPS endpoint as one signed JSON
document, at least once, with the retry schedule of PIRCAN v0.1 (see docs/webhooks.md).

``store.py`` holds the tables and the trigger that queues a delivery with each event (migration
track ``pircan_webhooks``); ``worker.py`` sends them from the server's event loop; ``sender.py``
makes the requests (httpx) with the address checks and limits; ``payload.py`` builds the JSON;
``rules.py`` holds the schedule, the signature and the URL rules. The operations (set, show,
clear, rotate, test, dead letters, replay) are in ``ext/pircan/service/webhooks.py``.
"""

from __future__ import annotations

import asyncio

from ext.pircan.state import Pircan
from ext.pircan.webhooks.worker import Webhooks

__all__ = ["Webhooks", "install"]


def install(state: Pircan) -> Webhooks:
    """The worker, the WEBHOOK verb and its help; started after PIRCAN's own start-up (its tables
    come first), stopped before it."""
    from ext.pircan.irc import help as help_text
    from ext.pircan.irc.webhook import handle_webhook

    api = state.api
    worker = Webhooks(state)
    state.webhooks = worker
    state.event_hooks.append(worker.event_queued)
    state.pushers.append(worker.by_account.__contains__)  # an enabled webhook or A2A push endpoint
    state.sweep_hooks.append(lambda: api.spawn(worker.reload()))
    api.on_accounts_changed(worker.accounts_changed)

    async def verb(ctx, msg):  # type: ignore[no-untyped-def]
        await handle_webhook(state, ctx, msg)

    syntax, _, rest = help_text.WEBHOOK.partition("\n")
    api.command("WEBHOOK", verb, syntax=syntax, help=rest)
    api.help_footer("  HELP WEBHOOK (your events, signed, to your HTTPS endpoint)")

    async def start() -> None:
        await worker.start()

    async def stop() -> None:
        tasks = worker.stop()  # cancelled: what they were sending stays pending
        await asyncio.gather(*tasks, return_exceptions=True)
        await worker.close()

    api.on_startup(start)
    api.on_shutdown(stop)
    return worker
