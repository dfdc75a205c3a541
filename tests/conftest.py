from __future__ import annotations

import pytest

from tests import dbs
from tests.harness import Harness, config
from tests.live import IRCClient, LiveServer

# the cluster tests' fixtures (nats, nodes), shared by every tests/test_cluster*.py
pytest_plugins = ["tests.clusters"]


def pytest_report_header(config):
    return f"database: {dbs.BACKEND} (PIRCD_TEST_DB)"


def pytest_collection_modifyitems(config, items):
    """A test about one database says so in its name (``test_sqlite_...``, ``test_postgresql_...``)
    and belongs to that database's run only (.ci/run runs the suite on both): in the other run it is
    deselected, not skipped, so that no skip in a run stands for missing work."""
    other = f"test_{'sqlite' if dbs.POSTGRESQL else 'postgresql'}_"
    kept, dropped = [], []
    for item in items:
        (dropped if getattr(item, "originalname", item.name).startswith(other) else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def clients():
    """Live IRC clients a test makes (append them); closed after it."""
    made: list[IRCClient] = []
    yield made
    for c in made:
        c.close()


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    harness.close()


@pytest.fixture
def room(h):
    """alice (op) and bob in #a, outboxes empty."""
    h.alice_and_bob_in("#a")
    return h


@pytest.fixture
def make_harness():
    made = []

    def make(**sections):
        harness = Harness(config(**sections))
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()


@pytest.fixture
def live():
    """A server on 127.0.0.1 port 0 (defaults plus test-friendly names)."""
    servers = []

    def start(**sections):
        sections.setdefault("server", {})
        sections["server"] = {"listen": ["127.0.0.1:0"], **sections["server"]}
        server = LiveServer(config(**sections)).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def client_factory():
    clients = []

    def make(port: int, **kwargs):
        c = IRCClient(port, **kwargs)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()
