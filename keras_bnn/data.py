"""Datasets: scikit-learn's bundled sets, the synthetic teacher task and
tensorflow-datasets loaders.

Every loader returns ``(train_ds, test_ds, info)``: batched, prefetched
`tf.data.Dataset`s of ``(inputs, int64 labels)`` (the training set reshuffled
every epoch, the test set in a fixed order) and a dict ``info`` with at least
"name", "num_train" (pass it as ``train_size``), "num_test", "num_classes" and
"input_shape". `load(name, ...)` dispatches on the name. Every loader's
``seed`` may be None: a seed drawn at random for the call, so another
training order every call (and, where the seed also draws data, other data:
the synthetic task, Fashion-MNIST's held-out images; their info records the
seed drawn).

`load_bundled` serves the small real datasets that scikit-learn ships inside
its package (no download): digits, breast_cancer, wine (classification) and
diabetes (regression), with a fixed split and scaling (see BUNDLED).
`load_npy` serves your own arrays: four `.npy` files in a directory
(`NPY_FILES`; see `keras_bnn.datasets.npy_files`).

The tensorflow-datasets loaders never download unless ``download=True``: a
data directory that does not hold the prepared dataset raises
FileNotFoundError at once, instead of tfds retrying a download for minutes.

Importing this module does not import TensorFlow: the array functions
(`synthetic_teacher`, `bundled_arrays`, `teacher_probs`) are numpy and
scikit-learn, and the functions that build `tf.data` pipelines import
TensorFlow when called (so under ``KERAS_BACKEND=jax`` they still work when
TensorFlow is installed).

This module is the public interface (every name below, and :func:`load`);
the loaders live in :mod:`keras_bnn.datasets`: ``pipeline`` (arrays as
``tf.data``), ``synthetic``, ``bundled``, ``npy_files`` and ``tfds_loaders``.
"""

import inspect

from keras_bnn.datasets.bundled import (BUNDLED, BUNDLED_SPLIT_SEED, bundled_arrays,
                                        load_bundled)
from keras_bnn.datasets.npy_files import NPY_FILES, load_npy, npy_arrays
from keras_bnn.datasets.pipeline import dataset_labels, make_dataset
from keras_bnn.datasets.synthetic import synthetic_teacher, teacher_probs
from keras_bnn.fashion_mnist import load_fashion_mnist
from keras_bnn.datasets.tfds_loaders import (CIFAR10_MEAN, CIFAR10_PAD, CIFAR10_STD, load_cifar10,
                                             load_imdb, load_mnist)
from keras_bnn.validation import argument_error, check_choice

__all__ = ["BUNDLED", "BUNDLED_SPLIT_SEED", "CIFAR10_MEAN", "CIFAR10_PAD", "CIFAR10_STD",
           "DATASETS", "NPY_FILES", "bundled_arrays", "dataset_labels", "load", "load_bundled",
           "load_cifar10", "load_fashion_mnist", "load_imdb", "load_mnist", "load_npy",
           "make_dataset", "npy_arrays", "synthetic_teacher", "teacher_probs"]

DATASETS = ("synthetic", *BUNDLED, "npy", "fashion_mnist", "mnist", "cifar10", "imdb")


def load(name, batch_size=128, **kwargs):
    """Loads a dataset by name.

    Args:
      name: one of DATASETS: "synthetic" (`synthetic_teacher`, keyword
        arguments num_train (default 1000), num_test (default 1000), seed and
        the teacher's shape), the bundled "digits", "breast_cancer", "wine",
        "diabetes" (`load_bundled`, keyword argument seed), "npy" (your
        own arrays: `load_npy`, keyword arguments data_dir, seed), "fashion_mnist"
        (`keras_bnn.fashion_mnist.load_fashion_mnist`: keyword arguments
        validation_split, seed, data_dir; local files only), "mnist",
        "cifar10", "imdb" (keyword arguments of `load_mnist`, `load_cifar10`,
        `load_imdb`).
      batch_size: examples per batch.
      **kwargs: passed to the loader.

    Returns:
      (train_ds, test_ds, info) as described in the module docstring; for
      "synthetic", info is the task's metadata plus "input_shape".

    Raises:
      ValueError: for an unknown name, a keyword argument that the dataset's
        loader does not take (named, with those it takes), or as raised by
        the loader.
      FileNotFoundError: as raised by the tfds, "npy" and Fashion-MNIST loaders.
    """
    loaders = {"synthetic": synthetic_teacher, **dict.fromkeys(BUNDLED, load_bundled),
               "npy": load_npy, "fashion_mnist": load_fashion_mnist, "mnist": load_mnist,
               "cifar10": load_cifar10, "imdb": load_imdb}
    loader = loaders[check_choice(name, "name", DATASETS, owner="load")]
    taken = [key for key in inspect.signature(loader).parameters if key not in (
        "name", "batch_size")]
    for key in kwargs:
        if key not in taken:  # e.g. validation_split, which only fashion_mnist takes
            raise argument_error(key, f"be left out for dataset {name!r} (it takes "
                                 f"{', '.join(taken)})", kwargs[key], "load")
    if name == "synthetic":
        (x_train, y_train), (x_test, y_test), info = synthetic_teacher(
            kwargs.pop("num_train", 1000), kwargs.pop("num_test", 1000), **kwargs)
        info["input_shape"] = (info["input_dim"],)
        return (make_dataset(x_train, y_train, batch_size, shuffle=True, seed=info["seed"]),
                make_dataset(x_test, y_test, batch_size), info)
    if name in BUNDLED:
        return load_bundled(name, batch_size=batch_size, **kwargs)
    return loader(batch_size=batch_size, **kwargs)
