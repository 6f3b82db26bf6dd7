"""keras_bnn.runs.sweep and `keras-bnn sweep`: prior-scale and
temperature sweeps on in-memory arrays and on bundled datasets."""

import csv
import os

import numpy as np
import pytest

from keras_bnn import cli, data, runs

TINY = dict(epochs=2, burn_in_epochs=1, batch_size=50, model_args={"hidden": [8]})


def _arrays(n=200):
    (x, y), _, _ = data.synthetic_teacher(n, 1, seed=0)
    return x, y


def test_sweep_over_prior_scale_runs_on_arrays(tmp_path):
    x, y = _arrays()
    config = runs.RunConfig(output_dir=str(tmp_path / "sweep"), **TINY)
    rows = runs.sweep("prior_scale", [0.5, 2.0], x=x, y=y, config=config,
                      seeds=(0, 1), validation_split=0.25)
    assert [(r["prior_scale"], r["seed"]) for r in rows] == [
        (0.5, 0), (0.5, 1), (2.0, 0), (2.0, 1)]
    for row in rows:
        assert 0.0 <= row["ensemble_accuracy"] <= 1.0 and row["ensemble_nll"] > 0
    # The runs saw only the training part: 150 of 200 examples (validation 50).
    run = os.path.join(str(tmp_path / "sweep"), "prior_scale=2", "seed=1")
    config_json = runs.load_run(run)[0]
    assert config_json.prior_scale == 2.0 and config_json.dataset == "arrays"
    # The two scales give different chains (the prior enters the potential).
    assert rows[0]["ensemble_nll"] != rows[2]["ensemble_nll"]
    assert os.path.getsize(str(tmp_path / "sweep" / "sweep.png")) > 10_000
    assert len(list(csv.DictReader(open(tmp_path / "sweep" / "sweep.csv")))) == 4


@pytest.mark.parametrize("kwargs, match", [
    (dict(param="depth", values=[1]), "param"),
    (dict(param="temperature", values=[]), "positive numbers"),
    (dict(param="temperature", values=[0.0]), "positive numbers"),
    (dict(param="temperature", values=[1], validation_split=1.5), "validation_split"),
    (dict(param="temperature", values=[1], dataset="cifar10"), "needs arrays"),
])
def test_sweep_rejects_bad_arguments(kwargs, match, tmp_path):
    config = runs.RunConfig(output_dir=str(tmp_path), **TINY)
    with pytest.raises(ValueError, match=match):
        runs.sweep(config=config, **kwargs)


def test_cli_sweep_on_npy_arrays_and_a_bundled_dataset(tmp_path, capsys):
    x, y = _arrays()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    flags = ["--epochs", "2", "--burn-in-epochs", "1", "--batch-size", "64", "--verbose", "0"]
    code = cli.main(["sweep", "--param", "temperature", "--values", "0.5",
                     "--x", str(tmp_path / "x.npy"), "--y", str(tmp_path / "y.npy"),
                     "--output-dir", str(tmp_path / "a"), *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "ensemble_nll" in out and "sweep.png" in out
    code = cli.main(["sweep", "--param", "prior_scale", "--values", "1", "--dataset", "wine",
                     "--output-dir", str(tmp_path / "b"), *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = list(csv.DictReader(open(tmp_path / "b" / "sweep.csv")))
    assert [float(r["prior_scale"]) for r in rows] == [1.0]
    code = cli.main(["sweep", "--param", "width", "--values", "1"])
    assert code == 2 and "`param` must be one of" in capsys.readouterr().err


def test_run_config_fills_dataset_defaults_only_for_fields_left_unset():
    digits = runs.RunConfig(dataset="digits").validate()
    assert (digits.prior, digits.prior_scale, digits.epochs, digits.burn_in_epochs) == (
        "student_t", 0.4, 150, 100)
    # Another prior does not inherit the digits default's scale.
    he = runs.RunConfig(dataset="digits", prior="he_normal").validate()
    assert (he.prior, he.prior_scale) == ("he_normal", 1.0)
    assert runs.RunConfig(dataset="digits", epochs=60).validate().burn_in_epochs == 40
    synthetic = runs.RunConfig(epochs=12).validate()
    assert (synthetic.prior, synthetic.prior_scale, synthetic.burn_in_epochs) == (
        "he_normal", 1.0, 4)
