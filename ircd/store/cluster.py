"""The cluster's table (docs/scaling.md): who holds which nick, network-wide.

A row per nick in use, owned by the node whose client holds it. The row's primary key
settles a race between two nodes: the first INSERT wins and the other node's client is
refused the nick. Inside one node the node's own state decides (its commands run one at
a time), so a node that owns a row may give the nick to any of its clients. A node that
starts drops the rows of its previous run (its clients are gone).

Each node also has a number for good (``cluster_nodes``), the lowest free one when its name
is first seen: it goes into the top bits of the sequence of the ids the node makes (msgids, the
history's and PIRCAN's keys), so ids made by two nodes in one millisecond differ.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CLUSTER_MIGRATIONS",
    "CLUSTER_TRACK",
    "NODE_BITS",
    "claim_nick",
    "node_number",
    "release_nick",
    "release_node",
    "take_over_nick",
]

CLUSTER_TRACK = "cluster"
NODE_BITS = 8  # a node's number atop its msgids' sequence (ircd.proto.msgid): up to 256 nodes

_STEP1 = """
    CREATE TABLE cluster_nicks (
        folded     TEXT PRIMARY KEY,
        node       TEXT NOT NULL,
        client     INTEGER NOT NULL,
        claimed_at INTEGER NOT NULL
    );
    CREATE INDEX cluster_nicks_node ON cluster_nicks(node);
    CREATE TABLE cluster_nodes (
        node   TEXT PRIMARY KEY,
        number INTEGER NOT NULL UNIQUE
    );
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


def take_over_nick(conn: Any, folded: str, node: str, client: int, now: int, from_node: str) -> bool:
    """``node`` holds ``folded`` now that ``from_node``'s user of that nick is gone (an agent's
    new connection took it over): the row becomes ``node``'s whether ``from_node`` has deleted
    it yet or not. False when a third node holds it."""
    row = conn.execute(
        "INSERT INTO cluster_nicks (folded, node, client, claimed_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (folded) DO UPDATE SET node = excluded.node, client = excluded.client, "
        "claimed_at = excluded.claimed_at WHERE cluster_nicks.node IN (excluded.node, ?) RETURNING node",
        (folded, node, client, now, from_node),
    ).fetchone()
    return row is not None


def release_nick(conn: Any, folded: str, node: str) -> None:
    conn.execute("DELETE FROM cluster_nicks WHERE folded = ? AND node = ?", (folded, node))


def release_node(conn: Any, node: str) -> int:
    """Free every nick ``node`` held (it started again, or it is gone)."""
    return conn.execute("DELETE FROM cluster_nicks WHERE node = ?", (node,)).rowcount


def node_number(conn: Any, node: str) -> int:
    """The number of ``node``: the one it had, else the lowest free one (writes are serialised
    across processes, so two nodes starting together get two numbers)."""
    row = conn.execute("SELECT number FROM cluster_nodes WHERE node = ?", (node,)).fetchone()
    if row is not None:
        return int(row[0])
    used = {r[0] for r in conn.execute("SELECT number FROM cluster_nodes").fetchall()}
    free = next((n for n in range(1 << NODE_BITS) if n not in used), None)
    if free is None:
        raise RuntimeError(f"no node number left for {node}: {1 << NODE_BITS} nodes have one (cluster_nodes)")
    conn.execute("INSERT INTO cluster_nodes (node, number) VALUES (?, ?)", (node, free))
    return free
