"""The figures the READMEs quote, computed from the committed results, never typed by hand.

Holds the command that rewrites them (``quoted_figures``), their names (``figure_names``) and
where each is read from (``figure_sources``, ``figure_profiles``). May import
:mod:`benchmarks.report`, :mod:`benchmarks.studies` and :mod:`benchmarks.sweep.records`;
nothing in ``benchmarks`` imports it.
"""
