"""Files written whole or not at all: a temporary file beside the target, then one rename.

An interrupted write (an exception, Ctrl-C, a full disk) leaves the previous file, or none, and
no temporary file behind. :func:`write_files_atomic` writes several files of a folder that way:
every temporary first, then the renames, so that a failure while writing leaves none of them.
"""

import os
import tempfile


def _new_file_mode():
    """The permissions a file created now gets: ``0o666`` less the process umask."""
    umask = os.umask(0)  # read by setting it: put back at once
    os.umask(umask)
    return 0o666 & ~umask


def _temporary(path, data):
    """Write ``data`` to a new temporary file beside ``path``; return its path."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        with os.fdopen(handle, "wb") as file:
            # mkstemp makes the file private (0o600): give it the mode of an ordinary new file
            os.chmod(temporary, _new_file_mode())
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        os.remove(temporary)
        raise
    return temporary


def write_atomic(path, data):
    """Write ``data`` to ``path`` through a temporary file in the same folder.

    The temporary file is flushed to disk (``os.fsync``) and given the mode of a new file under
    the process umask (``0o666 & ~umask``) before it replaces ``path`` in one rename; a
    failure or an interruption on the way removes it and leaves ``path`` as it was.

    Parameters
    ----------
    path : str or path-like
    data : bytes or str
        Text is written as UTF-8.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "losses.json"
    >>> write_atomic(target, "[1.0]")
    >>> target.read_text(), sorted(p.name for p in target.parent.iterdir())
    ('[1.0]', ['losses.json'])
    """
    path = os.fspath(path)
    temporary = _temporary(path, data)
    try:
        os.replace(temporary, path)
    except BaseException:
        os.remove(temporary)
        raise


def write_files_atomic(folder, files):
    """Write ``files`` into ``folder`` (created with its parents), all of them or none.

    Every file is written to a temporary first; the renames follow once all are written. A
    failure while writing (an exception, Ctrl-C, a full disk) removes the temporaries and the
    folders this call created: the folder is as it was.

    Parameters
    ----------
    folder : str or path-like
    files : dict
        File name to its content (bytes, or text written as UTF-8).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> write_files_atomic(out, {"losses.json": "[1.0]", "model.onnx": b"..."})
    >>> sorted(p.name for p in out.iterdir()), (out / "losses.json").read_text()
    (['losses.json', 'model.onnx'], '[1.0]')
    """
    folder = os.path.abspath(os.fspath(folder))
    created, parent = [], folder
    while not os.path.isdir(parent):
        created.append(parent)
        parent = os.path.dirname(parent)
    temporaries = {}
    try:
        os.makedirs(folder, exist_ok=True)
        for name, data in files.items():
            temporaries[name] = _temporary(os.path.join(folder, name), data)
        while temporaries:
            name, temporary = next(iter(temporaries.items()))
            os.replace(temporary, os.path.join(folder, name))
            del temporaries[name]
    except BaseException:
        for temporary in temporaries.values():
            os.remove(temporary)
        for made in created:  # the deepest first; left where something else was written
            try:
                os.rmdir(made)
            except OSError:
                break
        raise
