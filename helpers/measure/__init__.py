"""Measuring training: step timings (:mod:`~helpers.measure.timing`), the conditions they ran under
and the caveats they carry (:mod:`~helpers.measure.conditions`), and runtime profiles
(:mod:`~helpers.measure.profiling`).

Its public names load on first use: ``from helpers.measure import profile_training``.
"""

from ..portable.module_names import lazy_names

#: Each public name and the module that defines it.
_PUBLIC = {
    "BUSY_EXTRA_LOAD": ".conditions",
    "NOISY_SPREAD": ".conditions",
    "machine_conditions": ".conditions",
    "sharing": ".conditions",
    "timing_caveat": ".conditions",
    "timing_note": ".timing",
    "usable_cores": ".conditions",
    "SESSION_ROLES": ".profiling",
    "StepProducts": ".profiling",
    "kernel_table": ".profiling",
    "profile_training": ".profiling",
    "read_profile": ".profiling",
    "session_label": ".profiling",
    "step_products_model": ".profiling",
    "summarize_by_session": ".profiling",
    "RunClock": ".conditions",
    "fit_times": ".timing",
    "interleaved_fit_times": ".timing",
    "interleaved_measure": ".timing",
    "marginal_step_cost": ".timing",
    "measure": ".timing",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_names(__name__, _PUBLIC, globals())
