"""bench.webhooks with tiny counts: not a benchmark, a check that it still runs end to end (every
delivery arrives once, every hanging request is in flight, the bystanders get their round trips)."""

from __future__ import annotations

from bench import webhooks


def test_the_webhook_benchmark_runs(capsys):
    assert webhooks.main(["--deliveries", "40", "--endpoints", "1", "--hanging", "20", "--pairs", "2",
                          "--seconds", "0.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == [
        "throughput", "bystanders, webhooks off", "bystanders, 20 webhooks hanging (20 in flight)"]
    assert out[0].startswith("throughput: 40 deliveries to 1 webhook(s): ")
