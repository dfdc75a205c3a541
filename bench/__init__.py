"""The benchmark suite: ``python -m bench.run`` (see docs/benchmarks.md)."""
