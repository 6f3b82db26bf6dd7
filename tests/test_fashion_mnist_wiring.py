"""Fashion-MNIST through kb.data.load and the keras-bnn command, on small written files."""

import glob
import json
import os

import pytest
from fashion_mnist_files import write_set

import keras_bnn as kb
from keras_bnn import cli
from keras_bnn import fashion_mnist as fm


@pytest.fixture
def small_set(monkeypatch, tmp_path):
    """A learnable 80 + 30 image set in its own directory; the default places empty."""
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    write_set(tmp_path / "fmnist", num_train=80, num_test=30, learnable=True)
    return str(tmp_path / "fmnist")


def _example(name):
    """Imports ``examples/<name>.py`` as a module."""
    import importlib.util

    path = os.path.join(os.path.dirname(__file__), "..", "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"{name}_example", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def test_load_splits_and_batches(small_set):
    train_ds, test_ds, info = kb.data.load("fashion_mnist", batch_size=16, validation_split=0.25,
                                           seed=2, data_dir=small_set)
    assert info["num_train"] == 60 and info["num_validation"] == 20 and info["num_test"] == 30
    sizes = [int(x.shape[0]) for x, _ in train_ds]
    assert sum(sizes) == 60 and max(sizes) == 16
    x, y = next(iter(test_ds))
    assert tuple(x.shape[1:]) == (28, 28, 1) and y.dtype.name == "int64"
    assert sum(int(y.shape[0]) for _, y in info["validation_ds"]) == 20
    assert kb.data.load("fashion_mnist", data_dir=small_set)[2]["validation_ds"] is None


def test_missing_files_fail_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        kb.data.load("fashion_mnist", data_dir=str(tmp_path / "nothing"))


@pytest.mark.parametrize("model", ["mlp", pytest.param("cnn", marks=pytest.mark.slow)])  # 16 s
def test_cli_trains_and_evaluates(small_set, tmp_path, capsys, model):
    run_dir = str(tmp_path / model)
    code = cli.main(["train", "--dataset", "fashion_mnist", "--data-dir", small_set,
                     "--model", model, "--sampler", "atmc", "--epochs", "3",
                     "--burn-in-epochs", "1", "--batch-size", "20", "--verbose", "0",
                     "--output-dir", run_dir])
    assert code == 0, capsys.readouterr().err
    code = cli.main(["evaluate", "--run-dir", run_dir])
    assert code == 0, capsys.readouterr().err
    metrics = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert metrics["num_samples"] == 2
    assert 0.0 <= metrics["ensemble"]["accuracy"] <= 1.0 and metrics["ensemble"]["nll"] > 0


@pytest.mark.slow
def test_real_data_atmc_ensemble_beats_one_sgd_net_in_nll(tmp_path):
    """On the real files (skipped without them; .ci/run installs Debian's
    package): all 60 000 training images, the MLP with the library's
    He-normal prior, SGD/MAP for 3 epochs against one ATMC chain of 5 epochs
    (h0 = 5e-4, chosen on a validation split, see README "Fashion-MNIST"),
    3 samples (about 2 minutes on 2 busy CPU cores). The posterior ensemble
    must have a lower test NLL than the SGD net, at an accuracy no more than
    0.02 below it."""
    try:
        fm.find_files()
    except FileNotFoundError as error:
        pytest.skip(f"Fashion-MNIST files absent: {error}")
    (x, y), _, (x_test, y_test), _ = fm.fashion_mnist_arrays()
    data = kb.runs.arrays_data(x, y, 128, x_test=x_test, y_test=y_test)
    scores = {}
    for sampler, epochs, step_size, burn_in in (("sgd", 3, None, None), ("atmc", 5, 5e-4, 2)):
        config = kb.runs.RunConfig(dataset=kb.runs.ARRAYS, model="mlp", sampler=sampler,
                                   epochs=epochs, burn_in_epochs=burn_in, batch_size=128,
                                   step_size=step_size, output_dir=str(tmp_path / sampler))
        kb.runs.train(config.validate(), verbose=0, data=data)
        members = kb.PosteriorEnsemble.from_store(config.output_dir).predict_members(data[1])
        scores[sampler] = kb.metrics.evaluate_probs(members.mean(axis=0), y_test)
    sgd, atmc = scores["sgd"], scores["atmc"]
    assert atmc["nll"] < sgd["nll"], scores
    assert atmc["accuracy"] > sgd["accuracy"] - 0.02, scores


@pytest.mark.slow  # 22 s (the compare wiring stays in the default suite: the collision test)
def test_example_compare_and_table(small_set, tmp_path, capsys):
    """``examples/fashion_mnist.py compare`` trains the deep ensemble and the K
    chains under the chosen prior (the chains with their own burn-in), one
    JSON row each; a chain too short for the equilibrium test is a
    ``not_converged`` row, not a crash; ``table`` renders them."""
    example = _example("fashion_mnist")
    out = str(tmp_path / "out")
    example.main(["compare", "--out", out, "--data-dir", small_set, "--k", "2",
                  "--rows", "sgd x K", "atmc 1 chain", "atmc x K", "--sgd-epochs", "2",
                  "--chain-epochs", "2", "--chains-epochs", "3",
                  "--chains-burn-in-epochs", "1", "--step-size", "1e-3", "--batch-size", "20",
                  "--seeds", "0", "--prior", "student_t"])
    rows = [json.loads(line) for line in open(os.path.join(out, "results.jsonl"))]
    assert [(r["row"], r["chains"], r.get("num_samples")) for r in rows] == [
        ("sgd x 2", 2, 2), ("atmc 1 chain", 1, None),
        ("atmc x 2", 2, 4)]  # 2 chains × epochs 1, 2 after burn-in
    assert all((r["prior"], r["prior_scale"]) == ("student_t", 0.4) for r in rows)
    assert rows[1]["not_converged"] == "20 epochs after warm-up are needed (window 10); have 2"
    assert rows[2]["burn_in_epochs"] == 1 and "burn_in_epochs" not in rows[0]
    capsys.readouterr()
    example.main(["table", "--out", out])
    table = capsys.readouterr().out
    assert "| mlp | student_t | sgd x 2 |" in table and "| mlp | student_t | atmc x 2 |" in table
    assert "not_converged: " in table


def test_example_rows_differing_only_in_data_or_batch_do_not_collide(small_set, tmp_path):
    """A row's run directory names its training subset, batch size and
    validation split: two compares that differ only there used to write the
    same directory (the second refused as "already holds this row's runs")."""
    example = _example("fashion_mnist")
    out = str(tmp_path / "out")
    common = ["compare", "--out", out, "--data-dir", small_set, "--k", "1", "--rows", "sgd x K",
              "--sgd-epochs", "1", "--seeds", "0", "--prior", "student_t"]
    for extra in (["--batch-size", "20"], ["--batch-size", "40"],
                  ["--batch-size", "20", "--train-subset", "40"]):
        example.main(common + extra)
    assert len(open(os.path.join(out, "results.jsonl")).readlines()) == 3
    example.main(common + ["--batch-size", "40"])  # done: skipped, not trained again
    assert len(open(os.path.join(out, "results.jsonl")).readlines()) == 3


@pytest.mark.slow  # 18 s
def test_example_sweep_with_a_fixed_burn_in(small_set, tmp_path, capsys):
    """``sweep --chain-burn-in-epochs B`` gives every run that burn-in (the
    library's equilibrium test would need 20 epochs after the warm-up), so
    each temperature's row holds the samples of the epochs after B; ``table``
    renders the sweep and draws its plot."""
    example = _example("fashion_mnist")
    out = str(tmp_path / "out")
    example.main(["sweep", "--out", out, "--data-dir", small_set, "--priors", "he_normal",
                  "--temperatures", "1", "0.1", "--chain-epochs", "3",
                  "--chain-burn-in-epochs", "1", "--step-size", "1e-3", "--batch-size", "20",
                  "--seeds", "0"])
    rows = [json.loads(line) for line in open(os.path.join(out, "results.jsonl"))]
    assert [(r["temperature"], r["burn_in_epochs"], r.get("num_samples")) for r in rows] == [
        (1.0, 1, 2), (0.1, 1, 2)]  # epochs 2 and 3 after a burn-in of 1
    for row in rows:  # the last epoch's configurational temperature, in units of T
        (chain,) = glob.glob(os.path.join(out, "runs", f"*-{row['temperature']}-he_normal-*",
                                          "chain-0"))
        history = json.load(open(kb.runs.RunDir(chain).history))
        assert row["configurational_temperature"] == pytest.approx(
            history["configurational_temperature"][-1] / row["temperature"], abs=1e-3)
    capsys.readouterr()
    example.main(["table", "--out", out])
    table = capsys.readouterr().out
    assert "| mlp | he_normal | 0.1 |" in table
    assert os.path.getsize(os.path.join(out, "cold_posterior.png")) > 0


def test_example_weight_growth_reports_each_variable(small_set, capsys):
    """``examples/fashion_mnist_weight_growth.py``: one row per epoch with every
    variable's configurational temperature, the mean of θ·G/d over the epoch's
    steps (80 images at batch 128: one step, so the last step's virial/d), and
    each kernel's median |w|, both read from the trained model."""
    import numpy as np

    example = _example("fashion_mnist_weight_growth")
    model, rows = example.main(["--epochs", "2", "--data-dir", small_set, "--sampler", "sghmc"])
    assert [row["epoch"] for row in rows] == [1, 2]
    assert capsys.readouterr().out.count('"configurational_temperature"') == 2
    sampler = model.optimizer
    variables = sampler._trainable_variables
    last = rows[-1]
    assert list(last["configurational_temperature"]) == [v.path for v in variables]
    for v, virial in zip(variables, sampler.slots("virial")):
        expected = float(virial) / np.prod(v.shape)
        assert last["configurational_temperature"][v.path] == pytest.approx(expected, rel=1e-6)
    kernels = [v for v in variables if v.path.endswith("kernel")]
    assert list(last["median_abs_kernel"]) == [v.path for v in kernels] and len(kernels) == 3
    for v in kernels:
        assert last["median_abs_kernel"][v.path] == pytest.approx(np.median(np.abs(v.numpy())))
