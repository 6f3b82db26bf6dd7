"""Data loaders: the validation rows do not shape the bundled sets' scaling."""

import numpy as np
import pytest
import sklearn.datasets
from sklearn.model_selection import train_test_split

from keras_bnn import data
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
