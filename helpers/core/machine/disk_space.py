"""A full disk, said plainly: which folder is full and how much the files need.

The whole-training API writes files: its training artifacts (in the
temporary folder, or ``artifact_dir``), checkpoints, and the AdamW state a
pickle carries (through a temporary file). When the file system is full,
onnxruntime raises a ``RuntimeError`` whose last words only say ``No space
left on device``; :func:`full_disk_explained` turns it (and Python's own
``OSError``) into a :class:`DiskFullError` that names the folder, says it is
full, and how much the files need and how much is free. The writers remove
what they wrote half-way: nothing half-written is used afterwards.
"""

import errno
import os
import shutil
import tempfile
from contextlib import contextmanager

#: Where to write instead, when the temporary folder is full.
TEMPORARY_FOLDER = (
    "choose another temporary folder (the TMPDIR environment variable, or tempfile.tempdir)"
)


class DiskFullError(OSError):
    """A file the training writes does not fit: the folder's file system is full (``errno.ENOSPC``).

    Examples
    --------
    >>> error = DiskFullError("/tmp", "the training artifacts", 2_500_000)
    >>> error.errno == errno.ENOSPC, isinstance(error, OSError), error.filename
    (True, True, '/tmp')
    """

    def __init__(self, folder, what, needed, elsewhere=TEMPORARY_FOLDER):
        free = _free_bytes(folder)
        space = "" if free is None else f", {_size(free)} free"
        super().__init__(
            errno.ENOSPC,
            f"The folder {folder} is full (its file system says: {os.strerror(errno.ENOSPC)}): "
            f"writing {what} needs about {_size(needed)}"
            f"{space}. Free some space there, or {elsewhere}",
            folder,
        )


def _size(n_bytes):
    """``n_bytes`` in the unit that reads best.

    Examples
    --------
    >>> _size(512), _size(87_108), _size(3 * 2**20)
    ('512 bytes', '85.1 KiB', '3.0 MiB')
    """
    if n_bytes < 1024:
        return f"{n_bytes} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n_bytes /= 1024
        if n_bytes < 1024 or unit == "GiB":
            return f"{n_bytes:.1f} {unit}"


def _free_bytes(folder):
    """Free bytes of the file system of ``folder`` (or its nearest existing parent), or None."""
    folder = os.path.abspath(folder)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def is_disk_full(error):
    """Whether ``error`` says that the disk is full: ``errno.ENOSPC``, or onnxruntime's message.

    Examples
    --------
    >>> is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    True
    >>> is_disk_full(RuntimeError("Failed to save checkpoint. error:No space left on device"))
    True
    >>> is_disk_full(RuntimeError("Failed to save checkpoint: Permission denied"))
    False
    """
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return True
    return isinstance(error, RuntimeError) and os.strerror(errno.ENOSPC) in str(error)


def artifact_bytes(onx_loss):
    """About how many bytes the training artifacts of ``onx_loss`` take.

    The checkpoint holds the initializers; the training, evaluation and
    optimizer models hold the graph, its gradient and the update, about ten
    times the graph without its initializers (measured on perceptrons).

    Examples
    --------
    >>> from helpers import add_loss_output
    >>> from helpers.teaching.model_factories import mlp_onnx
    >>> model = add_loss_output(mlp_onnx(30, hidden=(60,)))
    >>> 5_000 < artifact_bytes(model) < 40_000  # 17,757 bytes written
    True
    """
    weights = sum(initializer.ByteSize() for initializer in onx_loss.graph.initializer)
    return weights + 10 * (onx_loss.ByteSize() - weights)


@contextmanager
def full_disk_explained(folder, what, needed, elsewhere=TEMPORARY_FOLDER):
    """Raise :class:`DiskFullError` when the block fills the disk.

    The error names ``folder``, ``what`` is written and the ``needed``
    bytes; ``elsewhere`` says where to write instead.

    Examples
    --------
    >>> try:
    ...     with full_disk_explained("/data", "the checkpoint", 80_000):
    ...         raise RuntimeError("Failed to save checkpoint. error:No space left on device")
    ... except DiskFullError as error:
    ...     print(error.strerror.split(": ", 1)[1].split(",")[0])
    No space left on device): writing the checkpoint needs about 78.1 KiB
    """
    try:
        yield
    except Exception as error:
        if not is_disk_full(error):
            raise
        raise DiskFullError(folder, what, needed, elsewhere) from None


@contextmanager
def temporary_file(what, needed):
    """The path of a file in a new temporary folder, removed with it when the block ends.

    A full disk raises :class:`DiskFullError` naming the temporary folder
    and ``what`` (needing about ``needed`` bytes).

    Examples
    --------
    >>> import os
    >>> with temporary_file("an example", 5) as path:
    ...     with open(path, "wb") as f:
    ...         _ = f.write(b"bytes")
    ...     written = os.path.getsize(path)
    >>> written, os.path.exists(path)
    (5, False)
    """
    with full_disk_explained(tempfile.gettempdir(), what, needed):
        with tempfile.TemporaryDirectory() as folder:
            yield os.path.join(folder, "file")
