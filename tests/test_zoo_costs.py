"""Memory and first-fit cost per zoo model: the processes' figures, the caches, the answer."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.report import study_sections
from benchmarks.studies import peak_memory, peak_memory_process, zoo_costs

ORT = ("ort whole-training", "ort forward-backward")


@pytest.mark.training_package
def test_a_child_process_measures_memory_and_the_caches_of_its_fits():
    repeats = 2
    df = peak_memory.measure(
        model_function="benchmarks.example_models:token_classifier_small",
        batch_size=16,
        n_samples=32,
        epochs=1,
        frameworks=ORT,
        repeats=repeats,
        **zoo_costs.zoo_input("token_classifier_small"),
    )
    assert list(df.framework) == list(ORT)
    assert (df.import_mb > 50).all() and (df.peak_mb >= df.import_mb).all()
    # step_s is a difference of two timings (a marginal cost): on a busy machine it may come out
    # below zero, so only its presence is checked, never its value
    assert (df.first_fit_setup_s > 0).all() and np.isfinite(df.step_s).all()
    # the first fit built its training graph; every refit (and the training) found it cached
    assert (df.first_fit_builds == 1).all() and (df.refit_builds == 0).all()
    assert (df.refit_cache_hits == repeats + 1).all()


@pytest.mark.training_package
@pytest.mark.parametrize("framework", ORT)
def test_the_first_fit_empties_the_caches_and_refits_hit_them(framework):
    from helpers.core.machine.training_cache import clear_training_caches
    from helpers.teaching.model_factories import mlp_onnx

    X = np.random.default_rng(0).standard_normal((16, 3), dtype=np.float32)
    y = X[:, :1].copy()
    counts = dict.fromkeys(("first_fit_builds", "refit_builds", "refit_cache_hits"), 0)
    first_fit, refit = peak_memory_process._ort_fits(framework, mlp_onnx(3, hidden=(4,)), 8, counts)
    try:
        refit(X, y, 1)  # a warm cache before the first fit: it must be emptied, not used
        counts.update(dict.fromkeys(counts, 0))
        costs = peak_memory_process.setup_costs(first_fit, refit, X, y, 8, 2, repeats=3)
    finally:
        clear_training_caches()
    assert counts == {"first_fit_builds": 1, "refit_builds": 0, "refit_cache_hits": 4}
    assert set(costs) == {"first_fit_setup_s", "refit_setup_s", "step_s"}


def test_setup_costs_fits_two_rows_then_trains_the_whole_data():
    calls = []

    def fit(name):
        def run(X, y, epochs):
            calls.append((name, len(X), epochs))
            return lambda X, y, epochs: calls.append(("more", len(X), epochs))

        return run

    ticks = iter(np.arange(0.0, 100.0))
    peak_memory_process.setup_costs(
        fit("first"),
        fit("refit"),
        np.zeros(40),
        np.zeros(40),
        8,
        3,
        repeats=2,
        clock=lambda: next(ticks),
    )
    assert calls == [
        ("first", 2, 1),
        ("refit", 2, 1),
        ("refit", 2, 1),
        ("more", 2, 1),
        ("more", 2, 1),
        ("refit", 40, 3),
    ]


def _table(peaks, imports=None):
    """Rows of zoo_costs.csv: each model's peaks per framework; whole-training steps fastest."""
    rows = []
    for model, (whole, forward_backward, torch) in peaks.items():
        ort_import, torch_import = (imports or {}).get(model, (400.0, 220.0))
        for framework, peak, imported, step in [
            ("ort whole-training", whole, ort_import, 0.001),
            ("ort forward-backward", forward_backward, ort_import, 0.002),
            ("torch eager", torch, torch_import, 0.003),
        ]:
            rows.append(
                {
                    "model": model,
                    "framework": framework,
                    "import_mb": imported,
                    "peak_mb": peak,
                    "step_s": step,
                    "refit_setup_s": 0.01,
                    "first_fit_setup_s": 0.3 if framework in ORT else 0.9,
                }
            )
    return pd.DataFrame(rows)


def test_the_sentence_names_the_models_where_onnxruntime_peaks_higher():
    df = _table(
        {
            "resnet_small": (520.0, 900, 400),
            "image_cnn_small": (430.0, 300, 435),
            "mobilenet_large": (700.0, 700, 500),
            "sequence_conv_small": (300.0, 300, 500),
        }
    )
    sentence = study_sections.costs_sentence(df)
    higher = sentence.split(";")[0]
    assert "ResNet-style CNN (small) and MobileNetV2-style CNN (large) (1.3 to 1.4x more:" in higher
    assert "CNN on images" not in higher  # 430 MB against 435: the same
    assert "1-D CNN" not in higher  # less
    assert "+180 MB in its imports, which load torch as well, -60 to +20 MB while" in higher
    assert "Its first fit spends 0.30 s setting up" in sentence


def test_the_sentence_says_the_exceptions_when_most_models_peak_higher():
    peaks = {
        "resnet_small": (520.0, 520, 400),
        "resnet_large": (600.0, 600, 500),
        "image_cnn_small": (400.0, 400, 405),
    }
    imports = {model: (230.0, 220.0) for model in peaks}  # the extra is in training
    sentence = study_sections.costs_sentence(_table(peaks, imports))
    assert (
        "higher than torch eager for every model but CNN on images (small) (1.2 to 1.3x more:"
        in sentence
    )
    assert "+10 MB in its imports, which load torch as well, +90 to +110 MB while" in sentence
    none_higher = study_sections.costs_sentence(_table({"resnet_small": (400.0, 400, 420)}))
    assert "peaks no higher than torch eager for any model" in none_higher


def test_the_table_compares_the_faster_api_with_torch():
    df = _table({"resnet_small": (520.0, 900, 400)})
    df.loc[df.framework == "ort forward-backward", "step_s"] = 0.0005  # now the faster API
    row = study_sections.costs_table(df).iloc[0]
    assert row["peak MB, ORT / torch"] == "900 / 400 (2.2x)"  # the forward/backward API's peak
    text = study_sections.zoo_costs_markdown(df)
    assert text.startswith("onnxruntime (the faster of its two APIs for each model) peaks higher")
    assert "| ResNet-style CNN (small) | 900 / 400 (2.2x) |" in text


@pytest.mark.slow
def test_the_command_writes_one_row_per_model_and_framework(tmp_path):
    argv = ["--quick", "--models", "layernorm_mlp_small", "--out", str(tmp_path)]
    assert zoo_costs.main(argv) == 0
    df = pd.read_csv(tmp_path / "zoo_costs.csv")
    assert (
        list(df.columns)
        == zoo_costs.COLUMNS
        == [
            "model",
            "framework",
            "import_mb",
            "peak_mb",
            "training_mb",
            "first_fit_setup_s",
            "refit_setup_s",
            "step_s",
        ]
    )
    assert list(df.framework) == list(zoo_costs.FRAMEWORKS)
    assert set(df.model) == {"layernorm_mlp_small"}
    assert (df.peak_mb >= df.import_mb).all() and (df.import_mb > 50).all()
    np.testing.assert_allclose(df.training_mb, df.peak_mb - df.import_mb)
    assert study_sections.zoo_costs_section(str(tmp_path))[0].startswith("## Memory and first fit")
