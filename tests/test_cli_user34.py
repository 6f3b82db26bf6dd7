"""The ``keras-bnn`` command line as a user drives it: its files read by other tools."""

import dataclasses
import json
import math
import os

import numpy as np
import pytest

from keras_bnn import cli, console, diagnostics, runs


def _strict(text):
    """``json.loads`` that refuses NaN and Infinity, as JSON (RFC 8259) does."""
    def refuse(literal):
        raise ValueError(f"not JSON: {literal}")
    return json.loads(text, parse_constant=refuse)


def _stuck_chains_result():
    """An evaluation result of 2 chains whose predictions each stay constant at
    other values (R-hat inf: the chains disagree completely) and of 1 chain of
    4 draws (R-hat undefined, NaN) in weight space."""
    stuck = np.zeros((2, 8, 3))
    stuck[1] += 1.0
    short = np.random.default_rng(0).normal(size=(1, 4, 6))
    scores = {"accuracy": 0.5, "nll": 0.7, "ece": 0.1, "brier": 0.4}
    return {"sampler": "hmc", "temperature": 1.0, "likelihood": "categorical",
            "num_chains": 2, "num_samples": 16, "reliability_plot": None,
            "single_sample": scores, "ensemble": scores,
            "metric_vs_num_samples": {"num_samples": [1, 2], "nll": [-math.inf, 0.7]},
            "rhat": {"function": diagnostics.convergence_summary(stuck),
                     "weight": diagnostics.convergence_summary(short)}}


def test_infinite_rhat_is_told_from_undefined_in_metrics_json(tmp_path, capsys):
    """Until 2026-11-30 an infinite R-hat was written as null, as an undefined
    one: read back as NaN, the console said "R-hat is undefined" of chains that
    had not mixed at all."""
    result = _stuck_chains_result()
    assert result["rhat"]["function"]["max"] == math.inf
    assert math.isnan(result["rhat"]["weight"]["max"])
    run = runs.RunDir(tmp_path / "run")
    run.write_json(run.metrics, result)
    with open(run.metrics) as handle:
        written = _strict(handle.read())
    assert written["rhat"]["function"]["median"] == "Infinity"
    assert written["rhat"]["function"]["max"] == "Infinity"
    assert written["rhat"]["weight"]["max"] is None
    assert written["metric_vs_num_samples"]["nll"] == ["-Infinity", 0.7]
    assert float(written["rhat"]["function"]["max"]) == math.inf  # what a reader does
    read = runs.read_metrics(run.path)
    assert read["rhat"]["function"]["max"] == math.inf
    assert math.isnan(read["rhat"]["weight"]["median"])
    assert read["metric_vs_num_samples"]["nll"] == [-math.inf, 0.7]
    assert read["sampler"] == "hmc" and read["reliability_plot"] is None
    console.print_rhat(read)
    printed = capsys.readouterr().out
    assert "function space: not converged: R-hat ≥ 1.01 for 100% of the" in printed
    assert "(max inf)" in printed
    assert "weight space: not assessed: R-hat is undefined (4 draws" in printed
    function_row = next(line for line in printed.splitlines()
                        if line.strip().startswith("function"))
    assert function_row.split()[1:3] == ["inf", "inf"]


def _refused(argv, capsys):
    """The one error line of ``keras-bnn`` for ``argv``, which must exit with 2."""
    assert cli.main(argv) == 2
    return capsys.readouterr().err


def test_a_cycle_for_sgd_is_refused_not_ignored(tmp_path, capsys):
    """The SGD baseline's learning rate has no cycle: until 2026-11-30
    `train --sampler sgd --cycle-epochs 2` trained (wine, 4 epochs) to a
    history.json equal to the one without it, as a temperature is refused."""
    err = _refused(["train", "--sampler", "sgd", "--epochs", "4", "--cycle-epochs", "2",
                    "--output-dir", str(tmp_path / "run")], capsys)
    assert err.startswith("keras-bnn: error: `cycle_epochs` applies to samplers")
    assert "not to sampler='sgd'" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("values, named", [
    ({"dataset": "wine", "num_train": 50, "epochs": 2}, "`num_train` in --config"),
    ({"dataset": "digits", "num_test": 10, "epochs": 2}, "`num_test` in --config"),
])
def test_config_file_sizes_that_would_be_ignored_are_refused(tmp_path, capsys, values, named):
    """A --config key that its flag's check refuses was ignored silently
    (until 2026-11-30 `{"dataset": "wine", "num_train": 50}` trained on wine's
    128 training rows, as the flag --num-train 50 is refused for)."""
    path = tmp_path / "run.json"
    path.write_text(json.dumps(values))
    err = _refused(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")],
                   capsys)
    assert err.startswith(f"keras-bnn: error: {named} ")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("target, reason", [
    ("config.json", "must be a directory, or a path where one can be made"),
    ("1", "must be a model's base directory (saved_models/<name>), not one of its versions"),
])
def test_export_names_the_export_dir_flag(tmp_path, capsys, target, reason):
    """`export --export-dir <a file>` said "`model_dir` must be a directory", a
    name the command line has no flag for (until 2026-11-30)."""
    config = runs.RunConfig(sampler="sgd", output_dir=str(tmp_path / "run")).validate()
    run = runs.RunDir(config.output_dir)
    run.write_json(run.config, dataclasses.asdict(config))
    version = tmp_path / "model" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(b"")
    export_dir = run.config if target == "config.json" else str(version)
    err = _refused(["export", "--run-dir", run.path, "--export-dir", export_dir], capsys)
    assert err.startswith(f"keras-bnn: error: --export-dir {reason}")
    assert "model_dir" not in err


@pytest.mark.slow  # 20-30 s: demo trains SGD and ATMC, each choosing its prior
def test_a_demo_too_short_to_sample_names_its_own_flag(tmp_path, capsys):
    """`demo --epochs 3` on wine ends in warm-up; until 2026-11-30 its error
    advised --max-epochs and --burn-in-epochs, flags demo does not have."""
    err = _refused(["demo", "--dataset", "wine", "--epochs", "3", "--verbose", "0",
                    "--output-dir", str(tmp_path / "demo"),
                    "--export-dir", str(tmp_path / "models")], capsys)
    line = err.splitlines()[-1]
    assert line.startswith("keras-bnn: error: the atmc run collected no sample in 3 epochs")
    assert "give demo more --epochs" in line
    assert "--max-epochs" not in line and "--burn-in-epochs" not in line
    assert not (tmp_path / "models").exists()


def test_train_refuses_a_sample_store_as_its_run_directory(tmp_path, capsys):
    """`train --output-dir <run>/samples` trained a run into another run's
    sample store (until 2026-11-30: its config.json and history.json among the
    samples, its own samples in samples/samples)."""
    store_dir = tmp_path / "run" / "samples"
    store_dir.mkdir(parents=True)
    (store_dir / "store.json").write_text("{}")
    err = _refused(["train", "--sampler", "sgd", "--epochs", "1", "--num-train", "50",
                    "--num-test", "10", "--verbose", "0", "--output-dir", str(store_dir)],
                   capsys)
    assert err.startswith(f"keras-bnn: error: `output_dir` {str(store_dir)!r} is a sample store")
    assert sorted(os.listdir(store_dir)) == ["store.json"]  # a refusal leaves no .lock
