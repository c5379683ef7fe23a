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

Threads and processes:

* fits in several threads share the cache: one thread builds a missing
  entry while the others wait for it, and a folder some fit is loading
  (:meth:`ContentCache.leased`) is removed only once it is released;
* a folder that disappeared (a temporary-file cleaner, another process) is
  built again, not fatal;
* a forked child forgets its parent's entries without touching them: it
  builds its own, in a folder of its own, and never removes the parent's.
  How every process's folder is removed when it ends, pool workers and
  killed processes included: :mod:`helpers.core.machine.process_folders`.
"""

import hashlib
import os
import shutil
import tempfile
import threading
from collections import Counter, OrderedDict
from contextlib import contextmanager

import onnx

# ROOT_PREFIX and remove_stale_folders: re-exported, where callers found them before
from .process_folders import (  # noqa: F401
    ROOT_PREFIX,
    artifact_root,
    forget_parent_folder,
    remove_stale_folders,
)


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
    """A bounded least-recently-used cache of built objects, safe for threads.

    Parameters
    ----------
    maxsize : int
        Entries kept; the least recently used one is dropped beyond it.
    on_evict : callable, optional
        Called with each dropped value (to remove its files, say), once no
        :meth:`leased` block uses it any more.
    is_valid : callable, optional
        ``is_valid(value)`` is False for an entry that can no longer be used
        (its folder disappeared): it is built again.

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

    def __init__(self, maxsize, on_evict=None, is_valid=None):
        self.maxsize = maxsize
        self.on_evict = on_evict
        self.is_valid = is_valid
        self._reset()

    def _reset(self):
        self.hits = self.misses = 0
        self._entries = OrderedDict()
        self._lock = threading.Lock()
        self._building = {}  # key -> lock held by the thread building it
        self._leases = Counter()
        self._evicted = []  # (key, value) dropped while leased

    def __len__(self):
        return len(self._entries)

    def _lookup(self, key):
        """The entry of ``key`` if it is there and valid (called with the lock held)."""
        if key not in self._entries:
            return None
        value = self._entries[key]
        if self.is_valid is not None and not self.is_valid(value):
            del self._entries[key]  # gone from under us: build it again
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return value

    def get_or_build(self, key, build):
        """Return the value stored under ``key``, built by ``build()`` if missing (once, whatever
        the threads)."""
        while True:
            with self._lock:
                value = self._lookup(key)
                if value is not None:
                    return value
                building = self._building.get(key)
                if building is None:
                    building = self._building[key] = threading.Lock()
                    building.acquire()
                    break
            with building:  # another thread builds it: wait, then look again
                pass
        try:
            value = build()
            self._store(key, value)  # stored before the waiting threads look again: built once
        finally:
            with self._lock:
                del self._building[key]
            building.release()
        return value

    def _store(self, key, value):
        with self._lock:
            self.misses += 1
            self._entries[key] = value
            self._entries.move_to_end(key)
            dropped = []
            while len(self._entries) > self.maxsize:
                dropped.append(self._entries.popitem(last=False))
            dropped = self._defer_leased(dropped)
        self._evict(dropped)

    def _defer_leased(self, dropped):
        """Keep the leased ones of ``dropped`` aside until released; return the others (lock
        held)."""
        free = []
        for key, value in dropped:
            (self._evicted if self._leases[key] else free).append((key, value))
        return free

    def _evict(self, dropped):
        if self.on_evict is not None:
            for _, value in dropped:
                self.on_evict(value)

    @contextmanager
    def leased(self, key, build):
        """The value of ``key`` (built if missing), kept from eviction until the block ends.

        Examples
        --------
        >>> removed = []
        >>> cache = ContentCache(maxsize=1, on_evict=removed.append)
        >>> with cache.leased("a", lambda: "folder a") as value:
        ...     _ = cache.get_or_build("b", lambda: "folder b")  # evicts 'a', which is in use
        ...     kept = list(removed)
        >>> value, kept, removed
        ('folder a', [], ['folder a'])
        """
        with self._lock:
            self._leases[key] += 1
        try:
            yield self.get_or_build(key, build)
        finally:
            with self._lock:
                self._leases[key] -= 1
                released = [(k, v) for k, v in self._evicted if k == key and not self._leases[key]]
                self._evicted = [(k, v) for k, v in self._evicted if (k, v) not in released]
            self._evict(released)

    def clear(self):
        """Drop every entry (and reset the counters)."""
        with self._lock:
            dropped = self._defer_leased(list(self._entries.items()))
            self._entries.clear()
            self.hits = self.misses = 0
        self._evict(dropped)

    def forget(self):
        """Forget every entry without evicting it: a forked child's view of its parent's cache."""
        self._reset()


def _remove_folder(folder):
    shutil.rmtree(folder, ignore_errors=True)


def _has_artifacts(folder):
    return os.path.isfile(os.path.join(folder, "checkpoint")) and os.path.isfile(
        os.path.join(folder, "training_model.onnx")
    )


#: Training artifacts of the whole-training API: key -> folder.
ARTIFACTS = ContentCache(maxsize=16, on_evict=_remove_folder, is_valid=_has_artifacts)

#: Compiled gradient graphs and sessions of the forward/backward API.
GRADIENT_GRAPHS = ContentCache(maxsize=16)

#: What a forked child inherited and must neither use nor destroy (sessions
#: whose threads stayed in the parent): kept alive, never touched.
_INHERITED = []


def _forget_parent_state():
    """In a forked child: start with empty caches and a folder of its own; leave the parent's
    alone."""
    _INHERITED.append((dict(ARTIFACTS._entries), dict(GRADIENT_GRAPHS._entries)))
    ARTIFACTS.forget()
    GRADIENT_GRAPHS.forget()
    forget_parent_folder()


os.register_at_fork(after_in_child=_forget_parent_state)


@contextmanager
def cached_artifact_folder(key, write):
    """A folder holding the artifacts of ``key``, written by ``write(folder)`` once; leased while
    the block runs.

    A folder is only published once ``write`` has returned, under a name of
    its own: an error while writing leaves no half-written entry behind,
    and no fit ever sees another's folder half-written or removed.

    Examples
    --------
    >>> import os
    >>> def write(folder):
    ...     open(os.path.join(folder, "checkpoint"), "wb").close()
    ...     open(os.path.join(folder, "training_model.onnx"), "wb").close()
    >>> with cached_artifact_folder(content_key("example"), write) as folder:
    ...     files = sorted(os.listdir(folder))
    >>> files
    ['checkpoint', 'training_model.onnx']
    >>> clear_training_caches()
    """

    def build():
        folder = tempfile.mkdtemp(prefix=f"{key[:16]}_", dir=artifact_root())
        try:
            write(folder)
        except BaseException:
            _remove_folder(folder)
            raise
        return folder

    with ARTIFACTS.leased(key, build) as folder:
        yield folder


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
