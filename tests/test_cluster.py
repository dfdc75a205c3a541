"""Several pircd nodes as one network (docs/scaling.md): the [cluster] table."""

from __future__ import annotations

import re

from tests.proc import cli

_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d")


# the table ---------------------------------------------------------------------------------


def _problems(result) -> tuple[int, list[str]]:
    return result.returncode, [ln for ln in result.stderr.splitlines() if not _LOG_LINE.match(ln)]


def test_cluster_table_needs_postgresql_at_check_config_and_serve(tmp_path):
    """With [cluster] the store must be PostgreSQL: a SQLite file is refused with one line by
    both commands, before anything starts; a postgresql:// URL is a valid configuration."""
    path = tmp_path / "c.toml"
    path.write_text(f'[server]\ndb = "{tmp_path}/pircd.db"\n[cluster]\nnode = "a"\nnats = ["nats://127.0.0.1:4222"]\n')
    refused = (2, ["configuration is not valid:",
                   "  cluster: needs a PostgreSQL server.db (postgresql://...): the nodes share one database, "
                   "and a SQLite file belongs to one process"])
    assert _problems(cli("check-config", str(path))) == refused
    assert _problems(cli("serve", "--config", str(path), "--listen", "127.0.0.1:0", "--no-http")) == refused
    assert not (tmp_path / "pircd.db").exists()
    path.write_text('[server]\ndb = "postgresql://pircd@127.0.0.1/pircd"\n'
                    '[cluster]\nnode = "a"\nnats = ["nats://127.0.0.1:4222"]\n')
    assert cli("check-config", str(path)).stdout == f"{path}: configuration is valid\n"


def test_cluster_table_keys_are_checked(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[server]\ndb = "postgresql://pircd@127.0.0.1/pircd"\n'
                    '[cluster]\nnode = "a.b"\nnats = ["127.0.0.1:4222"]\nport = 1\n')
    assert _problems(cli("check-config", str(path))) == (2, [
        "configuration is not valid:",
        "  cluster.node: String should match pattern '^[A-Za-z0-9_-]{1,32}$'",
        "  cluster.nats: Value error, '127.0.0.1:4222' is not a nats://HOST:PORT or tls://HOST:PORT URL",
        "  cluster.port: Extra inputs are not permitted",
    ])
    path.write_text('[server]\ndb = "postgresql://pircd@127.0.0.1/pircd"\n[cluster]\nnode = "a"\nnats = []\n')
    assert _problems(cli("check-config", str(path))) == (2, [
        "configuration is not valid:",
        "  cluster.nats: List should have at least 1 item after validation, not 0",
    ])
