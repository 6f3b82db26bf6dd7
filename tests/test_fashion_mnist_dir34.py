"""Fashion-MNIST's ``data_dir``: never passed over silently, ungzipped files
read, never a set mixed from two places (on small IDX files the tests write).

Until 2026-11-30 a ``data_dir`` that existed but lacked a file, or held the
four files ungzipped (as torchvision and Kaggle keep them), was passed over
for Keras' cache or Debian's copy without a word.
"""

import gzip
import os
import warnings

import numpy as np
import pytest

from fashion_mnist_files import write_set

import keras_bnn as kb
from keras_bnn import fashion_mnist as fm


@pytest.fixture
def places(monkeypatch, tmp_path):
    """Keras' cache and Debian's directory point into ``tmp_path``; returns
    the three directories (data_dir, cache, Debian), none of them created."""
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    return tmp_path / "mine", tmp_path / "keras-cache", tmp_path / "debian"


def gunzip(directory, keys=tuple(fm.FILES)):
    """Replaces the files of ``keys`` in ``directory`` by ungzipped copies
    under the same names without ``.gz``."""
    for key in keys:
        path = directory / fm.FILES[key]
        (directory / fm.FILES[key][:-3]).write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()


def assert_read(arrays, data):
    """``arrays`` (from ``fashion_mnist_arrays``, no validation split, seed 0)
    hold ``data``: the training split in the order of the seed's permutation."""
    (x, y), _, (xt, yt), _ = arrays
    order = np.random.default_rng(0).permutation(len(data["y_train"]))
    np.testing.assert_array_equal(y, data["y_train"][order])
    np.testing.assert_array_equal(yt, data["y_test"])
    np.testing.assert_allclose(x[..., 0] * 255.0, data["x_train"][order], atol=1e-4)
    np.testing.assert_allclose(xt[..., 0] * 255.0, data["x_test"], atol=1e-4)


@pytest.mark.parametrize("fallback", ["keras-cache", "debian"])
def test_a_data_dir_that_lacks_a_file_warns_and_names_the_place_read(places, fallback):
    mine, cache, debian = places
    write_set(mine, seed=1)
    os.remove(mine / fm.FILES["y_test"])
    os.remove(mine / fm.FILES["x_train"])
    other = write_set(cache if fallback == "keras-cache" else debian, seed=2)
    with pytest.warns(fm.DataDirWarning) as caught:
        arrays = fm.fashion_mnist_arrays(mine)
    message = str(caught[0].message)
    assert f"`data_dir` '{mine}' lacks {fm.FILES['x_train']}, {fm.FILES['y_test']}" in message
    assert f"read from '{cache if fallback == 'keras-cache' else debian}'" in message
    # All four from the place read, even the two that data_dir holds: never mixed.
    assert_read(arrays, other)
    assert arrays[3]["data_dir"] == str(cache if fallback == "keras-cache" else debian)
    assert issubclass(kb.DataDirWarning, UserWarning) and kb.DataDirWarning is fm.DataDirWarning


def test_an_empty_data_dir_names_all_four_files(places):
    mine, cache, _ = places
    mine.mkdir()
    write_set(cache)
    with pytest.warns(fm.DataDirWarning, match=", ".join(fm.FILES.values())):
        fm.find_files(mine)


@pytest.mark.parametrize("keys", [tuple(fm.FILES), ("x_train", "y_test")])
def test_ungzipped_files_with_the_standard_names_are_read_from_data_dir(places, keys):
    mine, cache, _ = places
    data = write_set(mine, seed=1)
    gunzip(mine, keys)
    write_set(cache, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        arrays = fm.fashion_mnist_arrays(mine)
    assert_read(arrays, data)
    assert arrays[3]["data_dir"] == str(mine)


def test_the_gzipped_file_is_read_when_both_are_there(places):
    mine, _, _ = places
    write_set(mine, seed=1)
    gunzip(mine)
    data = write_set(mine, seed=2)  # the .gz files now differ from the ungzipped ones
    assert_read(fm.fashion_mnist_arrays(mine), data)


def test_a_damaged_ungzipped_file_is_named(places):
    mine, _, _ = places
    write_set(mine)
    gunzip(mine, ["x_test"])
    path = mine / fm.FILES["x_test"][:-3]
    path.write_bytes(bytes([0, 0, 0x08, 1, 0, 0, 0, 9, 7]))
    with pytest.raises(ValueError, match=f"{path}: 1 data bytes"):
        fm.fashion_mnist_arrays(mine)


def test_a_set_split_between_data_dir_and_the_cache_is_not_mixed(places):
    mine, cache, debian = places
    write_set(mine)
    write_set(cache)
    for key in ("x_test", "y_test"):
        os.remove(mine / fm.FILES[key])
    for key in ("x_train", "y_train"):
        os.remove(cache / fm.FILES[key])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FileNotFoundError) as caught:
            fm.fashion_mnist_arrays(mine)
    message = str(caught.value)
    assert f"`data_dir` '{mine}' lacks {fm.FILES['x_test']}, {fm.FILES['y_test']}" in message
    assert all(str(place) in message for place in (mine, cache, debian))


def test_a_complete_data_dir_reads_without_a_warning(places):
    mine, cache, _ = places
    data = write_set(mine, seed=1)
    write_set(cache, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_read(fm.fashion_mnist_arrays(mine), data)
