"""The CUDA 11.8 and cuDNN 8 libraries of the GPU runtime, from pip packages, and the NVIDIA driver.

The GPU package ``onnxruntime-training==1.19.2`` loads its CUDA provider,
``libonnxruntime_providers_cuda.so``, when a session first asks for
``CUDAExecutionProvider``. That library links against CUDA 11.8 and cuDNN 8
by name (``libcudart.so.11.0``, ``libcublas.so.11``, ``libcudnn.so.8``...),
which machines with a CUDA 12 or 13 toolkit do not have. NVIDIA publishes
those libraries as pip packages (``nvidia-cudnn-cu11``...), which
``requirements/gpu.txt`` pins; they install under ``site-packages/nvidia/``,
where the system's loader does not look. :func:`load_cuda_libraries` loads
them by full path first: the provider's own lookups by name then find them
already loaded, without ``LD_LIBRARY_PATH`` or a system toolkit.

Set ``ORT_TRAINING_CUDA=system`` to skip the pip libraries and use a system
CUDA 11.8 found by the loader (``LD_LIBRARY_PATH``, ``ldconfig``).

Examples
--------
>>> [package for package, _, _ in CUDA_PACKAGES][:2]
['nvidia-cuda-runtime-cu11', 'nvidia-cublas-cu11']
>>> minimum_driver_text()
'a driver for CUDA 11.0 or later (Linux 450.80.02 or later)'
"""

import ctypes
import os
import sys
from pathlib import Path

#: Each pip package, its folder under ``site-packages/nvidia``, and the
#: libraries the CUDA provider needs from it, in the order they load
#: (a library after those it links to). cuDNN 8 opens its parts itself, by name.
CUDA_PACKAGES = (
    ("nvidia-cuda-runtime-cu11", "cuda_runtime", ("libcudart.so.11.0",)),
    ("nvidia-cublas-cu11", "cublas", ("libcublasLt.so.11", "libcublas.so.11")),
    ("nvidia-cufft-cu11", "cufft", ("libcufft.so.10",)),
    ("nvidia-curand-cu11", "curand", ("libcurand.so.10",)),
    # cuDNN 8's own dependency (its runtime-compiled kernels), not the provider's
    ("nvidia-cuda-nvrtc-cu11", "cuda_nvrtc", ("libnvrtc.so.11.2", "libnvrtc-builtins.so.11.8")),
    (
        "nvidia-cudnn-cu11",
        "cudnn",
        (
            "libcudnn.so.8",
            "libcudnn_ops_infer.so.8",
            "libcudnn_ops_train.so.8",
            "libcudnn_cnn_infer.so.8",
            "libcudnn_cnn_train.so.8",
            "libcudnn_adv_infer.so.8",
            "libcudnn_adv_train.so.8",
        ),
    ),
)
#: The libraries ``libonnxruntime_providers_cuda.so`` links by name (``readelf -d``):
#: the ones a system CUDA 11.8 must provide; the others are opened by these.
PROVIDER_LIBRARIES = (
    "libcudart.so.11.0",
    "libcublasLt.so.11",
    "libcublas.so.11",
    "libcufft.so.10",
    "libcurand.so.10",
    "libcudnn.so.8",
)
#: The lowest CUDA version (``cuDriverGetVersion``: 1000 x major + 10 x minor)
#: a driver must support to run CUDA 11.8 code (CUDA's minor-version compatibility).
MINIMUM_DRIVER_CUDA = 11000
#: The environment variable that selects a system CUDA 11.8 instead of the pip libraries.
SOURCE_VARIABLE = "ORT_TRAINING_CUDA"


def minimum_driver_text():
    """The driver CUDA 11.8 code needs, in words.

    Examples
    --------
    >>> "450.80.02" in minimum_driver_text()
    True
    """
    major, minor = divmod(MINIMUM_DRIVER_CUDA // 10, 100)
    return f"a driver for CUDA {major}.{minor} or later (Linux 450.80.02 or later)"


def package_folders(search_path=None):
    """Folders of the ``nvidia`` namespace package, where the pip libraries install.

    Parameters
    ----------
    search_path : list of str or None
        Where to look for ``nvidia/`` (``sys.path`` when None).

    Returns
    -------
    list of pathlib.Path

    Examples
    --------
    >>> package_folders(["/nonexistent"])
    []
    """
    folders = []
    for entry in sys.path if search_path is None else search_path:
        folder = Path(entry or ".") / "nvidia"
        if folder.is_dir() and folder not in folders:
            folders.append(folder)
    return folders


def find_cuda_libraries(search_path=None):
    """Where the pip packages put each library the CUDA provider needs.

    Parameters
    ----------
    search_path : list of str or None
        Where to look for ``nvidia/<package>/lib/`` (``sys.path`` when None).

    Returns
    -------
    found : dict
        Library name to its full path, in loading order.
    missing : dict
        Library name to the pip package that provides it.

    Examples
    --------
    >>> found, missing = find_cuda_libraries(["/nonexistent"])
    >>> found, missing["libcudnn.so.8"]
    ({}, 'nvidia-cudnn-cu11')
    """
    folders = package_folders(search_path)
    found, missing = {}, {}
    for package, folder, libraries in CUDA_PACKAGES:
        for library in libraries:
            paths = [
                f / folder / "lib" / library
                for f in folders
                if (f / folder / "lib" / library).is_file()
            ]
            if paths:
                found[library] = str(paths[0])
            else:
                missing[library] = package
    return found, missing


def load_cuda_libraries(search_path=None, loader=None):
    """Load the pip packages' CUDA 11.8 and cuDNN 8 libraries, once per process, before the CUDA
    provider.

    Nothing happens when ``ORT_TRAINING_CUDA=system`` is set or when no
    library is found (a system CUDA 11.8 may then serve).

    Parameters
    ----------
    search_path : list of str or None
        Where to look for the packages (``sys.path`` when None).
    loader : callable or None
        Loads one library by path (``ctypes.CDLL`` with ``RTLD_GLOBAL``
        when None); tests pass a fake.

    Returns
    -------
    dict
        Library name to the path it was loaded from, or to the error that
        prevented it (a string starting with ``'error: '``).

    Examples
    --------
    >>> load_cuda_libraries(["/nonexistent"])
    {}
    """
    if uses_system_cuda():
        return {}
    loader = loader or _load_global
    found, _ = find_cuda_libraries(search_path)
    loaded = {}
    for library, path in found.items():
        if library in _LOADED:
            loaded[library] = _LOADED[library]
            continue
        try:
            loader(path)
        except OSError as error:
            loaded[library] = f"error: {error}"
            continue
        loaded[library] = _LOADED[library] = path
    return loaded


_LOADED = {}


def _load_global(path):
    """Load a library by path, its symbols visible to the libraries loaded after it."""
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def loadable_by_name(library):
    """Whether the system's loader finds ``library`` (already loaded, ``LD_LIBRARY_PATH``,
    ``ldconfig``).

    Examples
    --------
    >>> loadable_by_name("libc.so.6"), loadable_by_name("libnothing.so.0")
    (True, False)
    """
    try:
        ctypes.CDLL(library)
    except OSError:
        return False
    return True


def uses_system_cuda():
    """Whether ``ORT_TRAINING_CUDA=system`` asks for a system CUDA 11.8 instead of the pip
    libraries.

    Examples
    --------
    >>> import os
    >>> uses_system_cuda() == (os.environ.get("ORT_TRAINING_CUDA", "").lower() == "system")
    True
    """
    return os.environ.get(SOURCE_VARIABLE, "").lower() == "system"


def missing_cuda_libraries(search_path=None, by_name=None):
    """The libraries the CUDA provider needs that neither the pip packages nor the system provide.

    With ``ORT_TRAINING_CUDA=system`` the pip packages are not used, so every
    library the provider links is looked up by name; otherwise only those no
    pip package holds.

    Parameters
    ----------
    search_path : list of str or None
        Where to look for the packages (``sys.path`` when None).
    by_name : callable or None
        Whether the system's loader finds a library (:func:`loadable_by_name`
        when None); tests pass a fake.

    Returns
    -------
    dict
        Library name to the pip package that provides it.

    Examples
    --------
    >>> missing_cuda_libraries(["/nonexistent"], by_name=lambda name: name != "libcufft.so.10")
    {'libcufft.so.10': 'nvidia-cufft-cu11'}
    """
    by_name = by_name or loadable_by_name
    found, missing = find_cuda_libraries(search_path)
    if uses_system_cuda():
        missing = {
            **missing,
            **{
                name: package
                for package, _, names in CUDA_PACKAGES
                for name in names
                if name in found
            },
        }
    # cuDNN opens its parts and nvrtc itself, after libcudnn.so.8: only the provider's direct needs
    # are checked
    return {
        name: package
        for name, package in missing.items()
        if name in PROVIDER_LIBRARIES and not by_name(name)
    }


def load_errors(loaded):
    """The libraries of a :func:`load_cuda_libraries` result that failed to load, with the loader's
    message.

    Examples
    --------
    >>> load_errors({"libcudart.so.11.0": "/site/nvidia/cuda_runtime/lib/libcudart.so.11.0",
    ...              "libcudnn.so.8": "error: libz.so.1: cannot open shared object file"})
    {'libcudnn.so.8': 'libz.so.1: cannot open shared object file'}
    """
    return {
        name: value[len("error: ") :]
        for name, value in loaded.items()
        if value.startswith("error: ")
    }


def provider_load_error(loader=None):
    """Why the runtime's CUDA provider library cannot be loaded, in the loader's words, or None.

    onnxruntime falls back to the CPU without saying why when
    ``libonnxruntime_providers_cuda.so`` fails to load; loading it here gives
    the loader's message, which names the library that is missing.

    Parameters
    ----------
    loader : callable or None
        Loads a library by path (``ctypes.CDLL`` with ``RTLD_GLOBAL`` when None).

    Examples
    --------
    >>> def refuse(path):
    ...     raise OSError("libcublasLt.so.11: cannot open shared object file")
    >>> provider_load_error(refuse) in (
    ...     None,
    ...     "libcublasLt.so.11: cannot open shared object file",
    ... )  # None: CPU package
    True
    """
    import onnxruntime  # noqa: PLC0415  (this module is also used before onnxruntime is imported)

    folder = Path(onnxruntime.__file__).parent / "capi"
    shared, provider = (
        folder / "libonnxruntime_providers_shared.so",
        folder / "libonnxruntime_providers_cuda.so",
    )
    if not provider.is_file():
        return None
    loader = loader or _load_global
    try:
        if shared.is_file():
            loader(str(shared))
        loader(str(provider))
    except OSError as error:
        return str(error)
    return None


def driver_cuda_version(library="libcuda.so.1"):
    """The CUDA version the NVIDIA driver supports (e.g. 12040 for 12.4), or None without a driver.

    Examples
    --------
    >>> driver_cuda_version("libnothing.so.0") is None
    True
    """
    try:
        cuda = ctypes.CDLL(library)
    except OSError:
        return None
    version = ctypes.c_int(0)
    if cuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
        return None
    return version.value


def visible_gpus(library="libcuda.so.1"):
    """The number of GPUs the driver sees, or the reason it sees none.

    Returns
    -------
    count : int
    reason : str or None
        Why ``count`` is 0: no driver, or the driver's error.

    Examples
    --------
    >>> visible_gpus("libnothing.so.0")
    (0, 'no NVIDIA driver: libnothing.so.0 cannot be loaded')
    """
    try:
        cuda = ctypes.CDLL(library)
    except OSError:
        return 0, f"no NVIDIA driver: {library} cannot be loaded"
    status = cuda.cuInit(0)
    if status != 0:
        hint = " (no GPU, or none visible: check CUDA_VISIBLE_DEVICES)" if status == 100 else ""
        return 0, f"the NVIDIA driver found no usable GPU: cuInit returned error {status}{hint}"
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0, "the NVIDIA driver could not count the GPUs"
    return count.value, None if count.value else "the NVIDIA driver sees no GPU"


def driver_version_text():
    """The NVIDIA driver's own version (``/proc/driver/nvidia/version``), or None.

    Examples
    --------
    >>> text = driver_version_text()
    >>> text is None or text[0].isdigit()
    True
    """
    path = Path("/proc/driver/nvidia/version")
    if not path.is_file():
        return None
    for word in path.read_text().split():
        if word[:1].isdigit() and word.count(".") >= 1:
            return word
    return None
