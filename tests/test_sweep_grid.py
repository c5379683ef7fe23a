"""The grids of the sweep: the quick and full grids expand, parameters that do not apply make no
duplicate runs."""

import os

import pytest

from benchmarks.sweep import sweep_grid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BENCHMARKS = os.path.join(ROOT, "benchmarks")


def test_grids_expand(tmp_path):
    quick = sweep_grid.expand(sweep_grid.load_grid("quick"))
    full = sweep_grid.expand(sweep_grid.load_grid("full"))
    assert len({r["id"] for r in quick}) == len(quick) >= 3
    assert len(full) > len(quick)
    assert {r["benchmark"].split("_")[0] for r in full} == {
        "sklearn",
        "torch",
        "scaling",
        "your",
        "zoo",
    }
    # the model zoo: every builder of ZOO at 1 and 2 threads, given the input and task ZOO says
    from benchmarks.example_models import ZOO

    zoo = [r["parameters"] for r in full if r["benchmark"].startswith("zoo_")]
    assert sorted((p["model_function"].split(":")[1], p["n_threads"]) for p in zoo) == sorted(
        (name, threads) for name in ZOO for threads in (1, 2)
    )
    for p in zoo:
        _, shape, task = ZOO[p["model_function"].split(":")[1]]
        assert p["task"] == task and p.get("input_shape", shape) == shape
    # the committed reference holds a record of every run of the full grid
    records = os.path.join(ROOT, "results", "reference", "records")
    assert {r["id"] for r in full} == {f[: -len(".json")] for f in os.listdir(records)}


def test_parameters_that_do_not_apply_make_no_duplicate_runs(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        f"""
[sk]
notebook = "{os.path.join(BENCHMARKS, "bench_sklearn.ipynb")}"
[sk.fixed]
epochs = 2
[sk.grid]
model = ["linear", "mlp"]
batch_size = [32, 64]
hidden = [10, 20]
[sk.ignored_when]
model = {{ linear = ["batch_size", "hidden"] }}
"""
    )
    runs = sweep_grid.expand(sweep_grid.load_grid(str(grid)))
    linear = [r for r in runs if r["parameters"]["model"] == "linear"]
    assert len(runs) == 5 and len(linear) == 1  # not 4 identical linear runs
    assert linear[0]["parameters"] == {"epochs": 2, "model": "linear"}
    assert len({r["id"] for r in runs}) == 5
    # the quick grid: the linear model's run carries no batch size nor hidden layer
    (quick_linear,) = [
        r
        for r in sweep_grid.expand(sweep_grid.load_grid("quick"))
        if r["parameters"].get("model") == "linear"
    ]
    assert (
        "batch_size" not in quick_linear["parameters"]
        and "hidden" not in quick_linear["parameters"]
    )
    # values other than strings: TOML keys are strings
    assert sweep_grid.applicable({"threads": 1, "x": 0}, {"threads": {"1": ["x"]}}) == {
        "threads": 1
    }
    assert sweep_grid.applicable({"flag": True, "x": 0}, {"flag": {"true": ["x"]}}) == {
        "flag": True
    }
    grid.write_text(
        grid.read_text().replace('{ linear = ["batch_size", "hidden"] }', '["batch_size"]')
    )
    with pytest.raises(SystemExit, match="ignored_when"):
        sweep_grid.load_grid(str(grid))
