"""What a pircd cluster (docs/scaling.md) needs at 10 and 100 nodes: a model on paper, fed with
the per-unit costs the cluster scenarios measured (bench/cluster.py).

    python -m bench.cluster_model                                  # the costs quoted in docs/scaling.md
    python -m bench.cluster_model --results results.json           # the medians of a run of
                                                                   #   python -m bench.run --scenario cluster --json ...
    python -m bench.cluster_model --users 20000 --change-every 60  # another workload

The design as built: every node holds every user; every change (a user arriving or leaving, a
nick, a JOIN, a PART, an away...) is published once per peer; a channel line is formatted on
the node where it was said for each member on another node, and forwarded to each other node as
one frame naming all its members there; every node says "alive" to every peer once a second
and sweeps its own users once a second; a nick nobody holds is claimed with one row written in
PostgreSQL; every durable write takes PostgreSQL's one writers' lock.

The workload is per node (a node is added to carry more users), so what grows with the node count
is what each node must know of and do for the others.
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, fields
from pathlib import Path


@dataclass
class Costs:
    """Per-unit costs, from one run of the cluster scenarios (2 nodes unless said): the defaults are
    the run quoted in docs/scaling.md."""

    local_line_us: float = 0.21  # nodes' CPU per line delivered on the sender's node (1 node)
    remote_line_us: float = 0.24  # both nodes' CPU per line delivered to a member of the other node
    # NATS bytes in per line delivered to a remote member: a frame names every member of a node
    # getting the same bytes, and a pass's lines for one member go together
    nats_bytes_per_remote_line: float = 1.5
    nats_us_per_msg: float = 7.3  # NATS CPU per message published (and delivered once)
    change_bytes: float = 307.0  # NATS bytes of one change (a remote user's arrival)
    apply_us: float = 22.0  # CPU of the node taking a remote user in (a change applied)
    remote_user_bytes: float = 1663.0  # RSS per remote user on the node that holds it remotely
    sweep_us_per_user_s: float = 0.53  # CPU per second per local user, nothing happening (the sweep)
    idle_remote_us_per_user_s: float = 0.0  # the same per remote user
    claim_pg_us: float = 209.0  # PostgreSQL's CPU per registration (a nick claimed, later freed)
    send_node_us: float = 95.0  # the CPU of the node making a durable SEND (the 1-node run)
    send_pg_us: float = 98.0  # PostgreSQL's CPU per durable SEND
    # what a SEND costs a node that did not make it (its news applied: counted, waits woken), taken
    # as the 2-node run's nodes' CPU per SEND less the 1-node run's: an upper bound (the commit
    # groups are smaller too)
    send_apply_us: float = 123.0
    send_news_msgs: float = 2.0  # NATS messages to each other node per SEND (its message, its event)
    send_news_bytes: float = 399.0  # their bytes
    publish_us: float = 1.6  # a node's CPU per NATS publish of a change (--publish measures it)


@dataclass
class Workload:
    users: int = 5_000  # clients per node
    change_every: float = 100.0  # seconds between two network changes of one user
    claims_share: float = 0.2  # of those changes, a free nick claimed (a connect or a NICK)
    sends: float = 100.0  # durable SENDs per second per node
    channel_members: int = 20  # members per node of one channel with members on every node
    channel_lines: float = 5.0  # lines per second said in that channel, over the whole network
    line_bytes: int = 150  # one delivered line with its prefix and tags


def _median(runs: list[dict], key: str) -> float:
    values = [r[key] for r in runs if key in r and isinstance(r[key], (int, float))]
    if not values:
        raise SystemExit(f"no {key} in the results")
    return float(statistics.median(values))


def costs_from(path: Path) -> Costs:
    """The medians of a ``python -m bench.run --scenario cluster --json PATH`` run."""
    data = json.loads(path.read_text())
    runs = {(r["scenario"].split("-")[1], r["server"]): [x for x in r["runs"] if "error" not in x]
            for r in data["results"]}
    fan1, fan2 = runs[("fanout", "1-node")], runs[("fanout", "2-nodes")]
    send, users = runs[("send", "2-nodes")], runs[("remote", "2-nodes")]
    send1 = runs[("send", "1-node")]
    local = _median(fan1, "cpu_us_per_line")
    share = _median(fan2, "remote_share")
    return Costs(
        local_line_us=local,
        remote_line_us=(_median(fan2, "cpu_us_per_line") - (1 - share) * local) / share,
        nats_bytes_per_remote_line=_median(fan2, "nats_bytes_per_line") / share,
        nats_us_per_msg=_median(users, "nats_us_per_registration") / _median(users, "nats_msgs_per_registration"),
        change_bytes=_median(users, "nats_bytes_per_registration") / _median(users, "nats_msgs_per_registration"),
        apply_us=_median(users, "home_us_per_registration"),
        remote_user_bytes=_median(users, "remote_bytes_per_user"),
        sweep_us_per_user_s=_median(users, "idle_local_us_per_user_s"),
        idle_remote_us_per_user_s=_median(users, "idle_remote_us_per_user_s"),
        claim_pg_us=_median(users, "pg_us_per_registration"),
        send_node_us=_median(send1, "cpu_us_per_send"),
        send_pg_us=_median(send, "pg_us_per_send"),
        send_news_msgs=_median(send, "nats_msgs_per_send"),
        send_news_bytes=_median(send, "nats_bytes_per_send"),
        send_apply_us=max(0.0, _median(send, "cpu_us_per_send") - _median(send1, "cpu_us_per_send")),
    )


def model(n: int, w: Workload, c: Costs) -> dict[str, float]:
    """What ``n`` nodes, each with the workload ``w``, need (per node, of NATS, of PostgreSQL)."""
    changes = n * w.users / w.change_every  # network changes per second
    change_pubs = changes * (n - 1)  # each published to every peer
    alive = n * (n - 1)  # a heartbeat to every peer every second
    remote_members = w.channel_members * (n - 1)  # of one line said on one node
    line_frames = w.channel_lines * remote_members  # lines delivered to members of other nodes
    line_pubs = w.channel_lines * (n - 1)  # lines of one pass go to a peer as one message
    send_pubs = n * w.sends * (n - 1) * c.send_news_msgs  # every SEND's news to every other node
    pubs = change_pubs + alive + line_pubs + send_pubs
    nats_bytes = (change_pubs * c.change_bytes + line_frames * c.nats_bytes_per_remote_line
                  + n * w.sends * (n - 1) * c.send_news_bytes)
    per_node_cpu_us = (
        changes / n * (n - 1) * c.publish_us  # its own changes, published to every peer
        + changes * (n - 1) / n * c.apply_us  # every other node's changes applied
        + w.users * c.sweep_us_per_user_s  # the heartbeat's sweep of its own users
        + w.users * (n - 1) * c.idle_remote_us_per_user_s  # remote users held, nothing happening
        + line_frames / n * c.remote_line_us  # its share of the channel's forwarded lines
        + w.sends * c.send_node_us
        + (n - 1) * w.sends * c.send_apply_us  # every other node's SENDs, whose news it applies
    )
    return {
        "nodes": n,
        "users": n * w.users,
        "changes_per_s": changes,
        "nats_publishes_per_s": pubs,
        "nats_mb_per_s": nats_bytes / 1e6,
        "nats_cores": pubs * c.nats_us_per_msg / 1e6,
        "node_changes_applied_per_s": changes * (n - 1) / n,
        "node_publishes_per_s": changes / n * (n - 1),
        "node_cores": per_node_cpu_us / 1e6,
        "node_remote_users": w.users * (n - 1),
        "node_remote_mb": w.users * (n - 1) * c.remote_user_bytes / 2**20,
        "channel_frames_per_line": n - 1,  # one frame per node, naming its members
        # a line alone in its pass: a message to each other node, the line and its members' ids
        "channel_nats_kb_per_line": (n - 1) * (w.line_bytes + 8 + 8 * w.channel_members) / 1e3,
        # one message on a channel subject, which NATS hands to each node with members
        "channel_nats_kb_per_line_next": w.line_bytes / 1e3,
        "pg_claims_per_s": changes * w.claims_share,
        "pg_sends_per_s": n * w.sends,
        "pg_cores": (changes * w.claims_share * c.claim_pg_us + n * w.sends * c.send_pg_us) / 1e6,
    }


_ROWS = [
    ("users", "users on the network", "{:,.0f}"),
    ("changes_per_s", "network changes/s", "{:,.0f}"),
    ("nats_publishes_per_s", "NATS publishes/s (changes and SENDs x (N-1), heartbeats, channel)", "{:,.0f}"),
    ("nats_mb_per_s", "NATS MB/s in", "{:,.1f}"),
    ("nats_cores", "NATS cores (at the measured CPU per message)", "{:,.2f}"),
    ("node_changes_applied_per_s", "per node: others' changes applied/s", "{:,.0f}"),
    ("node_publishes_per_s", "per node: its changes published/s (to N-1 peers)", "{:,.0f}"),
    ("node_cores", "per node: cores (publishing, applying, sweep, channel, SENDs)", "{:,.2f}"),
    ("node_remote_users", "per node: remote users held", "{:,.0f}"),
    ("node_remote_mb", "per node: MB of RSS for remote users", "{:,.0f}"),
    ("channel_frames_per_line", "channel on every node: messages per line today", "{:,.0f}"),
    ("channel_nats_kb_per_line", "  NATS kB in per line today (a line alone in its pass)", "{:,.1f}"),
    ("channel_nats_kb_per_line_next", "  NATS kB in per line, one message on a channel subject", "{:,.2f}"),
    ("pg_claims_per_s", "PostgreSQL nick claims/s", "{:,.0f}"),
    ("pg_sends_per_s", "PostgreSQL durable SENDs/s", "{:,.0f}"),
    ("pg_cores", "PostgreSQL cores (claims and SENDs)", "{:,.2f}"),
]


def table(nodes: list[int], w: Workload, c: Costs) -> str:
    results = [model(n, w, c) for n in nodes]
    head = ["", *(f"{n} nodes" for n in nodes)]
    rows = [[label, *(fmt.format(r[key]) for r in results)] for key, label, fmt in _ROWS]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i])
                               for i, cell in enumerate(row)) for row in [head, *rows])


def publish_cost(count: int = 50_000, size: int = 287) -> float:
    """A node's CPU (µs) per NATS publish of a change-sized message: ``count`` publishes with
    nats-py, as a node's sender task makes them (one awaited publish after the other), against a
    NATS server of its own (nothing subscribes: the cost is the publisher's)."""
    import asyncio
    import resource

    from bench.cluster import Nats

    server = Nats(1024 * 1024)

    async def run() -> float:
        import nats

        nc = await nats.connect(server.url)
        payload = b"{" + b"x" * (size - 2) + b"}"
        ru = resource.getrusage(resource.RUSAGE_SELF)
        before = ru.ru_utime + ru.ru_stime
        for _ in range(count):
            await nc.publish("pircd.bench.node.n2", payload)
        await nc.flush()
        ru = resource.getrusage(resource.RUSAGE_SELF)
        await nc.close()
        return 1e6 * (ru.ru_utime + ru.ru_stime - before) / count

    try:
        return asyncio.run(run())
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cluster_model", description=__doc__.split("\n\n")[0])
    p.add_argument("--results", type=Path, help="JSON of a run of the cluster scenarios (bench.run --json)")
    p.add_argument("--nodes", default="2,10,100", help="node counts (default 2,10,100)")
    for f in fields(Workload):
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(f.default), default=f.default,
                       help=f"workload: {f.name} (default {f.default})")
    p.add_argument("--publish", action="store_true", help="measure a node's CPU per NATS publish (nats-py)")
    args = p.parse_args(argv)
    costs = costs_from(args.results) if args.results else Costs()
    if args.publish:
        costs.publish_us = publish_cost()
    work = Workload(**{f.name: getattr(args, f.name) for f in fields(Workload)})
    print("costs: " + ", ".join(f"{f.name}={getattr(costs, f.name):.3g}" for f in fields(Costs)))
    print("workload per node: " + ", ".join(f"{f.name}={getattr(work, f.name)}" for f in fields(Workload)))
    print(table([int(x) for x in args.nodes.split(",")], work, costs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
