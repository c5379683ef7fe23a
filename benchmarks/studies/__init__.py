"""The studies: scripts that measure one question each, ``python -m benchmarks.studies.NAME``.

Holds the speed targets (``step_targets``, ``zoo_targets``), the scaling with threads
(``thread_scaling``, its fits in ``thread_scaling_fits``), the time to an accuracy
(``time_to_accuracy``) and the memory (``peak_memory``, one process's measures in
``peak_memory_process``, ``zoo_costs``); each writes its files under ``results/``, and the
summary's sections on them are :mod:`benchmarks.report.study_sections`. May import
:mod:`benchmarks.workloads`, :mod:`benchmarks.sweep.records`, :mod:`benchmarks.report` and
:mod:`benchmarks.profiles`; never the runner, and nothing of the report imports a study.
"""
