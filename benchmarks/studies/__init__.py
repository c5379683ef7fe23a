"""The studies: scripts that measure one question each, ``python -m benchmarks.studies.NAME``.

Holds the speed targets (``step_targets``, ``zoo_targets``), the scaling with threads
(``thread_scaling``), the time to an accuracy (``time_to_accuracy``) and the memory
(``peak_memory``, ``zoo_costs``); each writes its files under ``results/``. May import
:mod:`benchmarks.workloads`, :mod:`benchmarks.sweep.records`, the tables and words of
:mod:`benchmarks.report` and :mod:`benchmarks.profiles`; never the runner.
"""
