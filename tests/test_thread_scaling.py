"""The thread-scaling study: its script on a tiny size, its ratios and answer, its arguments."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from benchmarks.studies import thread_scaling, thread_scaling_fits

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_thread_scaling_quick(tmp_path):
    """The thread-scaling script, as a user runs it, on a tiny size and one thread."""
    out = tmp_path / "out"
    subprocess.run(
        [
            sys.executable,
            os.path.join("benchmarks", "studies", "thread_scaling.py"),
            "--quick",
            "--threads",
            "1",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    # the three files, no temporary file left behind
    assert sorted(os.listdir(out)) == [
        "thread_scaling.csv",
        "thread_scaling.md",
        "thread_scaling.png",
    ]
    df = pd.read_csv(out / "thread_scaling.csv", dtype={"note": "string"})
    assert list(df.columns) == list(thread_scaling.COLUMNS)
    assert len(df) == 5 and sorted(df.framework) == sorted(thread_scaling.FRAMEWORKS)
    assert set(df["size"]) == set(thread_scaling.QUICK_SIZES) and (df.threads == 1).all()
    # a busy machine can lose a tiny step in its noise: then the figure is NaN and the note says why
    notes = df.note.fillna("")
    assert ((df.ms_per_step > 0) | df.ms_per_step.isna()).all()
    assert ((df.fixed_ms >= 0) | df.fixed_ms.isna()).all()
    assert (df.ms_per_step.isna() == notes.str.startswith("not measurable")).all()
    assert (df.fixed_ms.isna() == notes.str.contains("not measurable")).all()
    ms = df.ms_per_step
    by_framework = df.set_index("framework").ms_per_step  # the CSV keeps 6 digits
    np.testing.assert_allclose(df.ratio_to_torch, ms / by_framework["torch eager"], rtol=1e-5)
    bound = by_framework["onnxruntime matmul bound"]
    np.testing.assert_allclose(df.ratio_to_ort_bound, ms / bound, rtol=1e-5)
    np.testing.assert_array_equal(df.speedup_vs_1_thread, np.where(ms.isna(), np.nan, 1))
    text = (out / "thread_scaling.md").read_text(encoding="utf-8")
    assert "How do both APIs scale with threads, against torch?" in text
    assert "| 8-16-1@32 | 1 |" in text
    # the machine in full atop the page (benchmarks.sweep.records.machine_lines)
    head = "# Thread scaling of a training step\n\nMeasured on:\n\n- **Processor**: "
    assert text.startswith(head)
    assert "; threads used: 1\n- **Instruction sets**: " in text
    assert "- **Versions**: onnxruntime-training 1.19.2, onnx 1.17.0, torch " in text
    assert "only 1 thread(s) measured" in text
    for row in df[notes != ""].itertuples():
        assert f"- 8-16-1@32, 1 thread(s), {row.framework}: {row.note}" in text
    for written in (text, (out / "thread_scaling.csv").read_text(encoding="utf-8")):
        assert (
            str(tmp_path) not in written
            and ROOT not in written
            and os.path.expanduser("~") + "/" not in written
        )
    assert (out / "thread_scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_thread_scaling_ratios_and_answer():
    """Ratios compare frameworks at one size and thread count; the speed-up compares with one
    thread."""
    rows = []
    for threads, factor in ((1, 1.0), (2, 0.5)):
        for framework, ms in (
            ("ort whole-training", 1.0),
            ("ort forward-backward", 2.0),
            ("torch eager", 4.0),
            ("onnxruntime matmul bound", 0.5),
            ("numpy matmul", 0.25),
        ):
            rows.append(
                {
                    "size": "4-8-1@16",
                    "n_features": 4,
                    "hidden": 8,
                    "batch_size": 16,
                    "n_samples": 128,
                    "threads": threads,
                    "framework": framework,
                    "ms_per_step": ms * factor,
                    "fixed_ms": 3.0,
                    "note": "",
                }
            )
    rows[-2]["ms_per_step"] = 1.0  # the bound at 2 threads did not scale
    df = thread_scaling.add_ratios(pd.DataFrame(rows))
    at = df.set_index(["threads", "framework"])
    assert at.loc[(2, "ort whole-training"), "ratio_to_torch"] == pytest.approx(0.25)
    assert at.loc[(2, "ort whole-training"), "ratio_to_ort_bound"] == pytest.approx(0.5)
    assert at.loc[(2, "torch eager"), "speedup_vs_1_thread"] == pytest.approx(2.0)
    assert at.loc[(2, "onnxruntime matmul bound"), "speedup_vs_1_thread"] == pytest.approx(0.5)
    assert np.allclose(at.loc[1, "speedup_vs_1_thread"], 1.0)
    (line,) = thread_scaling.answer(df)
    assert "1 -> 2 threads" in line and "whole-training 1 -> 0.5 ms (x2.00)" in line
    assert "whole-training 0.25x torch eager" in line
    # no thread count 1 measured: no speed-up over one thread
    assert (
        df.assign(threads=df.threads + 1)
        .pipe(thread_scaling.add_ratios)
        .speedup_vs_1_thread.isna()
        .all()
    )
    # a step lost in the noise: no figure, no ratio, and the summary says why
    note = "not measurable: the longer fit was not slower than the shorter one"
    rows[2].update(ms_per_step=float("nan"), fixed_ms=float("nan"), note=note)  # torch, 1 thread
    df = thread_scaling.add_ratios(pd.DataFrame(rows))
    assert df[(df.threads == 1)].ratio_to_torch.isna().all()
    text = thread_scaling.markdown(df, (1, 4), 3)
    assert "| 4-8-1@16 | 1 | 1 | 2 | - | 0.5 | 0.25 |" in text
    assert f"- 4-8-1@16, 1 thread(s), torch eager: {note}" in text
    assert "torch eager - -> 2 ms (not measurable here" in text


def test_thread_scaling_arguments():
    assert thread_scaling_fits.parse_size("100-50-1@100")["n_samples"] == 8000
    assert thread_scaling_fits.parse_size("500-500-1@1000")["n_samples"] == 8000
    assert thread_scaling.parse_threads("2,1,2") == [2, 1]
    for bad in (["--sizes", "100x50"], ["--threads", "0"], ["--threads", "a"], ["--epochs", "4,1"]):
        with pytest.raises(SystemExit):
            thread_scaling.main(bad)
