"""In-memory arrays as batched, prefetched ``tf.data`` pipelines.

TensorFlow is imported when a pipeline is built, not at import time.
"""

import numpy as np

from keras_bnn.validation import argument_error, check_int


def batched(ds, batch_size, shuffle, seed, example_fn=None, batch_fn=None,
             repeat=False, drop_remainder=False):
    """``ds`` shuffled, mapped, repeated, batched and prefetched, in that order.

    Args:
      ds: an unbatched ``tf.data.Dataset`` of examples.
      batch_size: examples per batch, >= 1.
      shuffle: reshuffle the whole set every epoch (full-size buffer).
      seed: shuffle seed (None: a different order every run).
      example_fn: applied to every example before batching, or None.
      batch_fn: applied to every batch, or None.
      repeat: repeat forever.
      drop_remainder: drop the last, smaller batch.

    Returns:
      The batched, prefetched dataset.

    Raises:
      ValueError: if batch_size is not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    batch_size = check_int(batch_size, "batch_size", 1)
    if shuffle:
        # A full-size buffer gives a uniform shuffle; reshuffled every epoch.
        ds = ds.shuffle(int(ds.cardinality()), seed=seed,
                        reshuffle_each_iteration=True)
    if example_fn is not None:
        ds = ds.map(example_fn, num_parallel_calls=tf.data.AUTOTUNE)
    if repeat:
        ds = ds.repeat()
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if batch_fn is not None:
        ds = ds.map(batch_fn, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


def make_dataset(x, y, batch_size, shuffle=False, seed=None, repeat=False,
                 drop_remainder=False):
    """A batched, prefetched `tf.data.Dataset` of (x, y) from in-memory arrays.

    Args:
      x: [n, ...] inputs.
      y: [n] labels.
      batch_size: examples per batch, >= 1.
      shuffle: reshuffle the whole set every epoch (full-size buffer).
      seed: shuffle seed (None: a different order every run).
      repeat: repeat forever (then give `fit` a steps_per_epoch).
      drop_remainder: drop the last, smaller batch.

    Returns:
      tf.data.Dataset of (x_batch, y_batch).

    Raises:
      ValueError: if x and y differ in length or are empty, or batch_size is
        not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    x, y = np.asarray(x), np.asarray(y)
    if x.ndim == 0 or y.ndim == 0 or len(x) != len(y) or len(x) == 0:
        raise argument_error("y", "be non-empty, with as many examples as `x`", y,
                             got=f"shapes {x.shape} (x) and {y.shape} (y)")
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    return batched(ds, batch_size, shuffle, seed, repeat=repeat,
                    drop_remainder=drop_remainder)


def dataset_labels(ds):
    """All labels of a finite (inputs, labels) dataset, in order, as a numpy
    array: the `labels` argument of `keras_bnn.metrics` for `model.predict(ds)`
    on an unshuffled dataset (such as the test sets returned here)."""
    return np.concatenate([np.asarray(y) for _, y in ds.as_numpy_iterator()])
