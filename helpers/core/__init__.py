"""What both training APIs share.

* :mod:`~helpers.core.sessions`: every onnxruntime session of the project
  is made here (providers, device id, threads, options, profiling);
* :mod:`~helpers.core.runtime`: checks of the installed runtime and clear
  errors (IR versions, untrainable operators), quiet logs;
* :mod:`~helpers.core.devices` and :mod:`~helpers.core.batches`: where
  training runs, and the minibatches taken there;
* :mod:`~helpers.core.onnx_graph`, :mod:`~helpers.core.onnx_function`,
  :mod:`~helpers.core.graph_shapes`, :mod:`~helpers.core.inference_mode`:
  reading, editing and running ONNX graphs, and the graph of a model in
  inference mode;
* :mod:`~helpers.core.torch_export`, :mod:`~helpers.core.torch_symbolics`:
  forward-only models exported from torch, with the layer options the
  exporter drops recorded or written exactly;
* :mod:`~helpers.core.training_graph` and its rewrites
  (:mod:`~helpers.core.activations`, :mod:`~helpers.core.padding`,
  :mod:`~helpers.core.pooling`, :mod:`~helpers.core.resampling`,
  :mod:`~helpers.core.normalization`, :mod:`~helpers.core.batch_norm`,
  :mod:`~helpers.core.running_statistics`, :mod:`~helpers.core.embedding_padding`,
  :mod:`~helpers.core.gradient_rewrites`), with :mod:`~helpers.core.graph_nodes`
  and :mod:`~helpers.core.graph_values`: the graph onnxruntime's gradient
  builders are given (layers it cannot train as exported, rewritten exactly;
  batch normalization and its running statistics; embeddings' padding rows;
  faster exact gradients; the node-level pieces these rewrites share);
* :mod:`~helpers.core.learning_rates`, :mod:`~helpers.core.update_rules`,
  :mod:`~helpers.core.penalties`, :mod:`~helpers.core.loss_graphs`: the
  training vocabulary (schedules, torch's update rules, penalties, losses),
  each with one registry;
* :mod:`~helpers.core.configurable`: repr, equality and copies of those
  pieces from their constructor parameters;
* :mod:`~helpers.core.estimator`, :mod:`~helpers.core.trained_model`,
  :mod:`~helpers.core.parameters`, :mod:`~helpers.core.training_loop` and
  :mod:`~helpers.core.epoch_losses`: the scikit-learn estimator both
  optimizers derive from (its fit, and what a fitted one offers), the
  parameters they share, what keeps a fit consistent when it stops early
  (interrupts, divergence), and the losses of an epoch read from the device;
* :mod:`~helpers.core.validation`, :mod:`~helpers.core.training_cache`:
  input checks, and the per-process cache of artifacts and gradient graphs.
"""
