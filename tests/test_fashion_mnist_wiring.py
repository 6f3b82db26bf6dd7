"""Fashion-MNIST through kb.data.load and the keras-bnn command, on small written files."""

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


@pytest.mark.parametrize("model", ["mlp", "cnn"])
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
