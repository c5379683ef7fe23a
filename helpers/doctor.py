"""What this machine can train on, in a few lines: ``python -m helpers.doctor`` (or ``make
doctor``).

It prints Python, the onnxruntime package (and any other one beside it), the
backend the optimizers train with and why, the providers, whether a small
training step really runs on the CPU and on each GPU the driver sees (and why
not), the NVIDIA driver, the CUDA 11.8 libraries of the GPU package, the
threads, and torch. The exit status is 0 when the variant asked for
(--variant cpu, gpu or maintained; by default the one installed) trains.

Examples
--------
>>> status = main(["--variant", "cpu"])  # doctest: +ELLIPSIS
Python ...
verdict ...the CPU variant trains
>>> status
0
"""

import argparse
import os
import platform
import sys

import numpy as np
import onnxruntime

from .core.machine import cuda_libraries, devices
from .core.machine.backends import default_backend
from .core.machine.runtime import has_training_package
from .core.machine.threads import resolved_threads
from .measure.conditions import usable_cores


def training_step_problem(device):
    """Run one epoch of each API on a tiny network on ``device``; the error, or None when both
    train.

    Parameters
    ----------
    device : str
        ``'cpu'`` or ``'cuda:N'``.

    Returns
    -------
    str or None

    Examples
    --------
    >>> training_step_problem("cpu") is None
    True
    """
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 4)).astype(np.float32)
    y = X.sum(axis=1).astype(np.float32)
    try:  # an optimizer that does not import here is a failure to report too
        from .forward_backward.optimizer import OrtGradientForwardBackwardOptimizer  # noqa: PLC0415
        from .teaching.model_factories import mlp_onnx  # noqa: PLC0415
        from .whole_training.loss_output import add_loss_output  # noqa: PLC0415
        from .whole_training.optimizer import OrtGradientOptimizer  # noqa: PLC0415

        onx = mlp_onnx(4, hidden=(8,))
        for optimizer in (
            OrtGradientOptimizer(add_loss_output(onx), max_iter=2, batch_size=8, device=device),
            OrtGradientForwardBackwardOptimizer(onx, max_iter=2, batch_size=8, device=device),
        ):
            optimizer.fit(X, y)
            if not np.all(np.isfinite(optimizer.train_losses_)):
                return f"the losses on {device} are not finite: {optimizer.train_losses_}"
    except Exception as error:  # the doctor reports any failure
        return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    return None


#: The variants of ``make setup`` (``make setup VARIANT=...``).
VARIANTS = ("cpu", "gpu", "maintained")


def installed_variant():
    """The variant of ``make setup`` this environment holds, told by its onnxruntime package.

    ``'gpu'`` for the training package with a CUDA provider, ``'cpu'`` for the training package
    without one, ``'maintained'`` for an onnxruntime without training module (``onnxruntime``, or
    ``onnxruntime-gpu`` in its place).

    Examples
    --------
    >>> installed_variant() in VARIANTS
    True
    """
    if not has_training_package():
        return "maintained"
    return "gpu" if "CUDAExecutionProvider" in onnxruntime.get_available_providers() else "cpu"


def _variant_name(variant):
    return "maintained" if variant == "maintained" else variant.upper()


def backend_summary():
    """The backend the optimizers train with here (``backend="auto"``), and on what.

    ``make setup`` ends with it.

    Returns
    -------
    str

    Examples
    --------
    >>> backend_summary().startswith(default_backend() + " (")
    True
    """
    backend = default_backend()
    packages = ", ".join(devices.installed_runtime_packages()) or "onnxruntime"
    how = (
        "gradients in standard ONNX" if backend == "onnx" else "gradients from its gradient builder"
    )
    return f"{backend} ({packages} {onnxruntime.__version__}, {how})"


def _backend_line(variant):
    why = (
        "the training package is installed"
        if has_training_package()
        else "no training package (onnxruntime.training) is installed"
    )
    return f"{backend_summary()}, as {why} (the {_variant_name(variant)} variant)"


def _environment():
    if sys.prefix == sys.base_prefix:
        return "not in a virtual environment (make setup builds .venv)"
    return f"virtual environment {os.path.basename(sys.prefix)}"


def _runtime_line():
    packages = devices.installed_runtime_packages()
    text = ", ".join(packages) or "none"
    if len(packages) > 1:
        text += (
            " (more than one: they overwrite each other's files; uninstall all of them and run "
            "make setup)"
        )
    return f"{text}, version {onnxruntime.__version__}"


def _driver_line():
    version = cuda_libraries.driver_cuda_version()
    if version is None:
        return "none (libcuda.so.1 cannot be loaded)"
    major, minor = divmod(version // 10, 100)
    release = cuda_libraries.driver_version_text()
    return f"{release or 'version unknown'}, supports CUDA {major}.{minor}"


def _cuda_libraries_line():
    if cuda_libraries.uses_system_cuda():
        missing = cuda_libraries.missing_cuda_libraries()
        return (
            f"system ({cuda_libraries.SOURCE_VARIABLE}=system); not found: "
            f"{', '.join(missing) or 'none'}"
        )
    found, missing = cuda_libraries.find_cuda_libraries()
    failed = cuda_libraries.load_errors(cuda_libraries.load_cuda_libraries())
    text = (
        f"{len(found) - len(failed)} of {len(found) + len(missing)} loaded from the nvidia-*-cu11 "
        "pip packages"
    )
    if missing:
        text += f"; not installed: {', '.join(sorted(set(missing.values())))}"
    if failed:
        text += "; failed to load: " + ", ".join(
            f"{name} ({message})" for name, message in failed.items()
        )
    return text


def _threads_line():
    usable = usable_cores()
    chosen = resolved_threads()
    sessions = (
        f"{chosen} per session (helpers.set_num_threads)"
        if chosen
        else "onnxruntime's default per session (one per physical core) unless n_threads is given"
    )
    return f"{usable} cores usable (of {os.cpu_count()}); threads: {sessions}"


def _torch_line():
    try:
        import torch  # noqa: PLC0415
    except ImportError as error:
        return f"not importable ({error})"
    if torch.cuda.is_available():
        return (
            f"{torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s): "
            f"{torch.cuda.get_device_name(0)}"
        )
    return f"{torch.__version__}, CPU only"


def diagnose(variant=None):
    """Check this machine and return the report's lines and whether ``variant`` trains.

    Parameters
    ----------
    variant : {'cpu', 'gpu', 'maintained'} or None
        The variant that must work; the installed one when None
        (:func:`installed_variant`).

    Returns
    -------
    lines : list of (str, str)
        Name and value of each line of the report.
    works : bool

    Examples
    --------
    >>> lines, works = diagnose("cpu")
    >>> dict(lines)["CPU training"], works
    ('yes: both APIs ran two epochs', True)
    """
    packages = devices.installed_runtime_packages()
    training = has_training_package()
    gpu_package = training and "CUDAExecutionProvider" in onnxruntime.get_available_providers()
    variant = variant or installed_variant()
    lines = [
        (
            "Python",
            f"{platform.python_version()}, {sys.platform} {platform.machine()}, {_environment()}",
        ),
        ("onnxruntime", _runtime_line()),
        ("Backend", _backend_line(variant)),
        ("providers", ", ".join(onnxruntime.get_available_providers())),
    ]
    cpu_problem = training_step_problem("cpu")
    lines.append(
        ("CPU training", f"no: {cpu_problem}" if cpu_problem else "yes: both APIs ran two epochs")
    )
    lines.append(("NVIDIA driver", _driver_line()))
    if gpu_package:
        lines.append(("CUDA libraries", _cuda_libraries_line()))
    gpu_works = []
    if not training and variant != "gpu":
        lines.append(("GPU training", _maintained_gpu_line()))
    elif setup_problem := devices.gpu_setup_problem():
        lines.append(("GPU training", f"no: {setup_problem}"))
    else:
        for index in range(cuda_libraries.visible_gpus()[0]):
            problem = devices.cuda_problem(index) or training_step_problem(f"cuda:{index}")
            gpu_works.append(problem is None)
            lines.append(
                (
                    f"GPU cuda:{index}",
                    f"no: {problem}" if problem else "yes: both APIs ran two epochs",
                )
            )
    lines.append(("threads", _threads_line()))
    lines.append(("torch", _torch_line()))
    works = cpu_problem is None and len(packages) == 1 and (variant != "gpu" or any(gpu_works))
    lines.append(
        (
            "verdict",
            f"the {_variant_name(variant)} variant {'trains' if works else 'does not train'}",
        )
    )
    return lines, works


def _maintained_gpu_line():
    """The GPU line for an onnxruntime without training module (the maintained variant)."""
    version = onnxruntime.__version__
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        return (
            f"no: onnxruntime {version} has no CUDA provider; onnxruntime-gpu=={version} in its "
            "place has one (docs/guide/install.md: this path is documented but not tested on a "
            "GPU)"
        )
    if cuda_libraries.driver_cuda_version() is None:
        return "no: no NVIDIA driver is installed (libcuda.so.1 cannot be loaded)"
    return (
        f"not checked: this report's GPU checks are those of onnxruntime-training 1.19.2 (CUDA "
        f"11.8); onnxruntime-gpu {version} is documented but not tested on a GPU"
    )


def print_report(variant=None):
    """Print the report of :func:`diagnose` (the first cell of a GPU notebook runs it).

    Parameters
    ----------
    variant : {'cpu', 'gpu', 'maintained'} or None
        As in :func:`diagnose`.

    Returns
    -------
    bool
        Whether ``variant`` trains.

    Examples
    --------
    >>> works = print_report("cpu")  # doctest: +ELLIPSIS
    Python ...
    >>> works
    True
    """
    lines, works = diagnose(variant)
    width = max(len(name) for name, _ in lines) + 2
    for name, value in lines:
        print(f"{name:<{width}}{value}")
    return works


def main(argv=None):
    """Print the report; return 0 when the variant asked for trains, 1 otherwise.

    Examples
    --------
    >>> main(["--variant", "cpu"])  # doctest: +ELLIPSIS
    Python ...
    verdict ...the CPU variant trains
    0
    """
    parser = argparse.ArgumentParser(
        prog="python -m helpers.doctor",
        description="What this machine can train on: the onnxruntime package, the backend, a "
        "training step on the CPU and on each GPU (or why not), the NVIDIA driver, the CUDA "
        "libraries, the threads and torch.",
    )
    parser.add_argument(
        "--variant",
        choices=list(VARIANTS),
        help="the variant that must work (default: the installed one)",
    )
    args = parser.parse_args(argv)
    return 0 if print_report(args.variant) else 1


if __name__ == "__main__":
    sys.exit(main())
