"""Your own arrays on the command line: dataset "npy", four .npy files in --data-dir.

The data are scikit-learn's iris (classification) and diabetes (regression),
saved as a user would save theirs; the split is theirs, not the library's.
"""

import json
import os

import numpy as np
import pytest
import sklearn.datasets
import tensorflow as tf

from keras_bnn import cli, data as data_lib, runs
from keras_bnn.datasets.npy_files import NPY_FILES

QUICK = ["--batch-size", "30", "--verbose", "0", "--prior", "he_normal"]


def _save(directory, x_train, y_train, x_test, y_test):
    os.makedirs(directory, exist_ok=True)
    for name, array in zip(NPY_FILES, (x_train, y_train, x_test, y_test)):
        np.save(os.path.join(directory, name), array)
    return str(directory)


def _iris(directory):
    x, y = sklearn.datasets.load_iris(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    x = (x - x.mean(axis=0)) / x.std(axis=0)
    x, y = x[order], y[order]
    return _save(directory, x[:120], y[:120], x[120:], y[120:])


def _run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_loader_reads_labels_and_targets_by_their_dtype(tmp_path):
    (x, y), (xt, yt), info = data_lib.npy_arrays(_iris(tmp_path / "iris"))
    assert (x.shape, xt.shape, x.dtype, y.dtype) == ((120, 4), (30, 4), np.float32, np.int64)
    assert info["task"] == "classification" and info["num_classes"] == 3
    assert (info["num_train"], info["num_test"], info["input_shape"]) == (120, 30, (4,))
    rng = np.random.default_rng(1)
    # Classes counted over both splits: a class seen only in the test split still has a logit.
    labels = _save(tmp_path / "rare", rng.normal(size=(6, 2)), np.array([0, 1, 0, 1, 0, 1]),
                   rng.normal(size=(2, 2)), np.array([2, 0]))
    assert data_lib.npy_arrays(labels)[2]["num_classes"] == 3
    targets = _save(tmp_path / "reg", rng.normal(size=(8, 3)), rng.normal(size=8),
                    rng.normal(size=(4, 3)), rng.normal(size=4))
    (_, y), _, info = data_lib.npy_arrays(targets)
    assert info["task"] == "regression" and info["num_classes"] is None and y.dtype == np.float32
    train_ds, test_ds, _ = data_lib.load("npy", batch_size=4, data_dir=targets, seed=3)
    assert [int(b[0].shape[0]) for b in train_ds] == [4, 4]
    np.testing.assert_array_equal(np.concatenate([b[1].numpy() for b in test_ds]),
                                  np.load(os.path.join(targets, "y_test.npy")).astype("float32"))


def _bad(tmp_path, **replace):
    rng = np.random.default_rng(0)
    arrays = dict(x_train=rng.normal(size=(6, 2)), y_train=np.arange(6) % 2,
                  x_test=rng.normal(size=(3, 2)), y_test=np.array([0, 1, 1]))
    arrays.update(replace)
    return _save(tmp_path / "bad", *arrays.values())


@pytest.mark.parametrize("replace, message", [
    (dict(x_test=np.zeros((3, 5))), "x_test.npy` must hold examples of"),
    (dict(y_test=np.array([0.5, 1.0, 0.0])), "y_test.npy` must hold integer labels"),
    (dict(y_train=np.linspace(0, 1, 6)), "y_test.npy` must hold float targets"),
    (dict(y_train=np.array([0, -1, 0, 1, 0, 1])), "y_train.npy` must hold class labels 0, 1"),
    (dict(x_train=np.full((6, 2), np.nan)), "x_train.npy` must hold finite numbers"),
    (dict(y_train=np.arange(4)), "must hold one example per row each"),
    (dict(x_train=np.array(["a"] * 6)), "x_train.npy` must hold numbers"),
])
def test_bad_files_are_named_with_what_they_must_hold(tmp_path, replace, message):
    with pytest.raises(ValueError, match=message):
        data_lib.npy_arrays(_bad(tmp_path, **replace))


def test_missing_files_and_a_missing_directory_are_named(tmp_path):
    directory = _bad(tmp_path)
    os.remove(os.path.join(directory, "x_test.npy"))
    os.remove(os.path.join(directory, "y_test.npy"))
    with pytest.raises(FileNotFoundError, match="lacks x_test.npy, y_test.npy"):
        data_lib.npy_arrays(directory)
    with pytest.raises(ValueError, match="`data_dir` must name the directory holding"):
        data_lib.npy_arrays(None)
    np.save(os.path.join(directory, "x_test.npy"), np.array([{"a": 1}] * 3), allow_pickle=True)
    np.save(os.path.join(directory, "y_test.npy"), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="must be a .npy file of numbers"):
        data_lib.npy_arrays(directory)


def test_the_command_line_refuses_npy_without_its_directory(capsys):
    code, _, err = _run(["train", "--dataset", "npy", "--epochs", "2", *QUICK], capsys)
    assert code == 2 and "`data_dir` must name the directory holding x_train.npy" in err


@pytest.mark.filterwarnings("ignore::keras_bnn.WarmupSampleWarning")  # 5 epochs: in warm-up
def test_train_evaluate_export_on_your_own_npy_files(tmp_path, capsys, monkeypatch):
    data_dir, run_dir = _iris(tmp_path / "iris"), str(tmp_path / "run")
    monkeypatch.chdir(tmp_path)  # a relative --data-dir, read again from another directory
    code, out, err = _run(["train", "--dataset", "npy", "--data-dir", "iris", "--sampler",
                           "sghmc", "--epochs", "5", "--burn-in-epochs", "1", "--output-dir",
                           run_dir, *QUICK], capsys)
    assert code == 0, err
    monkeypatch.chdir(run_dir)
    code, out, err = _run(["evaluate", "--run-dir", run_dir], capsys)
    assert code == 0, err
    metrics = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert metrics["num_samples"] == 4 and "ensemble of 4" in out
    assert metrics["ensemble"]["nll"] > 0
    # Scored on the user's 30 test rows: their labels, in their order.
    np.testing.assert_array_equal(runs.evaluate(run_dir)["test_labels"],
                                  np.load(os.path.join(data_dir, "y_test.npy")))
    export_dir = str(tmp_path / "exported")
    code, out, err = _run(["export", "--run-dir", run_dir, "--export-dir", export_dir], capsys)
    assert code == 0, err
    serve = tf.saved_model.load(os.path.join(export_dir, "1")).signatures["serving_default"]
    probs = serve(inputs=tf.constant(np.load(os.path.join(data_dir, "x_test.npy")),
                                     tf.float32))["probabilities"].numpy()
    assert probs.shape == (30, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    # The run recorded its files' SHA-256: a test set changed since is refused, not scored.
    recorded = json.load(open(os.path.join(run_dir, "data_files.json")))
    assert sorted(recorded) == sorted(NPY_FILES)
    np.save(os.path.join(data_dir, "y_test.npy"), np.zeros(30, np.int64))
    code, _, err = _run(["evaluate", "--run-dir", run_dir], capsys)
    assert code == 2 and "whose y_test.npy changed since" in err and "data_files.json" in err


def test_float_targets_are_a_regression_and_refuse_a_classification_likelihood(
        tmp_path, capsys):
    x, y = sklearn.datasets.load_diabetes(return_X_y=True)
    y = (y - y.mean()) / y.std()
    data_dir = _save(tmp_path / "diabetes", x[:342], y[:342], x[342:], y[342:])
    code, _, err = _run(["train", "--dataset", "npy", "--data-dir", data_dir, "--likelihood",
                         "categorical", "--sampler", "sgd", "--epochs", "2", "--output-dir",
                         str(tmp_path / "refused"), *QUICK], capsys)
    assert code == 2 and "`likelihood` must be 'gaussian' (or left unset)" in err
    run_dir = str(tmp_path / "run")
    code, _, err = _run(["train", "--dataset", "npy", "--data-dir", data_dir, "--sampler", "sgd",
                         "--epochs", "3", "--output-dir", run_dir, *QUICK], capsys)
    assert code == 0, err
    code, out, err = _run(["evaluate", "--run-dir", run_dir], capsys)
    assert code == 0, err
    metrics = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert metrics["likelihood"] == "gaussian" and "rmse" in out
    assert 0 < metrics["single_sample"]["rmse"] < 1.5  # standardised targets: sd 1


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::keras_bnn.WarmupSampleWarning")  # 6 epochs: in warm-up
def test_prior_selection_and_chain_processes_read_the_files_again(tmp_path, capsys):
    """prior="auto" selects on a validation split of the files' training rows (as on a
    bundled dataset), and each chain process reads the files from the recorded directory."""
    data_dir, run_dir = _iris(tmp_path / "iris"), str(tmp_path / "run")
    code, out, err = _run(["train", "--dataset", "npy", "--data-dir", data_dir, "--sampler",
                           "sghmc", "--epochs", "6", "--burn-in-epochs", "2", "--chains", "2",
                           "--processes", "2", "--batch-size", "30", "--verbose", "0",
                           "--output-dir", run_dir], capsys)
    assert code == 0, err
    selection = json.load(open(os.path.join(run_dir, "prior_selection.json")))
    assert len(selection["candidates"]) == 2 and selection["num_validation"] == 24
    assert selection["prior"] in ("he_normal", "student_t")
    digests = json.load(open(os.path.join(run_dir, "data_files.json")))
    for chain in ("chain-0", "chain-1"):
        assert json.load(open(os.path.join(run_dir, chain, "data_files.json"))) == digests
        config = json.load(open(os.path.join(run_dir, chain, "config.json")))
        assert (config["dataset"], config["data_dir"]) == ("npy", data_dir)
        assert config["prior"] == selection["prior"]
    code, out, err = _run(["evaluate", "--run-dir", run_dir], capsys)
    assert code == 0, err
    assert json.load(open(os.path.join(run_dir, "metrics.json")))["num_chains"] == 2
