"""kb.data.make_dataset on Keras' forms of several inputs and outputs, and the
Fashion-MNIST loader's refusals of labels and validation splits it cannot serve."""

import numpy as np
import pytest

from fashion_mnist_files import write_idx, write_set

from keras_bnn import data
from keras_bnn import fashion_mnist as fm


def _rows(n=10):
    a = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return a, -a[:, :2], np.arange(n)


@pytest.mark.parametrize("form", ["dict", "list", "tuple"])
def test_make_dataset_takes_several_inputs_as_keras_fit_does(form):
    """A dict of arrays by input name, or a list or tuple in order (what
    ``fit(x=...)`` takes for a two-input model), was read by np.asarray as
    one object (``\\`y\\` must be non-empty ...; got shapes () (x)``) or
    stacked into one input of shape (2, n, 3)."""
    a, b, y = _rows()
    x = {"dict": {"a": a, "b": b}, "list": [a, b], "tuple": (a, b)}[form]
    ds = data.make_dataset(x, {"out": y}, 4, shuffle=True, seed=1,
                           sample_weight={"out": np.ones(10)})
    seen = []
    for xb, yb, wb in ds.as_numpy_iterator():
        first, second = (xb["a"], xb["b"]) if form == "dict" else xb
        rows = yb["out"]
        np.testing.assert_array_equal(first, a[rows])     # inputs stay with their labels
        np.testing.assert_array_equal(second, b[rows])
        assert wb["out"].dtype == np.float32 and wb["out"].shape == rows.shape
        seen.extend(rows)
    assert sorted(seen) == list(range(10))


def test_two_same_shaped_inputs_of_two_examples_are_not_stacked():
    """[a, b] with a, b of shape (2, 3) and two labels became one input of
    shape (None, 2, 3): a silently wrong dataset."""
    a, b, y = _rows(2)
    spec = data.make_dataset([a, a], y, 2).element_spec[0]
    assert isinstance(spec, tuple) and [tuple(s.shape) for s in spec] == [(None, 3)] * 2


@pytest.mark.parametrize("x, y, weights, match", [
    ({"a": np.zeros((10, 3)), "b": np.zeros((9, 3))}, np.zeros(10), None,
     r"`x` must hold arrays of one length"),
    ([np.zeros((10, 3)), np.zeros((10, 2))], {"o": np.zeros(9)}, None,
     r"`y` must be non-empty, with as many examples as `x`; got shapes \(9,\) \(y\) for 10"),
    (np.zeros((10, 3)), np.zeros(10), [np.ones(10), np.ones(8)],
     r"`sample_weight` must have one weight per example of `x` \(\[10\] or \[10, ...\]\)"),
])
def test_a_nest_of_other_lengths_names_its_argument(x, y, weights, match):
    with pytest.raises(ValueError, match=match):
        data.make_dataset(x, y, 4, sample_weight=weights)


@pytest.mark.parametrize("shuffle", [False, True])
def test_drop_remainder_with_a_batch_larger_than_the_data_is_refused(shuffle):
    """It served a dataset of no batch at all (fit then found no data)."""
    a, _, y = _rows()
    assert len(list(data.make_dataset(a, y, 100, shuffle=shuffle, seed=0))) == 1
    with pytest.raises(ValueError, match=r"`batch_size` must be at most the 10 examples with "
                                         r"drop_remainder=True .*; got 100"):
        data.make_dataset(a, y, 100, shuffle=shuffle, seed=0, drop_remainder=True)


def test_a_seed_beyond_int64_names_seed():
    """It raised TensorFlow's 'Can't convert Python sequence with out-of-range integer'."""
    a, _, y = _rows()
    with pytest.raises(ValueError, match=r"`seed` must be an int in \[0, 9223372036854775807\]"):
        data.make_dataset(a, y, 4, shuffle=True, seed=2**64)


@pytest.fixture
def fashion_dir(monkeypatch, tmp_path):
    """Four small IDX files in tmp_path/mine; Keras' cache and Debian's directory empty."""
    monkeypatch.setattr(fm, "KERAS_CACHE", str(tmp_path / "keras-cache"))
    monkeypatch.setattr(fm, "DEBIAN_DIR", str(tmp_path / "debian"))
    write_set(tmp_path / "mine", num_train=10)
    return tmp_path / "mine"


@pytest.mark.parametrize("split", ["train", "test"])
def test_fashion_mnist_labels_outside_the_ten_classes_are_refused(fashion_dir, split):
    """A label file holding 12 was served as label 12 with num_classes 10."""
    labels = np.arange(10 if split == "train" else 6) % 10
    labels[3] = 12
    path = fashion_dir / fm.FILES[f"y_{split}"]
    write_idx(path, labels)
    with pytest.raises(ValueError, match=rf"`data_dir` must hold class labels 0..9 \({split} "
                                         rf"split\); got label 12 in {path}"):
        fm.fashion_mnist_arrays(fashion_dir)


@pytest.mark.parametrize("split, held", [(0.96, 10), (0.04, 0)])
def test_a_validation_split_that_holds_out_no_image_or_all_is_refused(fashion_dir, split, held):
    """0.96 of 10 images held out all 10 (num_train 0; load_fashion_mnist then
    failed naming `y`), 0.04 none (validation_ds None though asked for)."""
    with pytest.raises(ValueError, match=r"`validation_split` must hold out between 1 and 9 of "
                                         rf"the 10 training images .*; got {split} \({held} "):
        fm.load_fashion_mnist(4, validation_split=split, data_dir=fashion_dir)
    _, (x_val, _), _, info = fm.fashion_mnist_arrays(fashion_dir, validation_split=0.1)
    assert info["num_validation"] == len(x_val) == 1


def test_a_list_of_numbers_or_numpy_scalars_is_still_one_array():
    labels = [np.int64(k % 3) for k in range(6)]
    ds = data.make_dataset([[float(k)] for k in range(6)], labels, 6)
    xb, yb = next(ds.as_numpy_iterator())
    assert xb.shape == (6, 1) and yb.tolist() == [0, 1, 2, 0, 1, 2]


def _npy_dir(directory, **replace):
    arrays = {"x_train": np.ones((6, 2)), "y_train": np.arange(6) % 2,
              "x_test": np.ones((3, 2)), "y_test": np.arange(3) % 2, **replace}
    directory.mkdir()
    for name, array in arrays.items():
        np.save(directory / f"{name}.npy", array)
    return directory


def test_npy_complex_features_are_refused_not_cut_to_their_real_part(tmp_path):
    """x_train of 0.5 + 1j was served as 0.5 (numpy's ComplexWarning only)."""
    directory = _npy_dir(tmp_path / "npy", x_train=np.full((6, 2), 0.5 + 1j))
    with pytest.raises(ValueError, match=r"x_train.npy` must hold numbers: integers, floats or "
                                         r"bools \(not complex\); got dtype complex128"):
        data.npy_arrays(directory)


def test_npy_features_beyond_float32_are_named_as_such(tmp_path):
    """1e300 (finite in the file) was reported as '12 NaN or infinite values'."""
    directory = _npy_dir(tmp_path / "npy", x_train=np.full((6, 2), 1e300))
    with pytest.raises(ValueError, match=r"x_train.npy` must hold finite numbers within "
                                         r"float32's range .*; got 12 NaN, infinite or larger"):
        data.npy_arrays(directory)


@pytest.mark.parametrize("seed", [-1, 1.5, True])
def test_synthetic_teacher_names_a_bad_seed(seed):
    """-1 and 1.5 raised numpy's 'expected non-negative integer' or a TypeError
    naming SeedSequence, True served seed 1 (None draws a recorded seed: test_data39)."""
    with pytest.raises(ValueError, match=r"synthetic_teacher: `seed` must be an int in "
                                         r"\[0, 9223372036854775807\]"):
        data.synthetic_teacher(5, 5, seed=seed)
