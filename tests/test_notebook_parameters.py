"""Notebooks run with the parameters a user would try (papermill), not only their defaults.

The defaults are tested by nbval; these runs cover what once failed with other
values: tuples given as strings, deeper networks in a later section, short
runs, and parameters that cannot work together.
"""

from pathlib import Path

import papermill
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def run(name, tmp_path, **parameters):
    return papermill.execute_notebook(
        str(NOTEBOOKS / name),
        str(tmp_path / name),
        parameters=parameters,
        kernel_name="ort-training",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
    )


def failure_of(name, tmp_path, **parameters):
    """The error that stopped the run (``cell_index`` counts papermill's injected cell)."""
    with pytest.raises(papermill.PapermillExecutionError) as caught:
        run(name, tmp_path, **parameters)
    return caught.value


@pytest.mark.slow
def test_deeper_networks_given_as_strings(tmp_path):
    # Two hidden layers in both sections: the penalty section once reused the
    # first network's weight names; '(16, 8)' is what `-p` passes for a tuple.
    run(
        "11_neural_network_forward_backward.ipynb",
        tmp_path,
        hidden_layer_sizes="(16, 8)",
        penalty_hidden_layer_sizes=[16, 8],
        full_batch_max_iter=3,
    )


@pytest.mark.slow
def test_short_full_batch_check_and_deeper_classifiers(tmp_path):
    # The tables of the full-batch check once picked rows 1, 2, 5 and 20 by position;
    # the raw scores were once cut at 'add_result1', the output of one hidden layer only.
    run(
        "12_classification.ipynb",
        tmp_path,
        full_batch_max_iter=2,
        max_iter=30,
        hidden_layer_sizes="(16, 8)",
        cancer_hidden_layer_sizes="(8, 4)",
    )


@pytest.mark.training_package  # notebook 4 teaches the training package's artifacts API
def test_parameters_that_cannot_work_together(tmp_path):
    error = failure_of("04_training_with_artifacts.ipynb", tmp_path, stop_after=6, max_iter=6)
    assert error.ename == "ValueError"
    assert "stop_after=6 must be between 0 and max_iter=6" in error.evalue
    # in the cell after the parameters, papermill's injected cell and the imports, before any
    # training
    assert error.cell_index == 6


@pytest.mark.slow
@pytest.mark.training_package  # notebook 2 opens the training package's whole-training step
def test_claim_needing_more_training_names_the_parameter(tmp_path):
    error = failure_of("02_whole_training_in_detail.ipynb", tmp_path, n_samples=60, batch_size=50)
    assert error.ename == "AssertionError"
    assert "raise max_iter" in error.evalue
