"""``random_state`` decides every random draw of a fit, the masks of ``Dropout`` included.

The masks are inputs of the training graph drawn from the fit's generator
(:mod:`helpers.core.model_graphs.random_draws`): two fits with the same seed are equal to the
last bit, first fit or refit from the training cache, and a fit cut in two (pickle, checkpoint)
continues the same sequence. With ``random_state=None`` onnxruntime's own generator draws them,
as before.
"""

import pickle

import numpy as np
import pytest
import torch

from helpers import (
    OrtGradientForwardBackwardOptimizer,
    OrtGradientOptimizer,
    OrtTorchModule,
    UntrainableModelError,
    add_loss_output,
    clear_training_caches,
    export_for_training,
)

APIS = ("whole", "forward_backward")


def dropout_mlp(seed=0, ratio=0.3):
    """The issue's model: 20 inputs, 64 hidden, dropout, 3 classes."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Dropout(ratio), torch.nn.Linear(64, 3)
    )
    return export_for_training(net, torch.zeros(2, 20))


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    return rng.randn(256, 20).astype(np.float32), rng.randint(0, 3, 256).astype(np.int64)


@pytest.fixture(scope="module")
def model():
    return dropout_mlp()


def make(api, onx, **params):
    params = {"max_iter": 3, "batch_size": 32, "learning_rate": 0.05, **params}
    if api == "whole":
        return OrtGradientOptimizer(add_loss_output(onx, score_name="cross_entropy"), **params)
    return OrtGradientForwardBackwardOptimizer(onx, learning_loss="cross_entropy", **params)


def fitted(api, onx, X, y, **params):
    est = make(api, onx, **params).fit(X, y)
    return est.train_losses_, est.get_state()


def assert_same(first, second):
    assert first[0] == second[0]  # the losses, to the last bit
    assert first[1].keys() == second[1].keys()
    for name, value in first[1].items():
        np.testing.assert_array_equal(value, second[1][name], err_msg=name)


@pytest.mark.parametrize("api", APIS)
def test_the_same_seed_gives_the_same_fit_first_or_cached(api, model, data):
    clear_training_caches()
    first = fitted(api, model, *data, random_state=0)
    cached = fitted(api, model, *data, random_state=0)  # the training cache's graph and sessions
    clear_training_caches()
    rebuilt = fitted(api, model, *data, random_state=0)
    assert_same(first, cached)
    assert_same(first, rebuilt)


@pytest.mark.parametrize("api", APIS)
def test_another_seed_drops_other_units(api, model, data):
    assert (
        fitted(api, model, *data, random_state=0)[0] != fitted(api, model, *data, random_state=1)[0]
    )


def test_both_apis_draw_the_same_masks(model, data):
    """The generator gives the batch order, then each step's masks, whatever the API."""
    whole = fitted("whole", model, *data, random_state=3)[0]
    forward_backward = fitted("forward_backward", model, *data, random_state=3)[0]
    np.testing.assert_allclose(whole, forward_backward, rtol=1e-5)


def draws_of(est):
    runtime = est._runtime
    return runtime.draws if hasattr(runtime, "draws") else runtime.fb.draws


@pytest.mark.parametrize("api", APIS)
def test_random_state_none_leaves_dropout_to_onnxruntime(api, model, data):
    est = make(api, model, max_iter=1, random_state=None).fit(*data)
    assert len(draws_of(est)) == 0
    seeded = make(api, model, max_iter=1, random_state=0).fit(*data)
    assert draws_of(seeded).names == ["training__dropout_mask__0"]


@pytest.mark.parametrize("api", APIS)
def test_a_fit_cut_in_two_by_a_pickle_continues_the_same_draws(api, model, data):
    whole_run = fitted(api, model, *data, random_state=0, max_iter=4)
    est = make(api, model, random_state=0, max_iter=2).fit(*data)
    est = pickle.loads(pickle.dumps(est))
    est.set_params(warm_start=True).fit(*data)
    assert_same(whole_run, (est.train_losses_, est.get_state()))


def test_a_fit_cut_in_two_by_a_checkpoint_continues_the_same_draws(model, data, tmp_path):
    whole_run = fitted("whole", model, *data, random_state=0, max_iter=4)
    make("whole", model, random_state=0, max_iter=2).fit(*data).save_checkpoint(tmp_path / "c")
    resumed = make("whole", model, random_state=0, max_iter=2, warm_start=True)
    resumed.load_checkpoint(str(tmp_path / "c")).fit(*data)
    assert_same(whole_run, (resumed.train_losses_, resumed.get_state()))


@pytest.mark.parametrize("api", APIS)
def test_a_generator_given_as_random_state_is_followed(api, model, data):
    first = fitted(api, model, *data, random_state=np.random.RandomState(5))
    second = fitted(api, model, *data, random_state=np.random.RandomState(5))
    assert_same(first, second)


def test_two_fits_in_threads_each_keep_their_draws(model, data):
    from concurrent.futures import ThreadPoolExecutor

    alone = fitted("forward_backward", model, *data, random_state=0)
    with ThreadPoolExecutor(2) as pool:
        runs = list(
            pool.map(lambda seed: fitted("forward_backward", model, *data, random_state=0), [0, 0])
        )
    for run in runs:
        assert_same(alone, run)


def training_loop(seed, steps=4):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(64, 3)
    )
    module = OrtTorchModule(net, torch.zeros(2, 20))
    optimizer = torch.optim.SGD(module.parameters(), lr=0.05)
    X, y = torch.randn(64, 20), torch.randint(0, 3, (64,))
    torch.manual_seed(seed)
    outputs = []
    for step in range(steps):
        optimizer.zero_grad()
        batch = slice(16 * step, 16 * (step + 1))
        scores = module(X[batch])
        torch.nn.functional.cross_entropy(scores, y[batch]).backward()
        outputs.append((scores.detach().clone(), [p.grad.clone() for p in module.parameters()]))
        optimizer.step()
    return outputs


def test_ort_torch_module_follows_torch_manual_seed():
    first, second, other = training_loop(0), training_loop(0), training_loop(1)
    for (scores, grads), (again, grads_again) in zip(first, second):
        assert torch.equal(scores, again)
        assert all(torch.equal(a, b) for a, b in zip(grads, grads_again))
    assert not torch.equal(first[0][0], other[0][0])


def random_op_model(op_type, **attributes):
    """x + noise, the noise drawn by ``op_type`` (a ``Like`` form, or a fixed shape)."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((1, 4), dtype=np.float32), "w")
    nodes = [helper.make_node("Mul", ["x", "w"], ["h"])]
    if op_type == "Bernoulli":
        nodes += [
            helper.make_node("Sigmoid", ["h"], ["p"]),
            helper.make_node(op_type, ["p"], ["noise"], **attributes),
        ]
    elif op_type.endswith("Like"):
        nodes.append(helper.make_node(op_type, ["h"], ["noise"], **attributes))
    else:
        nodes.append(helper.make_node(op_type, [], ["noise"], shape=[1, 4], **attributes))
    nodes.append(helper.make_node("Add", ["h", "noise"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "noisy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(
    "op_type, attributes",
    [
        ("RandomNormalLike", {"mean": 1.0, "scale": 0.5}),
        ("RandomUniformLike", {"low": -1.0, "high": 2.0}),
        ("RandomNormal", {}),
        ("RandomUniform", {}),
        ("Bernoulli", {}),
    ],
)
@pytest.mark.parametrize("api", APIS)
def test_every_random_operator_is_drawn_from_the_seed(api, op_type, attributes):
    onx = random_op_model(op_type, **attributes)
    X = np.random.RandomState(0).randn(40, 4).astype(np.float32)
    y = X * 2

    def fit(seed):
        params = {"max_iter": 2, "batch_size": 8, "learning_rate": 0.01, "random_state": seed}
        if api == "whole":
            est = OrtGradientOptimizer(add_loss_output(onx), **params)
        else:
            est = OrtGradientForwardBackwardOptimizer(onx, **params)
        est.fit(X, y)
        return est.train_losses_, est.get_state()

    assert_same(fit(0), fit(0))
    assert fit(0)[0] != fit(1)[0]


@pytest.mark.parametrize("api", APIS)
def test_a_random_operator_that_cannot_be_drawn_is_refused_by_name(api):
    onx = random_op_model("Bernoulli")
    node = onx.graph.node[-2]
    node.op_type = "Multinomial"
    node.name = "categories"
    X = np.ones((8, 4), dtype=np.float32)
    if api == "whole":
        est = OrtGradientOptimizer(add_loss_output(onx), max_iter=1, random_state=0)
    else:
        est = OrtGradientForwardBackwardOptimizer(onx, max_iter=1, random_state=0)
    with pytest.raises(UntrainableModelError, match="Multinomial node 'categories'"):
        est.fit(X, X)


def dropout_layer(ratio, width=400):
    """An identity ``Linear`` then ``Dropout(ratio)``: the dropout sees the input itself."""
    linear = torch.nn.Linear(width, width)
    with torch.no_grad():
        linear.weight.copy_(torch.eye(width))
        linear.bias.zero_()
    net = torch.nn.Sequential(linear, torch.nn.Dropout(ratio))
    return export_for_training(net, torch.zeros(2, width))


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.8])
@pytest.mark.parametrize("random_draws", [True, False], ids=["drawn", "onnxruntime"])
def test_dropout_keeps_one_minus_ratio_of_the_units_scaled_as_torch(ratio, random_draws):
    """Statistically against torch: the kept fraction, the ``1 / (1 - ratio)`` scale, eval mode."""
    from onnx import numpy_helper

    from helpers import OrtGradientForwardBackward

    onx = dropout_layer(ratio)
    fn = OrtGradientForwardBackward(onx, random_draws=random_draws).new_instance()
    weights = [numpy_helper.to_array(i) for i in onx.graph.initializer]
    x = np.random.RandomState(1).uniform(0.5, 1.5, (100, 400)).astype(np.float32)
    generator = np.random.default_rng(0)
    (out,) = fn.forward([x, *weights], training=True, generator=generator)
    out = out.numpy()
    kept = out != 0
    n = kept.size
    sigma = np.sqrt(ratio * (1 - ratio) / n)
    reference = torch.nn.functional.dropout(torch.from_numpy(x), ratio, training=True).numpy()
    assert abs(kept.mean() - (1 - ratio)) < 5 * sigma
    assert abs((reference != 0).mean() - (1 - ratio)) < 5 * sigma  # torch's own, alike
    # the kept units scaled as torch scales them, to float32 rounding
    np.testing.assert_allclose(out[kept], x[kept] / np.float32(1 - ratio), rtol=1e-6)
    np.testing.assert_allclose(
        reference[reference != 0], x[reference != 0] / np.float32(1 - ratio), rtol=1e-6
    )
    (again,) = fn.forward([x, *weights], training=True, generator=generator)
    assert not np.array_equal(again.numpy() != 0, kept)  # each step its own mask
    (evaluated,) = fn.forward([x, *weights], training=False)
    np.testing.assert_array_equal(evaluated.numpy(), x)  # eval mode: an identity, as torch's


def test_dropout_equals_torch_given_the_same_masks():
    """Exactly: torch's loss and gradients computed with the masks the runtime was fed."""
    from onnx import numpy_helper

    from helpers import OrtGradientForwardBackward

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(20, 64), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(64, 3)
    )
    onx = export_for_training(net, torch.zeros(2, 20))
    fn = OrtGradientForwardBackward(onx, random_draws=True).new_instance()
    weights = [numpy_helper.to_array(i) for i in onx.graph.initializer]
    x = np.random.RandomState(2).randn(32, 20).astype(np.float32)
    labels = torch.from_numpy(np.random.RandomState(3).randint(0, 3, 32))
    (mask,) = fn.parent.draws.values(np.random.default_rng(7), {"x": x})
    (scores,) = fn.forward([x, *weights], training=True, generator=np.random.default_rng(7))

    first, _, _, last = net
    tx = torch.from_numpy(x)
    expected = last(torch.relu(first(tx)) * torch.from_numpy(mask))
    loss = torch.nn.functional.cross_entropy(expected, labels)
    loss.backward()
    np.testing.assert_allclose(scores.numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)
    torch_scores = torch.from_numpy(scores.numpy().copy()).requires_grad_()
    torch.nn.functional.cross_entropy(torch_scores, labels).backward()
    gradients = fn.backward([torch_scores.grad.numpy()])
    for gradient, parameter in zip(gradients, net.parameters()):
        np.testing.assert_allclose(gradient.numpy(), parameter.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert 0.6 < (mask != 0).mean() < 0.8


@pytest.mark.parametrize("api", APIS)
def test_a_grid_search_over_a_dropout_model_repeats_in_threads_and_processes(api, model, data):
    from joblib import parallel_backend
    from sklearn.model_selection import GridSearchCV

    X, y = data
    estimator = make(api, model, max_iter=2, random_state=0)
    grid = {"learning_rate": [0.02, 0.05, 0.1]}

    def search(backend):
        with parallel_backend(backend, n_jobs=2):
            return GridSearchCV(estimator, grid, cv=2, n_jobs=2, error_score="raise").fit(X, y)

    runs = [search("threading"), search("threading"), search("loky"), search("loky")]
    scores = runs[0].cv_results_["mean_test_score"]
    assert len(set(scores)) == len(scores)  # the search compares something
    for run in runs[1:]:
        assert run.best_params_ == runs[0].best_params_
        np.testing.assert_array_equal(run.cv_results_["mean_test_score"], scores)


@pytest.mark.parametrize("api", APIS)
def test_an_exported_step_draws_the_masks_of_the_fit(api, model, data, tmp_path):
    """A step exported with a seed takes its masks as inputs; PortableTrainer draws them from the
    same seed: the fit's losses, and a fitted optimizer's step continues its draws."""
    from helpers import PortableTrainer

    X, y = data
    fit = make(api, model, random_state=0, max_iter=4).fit(X, y)
    make(api, model, random_state=0, max_iter=4).export_training_step(tmp_path / "new.onnx")
    trainer = PortableTrainer(str(tmp_path / "new.onnx")).fit(X, y)
    per_epoch = np.array(trainer.losses_).reshape(4, -1).mean(axis=1)  # batches of 32 rows
    np.testing.assert_allclose(per_epoch, fit.train_losses_, rtol=1e-5)
    make(api, model, random_state=0, max_iter=2).fit(X, y).export_training_step(
        tmp_path / "half.onnx"
    )
    continued = PortableTrainer(str(tmp_path / "half.onnx"), max_iter=2).fit(X, y)
    for name, value in fit.get_state().items():
        np.testing.assert_allclose(continued.get_state()[name], value, rtol=1e-5, atol=1e-7)
