"""The kernel survey: which kernels a training step spends its time in, onnxruntime beside torch.

Holds the two scripts (``kernel_survey``: every model's kernels and the suspects;
``kernels_side_by_side``: onnxruntime against torch, family by family) and what they share:
the steps profiled (``profiled_models``), each side's profiler (``ort_kernels``,
``torch_kernels``), the kernel families and their tables (``kernel_families``), their work
(``kernel_flops``) and what is known of the slow kernels (``suspects``). May import
:mod:`benchmarks.profiles.ab_timing`, :mod:`benchmarks.profiles.report`,
:mod:`benchmarks.workloads` and :mod:`helpers`; never :mod:`benchmarks.profiles.studies`.
"""
