"""Where and how onnxruntime runs: sessions, the installed runtime, devices, files on disk.

Every onnxruntime session is made in :mod:`~helpers.core.machine.sessions`; the runtime's
checks (:mod:`~helpers.core.machine.runtime`) and its output, logs and native stderr
(:mod:`~helpers.core.machine.runtime_output`), the devices and the GPU package's CUDA
libraries, the per-process cache and folders, and a full disk said plainly are beside it. It
imports no other part of :mod:`helpers.core`.
"""
