"""Files written whole or not at all: a temporary file beside the target, then one rename.

An interrupted write (an exception, Ctrl-C, a full disk) leaves the previous file, or none, and
no temporary file behind. :func:`write_files_atomic` writes several files of a folder that way:
every temporary first, then the renames, so that a failure while writing leaves none of them.
"""

import os
import tempfile


def _temporary(path, data):
    """Write ``data`` to a new temporary file beside ``path``; return its path."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(
        dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
    )
    try:
        # mkstemp makes the file private: give it the target's permissions, or the usual ones
        os.chmod(temporary, os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o644)
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        os.remove(temporary)
        raise
    return temporary


def write_atomic(path, data):
    """Write ``data`` to ``path`` through a temporary file in the same folder.

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
