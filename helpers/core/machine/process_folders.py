"""Temporary folders named after the process that made them, and removed when it ends.

Each process keeps its training artifacts in one folder,
``ort_training_artifacts_<pid>_<random>`` (:func:`artifact_root`), removed
when the process ends, whichever way it ends:

* at a normal exit, by ``atexit``;
* in a ``multiprocessing`` child, which exits without running ``atexit``
  (pool workers call ``os._exit``), by a multiprocessing finalizer;
* in a pool worker ended by ``Pool.terminate()`` (the end of every
  ``with Pool() as pool:`` block sends it SIGTERM, which runs neither), by
  a SIGTERM handler that removes the folder, then lets the signal end the
  worker as it would have (only where no other handler was set); a thread
  hands the signal to the main thread when the kernel gave it to another
  (:func:`_hand_signal_to_main_thread`), else the worker could wait for
  ever and ``terminate()`` with it;
* in a process killed outright (SIGKILL), by the parent when it exits, after
  its pool workers and other children ended, and by the next process that
  makes a folder: both remove the folders of processes that no longer run
  (:func:`remove_stale_folders`).
"""

import atexit
import os
import shutil
import signal
import tempfile
import threading
import time
from multiprocessing import parent_process, util

#: Prefix of the per-process artifact folders: ``ort_training_artifacts_<pid>_<random>``.
ROOT_PREFIX = "ort_training_artifacts_"

_ROOT = {"path": None, "pid": None}


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_folders(prefix=ROOT_PREFIX, directory=None):
    """Remove the folders ``<prefix><pid>_...`` of processes that ended without removing them.

    A process names its temporary folders with its id; a folder whose
    process no longer runs (killed, or ended with ``os._exit``) is left
    over, and the next process that makes such folders removes it, as does
    every process at its exit.

    Parameters
    ----------
    prefix : str
        The folders' prefix: the artifact folders by default; the benchmark
        runs use ``'bench-'``.
    directory : str, optional
        Where they are; the temporary folder by default.

    Returns
    -------
    list of str
        The folders removed.

    Examples
    --------
    >>> import os, tempfile
    >>> stale = tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}999999999_")  # no process has this id
    >>> stale in remove_stale_folders(), os.path.exists(stale)
    (True, False)
    """
    directory = directory or tempfile.gettempdir()
    removed = []
    for name in os.listdir(directory):
        pid = name[len(prefix) :].split("_", 1)[0] if name.startswith(prefix) else ""
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            path = os.path.join(directory, name)
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _remove_root(path, pid):
    """At exit: remove the artifact folder, in the process that made it only."""
    if os.getpid() == pid:
        shutil.rmtree(path, ignore_errors=True)


def artifact_root():
    """The folder, one per process, where cached training artifacts live.

    Examples
    --------
    >>> import os
    >>> os.path.isdir(artifact_root()) and artifact_root() == artifact_root()
    True
    """
    if _ROOT["path"] is None or _ROOT["pid"] != os.getpid() or not os.path.isdir(_ROOT["path"]):
        remove_stale_folders()
        pid = os.getpid()
        _ROOT["path"], _ROOT["pid"] = tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{pid}_"), pid
        atexit.register(_remove_root, _ROOT["path"], pid)
        _clean_up_in_worker(_ROOT["path"])
    return _ROOT["path"]


def forget_parent_folder():
    """In a forked child: the parent's folder is not this process's (it makes its own).

    Examples
    --------
    >>> before = artifact_root()
    >>> forget_parent_folder()
    >>> artifact_root() != before  # a new folder (the one before is removed at exit)
    True
    """
    _ROOT["path"] = _ROOT["pid"] = None


def _clean_up_in_worker(path):
    """In a multiprocessing child: remove ``path`` at its exit, and when its pool terminates it."""
    if parent_process() is None:
        return
    util.Finalize(None, shutil.rmtree, args=(path, True), exitpriority=0)
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _remove_root_and_end):
        signal.signal(signal.SIGTERM, _remove_root_and_end)
        _hand_signal_to_main_thread(signal.SIGTERM)


def _remove_root_and_end(signum, frame):
    """SIGTERM in a worker: remove its folder, then end as the signal would have.

    Further SIGTERMs are ignored while it runs: a second one (the thread of
    :func:`_hand_signal_to_main_thread` forwards each signal it sees) would
    enter the handler again in the middle of the removal.
    """
    signal.signal(signum, signal.SIG_IGN)
    if _ROOT["pid"] == os.getpid() and _ROOT["path"] is not None:
        shutil.rmtree(_ROOT["path"], ignore_errors=True)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


#: The wakeup pipe this process reads (its write end, and the pid that made it).
_WAKEUP = {"fd": -1, "pid": None}


def _hand_signal_to_main_thread(signum):
    """Send ``signum`` on to the main thread whenever another thread receives it.

    Python runs a signal's handler in the main thread only, once that thread
    runs Python again. The kernel may deliver a process's signal to any of its
    threads (onnxruntime's, tqdm's monitor); a main thread that waits on a
    lock, as an idle pool worker does, is then never woken, and
    ``Pool.terminate()`` waits for that worker for ever. Whichever thread the
    signal lands on, Python's C handler writes its number to the wakeup pipe
    (:func:`signal.set_wakeup_fd`); a daemon thread reading that pipe sends the
    signal to the main thread, which interrupts its wait and runs the handler.
    A signal can land just before the main thread starts to wait and be lost,
    so the thread sends it again every 50 ms (each signal it sends writes to
    the pipe once more) until the handler it was set up for is no longer the
    signal's handler (ours ignores the signal once it runs). A wakeup pipe
    that someone else set (an asyncio loop) is left alone.
    """
    if _WAKEUP["pid"] == os.getpid():
        return  # this process reads its pipe already
    read, write = os.pipe()
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    if previous not in (-1, _WAKEUP["fd"]):  # another reader's pipe: put it back
        signal.set_wakeup_fd(previous)
        os.close(read)
        os.close(write)
        return
    _WAKEUP.update(fd=write, pid=os.getpid())
    main, handler = threading.main_thread().ident, signal.getsignal(signum)

    def forward():
        while data := os.read(read, 512):
            if signum in data and signal.getsignal(signum) is handler:
                signal.pthread_kill(main, signum)
                time.sleep(0.05)

    threading.Thread(target=forward, name="hand-signal-to-main-thread", daemon=True).start()


def _remove_folders_of_ended_processes():
    """At exit, once the children ended: remove the folders of processes that no longer run."""
    try:
        remove_stale_folders()
    except OSError:  # the temporary folder itself is gone: nothing to remove
        pass


# multiprocessing's exit function ends the pool workers (and joins every child)
# before it runs the finalizers of negative priority
util.Finalize(None, _remove_folders_of_ended_processes, exitpriority=-100)
