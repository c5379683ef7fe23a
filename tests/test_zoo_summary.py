"""The model zoo in a sweep's summary: how many models each way and a row per model, the details
per torch run, and no ratio where only torch ran."""

from bench_records import write_record

from benchmarks.report import aggregate


def _zoo_rows(model, family, n_weights, times, threads):
    base = dict(
        benchmark="your_model",
        model=f"benchmarks.example_models:{model}",
        family=family,
        optimizer="sgd",
        input_shape=[1, 28, 28],
        input_dtype="float32",
        n_weights=n_weights,
        batch_size=64,
        threads=threads,
    )
    return [{**base, "framework": f, "time_per_update_s": t} for f, t in times.items()]


def test_the_zoo_has_its_answer_and_table(tmp_path):
    """onnxruntime wins on the MLP, loses on the CNN, does not train the sequence model (its rows
    are in the details)."""
    cnn = {
        "torch eager": 1.0,
        "torch.compile": 0.8,
        "ort whole-training": 2.0,
        "ort forward-backward": 4.0,
    }
    mlp = {
        "torch eager": 1.0,
        "torch.compile": 1.0,
        "ort whole-training": 0.5,
        "ort forward-backward": 0.8,
    }
    for threads in (1, 2):
        for size, n_weights in (("small", 26000), ("large", 225000)):
            write_record(
                tmp_path,
                f"zoo-cnn-{size}-{threads}",
                "m",
                _zoo_rows(f"image_cnn_{size}", "CNN on images", n_weights, cnn, threads),
                threads,
            )
        write_record(
            tmp_path,
            f"zoo-mlp-{threads}",
            "m",
            _zoo_rows("batchnorm_mlp_large", "BatchNorm MLP", 400000, mlp, threads),
            threads,
        )
        untrainable = _zoo_rows(
            "sequence_conv_small", "1-D CNN on sequences", 2000, {"torch eager": 1.0}, threads
        )
        untrainable += [
            {
                **untrainable[0],
                "framework": f,
                "time_per_update_s": None,
                "error": "UntrainableModelError: Round",
            }
            for f in ("ort whole-training", "ort forward-backward")
        ]
        write_record(tmp_path, f"zoo-seq-{threads}", "m", untrainable, threads)
    aggregate.summarize(str(tmp_path))
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    # the summary: how many models each way, then one table, a row per model (the faster API)
    zoo = text.split("## Model zoo: m, 2 cores\n\n")[1].split("## Glossary")[0]
    assert zoo.startswith(
        "Against torch eager, onnxruntime's faster API trains a step faster for "
        "1 of 3 models with a clean ratio, slower for 2; against torch.compile, "
        "faster for 1 of 3 models, slower for 2."
    )
    assert "| model | torch eager, 1 thread | torch eager, 2 threads |\n" in zoo  # compile: details
    assert "| CNN on images (small) | 2.0x slower | 2.0x slower |\n" in zoo
    assert "| BatchNorm MLP (large) | 2.0x faster | 2.0x faster |\n" in zoo
    untrained = "1-D CNN on sequences (small) (why: [details](details.md))."
    assert f"Not trained by onnxruntime: {untrained}" in zoo
    # the details: a family of two sizes named once when both agree; per torch run, sentence, table
    details = (tmp_path / "details.md").read_text(encoding="utf-8")
    eager = details.split("### Model zoo against torch eager: m, 2 cores\n\n")[1]
    compiled = details.split("### Model zoo against torch.compile: m, 2 cores\n\n")[1]
    assert eager.startswith(
        "Against torch eager, onnxruntime's faster API trains a step faster for: "
        "BatchNorm MLP (large); slower for: CNN on images.\n\n| model |"
    )
    assert compiled.startswith(
        "Against torch.compile, onnxruntime's faster API trains a step "
        "faster for: BatchNorm MLP (large); slower for: CNN on images."
        "\n\n| model |"
    )
    for table in (eager, compiled):
        assert "| model | weights | threads | whole-training | forward/backward |" in table
    assert "| CNN on images (small) | 26k | 2 | 2.0x slower | 4.0x slower |" in eager
    assert "| CNN on images (small) | 26k | 2 | 2.5x slower | 5.0x slower |" in compiled
    assert "| CNN on images (large) | 225k | 1 | 2.0x slower |" in eager
    assert "| BatchNorm MLP (large) | 400k | 1 | 2.0x faster | 1.2x faster |" in eager
    assert "| model | threads | framework | ms per step |" in details
    assert (
        "Every row: input [1, 28, 28] float32, optimizer sgd." in details
    )  # said once, above the table
    assert "not run: UntrainableModelError: Round" in details
    assert (
        max(line.count(" | ") for line in details.splitlines()) + 1 <= 8
    )  # columns a reader can scan
    assert "family" in (tmp_path / "summary.csv").read_text(encoding="utf-8").splitlines()[0]


def test_a_zoo_run_where_only_torch_ran_has_no_ratio():
    import pandas as pd

    from benchmarks.report.zoo_summary import zoo_section

    df = pd.DataFrame(
        _zoo_rows("image_cnn_small", "CNN on images", 26000, {"torch eager": 1.0}, 2)
    ).assign(machine="m")
    assert zoo_section(df) == []
    df = pd.DataFrame(
        _zoo_rows(
            "image_cnn_small",
            "CNN on images",
            26000,
            {"torch eager": 1.0, "ort whole-training": 0.5},
            2,
        )
    ).assign(machine="m")
    assert "| CNN on images (small) | 2.0x faster |" in "\n".join(zoo_section(df))
