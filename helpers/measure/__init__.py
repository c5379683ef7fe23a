"""Measuring training: step timings (:mod:`~helpers.measure.timing`), the conditions they ran under
and the caveats they carry (:mod:`~helpers.measure.conditions`), and runtime profiles
(:mod:`~helpers.measure.profiling`)."""
