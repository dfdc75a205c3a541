"""Registered channels: owner, topic, modes, key, limit and the b/e/I lists."""

from __future__ import annotations

from dataclasses import dataclass, field

from ircd.store.writes import Conn

__all__ = ["ChannelRow", "save_channel", "load_channels", "delete_channel"]


@dataclass(frozen=True, slots=True)
class ChannelRow:
    name: str
    folded: str
    owner: str
    created_at: int
    topic: str = ""
    topic_setter: str = ""
    topic_time: int = 0
    modes: str = ""
    key: str | None = None
    limit: int | None = None
    lists: tuple[tuple[str, str, str, int], ...] = field(default=())  # (which, mask, set_by, set_at)


def save_channel(conn: Conn, row: ChannelRow) -> None:
    conn.execute(
        "INSERT INTO channels (folded, name, owner, created_at, topic, topic_setter, topic_time, modes, "
        "chan_key, chan_limit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(folded) DO UPDATE SET name = excluded.name, owner = excluded.owner, "
        "topic = excluded.topic, topic_setter = excluded.topic_setter, topic_time = excluded.topic_time, "
        "modes = excluded.modes, chan_key = excluded.chan_key, chan_limit = excluded.chan_limit",
        (
            row.folded,
            row.name,
            row.owner,
            row.created_at,
            row.topic,
            row.topic_setter,
            row.topic_time,
            row.modes,
            row.key,
            row.limit,
        ),
    )
    conn.execute("DELETE FROM channel_lists WHERE channel = ?", (row.folded,))
    conn.executemany(
        "INSERT INTO channel_lists (channel, which, mask, set_by, set_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        [(row.folded, *entry) for entry in row.lists],
    )


def load_channels(conn: Conn) -> list[ChannelRow]:
    lists: dict[str, list[tuple[str, str, str, int]]] = {}
    for channel, which, mask, set_by, set_at in conn.execute(
        # in the order they were set: SQLite's rowid, a column of that name on PostgreSQL (schema.py)
        "SELECT channel, which, mask, set_by, set_at FROM channel_lists ORDER BY rowid"
    ):
        lists.setdefault(channel, []).append((which, mask, set_by, set_at))
    rows = []
    for name, folded, owner, created_at, topic, topic_setter, topic_time, modes, key, limit in conn.execute(
        "SELECT name, folded, owner, created_at, topic, topic_setter, topic_time, modes, chan_key, chan_limit "
        "FROM channels ORDER BY folded"
    ):
        rows.append(ChannelRow(
            name, folded, owner, created_at, topic, topic_setter, topic_time, modes, key, limit,
            lists=tuple(lists.get(folded, ())),
        ))
    return rows


def delete_channel(conn: Conn, folded: str) -> bool:
    return conn.execute("DELETE FROM channels WHERE folded = ?", (folded,)).rowcount == 1
