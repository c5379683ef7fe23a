"""Measuring training: step timings (:mod:`~helpers.measure.timing`) and runtime profiles (:mod:`~helpers.measure.profiling`)."""
