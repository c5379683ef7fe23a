"""Refits reuse artifacts and gradient graphs; the thread count reaches every session."""

import os
import tempfile

import numpy as np
import pytest
from conftest import APIS, make_optimizer
from sklearn.base import clone

from helpers import (
    LearningRateSGD,
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    add_loss_output,
)
from helpers.core.machine import sessions, training_cache
from helpers.core.machine.runtime import has_training_package
from helpers.core.machine.training_cache import (
    ARTIFACTS,
    GRADIENT_GRAPHS,
    ContentCache,
    content_key,
)
from helpers.teaching.model_factories import mlp_onnx

pytestmark = pytest.mark.usefixtures("fresh_caches")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 5)).astype(np.float32)
    return X, (X[:, :1] * 2 - 1).astype(np.float32)


def test_content_cache_is_bounded_and_least_recently_used_goes_first():
    evicted = []
    cache = ContentCache(maxsize=2, on_evict=evicted.append)
    cache.get_or_build("a", lambda: "A")
    cache.get_or_build("b", lambda: "B")
    cache.get_or_build("a", lambda: "not built")  # a is now the most recent
    cache.get_or_build("c", lambda: "C")
    assert evicted == ["B"] and len(cache) == 2
    assert (cache.hits, cache.misses) == (1, 3)


def test_threads_asking_for_one_key_build_it_once(monkeypatch):
    """The threads that waited for a build find its value, even when storing it takes a while."""
    import threading
    import time

    cache, builds = ContentCache(maxsize=2), []
    store = ContentCache._store

    def slow_store(self, key, value):
        time.sleep(0.05)  # a thread switch between the build and the store
        store(self, key, value)

    def build():
        builds.append(threading.get_ident())
        time.sleep(0.05)
        return "folder"

    monkeypatch.setattr(ContentCache, "_store", slow_store)
    threads = [threading.Thread(target=cache.get_or_build, args=("a", build)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(builds) == 1 and len(cache) == 1


def test_content_key_follows_the_weights():
    model = mlp_onnx(3, hidden=(4,), random_state=0)
    assert content_key(model, "sgd") == content_key(mlp_onnx(3, hidden=(4,), random_state=0), "sgd")
    assert content_key(model, "sgd") != content_key(mlp_onnx(3, hidden=(4,), random_state=1), "sgd")
    assert content_key(model, "sgd") != content_key(model, "adamw")


def _artifact_folders():
    return sorted(os.listdir(training_cache.artifact_root()))


@pytest.mark.training_package
def test_whole_training_refit_reuses_artifacts_without_temporary_folders(data, monkeypatch):
    X, y = data
    opt = OrtGradientOptimizer(
        add_loss_output(mlp_onnx(5, hidden=(6,))), max_iter=2, batch_size=20, random_state=0
    )
    first = clone(opt).fit(X, y)
    assert (ARTIFACTS.misses, ARTIFACTS.hits) == (1, 0)
    folders = _artifact_folders()
    calls = []
    monkeypatch.setattr(
        tempfile, "mkdtemp", lambda *a, **k: calls.append(a) or pytest.fail("mkdtemp")
    )
    second = clone(opt).fit(X, y)
    assert (ARTIFACTS.misses, ARTIFACTS.hits) == (1, 1)
    assert _artifact_folders() == folders and not calls
    assert second.train_losses_ == first.train_losses_
    # another setting is another entry
    monkeypatch.undo()
    clone(opt).set_params(solver="adamw").fit(X, y)
    clone(opt).set_params(fast_gradients=False).fit(X, y)
    assert ARTIFACTS.misses == 3 and len(_artifact_folders()) == 3


@pytest.mark.training_package
def test_failed_artifact_generation_leaves_nothing(data, monkeypatch):
    from helpers.whole_training import fit_artifacts  # noqa: PLC0415 - the training package

    X, y = data

    def broken(*args, **kwargs):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(fit_artifacts, "generate_training_artifacts", broken)
    before = _artifact_folders()
    with pytest.raises(RuntimeError, match="interrupted"):
        OrtGradientOptimizer(add_loss_output(mlp_onnx(5, hidden=(6,))), max_iter=1).fit(X, y)
    assert len(ARTIFACTS) == 0 and _artifact_folders() == before


def test_forward_backward_refit_shares_the_gradient_graph(data):
    X, y = data
    opt = OrtGradientForwardBackwardOptimizer(
        mlp_onnx(5, hidden=(6,)),
        learning_rate=LearningRateSGD(0.01, learning_rate="constant"),
        max_iter=3,
        batch_size=20,
        random_state=0,
    )
    first = clone(opt).fit(X, y)
    second = clone(opt).fit(X, y)
    assert (GRADIENT_GRAPHS.misses, GRADIENT_GRAPHS.hits) == (1, 1)
    assert first._runtime.fb._agent is second._runtime.fb._agent
    # sharing the sessions does not share the weights: more epochs of one leave the other alone
    before = second.get_state()
    first.set_params(warm_start=True).fit(X, y)
    for name, value in second.get_state().items():
        np.testing.assert_array_equal(value, before[name])
    np.testing.assert_array_equal(first.train_losses_[:3], second.train_losses_)
    clone(opt).set_params(n_threads=1).fit(X, y)
    assert GRADIENT_GRAPHS.misses == 2


@pytest.mark.parametrize("api", APIS)
def test_n_threads_reaches_the_model_sessions(data, monkeypatch, api):
    X, y = data
    seen = []
    original = sessions.session_options

    def recording(n_threads=None, label="session", spin=True):
        seen.append((label, n_threads))
        return original(n_threads, label, spin)

    # every session is made by the session layer; the training package's Module takes its options
    modules = ["core.machine.sessions"] + (
        ["whole_training.session"] if has_training_package() else []
    )
    for module in modules:
        monkeypatch.setattr(f"helpers.{module}.session_options", recording)
    opt = make_optimizer(api, mlp_onnx(5, hidden=(6,)), max_iter=1, n_threads=1)
    opt.fit(X, y, X_val=X, y_val=y)
    opt.predict(X)
    model_sessions = [n for label, n in seen if label in ("model", "predict", "score")]
    assert model_sessions and set(model_sessions) == {1}


@pytest.mark.parametrize("bad", [0, 2.5, "4", True])
def test_bad_thread_counts_are_refused(data, bad):
    X, y = data
    for api in APIS:
        opt = make_optimizer(api, mlp_onnx(5, hidden=(6,)), n_threads=bad)
        with pytest.raises(ValueError, match="n_threads must be an integer >= 1 or None"):
            opt.fit(X, y)


def test_fast_gradients_must_be_a_boolean(data):
    X, y = data
    with pytest.raises(TypeError, match="fast_gradients must be True or False"):
        OrtGradientForwardBackwardOptimizer(mlp_onnx(5, hidden=(6,)), fast_gradients="yes").fit(
            X, y
        )
