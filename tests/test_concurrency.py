"""Fits in threads and in forked processes: same weights as one after the other, nothing lost,
nothing deleted."""

import multiprocessing
import os
import shutil
import sys
import threading

import numpy as np
import pytest
from conftest import make_seeded_optimizer
from joblib import parallel_backend
from sklearn.model_selection import GridSearchCV

from helpers import (
    OrtGradientOptimizer,
    UntrainableModelError,
    add_loss_output,
)
from helpers.core.machine import training_cache
from helpers.teaching.model_factories import mlp_onnx

X = np.random.default_rng(0).standard_normal((60, 4)).astype(np.float32)
Y = np.tanh(X[:, :2].sum(axis=1)).astype(np.float32)
MODELS = {hidden: mlp_onnx(4, hidden=(hidden,), random_state=hidden) for hidden in (3, 5)}


def _fit(api, hidden, learning_rate=0.05):
    optimizer = make_seeded_optimizer(api, MODELS[hidden], 3, 16, learning_rate, n_threads=1)
    return optimizer.fit(X, Y).get_state()


def _run_in_threads(jobs):
    """Run every job in a thread of its own, all at once; their results and the exceptions
    raised."""
    results, errors = [None] * len(jobs), []
    start = threading.Barrier(len(jobs))

    def work(i):
        try:
            start.wait()  # all at once: the cache entries are built while others look them up
            results[i] = jobs[i]()
        except BaseException as exc:  # noqa: BLE001 - every failure is reported
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


@pytest.mark.parametrize("api", ["whole", "forward_backward"])
def test_fits_in_threads_equal_fits_one_after_the_other(api, fresh_caches):
    """Same and different models at once, starting from an empty cache: every fit succeeds with the
    sequential weights."""
    expected = {hidden: _fit(api, hidden) for hidden in MODELS}
    for _ in range(3):  # each round builds the cache entries again, in several threads at once
        training_cache.clear_training_caches()
        jobs = [(lambda h=hidden: _fit(api, h)) for hidden in list(MODELS) * 4]
        results, errors = _run_in_threads(jobs)
        assert errors == []
        for hidden, state in zip(list(MODELS) * 4, results):
            for name, value in expected[hidden].items():
                np.testing.assert_allclose(state[name], value, rtol=1e-6, atol=1e-7)


def test_threaded_grid_search_equals_the_sequential_one(fresh_caches):
    estimator = OrtGradientOptimizer(
        add_loss_output(MODELS[5]),
        max_iter=3,
        batch_size=16,
        random_state=0,
        n_threads=1,
        validation_every=0,
    )
    grid = {"learning_rate": [0.001, 0.01, 0.03]}
    sequential = GridSearchCV(estimator, grid, cv=3, error_score="raise").fit(X, Y)
    training_cache.clear_training_caches()
    with parallel_backend("threading", n_jobs=4):
        threaded = GridSearchCV(estimator, grid, cv=3, error_score="raise", n_jobs=4).fit(X, Y)
    assert threaded.best_params_ == sequential.best_params_
    np.testing.assert_allclose(
        threaded.cv_results_["mean_test_score"],
        sequential.cv_results_["mean_test_score"],
        rtol=1e-6,
    )


@pytest.mark.training_package
def test_fits_leave_the_process_stderr_alone(fresh_caches, monkeypatch):
    """No file descriptor swap: fd 2 and sys.stderr are the same after threaded fits and after a fit
    that raises."""
    before, stream = os.fstat(2), sys.stderr
    swaps = []
    dup2 = os.dup2
    monkeypatch.setattr(
        os, "dup2", lambda fd, fd2, *args: swaps.append(fd2) or dup2(fd, fd2, *args)
    )
    jobs = [
        (lambda a=api, h=hidden: _fit(a, h))
        for api in ("whole", "forward_backward")
        for hidden in MODELS
    ]
    _, errors = _run_in_threads(jobs * 2)
    assert errors == []
    import torch

    from helpers import export_for_training

    class Rounding(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 1)

        def forward(self, x):
            return torch.round(self.linear(x))

    untrainable = export_for_training(Rounding(), torch.zeros(2, 4))
    with pytest.raises(UntrainableModelError):
        OrtGradientOptimizer(add_loss_output(untrainable), max_iter=1).fit(X, Y)
    after = os.fstat(2)
    assert (
        swaps == []
    )  # the runtime's messages are silenced by its log settings, not by moving fd 2
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)
    assert sys.stderr is stream


def test_a_vanished_artifact_folder_is_built_again(fresh_caches):
    first = _fit("whole", 3)
    shutil.rmtree(training_cache.artifact_root())  # a temporary-file cleaner passed by
    again = _fit("whole", 3)
    for name, value in first.items():
        np.testing.assert_allclose(again[name], value, rtol=1e-6)
    assert os.path.isdir(training_cache.artifact_root())


def _fit_other_models(_):
    # a child fits models its parent never saw, more than the cache holds
    training_cache.ARTIFACTS.maxsize = 1
    for hidden in (2, 6, 7):
        MODELS[hidden] = mlp_onnx(4, hidden=(hidden,), random_state=hidden)
        _fit("whole", hidden)
    return training_cache.artifact_root()


@pytest.mark.training_package
@pytest.mark.skipif(sys.platform != "linux", reason="fork is the Linux default this test is about")
def test_forked_children_leave_the_parent_cache_alone(fresh_caches):
    expected = _fit("whole", 3)
    parent_root = training_cache.artifact_root()
    parent_folders = sorted(os.listdir(parent_root))
    with multiprocessing.get_context("fork").Pool(2) as pool:
        child_roots = pool.map(_fit_other_models, range(2))
        pool.close()
        pool.join()
    assert parent_root not in child_roots
    assert sorted(os.listdir(parent_root)) == parent_folders  # nothing of the parent's was removed
    assert not any(os.path.exists(root) for root in child_roots)  # the workers cleaned up at exit
    again = _fit("whole", 3)
    assert training_cache.ARTIFACTS.hits >= 1
    for name, value in expected.items():
        np.testing.assert_allclose(again[name], value, rtol=1e-6)


def test_folders_of_killed_processes_are_removed_at_the_next_start(tmp_path, monkeypatch):
    stale = tmp_path / f"{training_cache.ROOT_PREFIX}999999999_abc"
    stale.mkdir()
    mine = tmp_path / f"{training_cache.ROOT_PREFIX}{os.getpid()}_abc"
    mine.mkdir()
    other = tmp_path / "something_else"
    other.mkdir()
    assert training_cache.remove_stale_folders(directory=str(tmp_path)) == [str(stale)]
    assert not stale.exists() and mine.exists() and other.exists()


def test_fits_write_nothing_on_stderr(tmp_path):
    """The runtime's info and warning lines are silenced at their source (the gradient builders' log
    levels).

    Only what the fits print counts: importing torch may warn on its own (the CUDA wheel of
    torch on a machine without CUDA says so once), which is torch's message, not a fit's.
    """
    import subprocess

    script = tmp_path / "fit.py"
    script.write_text(
        "import numpy as np, torch\nfrom helpers import OrtGradientForwardBackwardOptimizer, "
        "OrtGradientOptimizer, add_loss_output, export_for_training\n"
        "net = torch.nn.Sequential(torch.nn.Linear(4, 6), "
        "torch.nn.BatchNorm1d(6), torch.nn.ReLU(), torch.nn.Linear(6, 1))\nX = "
        "np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)\nonx = "
        "export_for_training(net, torch.from_numpy(X[:2]))\nimport sys; sys.stderr.write('-- fits "
        "start --\\n'); sys.stderr.flush()\nOrtGradientOptimizer(add_loss_output(onx), "
        "max_iter=1).fit(X, X[:, 0])\nOrtGradientForwardBackwardOptimizer(onx, max_iter=1).fit(X, "
        "X[:, 0])\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    _, marker, during_fits = done.stderr.partition("-- fits start --\n")
    assert marker, done.stderr
    assert during_fits == ""
