"""The report of a sweep: ``summary.md``, ``details.md`` and their figures, from the records.

Holds the summary (``aggregate``, ``zoo_summary``, ``suite_ratios``, ``summary_terms``), the
tables (``details``), the words every page shares (``ratios``, ``caveats``) and the figures'
look (``plots``, ``style``). May import :mod:`benchmarks.sweep.records`; ``aggregate`` also
includes the sections the studies write of themselves (:mod:`benchmarks.studies.zoo_costs`,
:mod:`benchmarks.studies.time_to_accuracy`). Never imports the runner.
"""
