"""Tests of keras_bnn.data: synthetic teacher, tf.data pipelines, tfds loaders.

The tfds loaders run under `tfds.testing.mock_data` (random examples, no
download). Their not-downloaded check looks for `<data_dir>/<dataset>/
<version>/dataset_info.json`, so the tests create that marker file.
"""

import math
import os
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from keras_bnn import data, metrics
from keras_bnn.datasets import pipeline

NUM_MOCK = 10  # examples per split served by mock_data


# --------------------------------------------------------------------------
# Synthetic teacher task.


def test_synthetic_teacher_is_deterministic_per_seed():
    first = data.synthetic_teacher(200, 100, seed=3)
    again = data.synthetic_teacher(200, 100, seed=3)
    other = data.synthetic_teacher(200, 100, seed=4)
    for a, b in zip(first[0] + first[1], again[0] + again[1]):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0][0], other[0][0])
    assert not np.array_equal(first[2]["teacher"][0], other[2]["teacher"][0])


def test_synthetic_teacher_shapes_dtypes_and_metadata():
    (x_train, y_train), (x_test, y_test), meta = data.synthetic_teacher(
        30, 20, input_dim=7, num_classes=4, hidden=(6,), seed=0)
    assert x_train.shape == (30, 7) and x_train.dtype == np.float32
    assert y_train.shape == (30,) and y_train.dtype == np.int64
    assert x_test.shape == (20, 7) and y_test.shape == (20,)
    assert [w.shape for w in meta["teacher"]] == [(7, 6), (6, 4)]
    assert meta["test_probs"].shape == (20, 4)
    np.testing.assert_allclose(meta["test_probs"],
                               data.teacher_probs(x_test, meta["teacher"]), rtol=1e-6)
    assert 0 <= y_train.min() and y_train.max() < 4


def test_synthetic_sizes_extend_the_same_sequence():
    small = data.synthetic_teacher(50, 40, seed=1)
    large = data.synthetic_teacher(500, 40, seed=1)
    np.testing.assert_array_equal(small[0][0], large[0][0][:50])
    np.testing.assert_array_equal(small[0][1], large[0][1][:50])
    for a, b in zip(small[1], large[1]):  # test set independent of num_train
        np.testing.assert_array_equal(a, b)


def test_synthetic_labels_are_drawn_from_the_teacher_and_learnable():
    n, k = 20000, 3
    (_, _), (_, y), meta = data.synthetic_teacher(10, n, num_classes=k, seed=0)
    probs = meta["test_probs"]
    # With y ~ Cat(p_i), argmax is right with probability m_i = max_k p_ik:
    # accuracy has mean mean(m) and sd sqrt(Σ m(1-m))/n; tolerance 5 sd.
    m = probs.max(axis=1)
    assert abs(metrics.accuracy(probs, y) - m.mean()) < 5 * math.sqrt(np.sum(m * (1 - m))) / n
    # Class frequencies match mean(p_k): sd sqrt(Σ p_k(1-p_k))/n, 5 sd.
    freq = np.bincount(y, minlength=k) / n
    sd = np.sqrt(np.sum(probs * (1 - probs), axis=0)) / n
    np.testing.assert_array_less(np.abs(freq - probs.mean(axis=0)), 5 * sd)
    # Learnable: the teacher beats always predicting the majority class by far
    # more than the ~0.005 sampling sd of these accuracies (seed 0: 0.71 vs 0.41).
    assert metrics.accuracy(probs, y) > freq.max() + 0.15


@pytest.mark.parametrize("kwargs, match", [
    ({"num_train": 0}, "num_train"), ({"num_test": -1}, "num_test"),
    ({"num_classes": 1}, "num_classes"), ({"input_dim": 2.5}, "input_dim"),
    ({"hidden": (4, 0)}, r"`hidden\[1\]`"), ({"logit_scale": 0.0}, "`logit_scale`"),
])
def test_synthetic_teacher_validates(kwargs, match):
    args = {"num_train": 10, "num_test": 10} | kwargs
    with pytest.raises(ValueError, match=match):
        data.synthetic_teacher(**args)


# --------------------------------------------------------------------------
# make_dataset.


def test_make_dataset_batches_and_shuffles_reproducibly():
    x = np.arange(10, dtype=np.float32)[:, None]
    y = np.arange(10)
    ds = data.make_dataset(x, y, batch_size=4)
    assert [len(b) for b, _ in ds.as_numpy_iterator()] == [4, 4, 2]
    np.testing.assert_array_equal(data.dataset_labels(ds), y)

    shuffled = data.make_dataset(x, y, batch_size=4, shuffle=True, seed=0)
    epoch1, epoch2 = data.dataset_labels(shuffled), data.dataset_labels(shuffled)
    assert sorted(epoch1) == list(y)                   # a permutation
    assert not np.array_equal(epoch1, y)               # actually shuffled
    assert not np.array_equal(epoch1, epoch2)          # reshuffled per epoch
    again = data.make_dataset(x, y, batch_size=4, shuffle=True, seed=0)
    np.testing.assert_array_equal(data.dataset_labels(again), epoch1)
    for xb, yb in shuffled.as_numpy_iterator():        # pairs stay together
        np.testing.assert_array_equal(xb[:, 0], yb)


def test_make_dataset_repeat_and_drop_remainder():
    x, y = np.zeros((10, 2), np.float32), np.arange(10)
    ds = data.make_dataset(x, y, batch_size=4, repeat=True, drop_remainder=True)
    sizes = [len(b) for b, _ in ds.take(6).as_numpy_iterator()]
    assert sizes == [4] * 6


@pytest.mark.parametrize("x, y, batch_size, match", [
    (np.zeros((5, 2)), np.zeros(4), 2, r"`y` must be non-empty, with as many examples as `x`"),
    (np.zeros((0, 2)), np.zeros(0), 2, r"`y` must be non-empty"),
    (np.zeros((5, 2)), np.zeros(5), 0, "batch_size"),
])
def test_make_dataset_validates(x, y, batch_size, match):
    with pytest.raises(ValueError, match=match):
        data.make_dataset(x, y, batch_size)


# --------------------------------------------------------------------------
# tensorflow-datasets loaders.


@pytest.fixture
def prepared_dir(tmp_path):
    """A data_dir that passes the 'prepared' check; mock_data serves examples."""
    for full_name in ("mnist/3.0.1", "cifar10/3.0.2", "imdb_reviews/plain_text/1.0.0"):
        version_dir = tmp_path / full_name
        version_dir.mkdir(parents=True)
        (version_dir / "dataset_info.json").write_text("{}")
    return str(tmp_path)


@pytest.mark.parametrize("name", ["mnist", "cifar10", "imdb"])
def test_missing_data_dir_fails_fast_with_clear_error(tmp_path, name):
    missing = str(tmp_path / "no_data_here")
    start = time.monotonic()
    with pytest.raises(FileNotFoundError) as error:
        data.load(name, data_dir=missing)
    # A download attempt takes minutes; building the tfds builder takes < 1 s.
    assert time.monotonic() - start < 10
    assert missing in str(error.value) and "tfds build" in str(error.value)
    assert not os.path.exists(missing)


def test_load_mnist_under_mock_data(prepared_dir):
    with tfds.testing.mock_data(num_examples=NUM_MOCK):
        train, test, info = data.load_mnist(data_dir=prepared_dir, batch_size=4)
        batches = list(train.as_numpy_iterator())
        labels = data.dataset_labels(test)
    assert info["num_train"] == NUM_MOCK and info["num_test"] == NUM_MOCK
    assert info["num_classes"] == 10 and info["input_shape"] == (28, 28, 1)
    assert [len(y) for _, y in batches] == [4, 4, 2]
    x, y = batches[0]
    assert x.shape == (4, 28, 28, 1) and x.dtype == np.float32 and y.dtype == np.int64
    images = np.concatenate([b for b, _ in batches])
    assert images.min() >= 0 and images.max() <= 1 and images.max() > 0.5
    # Scaled by exactly 1/255: multiplying back gives whole pixel values.
    np.testing.assert_allclose(images * 255, np.round(images * 255), atol=1e-3)
    assert labels.shape == (NUM_MOCK,) and labels.max() < 10


def _cifar_train_images(prepared_dir, augment, epochs=1):
    with tfds.testing.mock_data(num_examples=NUM_MOCK):
        train, _, info = data.load_cifar10(data_dir=prepared_dir, batch_size=4,
                                           augment=augment, seed=0)
        epochs_out = []
        for _ in range(epochs):
            batches = list(train.as_numpy_iterator())
            epochs_out.append((np.concatenate([x for x, _ in batches]),
                               np.concatenate([y for _, y in batches])))
    return epochs_out, info


def _unnormalise(images):
    # The published CIFAR-10 channel statistics, written out independently.
    mean = np.array([0.4914, 0.4822, 0.4465])
    std = np.array([0.2470, 0.2435, 0.2616])
    return (images * std + mean) * 255


def test_load_cifar10_normalises_per_channel(prepared_dir):
    [(images, labels)], info = _cifar_train_images(prepared_dir, augment=False)
    assert images.shape == (NUM_MOCK, 32, 32, 3) and images.dtype == np.float32
    assert labels.dtype == np.int64
    pixels = _unnormalise(images)
    # Inverting the normalisation gives whole pixel values in [0, 255]
    # (float32 round-off ~1e-4); wrong constants or channel order would not.
    np.testing.assert_allclose(pixels, np.round(pixels), atol=1e-3)
    assert pixels.min() > -1e-3 and pixels.max() < 255 + 1e-3
    assert info["num_train"] == NUM_MOCK


def _find_transform(image, originals):
    """Index of the original and (dy, dx, flipped) such that `image` is the
    32x32 crop at (dy, dx) of the 4-pixel zero-padded original, optionally
    flipped left-right; None if there is none."""
    for index, original in enumerate(originals):
        padded = np.pad(original, ((4, 4), (4, 4), (0, 0)))
        for dy in range(9):
            for dx in range(9):
                crop = padded[dy:dy + 32, dx:dx + 32]
                for flipped, candidate in ((False, crop), (True, crop[:, ::-1])):
                    if np.array_equal(candidate, image):
                        return index, (dy, dx, flipped)
    return None


def test_load_cifar10_augmentation_is_pad_crop_flip(prepared_dir):
    [(plain, plain_labels)], _ = _cifar_train_images(prepared_dir, augment=False)
    epochs, _ = _cifar_train_images(prepared_dir, augment=True, epochs=2)
    originals = np.round(_unnormalise(plain))
    transforms = []
    for images, labels in epochs:
        found = [_find_transform(img, originals) for img in np.round(_unnormalise(images))]
        assert all(f is not None for f in found)  # every image is a pad-crop-flip
        assert [plain_labels[i] for i, _ in found] == list(labels)  # label kept
        transforms.append(sorted(found))
    identity = (4, 4, False)
    # P(all 10 untouched) = (1/162)^10; P(both epochs equal) is as small.
    assert any(t != identity for _, t in transforms[0])
    assert transforms[0] != transforms[1]  # fresh augmentation each epoch


def test_load_cifar10_augmentation_of_an_epoch_is_repeated_by_a_fresh_pipeline(prepared_dir):
    """What a resumed run relies on: a new pipeline set to epoch 1
    (``data_epoch``) presents epoch 1's images, augmented exactly as the
    unbroken pipeline augmented them (the crop and flip are keyed on seed,
    epoch and position, not on a generator's state)."""
    epochs, _ = _cifar_train_images(prepared_dir, augment=True, epochs=2)
    with tfds.testing.mock_data(num_examples=NUM_MOCK):
        train, _, _ = data.load_cifar10(data_dir=prepared_dir, batch_size=4, augment=True,
                                        seed=0)
        pipeline.data_epoch(train).assign(1)
        batches = list(train.as_numpy_iterator())
    np.testing.assert_array_equal(np.concatenate([x for x, _ in batches]), epochs[1][0])
    np.testing.assert_array_equal(np.concatenate([y for _, y in batches]), epochs[1][1])
    assert not np.array_equal(epochs[0][0], epochs[1][0])


def test_load_imdb_under_mock_data(prepared_dir):
    with tfds.testing.mock_data(num_examples=NUM_MOCK):
        train, test, info = data.load_imdb(data_dir=prepared_dir, batch_size=4,
                                           vocab_size=50, sequence_length=12)
        x, y = next(iter(train.as_numpy_iterator()))
        test_tokens = np.concatenate([t for t, _ in test.as_numpy_iterator()])
    assert x.shape == (4, 12) and x.dtype == np.int64 and y.dtype == np.int64
    assert set(np.unique(y)) <= {0, 1}
    assert test_tokens.shape == (NUM_MOCK, 12)
    assert 0 <= test_tokens.min() and test_tokens.max() < 50
    assert np.count_nonzero(test_tokens) > 0  # words were mapped to ids
    assert info["vocab_size"] == 50 and info["input_shape"] == (12,)
    tokens = info["vectorizer"](tf.constant(["a new review"])).numpy()
    assert tokens.shape == (1, 12)


def test_a_cnn_lstm_run_takes_the_loader_s_review_length(prepared_dir, tmp_path):
    """``keras-bnn train --dataset imdb --model cnn_lstm`` built the model for
    100 tokens (the builder's default) while the loader pads to 256: every
    step failed with "expected shape=(None, 100), found shape=(None, 256)"."""
    from keras_bnn import runs

    config = runs.RunConfig(dataset="imdb", model="cnn_lstm", data_dir=prepared_dir,
                            output_dir=str(tmp_path / "run"), batch_size=4,
                            prior="he_normal").validate()
    with tfds.testing.mock_data(num_examples=NUM_MOCK):
        train, _, info = runs.load_data(config)
        x, _ = next(iter(train.as_numpy_iterator()))
    model = runs.build_model(config, info)
    assert tuple(model.inputs[0].shape) == (None, info["sequence_length"]) == (None, x.shape[1])
    assert model(x).shape == (4, 2)


def test_load_dispatches_synthetic():
    train, test, info = data.load("synthetic", batch_size=16, num_train=40,
                                  num_test=20, seed=2)
    assert info["num_train"] == 40 and info["input_shape"] == (5,)
    x, y = next(iter(train))
    assert x.shape == (16, 5) and y.dtype == tf.int64
    (_, _), (_, y_test), _ = data.synthetic_teacher(40, 20, seed=2)
    np.testing.assert_array_equal(data.dataset_labels(test), y_test)


def test_load_rejects_unknown_name_listing_allowed_ones():
    with pytest.raises(ValueError) as error:
        data.load("svhn")
    for name in ("synthetic", "mnist", "cifar10", "imdb"):
        assert name in str(error.value)


# --------------------------------------------------------------------------
# scikit-learn's bundled datasets.


@pytest.mark.parametrize("name, num_train, num_test, dim, num_classes", [
    ("digits", 1297, 500, 64, 10), ("breast_cancer", 400, 169, 30, 2),
    ("wine", 128, 50, 13, 3), ("diabetes", 342, 100, 10, None)])
def test_bundled_datasets_have_the_documented_split_and_scaling(
        name, num_train, num_test, dim, num_classes):
    (x_train, y_train), (x_test, y_test), info = data.bundled_arrays(name)
    assert x_train.shape == (num_train, dim) and x_test.shape == (num_test, dim)
    assert y_train.shape == (num_train,) and y_test.shape == (num_test,)
    assert info["num_classes"] == num_classes and info["input_shape"] == (dim,)
    assert x_train.dtype == np.float32
    if name == "digits":  # intensities 0..16 scaled into [0, 1]
        assert x_train.min() == 0.0 and x_train.max() == 1.0
    else:  # standardised with training statistics: mean 0, std 1 per feature
        np.testing.assert_allclose(x_train.mean(axis=0), 0.0, atol=1e-5)
        np.testing.assert_allclose(x_train.std(axis=0), 1.0, atol=1e-4)
    if num_classes is None:
        assert y_train.dtype == np.float32 and info["task"] == "regression"
        np.testing.assert_allclose([y_train.mean(), y_train.std()], [0.0, 1.0], atol=1e-5)
    else:
        assert y_train.dtype == np.int64
        assert set(np.unique(y_train)) == set(range(num_classes))
        # Stratified: per class, the two splits' frequencies differ by at
        # most one example's share of each split (rounding of the counts).
        freq = [np.bincount(y, minlength=num_classes) / len(y) for y in (y_train, y_test)]
        assert np.max(np.abs(freq[0] - freq[1])) <= 1.0 / num_test + 1.0 / num_train
    again = data.bundled_arrays(name)  # the split does not depend on any seed
    np.testing.assert_array_equal(again[1][0], x_test)


def test_load_serves_a_bundled_dataset_as_batches():
    train, test, info = data.load("wine", batch_size=32, seed=1)
    assert info["num_train"] == 128 and info["task"] == "classification"
    assert len(data.dataset_labels(test)) == 50
    x, y = next(iter(train))
    assert x.shape == (32, 13) and y.dtype == tf.int64
    with pytest.raises(ValueError, match="`name` must be one of 'digits', .*; got 'iris'"):
        data.bundled_arrays("iris")
