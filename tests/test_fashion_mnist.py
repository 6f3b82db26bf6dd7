"""keras_bnn.fashion_mnist: reading the four IDX files, on small files the tests write."""

import gzip
import os

import numpy as np
import pytest

from fashion_mnist_files import write_set as _write_set

from keras_bnn import fashion_mnist as fm


@pytest.fixture
def no_default_places(monkeypatch, tmp_path):
    """Keras' cache and Debian's directory point to empty places."""
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))


def test_arrays_are_read_scaled_and_split(tmp_path, no_default_places):
    data = _write_set(tmp_path / "mine")
    (x, y), (xv, yv), (xt, yt), info = fm.fashion_mnist_arrays(tmp_path / "mine",
                                                              validation_split=0.25, seed=3)
    assert x.shape == (15, 28, 28, 1) and xv.shape == (5, 28, 28, 1) and xt.shape == (6, 28, 28, 1)
    assert x.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 <= x.min() and x.max() <= 1.0
    # The split is a permutation of the training images: together they are all of them.
    order = np.random.default_rng(3).permutation(20)
    np.testing.assert_array_equal(np.concatenate([y, yv]), data["y_train"][order])
    np.testing.assert_allclose(xv[..., 0] * 255.0, data["x_train"][order[15:]], atol=1e-4)
    np.testing.assert_array_equal(yt, data["y_test"])
    assert info["num_train"] == 15 and info["num_validation"] == 5 and info["num_test"] == 6
    assert info["data_dir"] == str(tmp_path / "mine")


def test_search_order_is_data_dir_then_keras_cache_then_debian(tmp_path, no_default_places):
    _write_set(tmp_path / "debian", num_train=4)
    assert fm.fashion_mnist_arrays()[3]["num_train"] == 4
    _write_set(tmp_path / "keras-cache", num_train=5)
    assert fm.fashion_mnist_arrays()[3]["num_train"] == 5
    _write_set(tmp_path / "mine", num_train=6)
    assert fm.fashion_mnist_arrays(tmp_path / "mine")[3]["num_train"] == 6


def test_missing_files_name_every_place_and_the_remedies(tmp_path, no_default_places):
    _write_set(tmp_path / "mine")
    os.remove(tmp_path / "mine" / fm.FILES["y_test"])
    with pytest.raises(FileNotFoundError) as caught:
        fm.fashion_mnist_arrays(tmp_path / "mine")
    message = str(caught.value)
    for place in (tmp_path / "mine", tmp_path / "keras-cache", tmp_path / "debian"):
        assert str(place) in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "keras.datasets.fashion_mnist.load_data()" in message


def test_a_data_dir_that_does_not_exist_is_refused(tmp_path, no_default_places):
    """A misspelt --data-dir was passed over for Keras' cache or Debian's copy."""
    _write_set(tmp_path / "keras-cache")
    with pytest.raises(FileNotFoundError, match=r"`data_dir` '.*/misspelt' is not a directory"):
        fm.fashion_mnist_arrays(tmp_path / "misspelt")


def test_a_bad_seed_names_the_argument(tmp_path, no_default_places):
    _write_set(tmp_path / "mine")
    with pytest.raises(ValueError, match="fashion_mnist_arrays: `seed` must be an int"):
        fm.fashion_mnist_arrays(tmp_path / "mine", validation_split=0.1, seed=-1)


@pytest.mark.parametrize("damage", ["not gzip", "bad magic", "short data"])
def test_a_damaged_file_is_named(tmp_path, no_default_places, damage):
    _write_set(tmp_path / "mine")
    path = tmp_path / "mine" / fm.FILES["x_train"]
    if damage == "not gzip":
        path.write_bytes(b"hello")
    elif damage == "bad magic":
        with gzip.open(path, "wb") as handle:
            handle.write(bytes([0, 0, 0x0D, 1, 0, 0, 0, 1, 7]))
    else:
        with gzip.open(path, "wb") as handle:
            handle.write(bytes([0, 0, 0x08, 1, 0, 0, 0, 9, 7]))
    with pytest.raises(ValueError, match=str(path)):
        fm.fashion_mnist_arrays(tmp_path / "mine")


@pytest.mark.parametrize("split", [-0.1, 1.0, "0.2"])
def test_a_bad_validation_split_names_the_argument(tmp_path, no_default_places, split):
    _write_set(tmp_path / "mine")
    with pytest.raises(ValueError, match="`validation_split`"):
        fm.fashion_mnist_arrays(tmp_path / "mine", validation_split=split)


@pytest.mark.slow
def test_the_real_files_when_installed():
    """The real data (Debian's dataset-fashion-mnist, installed by .ci/run
    where it can be): 60 000 + 10 000 images, balanced classes."""
    try:
        place = fm.find_files()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    (x, y), _, (xt, yt), info = fm.fashion_mnist_arrays()
    assert info["data_dir"] == place
    assert x.shape == (60000, 28, 28, 1) and xt.shape == (10000, 28, 28, 1)
    np.testing.assert_array_equal(np.bincount(y), [6000] * 10)
    np.testing.assert_array_equal(np.bincount(yt), [1000] * 10)
