"""Benchmark notebooks and the runner that sweeps them: ``python -m benchmarks``.

The parts: :mod:`benchmarks.sweep` (the runner, its grids and records),
:mod:`benchmarks.workloads` (what is trained), :mod:`benchmarks.studies` (one script per
question), :mod:`benchmarks.report` (the summary of a sweep), :mod:`benchmarks.figures` (the
figures the READMEs quote) and :mod:`benchmarks.profiles` (kernel profiles). Nothing in
:mod:`helpers` imports ``benchmarks``.
"""
