"""What a refit of the same model reuses: artifacts and gradient graphs.

``GridSearchCV``, ``clone(est).fit`` and the benchmarks fit the same model
with the same settings again and again. Building its training graph
(``generate_artifacts``, or the gradient builder of the forward/backward
API) and the sessions that run it costs more than a few epochs of a small
network. Both optimizers therefore keep what they built in a small
in-memory cache, keyed by the content of the model and by every setting
the built objects depend on, and bounded in size (least recently used
entries go first).

The artifacts of the whole-training API are files (``Module`` loads paths):
they live in one temporary folder per process, removed when the process
ends or the entry is evicted, instead of one folder created and removed per
fit.
"""
import atexit
import hashlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict

import onnx


def content_key(*parts):
    """Return a hash of ``parts``: models by their bytes, other values by ``repr``.

    Examples
    --------
    >>> content_key("sgd", 2) == content_key("sgd", 2)
    True
    >>> content_key("sgd", 2) == content_key("sgd", 3)
    False
    """
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, onnx.ModelProto):
            part = part.SerializeToString(deterministic=True)
        elif not isinstance(part, bytes):
            part = repr(part).encode()
        digest.update(len(part).to_bytes(8, "little"))
        digest.update(part)
    return digest.hexdigest()


class ContentCache:
    """A bounded least-recently-used cache of built objects.

    Parameters
    ----------
    maxsize : int
        Entries kept; the least recently used one is dropped beyond it.
    on_evict : callable, optional
        Called with each dropped value (to remove its files, say).

    Attributes
    ----------
    hits, misses : int
        Lookups that found an entry, and lookups that built one.

    Examples
    --------
    >>> cache = ContentCache(maxsize=2)
    >>> cache.get_or_build("a", lambda: 1), cache.get_or_build("a", lambda: 2)
    (1, 1)
    >>> cache.hits, cache.misses
    (1, 1)
    """

    def __init__(self, maxsize, on_evict=None):
        self.maxsize = maxsize
        self.on_evict = on_evict
        self.hits = self.misses = 0
        self._entries = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._entries)

    def get_or_build(self, key, build):
        """Return the value stored under ``key``, built by ``build()`` if missing."""
        with self._lock:
            if key in self._entries:
                self.hits += 1
                self._entries.move_to_end(key)
                return self._entries[key]
        value = build()
        with self._lock:
            self.misses += 1
            self._entries[key] = value
            self._entries.move_to_end(key)
            dropped = []
            while len(self._entries) > self.maxsize:
                dropped.append(self._entries.popitem(last=False)[1])
        for old in dropped:
            if self.on_evict is not None:
                self.on_evict(old)
        return value

    def clear(self):
        """Drop every entry (and reset the counters)."""
        with self._lock:
            dropped = list(self._entries.values())
            self._entries.clear()
            self.hits = self.misses = 0
        for old in dropped:
            if self.on_evict is not None:
                self.on_evict(old)


_ROOT = {"path": None}


def artifact_root():
    """The folder, one per process, where cached training artifacts live.

    Examples
    --------
    >>> import os
    >>> os.path.isdir(artifact_root()) and artifact_root() == artifact_root()
    True
    """
    if _ROOT["path"] is None:
        _ROOT["path"] = tempfile.mkdtemp(prefix="ort_training_artifacts_")
        atexit.register(shutil.rmtree, _ROOT["path"], True)
    return _ROOT["path"]


def _remove_folder(folder):
    shutil.rmtree(folder, ignore_errors=True)


#: Training artifacts of the whole-training API: key -> folder.
ARTIFACTS = ContentCache(maxsize=16, on_evict=_remove_folder)

#: Compiled gradient graphs and sessions of the forward/backward API.
GRADIENT_GRAPHS = ContentCache(maxsize=16)


def cached_artifact_folder(key, write):
    """Return a folder holding the artifacts of ``key``, written by ``write(folder)`` once.

    A folder is only published once ``write`` has returned: an error while
    writing leaves no half-written entry behind.

    Examples
    --------
    >>> import os
    >>> def write(folder):
    ...     open(os.path.join(folder, "model.onnx"), "wb").close()
    >>> folder = cached_artifact_folder(content_key("example"), write)
    >>> os.listdir(folder), cached_artifact_folder(content_key("example"), write) == folder
    (['model.onnx'], True)
    >>> clear_training_caches()
    """

    def build():
        folder = tempfile.mkdtemp(prefix="tmp_", dir=artifact_root())
        try:
            write(folder)
        except BaseException:
            _remove_folder(folder)
            raise
        final = os.path.join(artifact_root(), key[:32])
        _remove_folder(final)
        os.replace(folder, final)
        return final

    return ARTIFACTS.get_or_build(key, build)


def clear_training_caches():
    """Forget every cached artifact and gradient graph (and remove their files).

    Examples
    --------
    >>> clear_training_caches()
    >>> len(ARTIFACTS), len(GRADIENT_GRAPHS)
    (0, 0)
    """
    ARTIFACTS.clear()
    GRADIENT_GRAPHS.clear()
