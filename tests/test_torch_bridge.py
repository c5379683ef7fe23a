"""onnxruntime inside torch: OrtAutogradFunction and OrtTorchModule against torch's own autograd."""

import copy

import numpy as np
import onnxruntime
import pytest
import torch
from conftest import APIS, make_optimizer
from onnx import numpy_helper

from helpers import OrtTorchModule
from helpers.teaching.model_factories import mlp_onnx

RTOL, ATOL = 1e-5, 1e-6


def mlp(activation, n_in=5, hidden=(16, 8), n_out=1, seed=0):
    torch.manual_seed(seed)
    layers, width = [], n_in
    for h in hidden:
        layers += [torch.nn.Linear(width, h), activation()]
        width = h
    return torch.nn.Sequential(*layers, torch.nn.Linear(width, n_out))


def assert_same_gradients(ours, reference):
    for (name, p), (_, q) in zip(ours.named_parameters(), reference.named_parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, rtol=RTOL, atol=ATOL, msg=name)


@pytest.mark.parametrize("activation", [torch.nn.ReLU, torch.nn.Tanh])
def test_outputs_and_every_gradient_equal_torch(activation):
    reference = mlp(activation)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    x, y = torch.randn(64, 5), torch.randn(64, 1)
    out_ort, out_ref = ort(x), reference(x)
    torch.testing.assert_close(out_ort, out_ref, rtol=RTOL, atol=ATOL)
    torch.nn.functional.mse_loss(out_ort, y).backward()
    torch.nn.functional.mse_loss(out_ref, y).backward()
    assert_same_gradients(ort.module, reference)


def test_classifier_with_cross_entropy_in_torch():
    reference = mlp(torch.nn.ReLU, n_in=8, hidden=(32,), n_out=4)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(2, 8))
    x, labels = torch.randn(50, 8), torch.randint(0, 4, (50,))
    torch.nn.functional.cross_entropy(ort(x), labels).backward()
    torch.nn.functional.cross_entropy(reference(x), labels).backward()
    assert_same_gradients(ort.module, reference)


def test_gradients_with_respect_to_the_inputs():
    reference = mlp(torch.nn.Tanh)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    x = torch.randn(16, 5)
    x_ort, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    (ort(x_ort) ** 2).sum().backward()
    (reference(x_ref) ** 2).sum().backward()
    torch.testing.assert_close(x_ort.grad, x_ref.grad, rtol=RTOL, atol=ATOL)
    assert_same_gradients(ort.module, reference)


@pytest.mark.parametrize(
    "make_optimizer",
    [
        lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
        lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.01),
    ],
    ids=["SGD", "AdamW"],
)
def test_twenty_optimizer_steps_give_torch_weights(make_optimizer):
    reference = mlp(torch.nn.ReLU)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    opt_ort, opt_ref = make_optimizer(ort.parameters()), make_optimizer(reference.parameters())
    generator = torch.Generator().manual_seed(1)
    for _ in range(20):
        x, y = torch.randn(32, 5, generator=generator), torch.randn(32, 1, generator=generator)
        for model, optimizer in ((ort, opt_ort), (reference, opt_ref)):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
    for (name, p), (_, q) in zip(ort.module.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)


def test_several_forwards_in_flight_in_any_order():
    reference = mlp(torch.nn.ReLU)
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(4, 5))
    x1, x2 = torch.randn(10, 5), torch.randn(7, 5)
    for model in (ort, reference):  # both forwards first, then the first one's backward first
        first, second = model(x1).sum(), 3 * model(x2).pow(2).sum()
        first.backward()
        second.backward()
    assert_same_gradients(ort.module, reference)


def test_outputs_survive_the_backward_pass_and_later_forwards():
    ort = OrtTorchModule(mlp(torch.nn.ReLU), torch.zeros(4, 5))
    out = ort(torch.randn(32, 5))
    kept = out.detach().clone()
    out.sum().backward()
    detached = ort(torch.randn(32, 5)).detach()  # its forward state is released at once
    kept_detached = detached.clone()
    for _ in range(3):
        ort(torch.randn(32, 5) * 10).sum().backward()
    torch.testing.assert_close(out.detach(), kept, rtol=0, atol=0)
    torch.testing.assert_close(detached, kept_detached, rtol=0, atol=0)


def test_no_grad_and_eval_use_the_inference_session():
    ort = OrtTorchModule(mlp(torch.nn.Tanh), torch.zeros(4, 5))
    x = torch.randn(9, 5)
    training = ort(x)
    with torch.no_grad():
        without = ort(x)
    ort.eval()
    evaluated = ort(x)  # gradients still flow in eval mode, as in torch
    with torch.no_grad():
        evaluated_without = ort(x)
    assert training.grad_fn is not None and without.grad_fn is None
    assert evaluated.grad_fn is not None and evaluated_without.grad_fn is None
    for out in (without, evaluated.detach(), evaluated_without):
        torch.testing.assert_close(out, training.detach(), rtol=RTOL, atol=ATOL)


def dropout_net(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(32, 2)
    )


def test_dropout_drops_in_training_only():
    """Training mode drops units; eval mode, no_grad and the exported model do not, as torch's
    module."""
    reference = dropout_net()
    ort = OrtTorchModule(copy.deepcopy(reference), torch.zeros(3, 6))
    x = torch.randn(20, 6)
    reference.eval()
    expected = reference(x).detach()
    # training forwards draw masks (onnxruntime's first two happen to share theirs: three are
    # compared)
    masks = [ort(x).detach() for _ in range(3)]
    assert not all(torch.equal(masks[0], m) for m in masks[1:])
    assert not torch.allclose(masks[0], expected)
    with torch.no_grad():
        torch.testing.assert_close(ort(x), expected, rtol=RTOL, atol=ATOL)
    ort.eval()
    torch.testing.assert_close(ort(x).detach(), expected, rtol=RTOL, atol=ATOL)
    session = onnxruntime.InferenceSession(
        ort.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_allclose(
        session.run(None, {"input": x.numpy()})[0], expected.numpy(), rtol=RTOL, atol=ATOL
    )
    # eval-mode gradients are those of the network without dropout (input saliency in eval mode)
    x_ort, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
    ort(x_ort).sum().backward()
    reference(x_ref).sum().backward()
    torch.testing.assert_close(x_ort.grad, x_ref.grad, rtol=RTOL, atol=ATOL)
    assert_same_gradients(ort.module, reference)


def test_dropout_is_off_in_the_optimizers_predictions():
    """An exported network with dropout trains with it, and predicts without it."""
    from helpers import export_for_training

    reference = dropout_net().eval()
    onx = export_for_training(dropout_net(), torch.zeros(3, 6))
    X = np.random.default_rng(0).standard_normal((40, 6)).astype(np.float32)
    expected = reference(torch.from_numpy(X)).detach().numpy()
    labels = np.arange(40) % 2
    for api in APIS:
        opt = make_optimizer(api, onx, "cross_entropy", learning_rate=1e-12, max_iter=1)
        opt.fit(X, labels)
        np.testing.assert_allclose(opt.predict(X), expected, rtol=1e-4, atol=1e-5)


def test_state_dict_round_trip_and_inference_onnx():
    ort = OrtTorchModule(mlp(torch.nn.ReLU), torch.zeros(4, 5))
    x = torch.randn(6, 5)
    saved = copy.deepcopy(ort.state_dict())
    before = ort(x).detach()
    optimizer = torch.optim.SGD(ort.parameters(), lr=0.5)
    ort(x).sum().backward()
    optimizer.step()
    assert not torch.allclose(ort(x), before)
    ort.load_state_dict(saved)
    torch.testing.assert_close(ort(x).detach(), before, rtol=0, atol=0)
    session = onnxruntime.InferenceSession(
        ort.to_onnx().SerializeToString(), providers=["CPUExecutionProvider"]
    )
    (predicted,) = session.run(None, {"input": x.numpy()})
    np.testing.assert_allclose(predicted, before.numpy(), rtol=RTOL, atol=ATOL)


def test_onnx_model_parameters_come_from_its_initializers():
    model = mlp_onnx(3, hidden=(6,), activation="relu")
    arrays = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    ort = OrtTorchModule(model)
    assert ort.weight_names == list(arrays)
    # the same network written in torch, from the same arrays
    weights = {name: torch.tensor(value, requires_grad=True) for name, value in arrays.items()}
    x = torch.randn(11, 3)
    hidden = torch.relu(x @ weights["coefficient0"] + weights["intercept0"])
    (hidden @ weights["coefficient1"] + weights["intercept1"]).pow(2).sum().backward()
    ort(x).pow(2).sum().backward()
    for name in arrays:
        torch.testing.assert_close(
            ort.weights[name].grad, weights[name].grad, rtol=RTOL, atol=ATOL, msg=name
        )


def test_what_cannot_work_raises_clearly():
    ort = OrtTorchModule(mlp(torch.nn.Tanh), torch.zeros(4, 5))
    with pytest.raises(TypeError, match="Input 'input' is torch.float64.*\\.to\\(torch.float32\\)"):
        ort(torch.zeros(3, 5, dtype=torch.float64))
    with pytest.raises(
        ValueError, match="'input' is on meta, but onnxruntime runs this function on cpu"
    ):
        ort(torch.zeros(3, 5, device="meta"))
    x = torch.randn(3, 5, requires_grad=True)
    with pytest.raises(
        RuntimeError, match="backward pass cannot be differentiated: create_graph=True"
    ):
        torch.autograd.grad(ort(x).sum(), x, create_graph=True)
    with pytest.raises(
        RuntimeError, match="backward pass cannot be differentiated"
    ):  # a gradient penalty
        (grad,) = torch.autograd.grad(ort(x).sum(), ort.parameters(), create_graph=True)
    with pytest.raises(
        ValueError,
        match=r"Input 'input' has shape \(5,\), but the ONNX model takes shape \['N', 5\]",
    ):
        ort(torch.zeros(5))
    with pytest.raises(ValueError, match=r"has shape \(3, 4\)"):
        ort(torch.zeros(3, 4))
    loss = ort(torch.randn(3, 5)).sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="ran the backward pass of this forward already"):
        loss.backward()
    with_buffer = torch.nn.Linear(3, 1)  # a buffer other than batch normalization's
    with_buffer.register_buffer("scale", torch.ones(1))
    with pytest.raises(ValueError, match="buffers"):
        OrtTorchModule(with_buffer, torch.zeros(4, 3))
    with pytest.raises(ValueError, match="example_input"):
        OrtTorchModule(torch.nn.Linear(3, 1))


def test_a_weight_changed_in_place_before_the_backward_is_caught():
    ort = OrtTorchModule(mlp(torch.nn.Tanh), torch.zeros(4, 5))
    loss = ort(torch.randn(3, 5)).sum()
    with torch.no_grad():
        next(ort.parameters()).mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_parameters_replaced_by_load_state_dict_assign_are_used():
    ort = OrtTorchModule(mlp(torch.nn.ReLU), torch.zeros(4, 5))
    x = torch.randn(6, 5)
    ort.load_state_dict({k: torch.zeros_like(v) for k, v in ort.state_dict().items()}, assign=True)
    assert ort(x).abs().max() == 0
    assert all(p.grad is None for p in ort.parameters())
    ort(x).sum().backward()
    assert all(
        p.grad is not None for p in ort.parameters()
    )  # the new parameters receive the gradients


def test_copy_and_pickle_rebuild_their_sessions():
    import pickle

    ort = OrtTorchModule(mlp(torch.nn.ReLU), torch.zeros(4, 5))
    x = torch.randn(6, 5)
    expected = ort(x).detach()
    for other in (copy.deepcopy(ort), pickle.loads(pickle.dumps(ort))):
        torch.testing.assert_close(other(x).detach(), expected, rtol=0, atol=0)
        other(x).sum().backward()
        assert all(p.grad is not None for p in other.parameters())


def test_parameters_the_forward_does_not_use_stay_untrained():
    class WithUnused(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.used(x)

    torch.manual_seed(0)
    ort = OrtTorchModule(WithUnused(), torch.zeros(2, 4))
    assert ort.weight_names == ["used.weight", "used.bias"]
    ort(torch.randn(3, 4)).sum().backward()
    assert ort.module.used.weight.grad is not None and ort.module.unused.weight.grad is None


def test_a_raw_function_refuses_an_input_gradient_it_was_not_built_for():
    from helpers import OrtGradientForwardBackward
    from helpers.forward_backward.torch_function import OrtAutogradFunction

    model = mlp_onnx(2, hidden=(3,))
    weights = [
        torch.tensor(numpy_helper.to_array(i), requires_grad=True) for i in model.graph.initializer
    ]
    fn = OrtGradientForwardBackward(model).new_instance()
    x = torch.ones(4, 2, requires_grad=True)
    with pytest.raises(ValueError, match="Input 'X' requires a gradient.*input_names_require_grad"):
        OrtAutogradFunction.apply(fn, 1, x, *weights)
    fn = OrtGradientForwardBackward(model, input_names_require_grad=["X"]).new_instance()
    (out,) = OrtAutogradFunction.apply(fn, 1, x, *weights)
    out.sum().backward()
    assert x.grad is not None and x.grad.shape == (4, 2)
