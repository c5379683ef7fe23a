"""What the benchmarks train: data, models, one training step per framework, any torch model.

Holds the frameworks' names, each task's loss and the optimizers of both onnxruntime APIs
(``frameworks``, light to import), the shared data and models (``models``), the trainers
(``trainers``) and the matrix products they are measured against (``matmul_references``), the
inputs a torch model takes (``model_inputs``), and the fits of ``bench_your_model.ipynb``,
torch's own spread that judges their losses and what it records (``your_model``,
``your_model_spread``, ``your_model_record``); the zoo's builders stay in
:mod:`benchmarks.example_models`, whose name the grids and the records keep. May import
:mod:`helpers`, :mod:`benchmarks.example_models` and the words of :mod:`benchmarks.report`
(``ratios``, ``caveats``); never the sweep or the studies.
"""
