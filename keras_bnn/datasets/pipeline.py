"""In-memory arrays as batched, prefetched ``tf.data`` pipelines.

TensorFlow is imported when a pipeline is built, not at import time.

A shuffled pipeline's order is a pure function of (seed, epoch): epoch e
presents the examples in the order of a stateless permutation keyed on
``(seed, e)``, so a process that resumes a run at epoch e sees the same
batches as one that never stopped. The epoch is the pipeline's
:func:`data_epoch` variable: each pass over the dataset takes its value and
advances it by one, and a training loop that may start at another epoch
sets it at every epoch's start (``keras_bnn.runs.train`` does).
"""

import numpy as np

from keras_bnn.validation import argument_error, check_int


def batched(ds, batch_size, shuffle, seed, example_fn=None, batch_fn=None,
            repeat=False, drop_remainder=False, example_seeds=False):
    """``ds`` shuffled, mapped, repeated, batched and prefetched, in that order.

    Args:
      ds: an unbatched ``tf.data.Dataset`` of examples.
      batch_size: examples per batch, >= 1.
      shuffle: a new order every epoch: epoch e is the permutation of the
        whole set keyed on (seed, e) (see :func:`data_epoch`); the set is
        held in memory once.
      seed: shuffle seed (None: a random one, so a different order every run).
      example_fn: applied to every example before batching, or None.
      example_seeds: with ``shuffle``, call ``example_fn(example, seed)``
        with a [2] int64 seed unique to (seed, epoch, position in the
        epoch), for stateless augmentation that a resumed run repeats.
      batch_fn: applied to every batch, or None.
      repeat: repeat forever.
      drop_remainder: drop the last, smaller batch.

    Returns:
      The batched, prefetched dataset.

    Raises:
      ValueError: if batch_size is not a positive integer, ``shuffle`` is
        asked of a dataset of unknown or infinite size, or
        ``example_seeds`` without ``shuffle``.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    batch_size = check_int(batch_size, "batch_size", 1)
    epoch = None
    if example_seeds and not shuffle:
        raise argument_error("example_seeds", "come with shuffle=True (its seeds are per "
                             "epoch)", example_seeds)
    if shuffle:
        ds, epoch = _shuffled_by_epoch(ds, seed, example_seeds)
    if example_fn is not None:
        ds = ds.map(example_fn, num_parallel_calls=tf.data.AUTOTUNE)
    if repeat:
        ds = ds.repeat()
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if batch_fn is not None:
        ds = ds.map(batch_fn, num_parallel_calls=tf.data.AUTOTUNE)
    ds = ds.prefetch(tf.data.AUTOTUNE)
    ds.keras_bnn_data_epoch = epoch
    return ds


def _shuffled_by_epoch(ds, seed, example_seeds=False):
    """``ds`` in the order of ``stateless_shuffle(range(n), (seed, epoch))``.

    The whole set is read into memory once, here; each pass gathers it in
    the epoch's order (with ``example_seeds``, each example paired with the
    seed ``(seed, epoch·n + position)``). Returns the dataset and its epoch
    variable.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    size = int(ds.cardinality())
    if size < 1:
        raise argument_error("ds", "be a finite dataset of known size to be shuffled", ds,
                             got=f"cardinality {size}")
    if seed is None:
        seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    key = tf.constant(check_int(seed, "seed", 0), tf.int64)
    with tf.init_scope():
        epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")

    examples = ds.batch(size).get_single_element()

    def one_epoch(_):
        current = epoch.assign_add(1, read_value=True) - 1
        order = tf.random.experimental.stateless_shuffle(
            tf.range(size, dtype=tf.int64), seed=tf.stack([key, current]))
        shuffled = tf.nest.map_structure(lambda tensor: tf.gather(tensor, order), examples)
        if example_seeds:
            positions = current * size + tf.range(size, dtype=tf.int64)
            shuffled = (shuffled, tf.stack([tf.fill([size], key), positions], axis=1))
        return tf.data.Dataset.from_tensor_slices(shuffled)

    shuffled = tf.data.Dataset.from_tensors(0).flat_map(one_epoch)
    return shuffled.apply(tf.data.experimental.assert_cardinality(size)), epoch


def data_epoch(ds):
    """The epoch variable of a shuffled pipeline from :func:`batched` or
    :func:`make_dataset`.

    The next pass over ``ds`` presents epoch ``data_epoch(ds)``'s order and
    advances the variable by one; assign it to start at another epoch (a
    resumed run assigns the epoch at each epoch's start).

    Args:
      ds: a dataset returned by :func:`batched` or :func:`make_dataset`.

    Returns:
      A scalar int64 ``tf.Variable``, or None for an unshuffled pipeline or
      any other dataset.
    """
    return getattr(ds, "keras_bnn_data_epoch", None)


def make_dataset(x, y, batch_size, shuffle=False, seed=None, repeat=False,
                 drop_remainder=False):
    """A batched, prefetched `tf.data.Dataset` of (x, y) from in-memory arrays.

    Args:
      x: [n, ...] inputs.
      y: [n] labels.
      batch_size: examples per batch, >= 1.
      shuffle: a new order every epoch, a pure function of (seed, epoch)
        (see :func:`batched`).
      seed: shuffle seed (None: a random one, so a different order every run).
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
