"""In-memory arrays as batched, prefetched ``tf.data`` pipelines.

TensorFlow is imported when a pipeline is built, not at import time.

A shuffled pipeline's order is a pure function of (seed, epoch): epoch e
presents the examples in the order of a stateless permutation keyed on
``(seed, e)``, so a process that resumes a run at epoch e sees the same
batches as one that never stopped. The epoch is the pipeline's
:func:`data_epoch` variable: each pass over the dataset takes its value and
advances it by one, and a training loop that may start at another epoch
sets it at every epoch's start. :func:`endless` makes one stream of all
epochs from such a pipeline, each pass ordered by its own index (what
``keras_bnn.runs.train`` trains on: Keras then keeps one iterator for the
whole run instead of making one every epoch).
"""

import numpy as np

from keras_bnn.validation import argument_error, check_int


def draw_seed(seed, owner=None, highest=2**63 - 1):
    """A loader's ``seed``: checked, or for None one drawn at random for this call.

    ``seed=None`` means the same in every loader of :mod:`keras_bnn.data`: a
    seed drawn from the operating system's entropy, another at every call
    (so another order, and where the seed also draws data, other data).

    Args:
      seed: an int in [0, ``highest``], or None.
      owner: the function the argument belongs to, for the error.
      highest: the largest seed taken.

    Returns:
      int: ``seed``, or the drawn seed (in [0, 2**31 - 1]) for None.

    Raises:
      ValueError: naming ``seed`` for a bool, a float, or an int outside [0, ``highest``].
    """
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1)[0] >> 1)
    return check_int(seed, "seed", 0, highest, owner)


def validation_rows(num_rows, fraction):
    """A fixed split of ``num_rows`` rows: ``(kept, held_out)`` row indices.

    The last ``round(num_rows·fraction)`` rows of a permutation drawn with
    seed 0 are held out (the same split for every run, seed and candidate).

    Args:
      num_rows: the number of rows.
      fraction: the held-out share, in (0, 1).

    Returns:
      Two int64 index arrays: the rows kept (in the permutation's order) and
      the rows held out.
    """
    order = np.random.default_rng(0).permutation(num_rows)
    cut = num_rows - int(round(num_rows * fraction))
    return order[:cut], order[cut:]


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
    if example_seeds and not shuffle:
        raise argument_error("example_seeds", "come with shuffle=True (its seeds are per "
                             "epoch)", example_seeds)

    def batches(examples):
        if example_fn is not None:
            examples = examples.map(example_fn, num_parallel_calls=tf.data.AUTOTUNE)
        if repeat:
            examples = examples.repeat()
        ds = examples.batch(batch_size, drop_remainder=drop_remainder)
        if batch_fn is not None:
            ds = ds.map(batch_fn, num_parallel_calls=tf.data.AUTOTUNE)
        return ds

    if not shuffle:
        ds = batches(ds).prefetch(tf.data.AUTOTUNE)
        ds.keras_bnn_data_epoch = None
        return ds
    order = _EpochOrder(ds, seed, example_seeds)
    ds = batches(order.next_pass()).prefetch(tf.data.AUTOTUNE)
    ds.keras_bnn_data_epoch = order.epoch
    # The batches of pass i alone, for `endless` (a repeated pipeline has no passes).
    ds.keras_bnn_pass_batches = None if repeat else lambda index: batches(order.pass_of(index))
    return ds


class _EpochOrder:
    """A finite dataset held in memory, presented in the order of
    ``stateless_shuffle(range(n), (seed, i))`` in pass i.

    Attributes:
        epoch: the int64 variable :meth:`next_pass` takes the pass index from.
    """

    def __init__(self, ds, seed, example_seeds=False):
        import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

        self.size = int(ds.cardinality())
        if self.size < 1:
            raise argument_error("ds", "be a finite dataset of known size to be shuffled", ds,
                                 got=f"cardinality {self.size}")
        self.key = tf.constant(draw_seed(seed), tf.int64)
        self.example_seeds = example_seeds
        with tf.init_scope():
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False, name="data_epoch")
        self.examples = ds.batch(self.size).get_single_element()

    def pass_of(self, index):
        """The examples in pass ``index``'s order (with ``example_seeds``, each
        paired with the seed ``(seed, index·n + position)``)."""
        import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

        order = tf.random.experimental.stateless_shuffle(
            tf.range(self.size, dtype=tf.int64), seed=tf.stack([self.key, index]))
        shuffled = tf.nest.map_structure(lambda tensor: tf.gather(tensor, order), self.examples)
        if self.example_seeds:
            positions = index * self.size + tf.range(self.size, dtype=tf.int64)
            shuffled = (shuffled, tf.stack([tf.fill([self.size], self.key), positions], axis=1))
        return tf.data.Dataset.from_tensor_slices(shuffled)

    def next_pass(self):
        """One pass, in the order of :attr:`epoch`'s value, which it advances by one."""
        import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

        one = tf.data.Dataset.from_tensors(0).flat_map(
            lambda _: self.pass_of(self.epoch.assign_add(1, read_value=True) - 1))
        return one.apply(tf.data.experimental.assert_cardinality(self.size))


def endless(ds, passes_per_epoch=1):
    """Every epoch of a shuffled pipeline, one after another, in one endless stream.

    Epoch e is passes ``e, e+1, …, e+P−1`` (P = ``passes_per_epoch``), each
    batched on its own, in the order a loop that assigns :func:`data_epoch`
    = e at epoch e's start would see over ``ds`` repeated P times; e starts
    at the value of ``data_epoch(ds)`` when an iterator of the stream makes
    its first batch (it reads the variable once and never changes it; Keras
    makes the iterator in the first epoch, after ``on_epoch_begin``). Give ``fit`` the
    epoch's batches as ``steps_per_epoch``: Keras keeps one iterator for the
    whole run instead of making one each epoch (10–30 ms an epoch on CPU).

    Args:
        ds: a shuffled, unrepeated dataset from :func:`batched` or
            :func:`make_dataset`.
        passes_per_epoch: P ≥ 1.

    Returns:
        The endless ``tf.data.Dataset`` of batches, carrying ``ds``'s epoch
        variable (:func:`data_epoch`); or None if ``ds`` has no passes
        (unshuffled, repeated, or another dataset).

    Raises:
        ValueError: if ``passes_per_epoch`` is not a positive integer.
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    passes_per_epoch = check_int(passes_per_epoch, "passes_per_epoch", 1)
    pass_batches = getattr(ds, "keras_bnn_pass_batches", None)
    if pass_batches is None:
        return None
    epoch = data_epoch(ds)
    first = tf.data.Dataset.from_tensors(0).flat_map(
        lambda _: tf.data.Dataset.range(epoch.read_value(), tf.int64.max))
    stream = first.flat_map(lambda e: tf.data.Dataset.range(passes_per_epoch).flat_map(
        lambda j: pass_batches(e + j))).prefetch(tf.data.AUTOTUNE)
    stream.keras_bnn_data_epoch = epoch
    return stream


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
                 drop_remainder=False, sample_weight=None):
    """A batched, prefetched `tf.data.Dataset` of (x, y) from in-memory arrays.

    Args:
      x: [n, ...] inputs: an array (or a ``pandas`` object), or, as Keras'
        ``fit`` takes them for a model of several inputs, a dict of such
        arrays by input name or a list or tuple of them in order.
      y: [n] labels, or a dict, list or tuple of them by output.
      batch_size: examples per batch, >= 1.
      shuffle: a new order every epoch, a pure function of (seed, epoch)
        (see :func:`batched`).
      seed: shuffle seed (None: a random one, so a different order every run).
      repeat: repeat forever (then give `fit` a steps_per_epoch).
      drop_remainder: drop the last, smaller batch.
      sample_weight: optional [n, ...] weights (or a dict, list or tuple of
        them by output): (x, y, sample_weight) batches, as Keras' ``fit`` and
        ``evaluate`` and :func:`keras_bnn.runs.evaluate` take them.

    Returns:
      tf.data.Dataset of (x_batch, y_batch), or of (x_batch, y_batch, w_batch);
      a list of arrays is yielded as a tuple.

    Raises:
      ValueError: if an array of x, y (or ``sample_weight``) differs in length
        from x's first or is empty, or batch_size is not a positive integer,
        or is larger than the data with ``drop_remainder`` (no batch at all).
    """
    import tensorflow as tf  # noqa: PLC0415 - TensorFlow only where tf.data is built

    x, y = _arrays(x), _arrays(y)
    size = _length(x, "x", None, "hold arrays of one length (examples first)")
    _length(y, "y", size, "be non-empty, with as many examples as `x`")
    arrays = (x, y)
    if sample_weight is not None:
        w = _arrays(sample_weight, np.float32)
        _length(w, "sample_weight", size,
                f"have one weight per example of `x` ([{size}] or [{size}, ...])")
        arrays = (x, y, w)
    if drop_remainder and check_int(batch_size, "batch_size", 1) > size:
        raise argument_error("batch_size", f"be at most the {size} examples with "
                             "drop_remainder=True (else no batch at all)", batch_size)
    ds = tf.data.Dataset.from_tensor_slices(arrays)
    return batched(ds, batch_size, shuffle, seed, repeat=repeat,
                   drop_remainder=drop_remainder)


def _arrays(value, dtype=None):
    """``value`` as numpy arrays: a dict by name, a tuple for a list or tuple of
    arrays (Keras' forms of several inputs or outputs), else one array (a list
    of numbers or of NumPy scalars too)."""
    if isinstance(value, dict):
        return {key: np.asarray(item, dtype) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and value and all(
            len(getattr(item, "shape", ())) for item in value):
        return tuple(np.asarray(item, dtype) for item in value)
    return np.asarray(value, dtype)


def _length(arrays, name, size, requirement):
    """The common length of ``arrays`` (one, or a dict or tuple of them), which
    must be ``size`` and non-zero (``size`` None: any); else the error names ``name``."""
    leaves = list(arrays.values()) if isinstance(arrays, dict) else (
        list(arrays) if isinstance(arrays, tuple) else [arrays])
    lengths = [len(leaf) if leaf.ndim else -1 for leaf in leaves]
    wanted = {lengths[0] if size is None and lengths else size}
    if not lengths or -1 in lengths or set(lengths) != wanted or (size is not None and not size):
        shapes = ", ".join(str(leaf.shape) for leaf in leaves) or "nothing"
        raise argument_error(name, requirement, None, got=f"shapes {shapes} ({name})"
                             + ("" if size is None else f" for {size} examples"))
    return lengths[0]


def dataset_targets(ds, name="ds", owner="dataset_targets"):
    """The labels and sample weights of a finite dataset, in one pass, in order.

    Args:
        ds: a finite ``tf.data.Dataset`` of (inputs, labels) or (inputs,
            labels, sample_weight) batches (the elements Keras' ``evaluate``
            takes).
        name, owner: the argument and its function, as an error names them
            (a caller's own argument, e.g. ``kb.runs.evaluate``'s ``data``).

    Returns:
        ``(labels, sample_weight)``: numpy arrays, ``sample_weight`` None for
        (inputs, labels) batches.

    Raises:
        ValueError: naming ``name`` for another object, an empty dataset, or a
            dataset of other elements.
    """
    return _targets(ds, name, owner)


def dataset_labels(ds):
    """All labels of a finite (inputs, labels) dataset, in order, as a numpy
    array: the `labels` argument of `keras_bnn.metrics` for `model.predict(ds)`
    on an unshuffled dataset (such as the test sets returned here). A dataset
    of (inputs, labels, sample_weight) batches gives its labels
    (:func:`dataset_targets` gives both).

    Raises:
        ValueError: for a ``ds`` that is not a ``tf.data.Dataset`` of such batches.
    """
    return _targets(ds, "ds", "dataset_labels")[0]


def _targets(ds, name, owner):
    """:func:`dataset_targets`, its errors naming ``name`` and ``owner``."""
    spec = getattr(ds, "element_spec", None)
    if not hasattr(ds, "as_numpy_iterator") or not isinstance(spec, tuple) or len(spec) not in (
            2, 3):
        got = (f"a dataset of {len(spec)}-tuples" if isinstance(spec, tuple) else
               f"a dataset of {type(spec).__name__}" if spec is not None else type(ds).__name__)
        raise argument_error(name, "be a finite tf.data.Dataset of (inputs, labels) or "
                             "(inputs, labels, sample_weight) batches", None, owner, got=got)
    columns = list(zip(*(batch[1:] for batch in ds.as_numpy_iterator())))
    if not columns:
        raise argument_error(name, "hold at least one batch", None, owner,
                             got="an empty dataset")
    labels, *weights = (np.concatenate([np.asarray(part) for part in column])
                        for column in columns)
    return labels, (weights[0] if weights else None)
