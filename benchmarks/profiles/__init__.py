"""Kernel profiles of the training steps; each script writes a section of ``kernel_survey.md``.

Holds what every profiling script shares: the interleaved timing of variants of a step
(``ab_timing``) and the sections of the page (``report``); the survey of the kernels of every
model, onnxruntime's beside torch's (:mod:`benchmarks.profiles.survey`); the one-question
studies of a rewrite or a kernel (:mod:`benchmarks.profiles.studies`). May import
:mod:`helpers`, :mod:`benchmarks.workloads`, :mod:`benchmarks.example_models` and
:mod:`benchmarks.sweep.records`; the studies import the survey, never the other way.
"""
