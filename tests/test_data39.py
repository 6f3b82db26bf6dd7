"""Data loaders: the validation rows do not shape the bundled sets' scaling, npy labels
are bounded, and ``seed=None`` means a random seed in every loader."""

import numpy as np
import pytest
import sklearn.datasets
from sklearn.model_selection import train_test_split

from fashion_mnist_files import write_set

from keras_bnn import data
from keras_bnn import fashion_mnist as fm
from keras_bnn import runs
from keras_bnn.datasets.bundled import BUNDLED, BUNDLED_SPLIT_SEED
from keras_bnn.datasets.pipeline import validation_rows

SPLIT = {"validation_split": 0.2, "data_seed": 0}


def _held_out_raw_row(name, fraction):
    """The index, in scikit-learn's array, of a training row the split holds out."""
    loader, task, num_test, _ = BUNDLED[name]
    _, y = getattr(sklearn.datasets, loader)(return_X_y=True)
    rows = train_test_split(np.arange(len(y)), test_size=num_test,
                            random_state=BUNDLED_SPLIT_SEED,
                            stratify=None if task == "regression" else y)[0]
    return rows[validation_rows(len(rows), fraction)[1][0]]


def _split_arrays(name):
    """The (x, y) of the training and held-out pipelines of a run on the split."""
    train, held, _ = runs.split_data(runs.RunConfig(dataset=name), SPLIT)
    return [tuple(np.concatenate(part) for part in zip(*ds.as_numpy_iterator()))
            for ds in (train, held)]


@pytest.mark.parametrize("name", ["wine", "breast_cancer", "diabetes"])
def test_a_validation_row_does_not_change_the_rows_trained_on(name, monkeypatch):
    """Prior selection and sweeps score on held-out training rows, but their scaling
    came from the whole training split: on dev, scaling one held-out row's features by
    1000 changed every scaled value of the rows trained on (wine: 1326 of 1326, the first
    1.3138 -> -0.0878; breast_cancer 9600 of 9600; diabetes 2740 of 2740)."""
    before = _split_arrays(name)
    loader = BUNDLED[name][0]
    original = getattr(sklearn.datasets, loader)
    row = _held_out_raw_row(name, SPLIT["validation_split"])

    def changed(return_X_y):
        x, y = original(return_X_y=return_X_y)
        x, y = x.copy(), y.astype(float if name == "diabetes" else y.dtype)
        x[row] *= 1000.0
        if name == "diabetes":
            y[row] *= 1000.0
        return x, y

    monkeypatch.setattr(sklearn.datasets, loader, changed)
    after = _split_arrays(name)
    np.testing.assert_array_equal(after[0][0], before[0][0])  # training features
    np.testing.assert_array_equal(after[0][1], before[0][1])  # training labels/targets
    assert not np.array_equal(after[1][0], before[1][0])      # the changed row is held out


@pytest.mark.parametrize("name", ["wine", "diabetes"])
def test_the_split_is_scaled_with_the_kept_rows_statistics(name):
    (x, y), (x_val, y_val), info = data.bundled_arrays(name, validation_split=0.2)
    whole, _, full_info = data.bundled_arrays(name)
    kept, held = validation_rows(full_info["num_train"], 0.2)
    assert info["num_train"] == len(kept) == len(x) and info["num_test"] == len(held)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(x.std(axis=0), 1.0, atol=1e-5)
    # The same rows as before, in the same order: the whole split's rows rescaled.
    raw = whole[0] * full_info["feature_std"] + full_info["feature_mean"]
    np.testing.assert_allclose(x, (raw[kept] - info["feature_mean"]) / info["feature_std"],
                               atol=1e-4)
    np.testing.assert_allclose(x_val, (raw[held] - info["feature_mean"]) / info["feature_std"],
                               atol=1e-4)
    if name == "diabetes":
        np.testing.assert_allclose([y.mean(), y.std()], [0.0, 1.0], atol=1e-5)
        target = whole[1] * full_info["target_std"] + full_info["target_mean"]
        np.testing.assert_allclose(y_val * info["target_std"] + info["target_mean"],
                                   target[held], rtol=1e-5)


@pytest.mark.parametrize("split", [0.0, 1.0, 0.001, "0.2"])
def test_a_bad_validation_split_is_named(split):
    with pytest.raises(ValueError, match=r"bundled_arrays: `validation_split` must "):
        data.bundled_arrays("wine", validation_split=split)


def _npy_dir(directory, y_train, y_test):
    directory.mkdir()
    arrays = {"x_train": np.ones((len(y_train), 2)), "y_train": np.asarray(y_train),
              "x_test": np.ones((len(y_test), 2)), "y_test": np.asarray(y_test)}
    for key, array in arrays.items():
        np.save(directory / f"{key}.npy", array)
    return directory


@pytest.mark.parametrize("which", ["y_train", "y_test"])
def test_a_huge_npy_label_is_refused_with_its_file_and_row(tmp_path, which):
    """On dev a label 10**12 gave num_classes 1000000000001 (a head of that many units)."""
    labels = {"y_train": [0, 1, 0, 1, 1], "y_test": [1, 0, 1]}
    labels[which] = list(labels[which])
    labels[which][2] = 10**12
    directory = _npy_dir(tmp_path / "npy", **labels)
    with pytest.raises(ValueError, match=rf"{which}.npy` must hold class labels 0, 1, ..., K-1 "
                                         r"\(K = the largest label \+ 1\), at least half of "
                                         r"which occur .*; got label 1000000000000 in row 2: "
                                         r"1000000000001 classes for 3 distinct labels"):
        data.npy_arrays(directory)


def test_npy_labels_may_leave_up_to_half_of_the_classes_out(tmp_path):
    """K = 2 x distinct labels is taken (e.g. 1-based labels, a class absent); one more is not."""
    _, _, info = data.npy_arrays(_npy_dir(tmp_path / "a", [1, 3, 1], [3]))
    assert info["num_classes"] == 4
    with pytest.raises(ValueError, match=r"got label 4 in row 1: 5 classes for 2 distinct"):
        data.npy_arrays(_npy_dir(tmp_path / "b", [1, 4, 1], [1]))


def test_synthetic_seed_none_draws_a_recorded_seed():
    """On dev seed=None was refused by the synthetic task (and Fashion-MNIST) but meant a
    random order for the bundled, npy and tfds loaders."""
    (x, y), (x_test, _), info = data.synthetic_teacher(20, 5, seed=None)
    assert isinstance(info["seed"], int) and 0 <= info["seed"] < 2**31
    (x2, y2), (x_test2, _), _ = data.synthetic_teacher(20, 5, seed=info["seed"])
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_array_equal(x_test, x_test2)
    seeds = {data.synthetic_teacher(2, 1, seed=None)[2]["seed"] for _ in range(4)}
    assert len(seeds) > 1  # 4 draws of 2**31 seeds: equal with probability < 1e-8
    train, _, info = data.load("synthetic", batch_size=32, num_train=20, num_test=5, seed=None)
    assert sum(len(batch[1]) for batch in train) == 20 and isinstance(info["seed"], int)


def test_fashion_mnist_seed_none_draws_a_recorded_seed(tmp_path, monkeypatch):
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    write_set(tmp_path / "mine")
    (x, y), (x_val, y_val), _, info = fm.fashion_mnist_arrays(
        tmp_path / "mine", validation_split=0.25, seed=None)
    assert isinstance(info["seed"], int) and 0 <= info["seed"] < 2**31
    again = fm.fashion_mnist_arrays(tmp_path / "mine", validation_split=0.25, seed=info["seed"])
    np.testing.assert_array_equal(again[1][0], x_val)
    np.testing.assert_array_equal(again[0][1], y)
    train, _, info = fm.load_fashion_mnist(8, validation_split=0.25, seed=None,
                                           data_dir=tmp_path / "mine")
    assert sum(len(batch[1]) for batch in train) == 15 and isinstance(info["seed"], int)
    with pytest.raises(ValueError, match=r"fashion_mnist_arrays: `seed` must be an int in "
                                         r"\[0, 2147483647\]"):
        fm.fashion_mnist_arrays(tmp_path / "mine", seed=True)
