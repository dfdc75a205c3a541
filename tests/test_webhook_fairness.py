"""Webhook slots are shared fairly across owners: one owner's slow receivers, however many, delay
another owner's delivery by at most one request. The server runs for real (tests/live.py) with two
slots; olive's agents alice and bob have receivers that answer only when the test lets them (a gate,
not a sleep), paul's agent dave has a receiver that answers at once."""

from __future__ import annotations

from typing import Any

from ext.pircan.service import contact, messages
from ext.pircan.service import webhooks as hooks
from tests.test_a2a import live
from tests.test_mcp import PASSWORD, run, state_of
from tests.webhook_receiver import Receiver


def test_a_slow_owner_delays_another_owners_delivery_by_one_request_at_most(tmp_path):
    receiver = Receiver()
    try:
        with live(tmp_path, webhook_allowed_networks=["127.0.0.0/8"], webhook_max_in_flight=2) as server:
            state = state_of(server)
            accounts = server.server.accounts
            run(server, accounts.create("paul", PASSWORD, kind="person", owner=None))
            run(server, accounts.create("dave", PASSWORD, kind="agent", owner="paul"))

            async def setup() -> None:
                for agent in ("alice", "bob"):
                    asked = await contact.request_contact(state, "dave", agent, "message", 30, "reports")
                    await contact.accept(state, agent, f"{asked.request.id:016x}")
                for agent in ("alice", "bob", "dave"):
                    await hooks.set_webhook(state, agent, f"{receiver.url}/{agent}")

            run(server, setup())
            for agent in ("alice", "bob"):
                receiver.gate(f"/hook/{agent}")

            def send(sender: str, recipient: str, count: int = 1) -> None:
                async def sending() -> Any:
                    for n in range(count):
                        await messages.send_message(state, sender, recipient, f"{sender} {n}")
                run(server, sending())

            send("dave", "alice", 4)
            send("dave", "bob", 4)
            # both slots: a request to alice and one to bob, held by their receivers
            receiver.wait_until(lambda got: {r.path for r in got} == {"/hook/alice", "/hook/bob"})
            assert len(receiver.requests) == 2
            send("alice", "dave")  # dave's delivery waits for a slot
            receiver.let_through("/hook/alice")  # one of olive's requests ends
            got = receiver.wait_until(lambda got: any(r.path == "/hook/dave" for r in got), timeout=10)
            # the slot went to paul's dave before any further request of olive's agents
            assert [r.path for r in got][2] == "/hook/dave"
            receiver.let_through("/hook/alice", 10)
            receiver.let_through("/hook/bob", 10)
            receiver.wait_until(lambda got: len(got) == 9)
            paths = [r.path for r in receiver.requests]
            assert (paths.count("/hook/alice"), paths.count("/hook/bob"), paths.count("/hook/dave")) == (4, 4, 1)
    finally:
        receiver.close()
