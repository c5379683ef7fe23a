"""What the notebooks read of a training, on either backend: the step ``export_training_step``
writes by default, the graphs of the forward/backward API and their parts, the sessions of a
profile.

Each test runs the backend ``"onnx"`` here too (the training package's inference session runs
it), so that a view the maintained onnxruntime breaks fails in the training environment as well.
"""

import numpy as np
import onnxruntime
import pytest
from conftest import APIS, make_optimizer

from helpers import OrtGradientForwardBackward, PortableTrainer
from helpers.core.machine.runtime import has_training_package
from helpers.measure import profile_training
from helpers.measure.profiling import SESSION_ROLES, session_label
from helpers.teaching import gradient_graph_parts, summarize_parts
from helpers.teaching.model_factories import mlp_onnx

needs_training = pytest.mark.skipif(
    not has_training_package(), reason="the backend onnxruntime-training needs its package"
)


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 3)).astype(np.float32)
    return X, np.sin(X[:, :1]).astype(np.float32)


@pytest.mark.parametrize("api", APIS)
def test_the_default_step_has_the_gradients_fit_runs(api, tmp_path):
    """With the backend "onnx", export_training_step writes the project's gradients without
    being told (it asked the training package for them, which the maintained onnxruntime lacks),
    and its step trains as fit does."""
    X, y = _data()
    settings = dict(max_iter=2, batch_size=16, learning_rate=0.05, random_state=0)
    opt = make_optimizer(api, mlp_onnx(3, hidden=(4,)), backend="onnx", **settings)
    path = str(tmp_path / "step.onnx")
    opt.export_training_step(path)
    explicit = opt.export_training_step(gradient_builder="onnx")
    with open(path, "rb") as f:
        assert f.read() == explicit.SerializeToString()
    trainer = PortableTrainer(path).fit(X, y)
    opt.fit(X, y)
    assert opt.backend_ == "onnx" and len(trainer.losses_) == opt.t_
    for name, value in opt.get_state().items():
        np.testing.assert_allclose(trainer.get_state()[name], value, rtol=2e-5, atol=2e-6)


@needs_training
def test_the_default_step_of_the_training_backend_is_the_training_package_s(tmp_path):
    opt = make_optimizer("whole", mlp_onnx(3, hidden=(4,)), backend="onnxruntime-training")
    default = opt.export_training_step()
    assert default.SerializeToString() == (
        opt.export_training_step(gradient_builder="onnxruntime-training").SerializeToString()
    )


def test_the_onnx_backend_shows_its_two_graphs():
    model = mlp_onnx(3, hidden=(4,), activation="tanh")
    fb = OrtGradientForwardBackward(model, backend="onnx")
    split = fb.split_graphs_
    assert [i.name for i in split.forward.graph.input] == fb.feed_names_
    assert list(split.gradients) == fb.grad_names_
    assert list(split.seeds) == ["variable"] and split.frontier
    assert not hasattr(fb, "graph_info_")
    parts = gradient_graph_parts(fb, model)
    assert list(parts["part"].unique()) == ["forward", "backward"]
    assert len(parts) == len(split.forward.graph.node) + len(split.backward.graph.node)
    assert {n.domain for n in [*split.forward.graph.node, *split.backward.graph.node]} <= {""}


@needs_training
def test_the_training_backend_shows_its_builder_s_graph_and_report():
    """graph_info_, which notebook 9 reads, is the builder's report again."""
    model = mlp_onnx(3, hidden=(4,), activation="tanh")
    fb = OrtGradientForwardBackward(model, backend="onnxruntime-training")
    assert list(fb.graph_info_.initializer_names_to_train) == fb.weights_to_train
    assert list(fb.graph_info_.user_output_names) == ["variable"]
    assert not hasattr(fb, "split_graphs_")
    parts = summarize_parts(gradient_graph_parts(fb, model))
    assert list(parts.index) == ["forward", "YieldOp", "backward"]
    assert "TanhGrad" in parts.loc["backward", "operators"]


@pytest.mark.parametrize(
    ("name", "label"),
    [
        ("model-3_2026-11-28_02-15-01.json", "model"),  # onnxruntime 1.19.2
        ("model-3_2026-11-28_02-15-01_429.json", "model"),  # 1.31.1 adds the milliseconds
        ("gather_batch-12_2026-11-28_02-15-01_007.json", "gather_batch"),
        ("model_2024-01-01_12-00-00.json", "model"),
    ],
)
def test_a_profile_is_named_by_its_session_on_every_runtime(name, label):
    assert session_label(f"profiles/{name}") == label


def test_a_profile_labels_its_sessions_and_says_its_backend():
    X, y = _data()
    opt = make_optimizer("forward_backward", mlp_onnx(3, hidden=(4,)), batch_size=16)
    opt.set_params(backend="onnx")
    table = profile_training(opt, X, y)
    assert set(table["session"]) <= set(SESSION_ROLES.values()), onnxruntime.__version__
    assert table.attrs["backend"] == "onnx"
