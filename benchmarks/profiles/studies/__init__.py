"""The profile studies: one question each, is a rewrite or an exact variant of a kernel faster?

Holds the scripts (``.venv/bin/python benchmarks/profiles/studies/NAME.py``) of the rewrites
(``relu_masks`` with its masks' graphs ``relu_mask_graphs``, ``gather_rewrite``,
``hardtanh_clip``, ``max_pool_gradients``, ``conv_gradients``), of a kernel's cost
(``embedding_gradients``, ``step_fixed_cost``, ``forward_backward_step``) and the timing of
variants on the zoo they share (``zoo_variants``). May import :mod:`benchmarks.profiles.survey`,
:mod:`benchmarks.profiles.ab_timing`, :mod:`benchmarks.profiles.report` and :mod:`helpers`.
"""
