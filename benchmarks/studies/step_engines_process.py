"""What ``step_engines`` runs in another environment: the fit server of ``portable_speed``, its
trainers on given execution providers.

This module runs under the onnxruntime of another environment (``.venv-maintained``, onnxruntime
1.31.1, for the CPU provider; ``.venv-openvino``, onnxruntime-openvino 1.24.1, for OpenVINO's):
it imports the standard library, onnxruntime and :mod:`helpers.portable` alone, besides
:mod:`benchmarks.studies.portable_process`, whose fit server it runs (``serve SPEC``: a new
:class:`~helpers.portable.trainer.PortableTrainer` of a step model for each request, one session
call per step, ``threads`` intra-op threads). Its SPEC has one more key, ``providers``: the
execution providers of every trainer (a list of names or ``[name, options]`` pairs; null or
absent: the CPU). Before the server's first line, it prints ``{"lean": bool}``
(:func:`trainer_lean`).
"""

import json
import sys

from benchmarks.studies import portable_process

#: Key of the execution providers in a SPEC.
PROVIDERS = "providers"


def provider_list(providers):
    """The providers of a SPEC as onnxruntime takes them: ``(name, options)`` pairs as tuples.

    Examples
    --------
    >>> provider_list([["OpenVINOExecutionProvider", {"precision": "FP32"}]])
    [('OpenVINOExecutionProvider', {'precision': 'FP32'})]
    >>> provider_list(None) is None
    True
    """
    if providers is None:
        return None
    return [tuple(p) if isinstance(p, list) else p for p in providers]


def default_providers(providers):
    """Make ``providers`` the providers of every ``PortableTrainer`` made from now on without any.

    ``providers=None`` leaves the trainer as it is (the CPU). The fit server makes its trainers
    without providers: they then run on these.

    Examples
    --------
    >>> from helpers.portable import trainer
    >>> default_providers(None) is trainer.PortableTrainer
    True
    >>> cpu = default_providers(["CPUExecutionProvider"])
    >>> try:
    ...     print(trainer.PortableTrainer("step.onnx").providers)
    ... finally:
    ...     trainer.PortableTrainer = cpu.unchanged
    ['CPUExecutionProvider']
    """
    from helpers.portable import trainer  # noqa: PLC0415

    if providers is None:
        return trainer.PortableTrainer
    base = getattr(trainer.PortableTrainer, "unchanged", trainer.PortableTrainer)

    class ProvidersTrainer(base):
        unchanged = base

        def __init__(self, step, *args, **kwargs):
            kwargs["providers"] = kwargs.get("providers") or providers
            super().__init__(step, *args, **kwargs)

    trainer.PortableTrainer = ProvidersTrainer
    return ProvidersTrainer


def trainer_lean():
    """Whether :class:`~helpers.portable.trainer.PortableTrainer` specialises a step model to the
    batch size of its fit by default (its ``lean`` parameter, where it has one).

    Examples
    --------
    >>> isinstance(trainer_lean(), bool)
    True
    """
    import inspect  # noqa: PLC0415

    from helpers.portable.trainer import PortableTrainer  # noqa: PLC0415

    parameter = inspect.signature(PortableTrainer).parameters.get("lean")
    return bool(parameter is not None and parameter.default)


def main(argv=None):
    """``serve SPEC`` (SPEC: JSON), each trainer on SPEC's providers; see the module's text."""
    command, spec = (sys.argv[1:] if argv is None else argv)[:2]
    print(json.dumps({"lean": trainer_lean()}), flush=True)  # the trainer's own parameters
    default_providers(provider_list(json.loads(spec).get(PROVIDERS)))
    return portable_process.main([command, spec])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
