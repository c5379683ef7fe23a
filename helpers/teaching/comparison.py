"""Train a network with scikit-learn and with onnxruntime, side by side, over several seeds.

Two trainings that shuffle their minibatches with different random
generators never follow the same path. Comparing one run of each would
mistake the luck of one shuffle for a difference between the libraries.
:func:`train_side_by_side` therefore trains both from the same starting
network once per seed and returns every run; :func:`summarize_runs` gives the
mean and the spread of each library.
"""

import time

import pandas as pd
from sklearn.utils import Bunch

from .sklearn_training import continue_mlp_training


def _default_predict(model, X):
    return model.predict(X)


def train_side_by_side(
    start,
    make_optimizer,
    data,
    max_iter,
    seeds,
    metrics,
    y_train_ort=None,
    y_test_ort=None,
    ort_predict=None,
    loss_scale=2.0,
    validation=True,
    **sklearn_params,
):
    """Train the network ``start`` further with scikit-learn and with onnxruntime, once per seed.

    Parameters
    ----------
    start : MLPRegressor or MLPClassifier
        The fitted network both trainings start from (its ONNX conversion
        must be the model of the optimizers ``make_optimizer`` builds).
    make_optimizer : callable
        ``make_optimizer(random_state=seed)`` returns an unfitted optimizer
        of :mod:`helpers`: usually ``functools.partial(OrtGradientOptimizer,
        model, ...)`` with the parameters of
        :func:`helpers.teaching.sklearn_training.mlp_update_parameters`.
    data : sklearn.utils.Bunch
        ``X_train``, ``y_train``, ``X_test``, ``y_test``.
    max_iter : int
        Epochs of scikit-learn's training (the optimizers carry their own).
    seeds : list of int
        One run per seed and library; the seed drives the shuffling only.
    metrics : dict
        Name to ``metric(y_true, y_pred)``, computed on both parts, such as
        ``{'R²': r2_score}``.
    y_train_ort, y_test_ort : array-like, optional
        Targets given to our optimizer when they differ from scikit-learn's
        (one-hot labels for a softmax loss); ``data.y_train`` and
        ``data.y_test`` otherwise. ``y_test_ort`` is the validation target.
    ort_predict : callable, optional
        ``ort_predict(optimizer, X)`` returns what ``metrics`` compare with
        ``y_true`` (class indices from raw scores, for example); the
        optimizer's ``predict`` by default.
    loss_scale : float
        scikit-learn's ``loss_curve_`` is multiplied by it to be on the scale
        of our losses: 2 for the squared error (scikit-learn halves it), 1 for
        the log loss.
    validation : bool
        Pass the test part to our optimizer as validation set.
    **sklearn_params
        Parameters of scikit-learn's training (:func:`continue_mlp_training`):
        ``batch_size``, ``learning_rate_init``, ``solver``, ``alpha``...

    Returns
    -------
    sklearn.utils.Bunch
        ``scores``: a DataFrame with one row per run (``library``, ``seed``,
        each metric on ``train`` and ``test``, ``fit time (s)``);
        ``curves``: ``{'scikit-learn': [...], 'onnxruntime': [...]}``, the loss
        of each epoch of each run, on our scale; ``networks`` and
        ``optimizers``: the trained models, in the order of ``seeds``.

    Examples
    --------
    >>> from functools import partial
    >>> import numpy as np
    >>> from sklearn.metrics import r2_score
    >>> from sklearn.neural_network import MLPRegressor
    >>> from sklearn.utils import Bunch
    >>> from skl2onnx import to_onnx
    >>> from helpers import OrtGradientOptimizer, add_loss_output
    >>> from helpers.teaching.sklearn_bridge import mlp_weight_names
    >>> from helpers.teaching.sklearn_training import fit_first_epoch, mlp_update_parameters
    >>> X = np.random.default_rng(0).standard_normal((40, 2)).astype(np.float32)
    >>> y = X.sum(axis=1)
    >>> data = Bunch(X_train=X[:30], y_train=y[:30], X_test=X[30:], y_test=y[30:])
    >>> start = fit_first_epoch(MLPRegressor(hidden_layer_sizes=(3,), solver="sgd", batch_size=10,
    ...                                      random_state=0), data.X_train, data.y_train)
    >>> onx = add_loss_output(to_onnx(start, data.X_train[:1]))
    >>> make = partial(OrtGradientOptimizer, onx, mlp_weight_names(start), max_iter=3,
    ...                **mlp_update_parameters(start))
    >>> result = train_side_by_side(start, make, data, 3, seeds=[0], metrics={"R²": r2_score})
    >>> result.scores[["library", "seed"]]
            library  seed
    0  scikit-learn     0
    1   onnxruntime     0
    >>> list(result.scores.columns[2:]), [len(runs[0]) for runs in result.curves.values()]
    (['R² (train)', 'R² (test)', 'fit time (s)'], [3, 3])
    """
    ort_predict = ort_predict or _default_predict
    if (y_train_ort is None) != (y_test_ort is None):
        raise ValueError("Give both y_train_ort and y_test_ort, or neither.")
    y_ort = data.y_train if y_train_ort is None else y_train_ort
    y_val = data.y_test if y_test_ort is None else y_test_ort
    rows, curves = [], {"scikit-learn": [], "onnxruntime": []}
    networks, optimizers = [], []
    for seed in seeds:
        t0 = time.perf_counter()
        network = continue_mlp_training(
            start,
            data.X_train,
            data.y_train,
            max_iter=max_iter,
            random_state=seed,
            **sklearn_params,
        )
        t1 = time.perf_counter()
        optimizer = make_optimizer(random_state=seed)
        if validation:
            optimizer.fit(data.X_train, y_ort, X_val=data.X_test, y_val=y_val)
        else:
            optimizer.fit(data.X_train, y_ort)
        t2 = time.perf_counter()
        networks.append(network)
        optimizers.append(optimizer)
        curves["scikit-learn"].append([loss_scale * v for v in network.loss_curve_])
        curves["onnxruntime"].append(list(optimizer.train_losses_))
        runs = (
            ("scikit-learn", network, lambda m, X: m.predict(X), t1 - t0),
            ("onnxruntime", optimizer, ort_predict, t2 - t1),
        )
        for library, model, predict, seconds in runs:
            row = {"library": library, "seed": seed}
            for part in ("train", "test"):
                X, y = data[f"X_{part}"], data[f"y_{part}"]
                pred = predict(model, X)
                for name, metric in metrics.items():
                    row[f"{name} ({part})"] = metric(y, pred)
            row["fit time (s)"] = seconds
            rows.append(row)
    return Bunch(scores=pd.DataFrame(rows), curves=curves, networks=networks, optimizers=optimizers)


def summarize_runs(scores, columns=None):
    """Mean and standard deviation over the seeds, one row per library.

    Parameters
    ----------
    scores : pandas.DataFrame
        The ``scores`` of :func:`train_side_by_side`.
    columns : list of str, optional
        Columns to summarize; all but ``library`` and ``seed`` by default.

    Returns
    -------
    pandas.DataFrame
        Index ``library`` in the order of first appearance, columns
        ``(column, 'mean')`` and ``(column, 'std')``.

    Examples
    --------
    >>> import pandas as pd
    >>> scores = pd.DataFrame({"library": ["scikit-learn", "onnxruntime"] * 2, "seed": [0, 0, 1, 1],
    ...                        "R² (test)": [0.80, 0.82, 0.84, 0.80]})
    >>> summarize_runs(scores).round(3)  # doctest: +NORMALIZE_WHITESPACE
                 R² (test)
                      mean    std
    library
    scikit-learn      0.82  0.028
    onnxruntime       0.81  0.014
    """
    if columns is None:
        columns = [c for c in scores.columns if c not in ("library", "seed")]
    return scores.groupby("library", sort=False)[columns].agg(["mean", "std"])


def check_same_level(
    summary, column, rtol=0.0, atol=0.0, n_std=2.0, libraries=("scikit-learn", "onnxruntime")
):
    """Check that two libraries reach the same mean, up to the spread of their seeds.

    With a few seeds, the mean of each library is itself uncertain: two
    libraries doing the same thing differ by about the standard deviation
    between seeds. The gap between the two means is accepted when it is
    below the largest of ``atol``, ``rtol`` times the first library's mean,
    and ``n_std`` times the sum of the two standard deviations.

    Parameters
    ----------
    summary : pandas.DataFrame
        From :func:`summarize_runs`: index ``library``, columns
        ``(column, 'mean')`` and ``(column, 'std')``.
    column : str
        The score to compare, such as ``'R² (test)'``.
    rtol, atol : float
        Tolerances on the gap, relative to the first library's mean, and
        absolute.
    n_std : float
        How many (summed) standard deviations the gap may reach.
    libraries : tuple of str
        The two rows to compare.

    Returns
    -------
    tuple of float
        The gap and the largest gap allowed.

    Raises
    ------
    AssertionError
        When the gap is larger than allowed; the message gives the numbers.

    Examples
    --------
    >>> import pandas as pd
    >>> scores = pd.DataFrame({"library": ["scikit-learn", "onnxruntime"] * 2, "seed": [0, 0, 1, 1],
    ...                        "R² (test)": [0.80, 0.82, 0.84, 0.80]})
    >>> summary = summarize_runs(scores)
    >>> gap, allowed = check_same_level(summary, "R² (test)")
    >>> round(gap, 3), round(allowed, 3)
    (0.01, 0.085)
    """
    first, second = libraries
    means = summary[(column, "mean")]
    stds = summary[(column, "std")].fillna(0.0)
    gap = abs(float(means[second]) - float(means[first]))
    allowed = max(atol, rtol * abs(float(means[first])), n_std * float(stds[first] + stds[second]))
    if not gap <= allowed:
        raise AssertionError(
            f"{column}: {second} {means[second]:.6g} and {first} {means[first]:.6g} differ by "
            f"{gap:.3g}, more than the {allowed:.3g} allowed (atol={atol}, rtol={rtol}, "
            f"{n_std} x the summed standard deviations {stds[first]:.3g} + {stds[second]:.3g})."
        )
    return gap, allowed
