"""Random small torch models train as in torch, or are refused.

:mod:`model_fuzz.grammar` draws the models, :mod:`model_fuzz.paths` trains
one in one path and names the outcome, :mod:`model_fuzz.runner` runs many
in child processes (``python -m model_fuzz``, ``make fuzz``).
"""
