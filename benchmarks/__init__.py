"""Benchmark notebooks and the runner that sweeps them: ``python -m benchmarks``."""
