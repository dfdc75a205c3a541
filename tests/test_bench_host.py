"""bench.host with two rounds: not a benchmark, a check that it still runs end to end (every
revived agent answers its message)."""

from __future__ import annotations

from bench import host


def test_the_host_benchmark_runs(capsys):
    assert host.main(["--rounds", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == ["revive", "warm"]
    assert out[0].startswith("revive: 2 rounds: SEND to first reply p50 ")
