"""The cluster's table (docs/scaling.md): who holds which nick, network-wide.

A row per nick in use, owned by the node whose client holds it. The row's primary key
settles a race between two nodes: the first INSERT wins and the other node's client is
refused the nick. Inside one node the node's own state decides (its commands run one at
a time), so a node that owns a row may give the nick to any of its clients. A node that
starts drops the rows of its previous run (its clients are gone).
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLUSTER_TRACK", "CLUSTER_MIGRATIONS", "claim_nick", "release_nick", "release_node"]

CLUSTER_TRACK = "cluster"

_STEP1 = """
    CREATE TABLE cluster_nicks (
        folded     TEXT PRIMARY KEY,
        node       TEXT NOT NULL,
        client     INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL
    );
    CREATE INDEX cluster_nicks_node ON cluster_nicks(node);
"""

CLUSTER_MIGRATIONS: list[Any] = [_STEP1]


def claim_nick(conn: Any, folded: str, node: str, client: int, now: int) -> bool:
    """True when ``node`` holds ``folded`` now (it took it, or held it already)."""
    row = conn.execute(
        "INSERT INTO cluster_nicks (folded, node, client, claimed_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (folded) DO NOTHING RETURNING node", (folded, node, client, now),
    ).fetchone()
    if row is not None:
        return True
    row = conn.execute("SELECT node FROM cluster_nicks WHERE folded = ?", (folded,)).fetchone()
    if row is not None and row[0] == node:
        conn.execute("UPDATE cluster_nicks SET client = ? WHERE folded = ?", (client, folded))
        return True
    return False


def release_nick(conn: Any, folded: str, node: str) -> None:
    conn.execute("DELETE FROM cluster_nicks WHERE folded = ? AND node = ?", (folded, node))


def release_node(conn: Any, node: str) -> int:
    """Free every nick ``node`` held (it started again, or it is gone)."""
    return conn.execute("DELETE FROM cluster_nicks WHERE node = ?", (node,)).rowcount
