"""The sweep: ``python -m benchmarks`` runs the benchmark notebooks over a grid, then summarizes.

Holds the runner and its command line (``runner``), the grids (``sweep_grid``), the engines
that execute the notebooks (``notebook_runs``, ``dask_engine``, ``scheduler_address``) and the
records the notebooks write (``records``). ``records`` imports nothing of ``benchmarks`` and
every other part may import it; the runner imports :mod:`benchmarks.report` to summarize.
"""
