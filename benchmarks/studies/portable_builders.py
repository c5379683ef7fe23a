"""Both step models of an optimizer, on both runtimes: the builders' part of ``portable_speed``.

:func:`export_steps` writes an optimizer's step model twice: its gradients from
onnxruntime-training 1.19.2's builder, its contrib operators lowered (``lowered``, the default of
``export_training_step``), and from :mod:`helpers.portable.gradients` (``built``,
``gradient_builder="onnx"``), with each one's node count. :class:`BuilderFits` trains them in
processes of the maintained environment (onnxruntime 1.31.1) and of the training package's
(1.19.2), through :class:`benchmarks.studies.portable_fits.MaintainedFits`: on the maintained
runtime both steps one session call per step and the lowered one in the epoch loop too (the
section of the summary reads those), on 1.19.2 both steps one call per step. Its fits are timed
beside the other frameworks' (:func:`benchmarks.studies.portable_speed.timed_rows`); each row it
labels carries ``builder``, ``runtime`` and ``nodes``.
"""

import contextlib
import os

from benchmarks.report.portable_section import BUILT, FAILED, LOWERED
from benchmarks.studies import portable_fits as pf
from benchmarks.workloads import frameworks as fw

#: ``export_training_step``'s ``gradient_builder`` of each builder label.
BUILDERS = {LOWERED: "onnxruntime-training", BUILT: "onnx"}


def node_count(path):
    """The nodes of the ONNX model at ``path``, those of its subgraphs included.

    Examples
    --------
    >>> import os, tempfile
    >>> import onnx
    >>> from onnx import helper, TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    >>> graph = helper.make_graph([helper.make_node("Neg", ["x"], ["y"]),
    ...                            helper.make_node("Abs", ["y"], ["z"])], "g", [x],
    ...                           [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])])
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     onnx.save(helper.make_model(graph), os.path.join(folder, "m.onnx"))
    ...     node_count(os.path.join(folder, "m.onnx"))
    2
    """
    import onnx  # noqa: PLC0415

    def count(graph):
        total = 0
        for node in graph.node:
            total += 1
            for attribute in node.attribute:
                total += sum(count(g) for g in [attribute.g, *attribute.graphs] if g.node)
        return total

    return count(onnx.load(path).graph)


def export_steps(optimizer, folder, name):
    """Write ``optimizer``'s step model with each builder of :data:`BUILDERS`.

    Returns
    -------
    dict
        Builder to ``{"path", "nodes", "refused"}``: ``refused`` is ``''`` or why
        (:func:`benchmarks.studies.portable_fits.export_step`), ``nodes`` None then.
    """
    steps = {}
    for builder, gradient_builder in BUILDERS.items():
        path = os.path.join(folder, f"{name}-{builder}.onnx")
        refused = pf.export_step(optimizer, path, gradient_builder)
        steps[builder] = {
            "path": path,
            "refused": refused,
            "nodes": None if refused else node_count(path),
        }
    return steps


def fit_name(framework, builder, runtime):
    """The name of a portable fit: ``'portable step, built, onnxruntime 1.31.1'``."""
    return f"{framework}, {builder}, {runtime}"


def fit_plan(steps, runtimes):
    """The portable fits of both steps on each runtime, by fit name.

    Parameters
    ----------
    steps : dict
        :func:`export_steps`'s.
    runtimes : list of (str, str)
        ``(runtime, interpreter)``, the maintained one first: its fits are the lowered step one
        call per step and in the epoch loop, and the built step; each other runtime's both steps
        one call per step.

    Returns
    -------
    dict
        Fit name to ``{"framework", "builder", "runtime", "nodes", "python", "step",
        "epoch_loop"}``.

    Examples
    --------
    >>> steps = {"lowered": {"path": "l.onnx", "nodes": 9, "refused": ""},
    ...          "built": {"path": "b.onnx", "nodes": 7, "refused": ""}}
    >>> plan = fit_plan(steps, [("onnxruntime 1.31.1", "new"), ("onnxruntime 1.19.2", "old")])
    >>> for name, fit in plan.items():
    ...     print(name, "|", fit["python"], fit["step"], fit["epoch_loop"], fit["nodes"])
    portable step, lowered, onnxruntime 1.31.1 | new l.onnx False 9
    portable epoch loop, lowered, onnxruntime 1.31.1 | new l.onnx True 9
    portable step, built, onnxruntime 1.31.1 | new b.onnx False 7
    portable step, lowered, onnxruntime 1.19.2 | old l.onnx False 9
    portable step, built, onnxruntime 1.19.2 | old b.onnx False 7
    """
    plan = {}
    for index, (runtime, python) in enumerate(runtimes):
        for builder, step in steps.items():
            modes = pf.PORTABLE_MODES if index == 0 and builder == LOWERED else [fw.PORTABLE_STEP]
            for framework in modes:
                plan[fit_name(framework, builder, runtime)] = {
                    "framework": framework,
                    "builder": builder,
                    "runtime": runtime,
                    "nodes": step["nodes"],
                    "python": python,
                    "step": step["path"],
                    "epoch_loop": pf.PORTABLE_MODES[framework],
                    "refused": step["refused"],
                }
    return plan


class BuilderFits:
    """The portable fits of :func:`fit_plan`, each runtime's in a server process of its own.

    Each fit is tried once (an epoch) on entry: one that fails, or whose step was refused, is
    left out of :meth:`fits` and is a row of :meth:`untimed` with the reason.

    Parameters
    ----------
    steps, runtimes
        :func:`fit_plan`'s.
    data : str
        An ``.npz`` of ``X`` and ``y``.
    batch_size, threads : int
        The trainers'.
    """

    def __init__(self, steps, runtimes, data, batch_size, threads):
        self.plan = fit_plan(steps, runtimes)
        self.args = (data, batch_size, 0, threads)
        self.why_not = {name: fit["refused"] for name, fit in self.plan.items() if fit["refused"]}
        self._fits = {}
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        for python in dict.fromkeys(fit["python"] for fit in self.plan.values()):
            names = [
                name
                for name, fit in self.plan.items()
                if fit["python"] == python and name not in self.why_not
            ]
            if not names:
                continue
            fits = {n: (self.plan[n]["step"], self.plan[n]["epoch_loop"]) for n in names}
            try:
                server = self._stack.enter_context(
                    pf.MaintainedFits(None, *self.args, python=python, fits=fits)
                )
            except RuntimeError as exc:  # the runtime could not read a step model
                self.why_not.update(dict.fromkeys(names, _failed(exc)))
                continue
            for name, fit in server.fits().items():
                try:
                    fit(1)
                except RuntimeError as exc:
                    self.why_not[name] = _failed(exc)
                else:
                    self._fits[name] = fit
        return self

    def __exit__(self, *exc):
        self._stack.close()

    def fits(self):
        """``fit(epochs)`` of each fit that trains, by fit name."""
        return dict(self._fits)

    def fail_all(self, exc):
        """Mark every fit failed with ``exc`` (a fit that failed while it was timed)."""
        self.why_not.update(dict.fromkeys(self._fits, _failed(exc)))
        self._fits = {}

    def labelled(self, rows):
        """``rows`` (timed, one per fit name in ``framework``) with the columns of their fit."""
        return [{**row, **self.columns(row["framework"])} for row in rows]

    def columns(self, name):
        """``framework``, ``builder``, ``runtime`` and ``nodes`` of a fit name; ``{}`` for
        another framework's name."""
        fit = self.plan.get(name)
        if fit is None:
            return {}
        return {key: fit[key] for key in ("framework", "builder", "runtime", "nodes")}

    def untimed(self, threads, **columns):
        """A row per fit that did not train: its reason in ``note``, ``columns`` added."""
        return [
            {**columns, **self.columns(name), "threads": threads, "note": note}
            for name, note in self.why_not.items()
        ]


def _failed(exc):
    """A failed fit's note: :data:`~benchmarks.report.portable_section.FAILED` and the message's
    last 300 characters on one line."""
    return FAILED + " ".join(str(exc).split())[-300:]
