"""The report of a sweep: ``summary.md``, ``details.md`` and their figures, from the records.

Holds the summary (``aggregate``, the answer per API and peer in ``answer``, ``zoo_summary``,
``suite_ratios``, ``summary_terms``, and ``study_sections``: the sections read from the
studies' CSVs), the tables (``details``), the words every page shares (``ratios``, ``caveats``)
and the figures' look (``plots``, ``style``). May import :mod:`benchmarks.sweep.records` and
the zoo's names (:data:`benchmarks.example_models.ZOO`). Never imports a study (the studies
import the report) nor the runner.
"""
