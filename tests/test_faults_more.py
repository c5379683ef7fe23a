"""More faults a user runs into: outputs that overflow, a full disk, temporary folders left by
pools."""

import errno
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import APIS, make_seeded_optimizer

from helpers import (
    OrtGradientOptimizer,
    TrainingDivergedError,
    add_loss_output,
    get_train_initializer,
)
from helpers.teaching.model_factories import mlp_onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
X = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
Y = np.tanh(X[:, :2].sum(axis=1)).astype(np.float32)


def _optimizer(api, hidden=5, max_iter=1, batch_size=40, learning_rate=0.05, **params):
    onx = mlp_onnx(4, hidden=(hidden,))
    return make_seeded_optimizer(api, onx, max_iter, batch_size, learning_rate, **params)


@pytest.mark.parametrize("api", APIS)
def test_a_last_update_whose_outputs_overflow_is_a_divergence(api):
    """One step on features of 1e9: a finite loss, finite weights (about 1e17), yet infinite
    predictions."""
    huge = X * 1e9
    with pytest.raises(TrainingDivergedError, match="non-finite outputs on rows 0:40"):
        _optimizer(api, on_divergence="raise").fit(huge, Y)
    opt = _optimizer(api, on_divergence="stop")
    initial = get_train_initializer(opt.model_onnx)
    with pytest.warns(RuntimeWarning, match="weights are those of the start of the epoch"):
        opt.fit(huge, Y)
    assert opt.t_ == 0 and opt.n_iter_ == 0 and opt.train_losses_ == []
    for name, value in opt.get_state().items():
        np.testing.assert_array_equal(value, initial[name])
    assert np.isfinite(opt.predict(huge)).all()


@pytest.mark.parametrize("api", APIS)
def test_a_fit_that_ends_well_is_left_alone(api):
    """The check of the last batch changes nothing in a fit that does not diverge."""
    opt = _optimizer(api, max_iter=3, batch_size=8).fit(X, Y)
    assert opt.n_iter_ == 3 and len(opt.train_losses_) == 3
    np.testing.assert_allclose(-opt.score(X, Y), np.mean((opt.predict(X) - Y) ** 2), rtol=1e-5)


FULL_DISK_SCRIPT = r"""
import errno, os, pickle, subprocess, sys, tempfile
import numpy as np
from helpers import OrtGradientOptimizer, add_loss_output
from helpers.core.machine import training_cache
from helpers.teaching.model_factories import mlp_onnx

small = tempfile.gettempdir()
X = np.random.default_rng(0).standard_normal((16, 30)).astype(np.float32)

def optimizer(hidden, **params):
    onx = add_loss_output(mlp_onnx(30, hidden=(hidden,)))
    return OrtGradientOptimizer(onx, max_iter=1, batch_size=8, **params)

def expect_full(call, what):
    try:
        call()
    except OSError as error:  # helpers.core.machine.disk_space.DiskFullError
        assert error.errno == errno.ENOSPC and error.filename == small, error
        message = str(error)
        assert f"The folder {small} is full" in message, message
        assert f"writing {what} needs about" in message, message
        assert "onnxruntime_src" not in message, message
        return
    raise AssertionError(f"no OSError for {what}")

# a fit whose artifacts (about 84 KiB) do not fit in 64 KiB: said plainly, nothing half-written kept
expect_full(lambda: optimizer(600).fit(X, X[:, 0]), "the training artifacts")
assert len(training_cache.ARTIFACTS) == 0
assert os.listdir(training_cache.artifact_root()) == [], os.listdir(training_cache.artifact_root())
# a checkpoint that does not fit: the previous one is kept, no temporary file is left
fitted = optimizer(200, solver="adamw").fit(X, X[:, 0])
path = os.path.join(small, "train.ckpt")
expect_full(lambda: fitted.save_checkpoint(path), "the checkpoint")
assert not os.path.exists(path) and [n for n in os.listdir(small) if "ckpt" in n] == []
# pickling an AdamW estimator writes its moments through a temporary file
expect_full(lambda: pickle.dumps(fitted), "the AdamW state a pickle carries")
# once there is room, the same fit builds its artifacts again and trains
subprocess.run(["mount", "-o", "remount,size=4m", small], check=True)
again = optimizer(600).fit(X, X[:, 0])
# the artifacts of this fit and those of the AdamW one
assert np.isfinite(again.predict(X)).all() and len(training_cache.ARTIFACTS) == 2
print("ok")
"""


def _mount_small_tmpfs(folder):
    folder.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip(
            "mounting a small tmpfs needs root: test_a_full_disk_simulated covers the same path"
        )
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode:
        pytest.skip(
            f"mounting a small tmpfs is not permitted here ({done.stderr.decode().strip()}): "
            "test_a_full_disk_simulated covers the same path"
        )


@pytest.mark.training_package
def test_a_full_temporary_folder_is_said_plainly_and_leaves_nothing_half_written(tmp_path):
    small = tmp_path / "small"
    _mount_small_tmpfs(small)
    try:
        env = dict(os.environ, TMPDIR=str(small), PYTHONPATH=ROOT)
        done = subprocess.run(
            [sys.executable, "-c", FULL_DISK_SCRIPT],
            env=env,
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
    finally:
        subprocess.run(["umount", str(small)], check=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


@pytest.mark.training_package
def test_a_full_disk_simulated(monkeypatch, tmp_path):
    """onnxruntime's own message, as a full disk gives it, whatever the file system."""
    from helpers.core.machine import training_cache
    from helpers.whole_training import session

    def full(graph, names, folder, **kwargs):
        with open(os.path.join(folder, "checkpoint"), "wb") as f:  # written half-way
            f.write(b"half")
        raise RuntimeError(
            "/onnxruntime_src/orttraining/orttraining/python/orttraining_pybind_state.cc:928 ... "
            "checkpoint.cc:231 ToFile Failed to save checkpoint to file: x. error:No space left "
            "on device errno:28"
        )

    training_cache.clear_training_caches()
    monkeypatch.setattr(session, "write_training_artifacts", full)
    with pytest.raises(
        OSError, match=r"is full .*writing the training artifacts needs about"
    ) as caught:
        _optimizer("whole", hidden=7).fit(X, Y)
    assert caught.value.errno == errno.ENOSPC and "onnxruntime_src" not in str(caught.value)
    assert len(training_cache.ARTIFACTS) == 0 and os.listdir(training_cache.artifact_root()) == []
    folder = str(tmp_path / "artifacts")
    with pytest.raises(
        OSError, match=f"The folder {folder} is full.*give artifact_dir= another folder"
    ):
        OrtGradientOptimizer(
            add_loss_output(mlp_onnx(4, hidden=(7,))), artifact_dir=folder, max_iter=1
        ).fit(X, Y)


POOL_SCRIPT = r"""
import faulthandler, glob, multiprocessing, os, signal, sys, tempfile
import numpy as np
faulthandler.register(signal.SIGUSR1, all_threads=True)  # every process's stacks, if it hangs
from helpers import OrtGradientOptimizer, add_loss_output
from helpers.teaching.model_factories import mlp_onnx

def folders():
    return glob.glob(os.path.join(tempfile.gettempdir(), "ort_training_artifacts_*"))

def fit(seed):
    X = np.random.default_rng(seed).standard_normal((16, 3)).astype(np.float32)
    onx = add_loss_output(mlp_onnx(3, hidden=(4,)))
    OrtGradientOptimizer(onx, max_iter=1, batch_size=8).fit(X, X[:, 0])
    return os.getpid()

def fit_and_die(seed):
    fit(seed)
    os.kill(os.getpid(), signal.SIGKILL)  # no exit hook, no signal handler

if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    with context.Pool(2) as pool:  # the block ends with terminate(): SIGTERM to the workers
        workers = set(pool.map(fit, range(4)))
        during = len(folders())
        ended = list(pool._pool)
    after_pool = folders()
    killed = context.Process(target=fit_and_die, args=(9,))
    killed.start()
    killed.join()
    print(len(workers), during, len(after_pool), len(folders()), killed.exitcode)
    print("workers' exit codes", [p.exitcode for p in ended], "left", after_pool, file=sys.stderr)
"""


@pytest.mark.training_package
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_no_artifact_folder_outlives_its_process(method, tmp_path):
    """Pool workers ended by terminate() remove their folders; a killed child's goes at the parent's
    exit."""
    script = tmp_path / "pool_fits.py"
    script.write_text(POOL_SCRIPT)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = dict(os.environ, TMPDIR=str(temporary), PYTHONPATH=ROOT)
    process = subprocess.Popen(
        [sys.executable, str(script), method],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,  # its pool workers and child in one process group
    )
    try:
        out, err = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGUSR1)  # each process prints where it waits
        time.sleep(2)
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        pytest.fail(f"the pool script hung; its processes' stacks:\n{err[-6000:]}")
    assert process.returncode == 0, err[-3000:]
    workers, during, after_pool, after_kill, exitcode = map(int, out.split())
    assert during == workers  # one folder per worker while the pool runs
    assert after_pool == 0, err[-3000:]  # terminate() did not leave them
    assert after_kill == 1 and exitcode == -9  # the killed child could not remove its own
    assert [
        name for name in os.listdir(temporary) if name.startswith("ort_training_artifacts_")
    ] == []


def run_script(tmp_path, source, *args):
    """Run ``source`` as a script in ``tmp_path``, which is also its temporary folder."""
    script = tmp_path / "script.py"
    script.write_text(source)
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, str(script), *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


SIGNAL_ON_ANOTHER_THREAD = r"""
import multiprocessing, os, signal, sys, threading, time
from helpers.core.machine.process_folders import artifact_root

def wait_for_ever(folders):
    folders.put(artifact_root())  # the worker's folder, and its SIGTERM handler
    lock = multiprocessing.Lock()
    lock.acquire()
    def signal_this_thread():  # the SIGTERM lands on another thread, as the kernel may choose
        time.sleep(2)  # once the main thread waits (not waiting yet, it runs the handler)
        signal.pthread_kill(threading.get_ident(), signal.SIGTERM)

    threading.Thread(target=signal_this_thread).start()
    lock.acquire()  # an idle pool worker waits on its queue's lock like this

if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    folders = context.Queue()
    child = context.Process(target=wait_for_ever, args=(folders,))
    child.start()
    folder = folders.get(timeout=120)
    child.join(timeout=60)
    hung = child.is_alive()
    if hung:
        child.kill()
    print(hung, child.exitcode, os.path.exists(folder))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_sigterm_on_another_thread_ends_a_waiting_worker(method, tmp_path):
    """The handler runs, the folder goes and the worker ends, though its main thread waits on a
    lock and the signal reached another thread."""
    done = run_script(tmp_path, SIGNAL_ON_ANOTHER_THREAD, method)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["False", str(-signal.SIGTERM), "False"]


SIGNALS_DURING_REMOVAL = r"""
import multiprocessing, os, shutil, signal, sys, time
from helpers.core.machine.process_folders import artifact_root

def remove_slowly(log):
    removal = shutil.rmtree

    def counted(path, *args, **kwargs):
        with open(log, "a") as entries:
            entries.write("entered\n")
        time.sleep(0.5)  # a wide window for more SIGTERMs to enter the handler again
        removal(path, *args, **kwargs)

    shutil.rmtree = counted

def wait(folders, log):
    remove_slowly(log)
    folders.put(artifact_root())
    time.sleep(120)

if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    folders = context.Queue()
    child = context.Process(target=wait, args=(folders, sys.argv[2]))
    child.start()
    folder = folders.get(timeout=120)
    time.sleep(0.5)
    child.terminate()
    child.join(timeout=60)
    print(child.exitcode, os.path.exists(folder))
"""


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_sigterm_removes_the_folder_once(method, tmp_path):
    """The handler runs once: the signals the forwarding thread sends while the folder is removed
    do not enter it again (they did, and a worker could end with its folder half-removed)."""
    log = tmp_path / "removals.log"
    done = run_script(tmp_path, SIGNALS_DURING_REMOVAL, method, str(log))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(-signal.SIGTERM), "False"]
    assert log.read_text().splitlines() == ["entered"]
