"""The update arithmetic: learning rates, torch's update rules, penalties on the weights.

The rules (:mod:`~helpers.core.updates.update_rules`) are run in place on the device by
:mod:`~helpers.core.updates.weight_updater`.

Each piece is described by its constructor parameters
(:mod:`~helpers.core.updates.configurable`) and has one registry. It may import
:mod:`helpers.core.machine`, :mod:`helpers.core.graphs` and :mod:`helpers.core.inputs`.
"""
