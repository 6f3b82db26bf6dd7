"""keras_bnn.runs.sweep and `keras-bnn sweep`: prior-scale and
temperature sweeps on in-memory arrays and on bundled datasets."""

import csv
import dataclasses
import os

import numpy as np
import pytest

from keras_bnn import cli, data, runs
from keras_bnn.runs import sweeps

# An explicit step: 6 steps are far too few for the warm-up of step_size="auto".
TINY = dict(epochs=2, burn_in_epochs=1, batch_size=50, model_args={"hidden": [8]},
            step_size=0.01)


def _arrays(n=200):
    (x, y), _, _ = data.synthetic_teacher(n, 1, seed=0)
    return x, y


@pytest.mark.slow
def test_sweep_over_prior_scale_runs_on_arrays(tmp_path):
    x, y = _arrays()
    config = runs.RunConfig(output_dir=str(tmp_path / "sweep"), prior="he_normal", **TINY)
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
    (dict(param="prior_scale", values=[1]), "set `prior`"),
])
def test_sweep_rejects_bad_arguments(kwargs, match, tmp_path):
    config = runs.RunConfig(output_dir=str(tmp_path), **TINY)
    with pytest.raises(ValueError, match=match):
        runs.sweep(config=config, **kwargs)


@pytest.mark.slow
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
                     "--prior", "he_normal", "--output-dir", str(tmp_path / "b"), *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = list(csv.DictReader(open(tmp_path / "b" / "sweep.csv")))
    assert [float(r["prior_scale"]) for r in rows] == [1.0]
    code = cli.main(["sweep", "--param", "width", "--values", "1"])
    assert code == 2 and "`--param` must be one of" in capsys.readouterr().err


def test_run_config_has_one_set_of_defaults_for_every_dataset():
    """#20: one set of run defaults. The step is the warm-up's, collection
    starts at equilibrium, and the length (None here) is set from the
    training set's size when the run starts (:func:`runs.config.default_epochs`)."""
    filled = [runs.RunConfig(dataset=name).validate() for name in
              ("synthetic", "digits", "wine", "breast_cancer", "diabetes")]
    assert {(c.epochs, c.burn_in_epochs, c.step_size) for c in filled} == {(None, "auto", None)}
    # No per-dataset entry: the prior is the same rule everywhere, chosen on a
    # validation split when the run starts (tests/test_prior_selection.py).
    assert {(c.prior, c.prior_scale) for c in filled} == {("auto", None)}
    he = runs.RunConfig(dataset="digits", prior="he_normal").validate()
    assert (he.prior, he.prior_scale) == ("he_normal", 1.0)
    with pytest.raises(ValueError, match="prior_scale"):
        runs.RunConfig(dataset="digits", prior_scale=0.5).validate()
    from keras_bnn import samplers
    assert {samplers.REGISTRY[name].step_size for name in ("sgld", "sghmc", "sgnht", "atmc")} \
        == {"auto"}
    from keras_bnn.runs import config as config_lib
    # 4000 steps: 1000 epochs of 4 steps (breast_cancer), at least 30 (Fashion-MNIST).
    assert config_lib.default_epochs(4) == 1000 and config_lib.default_epochs(600) == 30
    assert config_lib.default_collect_every(1000) == 10
    assert config_lib.default_collect_every(30) == 1
    explicit = runs.RunConfig(epochs=12, burn_in_epochs=4, step_size=0.01).validate()
    assert (explicit.epochs, explicit.burn_in_epochs, explicit.step_size) == (12, 4, 0.01)




@pytest.mark.slow  # 7 s: the default suite's 20 minutes
def test_a_run_that_collects_nothing_is_a_nan_row_and_the_sweep_goes_on(
        tmp_path, monkeypatch, capsys):
    """``keras-bnn sweep-temperature`` at its default temperatures stopped at
    its first one (0.01: on the synthetic task the chain is not stationary
    within the default length) with "holds no samples yet", and lost the
    rest. Here the run at T = 0.5 collects from equilibrium, which 2 epochs
    never reach: its row says 0 samples with NaN metrics, the T = 1 row is
    measured, and the table, CSV and plot are written."""
    real_train = sweeps.train

    def train(config, **kwargs):
        if config.temperature == 0.5:
            config = dataclasses.replace(config, burn_in_epochs="auto")
        return real_train(config, **kwargs)

    monkeypatch.setattr(sweeps, "train", train)
    root = tmp_path / "sweep"
    code = cli.main(["sweep-temperature", "--temperatures", "0.5,1", "--num-train", "200",
                     "--num-test", "50", "--epochs", "2", "--burn-in-epochs", "1",
                     "--batch-size", "50", "--step-size", "0.01", "--verbose", "0",
                     "--output-dir", str(root)])
    out = capsys.readouterr().out
    assert code == 0
    rows = list(csv.DictReader(open(root / "sweep.csv")))
    counts = [(row["temperature"], row["num_samples"]) for row in rows]
    assert counts == [("0.5", "0"), ("1.0", "1")]
    assert np.isnan(float(rows[0]["ensemble_nll"])) and float(rows[1]["ensemble_nll"]) > 0
    assert "no sample (the chain did not reach equilibrium" in out
    assert "temperature 0.5 seed 0" in out
    assert os.path.getsize(root / "sweep.png") > 10_000

    monkeypatch.setattr(sweeps, "train", lambda config, **kwargs: real_train(
        dataclasses.replace(config, burn_in_epochs="auto"), **kwargs))
    config = runs.RunConfig(output_dir=str(tmp_path / "none"), num_train=200, num_test=50,
                            **TINY)
    with pytest.raises(ValueError, match="no run of the sweep .* collected a sample"):
        runs.sweep_temperature(config, [1.0])


def test_a_second_sweep_into_a_sweep_directory_is_refused(tmp_path):
    """A second sweep into the same directory overwrote the first's sweep.csv
    and sweep.png (another parameter), or stopped part-way advising --resume,
    which sweeps do not have (found trying the CLI as a user)."""
    config = runs.RunConfig(output_dir=str(tmp_path / "sweep"), prior="he_normal", **TINY)
    runs.sweep_temperature(config, [1.0])
    table = open(runs.RunDir(config.output_dir).sweep_table).read()
    with pytest.raises(FileExistsError, match="holds a sweep already"):
        runs.sweep("prior_scale", [1.0], config=config)
    assert open(runs.RunDir(config.output_dir).sweep_table).read() == table
    os.remove(runs.RunDir(config.output_dir).sweep_table)  # as if stopped before the table
    with pytest.raises(FileExistsError, match="was stopped part-way"):
        runs.sweep_temperature(config, [1.0])


@pytest.mark.parametrize("dataset, seed, rows", [("digits", 0, 259), ("synthetic", 3, 50)])
@pytest.mark.slow
def test_evaluate_scores_a_sweep_run_on_the_rows_the_sweep_held_out(tmp_path, capsys, dataset,
                                                                      seed, rows):
    """`keras-bnn evaluate` on a run of `keras-bnn sweep` scored the test
    split (digits: 500 rows) and overwrote the run's metrics.json, while
    sweep.csv holds the scores on the 259 training rows the sweep held out.
    The run records its split; evaluate rebuilds it (the synthetic task's
    training set drawn with the sweep's seed, not the run's)."""
    sizes = {"num_train": 250} if dataset == "synthetic" else {}  # digits: its own split
    config = runs.RunConfig(output_dir=str(tmp_path / "sweep"), dataset=dataset, seed=seed,
                            prior="he_normal", **sizes, **TINY)
    (row,) = runs.sweep("temperature", [1.0], config=config, seeds=(1,))
    run = runs.RunDir(config.output_dir).sweep_run("temperature", 1.0, 1)
    result = runs.evaluate(run.path)
    assert len(result["test_labels"]) == rows
    assert result["ensemble"]["nll"] == pytest.approx(row["ensemble_nll"])
    assert run.read_json(run.validation_split) == {
        "validation_split": 0.2, "data_seed": seed, "num_validation": rows}
    assert cli.main(["evaluate", "--run-dir", run.path]) == 0
    assert run.read_json(run.metrics)["ensemble"]["nll"] == pytest.approx(row["ensemble_nll"])
    capsys.readouterr()
    # --resume would go on with the whole training set, not the sweep's part.
    assert cli.main(["train", "--resume", "--output-dir", run.path, "--verbose", "0"]) == 2
    assert "is a sweep's run on a validation split" in capsys.readouterr().err


@pytest.mark.parametrize("values, seeds, match", [
    ([1, 1], (0,), r"`values` must be distinct .* got 1.0 and 1.0, both `temperature=1`"),
    ([0.4, 0.40000001], (0,), r"got 0.4 and 0.40000001, both `temperature=0.4`"),
    ([1], (0, 2, 0), r"`seeds` must be distinct seeds .* got \[0, 2, 0\]"),
])
def test_values_or_seeds_that_share_a_run_directory_are_refused_before_training(
        tmp_path, values, seeds, match):
    """`--values 1,1` (or 0.4,0.40000001, both spelled 0.4) and `--seeds 0,0`
    trained the first run, then stopped at the second, whose directory the
    first had taken ("stopped part-way"), and wrote no sweep.csv."""
    config = runs.RunConfig(output_dir=str(tmp_path / "sweep"), **TINY)
    with pytest.raises(ValueError, match=match):
        runs.sweep("temperature", values, config=config, seeds=seeds)
    assert not os.path.exists(tmp_path / "sweep")
