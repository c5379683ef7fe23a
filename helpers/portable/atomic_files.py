"""Files written whole or not at all: a temporary file beside the target, then one rename.

An interrupted write (an exception, Ctrl-C, a full disk) leaves the previous file, or none, and
no temporary file behind.
"""

import os
import tempfile


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
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
