"""Where a forward/backward training step spends its time (MLP 10-50-1, batch 100).

Run: .venv/bin/python benchmarks/profiles/studies/forward_backward_step.py
Prints the microseconds of each part of one step, measured in isolation, then
of the whole step, with onnxruntime on 2 threads.
"""

import time
import warnings

import numpy as np
from onnxruntime import OrtValue
from skl2onnx import to_onnx
from sklearn.neural_network import MLPRegressor

from helpers import (
    Device,
    LearningRateSGD,
    OrtGradientForwardBackward,
    SquareLearningLoss,
    get_train_initializer,
    set_num_threads,
)

set_num_threads(2)
warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
X = rng.standard_normal((100, 10)).astype(np.float32)
y = X.sum(1, keepdims=True).astype(np.float32)
onx = to_onnx(MLPRegressor(hidden_layer_sizes=(50,), max_iter=1).fit(X, y.ravel()), X[:1])
d = Device("cpu")
fb = OrtGradientForwardBackward(onx)
fn = fb.new_instance()
W = [
    OrtValue.ortvalue_from_numpy(get_train_initializer(onx)[n].copy()) for n in fb.weights_to_train
]
loss = SquareLearningLoss()
lr = LearningRateSGD(eta0=1e-4, learning_rate="constant")
lr.init_learning_rate(d, W)


def T(f, n=3000):
    for _ in range(200):
        f()
    t = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - t) / n * 1e6


out = fn.forward([X] + W, training=True)[0]
_, g = loss.loss_gradient(d, y, out)
grads = fn.backward([g])


def fwd():
    fn.forward([X] + W, training=True)
    fn.states_.pop()


print(f"forward {T(fwd):.1f} us")
print(f"loss+grad {T(lambda: loss.loss_gradient(d, y, out)):.1f} us")


def fb_():
    fn.forward([X] + W, training=True)
    fn.backward([g])


print(f"forward+backward {T(fb_):.1f} us")
print(f"update {T(lambda: lr.update_weights(W, grads, 1)):.1f} us")


def step():
    o = fn.forward([X] + W, training=True)[0]
    step_loss, gg = loss.loss_gradient(d, y, o)
    gr = fn.backward([gg])
    lr.update_weights(W, gr, 1)
    float(step_loss.numpy())


print(f"whole step {T(step):.1f} us")
