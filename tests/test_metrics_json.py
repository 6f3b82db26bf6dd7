"""``metrics.json`` (and every run file) is strict JSON; old files with NaN still read.

Until 2026-11-29 an undefined R-hat (one chain of fewer than 8 draws) was
written as the literal ``NaN``, which is not JSON: JavaScript's
``JSON.parse`` and ``json.loads(..., parse_constant=<refuse>)`` reject the file.
"""

import json
import math
import os

import numpy as np
import pytest

from keras_bnn import cli, console, diagnostics, runs
from keras_bnn.runs import build


def _strict(text):
    """``json.loads`` that refuses NaN and Infinity, as JSON (RFC 8259) does."""
    def refuse(literal):
        raise ValueError(f"not JSON: {literal}")
    return json.loads(text, parse_constant=refuse)


def _result():
    """An evaluation result as :func:`keras_bnn.runs.evaluate` returns it for one
    chain of 4 draws: its R-hat is undefined (NaN)."""
    draws = np.random.default_rng(0).normal(size=(1, 4, 6))
    summary = diagnostics.convergence_summary(draws)
    scores = {"accuracy": 0.5, "nll": 0.7, "ece": 0.1, "brier": 0.4}
    return {"sampler": "sghmc", "temperature": 1.0, "likelihood": "categorical",
            "num_chains": 1, "num_samples": 4, "reliability_plot": None,
            "single_sample": scores, "ensemble": scores,
            "metric_vs_num_samples": {"num_samples": [1, 2], "nll": [0.8, math.inf]},
            "rhat": {"function": summary, "weight": dict(summary)}}


def test_run_files_are_strict_json(tmp_path):
    run = runs.RunDir(tmp_path / "run")
    value = {"nan": math.nan, "inf": [math.inf, -math.inf, 1.5], "numpy": np.float64("nan"),
             "nested": ({"x": float("nan"), "y": 2}, None, "NaN"), "finite": 0.1 + 0.2}
    run.write_json(run.history, value)
    with open(run.history) as handle:
        read = _strict(handle.read())
    assert read == {"nan": None, "inf": ["Infinity", "-Infinity", 1.5], "numpy": None,
                    "nested": [{"x": None, "y": 2}, None, "NaN"], "finite": 0.1 + 0.2}
    loss = runs.RunDir.read_numbers(run.history)["inf"]
    assert loss == [math.inf, -math.inf, 1.5]


def _nan_equal(a, b):
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)  # NaN spelled alike


def test_read_metrics_reads_old_and_new_files_alike(tmp_path, capsys):
    result = _result()
    assert math.isnan(result["rhat"]["function"]["median"])
    new, old = runs.RunDir(tmp_path / "new"), runs.RunDir(tmp_path / "old")
    new.write_json(new.metrics, result)
    with open(new.metrics) as handle:
        assert _strict(handle.read())["rhat"]["function"]["median"] is None
    os.makedirs(old.path)
    with open(old.metrics, "w") as handle:  # as written before 2026-11-29
        handle.write(json.dumps(result, indent=2))
    with pytest.raises(ValueError, match="not JSON"):
        _strict(open(old.metrics).read())
    read_new, read_old = runs.read_metrics(new.path), runs.read_metrics(old.path)
    for read in (read_new, read_old):
        assert _nan_equal(read, json.loads(json.dumps(result)))
    assert read_new["reliability_plot"] is None
    printed = []
    for read in (read_new, read_old):
        console.print_rhat(read)
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and "not assessed: R-hat is undefined (4 draws" in printed[0]
    with pytest.raises(FileNotFoundError, match="holds no metrics.json: evaluate it first"):
        runs.read_metrics(tmp_path)


def _train(path, *flags):
    small = ["--num-train", "200", "--num-test", "100", "--batch-size", "50", "--verbose", "0"]
    assert cli.main(["train", *small, *flags, "--output-dir", path]) == 0
    return path


@pytest.mark.slow  # 17-21 s (a trained run of 4 samples, one chain too short for R-hat)
def test_evaluate_writes_strict_json(tmp_path, capsys):
    """``keras-bnn evaluate``'s metrics.json parses as JSON, its undefined R-hat null,
    read back as NaN."""
    run_dir = _train(str(tmp_path / "run"), "--epochs", "5", "--burn-in-epochs", "1",
                     "--sampler", "sghmc")
    assert cli.main(["evaluate", "--run-dir", run_dir]) == 0
    assert "not assessed: R-hat is undefined (4 draws" in capsys.readouterr().out
    with open(runs.RunDir(run_dir).metrics) as handle:
        written = _strict(handle.read())
    assert written["rhat"]["function"]["median"] is None
    read = runs.read_metrics(run_dir)
    assert math.isnan(read["rhat"]["weight"]["max"]) and read["num_samples"] == 4


def test_a_shuffled_test_set_scores_as_the_ordered_one(tmp_path):
    """``evaluate(data=...)`` read the labels in one pass and the predictions in
    another: a test set that reshuffles each pass paired predictions with other
    examples' labels (until 2026-11-29, 4 SGHMC samples: accuracy 0.36 for 0.45,
    near chance 1/3). An SGD run (its one sample) is the cheapest run to score."""
    run_dir = _train(str(tmp_path / "run"), "--epochs", "2", "--sampler", "sgd")
    config = runs.RunConfig.from_json(runs.RunDir(run_dir).config)
    train_ds, test_ds, info = build.load_data(config)
    ordered = runs.evaluate(run_dir)
    shuffled = test_ds.unbatch().shuffle(100, seed=1).batch(50)
    mixed = runs.evaluate(run_dir, data=(train_ds, shuffled, info))
    assert not np.array_equal(mixed["test_labels"], ordered["test_labels"])
    for part in ("single_sample", "ensemble"):
        assert mixed[part] == pytest.approx(ordered[part], rel=1e-6)
