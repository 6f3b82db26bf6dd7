"""The order of ``BayesianModel.fit``'s array batches: a pure function of (seed, step).

Keras shuffles arrays (``fit(x, y, shuffle=True)``, its default) from the
global random state, so a run killed and resumed from a
``keras.callbacks.BackupAndRestore`` backup saw other batches than the run
never stopped: another chain. For a model compiled with a sampler,
:func:`keyed_arrays` hands Keras a :class:`KeyedArrays` adapter instead,
whose every pass over the arrays is ordered by :func:`pass_order`, keyed on
the sampler's ``seed`` and the step counter at the pass's first batch (a
backup restores it), on TensorFlow and JAX alike. Everything else is
Keras' own: the batches (``batch_size``, ``steps_per_epoch``), the weights
(``sample_weight``, ``class_weight``) and ``validation_split``, taken from
the end of the arrays before any shuffling.

With a ``steps_per_epoch`` shorter than a pass, a pass spans several epochs
and Keras' epochs follow from the pass length alone (:func:`pass_position`),
so a fit begun at epoch e > 0 (a resumed one: ``BackupAndRestore`` sets the
epoch) continues the pass epoch e is in, at its position, keyed on the step
counter at the pass's first batch: the one of the fit never stopped.
"""

import functools
import math
import weakref

import keras
import numpy as np

from keras_bnn.callbacks import current_step
from keras_bnn.keras_private import (ArrayDataAdapter, can_convert_arrays,
                                     convert_to_sliceable, is_jax_sparse, is_scipy_sparse,
                                     is_tensorflow_ragged, is_tensorflow_sparse,
                                     train_validation_split)
from keras_bnn.samplers.base import Sampler

#: Set apart from other streams keyed on (seed, step): the first word of the key.
ORDER_STREAM = 0x0DE5


def pass_order(seed, step, num_samples, batch_size, shuffle):
    """The order of one pass over ``num_samples`` examples.

    ``u ~ U(0, 1)^N`` drawn by NumPy's PCG64 from ``SeedSequence((ORDER_STREAM,
    seed, step))``; ``shuffle=True``: the permutation ``argsort(u)`` (stable);
    ``shuffle="batch"``: Keras' in-batch shuffle, the examples sorted by
    ``(i // batch_size, u_i)``: the batches in order, each one's examples
    permuted.

    Args:
        seed: the sampler's seed, an int ≥ 0.
        step: the step counter at the pass's first batch, an int ≥ 0.
        num_samples, batch_size: ints ≥ 1.
        shuffle: True or ``"batch"``.

    Returns:
        An int64 array of the ``num_samples`` indices in the pass's order.
    """
    u = np.random.default_rng(np.random.SeedSequence((ORDER_STREAM, seed, step))).random(
        num_samples)
    if shuffle == "batch":
        return np.lexsort((u, np.arange(num_samples) // batch_size)).astype("int64")
    return np.argsort(u, kind="stable").astype("int64")


def pass_position(epoch, num_batches, steps_per_epoch, steps_per_execution=1):
    """Where epoch ``epoch`` of a fit begun at epoch 0 starts in its pass, as Keras counts.

    Keras' epoch iterator keeps a pass's iterator across epochs when
    ``steps_per_epoch`` is given, runs an epoch of ``ceil(steps_per_epoch /
    steps_per_execution)`` executions (``E`` batches) and starts a new pass
    at the first epoch that begins at or past the pass's end, cutting the
    epoch that reaches it short ("Your input ran out of data"). Every pass
    so spans ``ceil(P / E)`` epochs.

    Args:
        epoch: the epoch's index, an int ≥ 0.
        num_batches: ``P``, the batches of a pass, an int ≥ 1.
        steps_per_epoch: ``fit``'s, an int ≥ 1 or None (an epoch is a pass).
        steps_per_execution: the model's, an int ≥ 1.

    Returns:
        ``(position, spans)``: the batches of its pass before the epoch
        (0 when it begins a pass), and whether a pass ends where an epoch
        does (``E`` divides ``P``: Keras' iterator of a resumed fit, begun
        mid-pass, runs on into the next pass; otherwise the epoch that
        reaches the pass's end is cut short, and it ends the iterator).
    """
    if not steps_per_epoch:
        return 0, False
    batches = math.ceil(steps_per_epoch / steps_per_execution) * steps_per_execution
    if batches >= num_batches:
        return 0, False
    return (epoch % math.ceil(num_batches / batches)) * batches, num_batches % batches == 0


class KeyedArrays(ArrayDataAdapter):
    """Keras' array adapter, each pass ordered by :func:`pass_order`.

    The step counter is read where each epoch begins (Keras calls
    :meth:`on_epoch_begin` before it reads a batch; a ``BackupAndRestore``
    backup is restored by then), and a pass's order is drawn when its first
    batch is read: in the input pipeline (TensorFlow, once a pass: a
    ``numpy_function``) or the iterator (JAX). A pass begins where an epoch
    does, so its key is the step counter at its first batch; a fit begun
    mid-pass (:func:`pass_position` of its first epoch, which
    :class:`EpochIndex` reports) keys it on that counter less the batches
    of the pass before the epoch.
    """

    def __init__(self, model, *args, shuffle=True, **kwargs):
        """Keras' adapter of the arrays, and the model whose sampler keys their order.

        Args:
            model: the model compiled with a sampler (its ``seed`` and step
                counter key each pass).
            *args, shuffle, **kwargs: as ``ArrayDataAdapter``'s (``x``, ``y``,
                ``sample_weight``, ``batch_size``, ``steps``, ``class_weight``);
                ``shuffle``: True or ``"batch"``; ``steps``: ``fit``'s
                ``steps_per_epoch``.

        Raises:
            ValueError: as ``ArrayDataAdapter`` (``class_weight`` with
                ``sample_weight``, arrays of different lengths).
        """
        super().__init__(*args, shuffle=shuffle, **kwargs)
        self._model = model
        self._steps_per_epoch = kwargs.get("steps")
        self.epoch = None  # the fit's epoch, set by EpochIndex (None: Keras' build pass)
        self._key, self._position, self._spans = 0, 0, False  # set by on_epoch_begin

    def on_epoch_begin(self):
        """Reads the step counter and where the epoch begins in its pass: the key of
        the pass an iterator made in this epoch begins in."""
        step = current_step(self._model.optimizer)
        self._position, self._spans = pass_position(
            self.epoch or 0, self.num_batches, self._steps_per_epoch,
            self._model.steps_per_execution)
        if self._position > step:  # not a resumed fit: no counter ran the epochs before
            self._position, self._spans = 0, False
        self._key = step - self._position

    def _rows(self):
        """The batches an iterator made in this epoch yields, as the rows of an index
        matrix: its pass's from the epoch's position on, then, where passes end with
        epochs, the next pass's first ``position`` (Keras counts a pass's batches to each
        iterator). Row ``i`` holds batch ``i``'s indices in its first ``lengths[i]``
        entries (a pass's last batch may be short; the rest of its row is 0).

        Returns:
            ``(matrix, lengths)``: int64 arrays of shape ``[batches, batch_size]`` and
            ``[batches]``.
        """
        size, count = self._batch_size, self.num_batches

        def rows(step):  # one pass's batches: its order cut into rows of batch_size
            matrix = np.zeros(count * size, "int64")
            matrix[:self._num_samples] = pass_order(self._model.optimizer.seed, step,
                                                    self._num_samples, size, self._shuffle)
            lengths = np.full(count, size, "int64")
            lengths[-1] = self._num_samples - (count - 1) * size
            return matrix.reshape(count, size), lengths

        matrix, lengths = rows(self._key)
        if not (self._spans and self._position):
            return matrix[self._position:], lengths[self._position:]
        after, after_lengths = rows(self._key + count)
        return (np.concatenate([matrix[self._position:], after[:self._position]]),
                np.concatenate([lengths[self._position:], after_lengths[:self._position]]))

    def _get_iterator(self, slice_and_convert_fn, inputs):
        for row, length in zip(*self._rows()):  # a generator's body: at the first batch
            take = functools.partial(slice_and_convert_fn, indices=row[:length])
            yield keras.tree.map_structure(take, inputs, none_is_leaf=False)

    def get_tf_dataset(self):
        """The ``tf.data.Dataset`` of one pass's batches (gathered in the pipeline).

        As Keras' own: the order is drawn once a pass (a ``numpy_function`` of
        :meth:`_rows`) and cut into rows of indices, each batch one gather per
        array in a parallel map, without tf.data's default graph rewrites.

        Returns:
            ``tf.data.Dataset``.
        """
        import tensorflow as tf  # the TensorFlow backend's pipeline

        # TensorFlow keeps a numpy_function's function as long as the outermost graph,
        # the process's global one: it holds the adapter (and the model) weakly.
        adapter = weakref.ref(self)
        shapes = ([None, self._batch_size], [None])

        def drawn(_):  # the batches' rows of indices and their lengths
            matrix, lengths = tf.numpy_function(lambda: adapter()._rows(), [],
                                                (tf.int64, tf.int64))
            return tuple(map(tf.ensure_shape, (matrix, lengths), shapes))

        def gathered(row, data):  # one batch: row = (indices, length)
            # Without a short batch every batch is of batch_size: a static batch
            # dimension, as in Keras' element_spec (the fit's step is traced for it).
            indices = row[0][:row[1]] if self.has_partial_batch else row[0]
            return keras.tree.map_structure(lambda value: tf.gather(value, indices, axis=0),
                                            data)

        inputs = keras.tree.lists_to_tuples(
            convert_to_sliceable(self._inputs, target_backend="tensorflow"))
        rows = tf.data.Dataset.range(1).map(drawn).flat_map(
            lambda *rows: tf.data.Dataset.from_tensor_slices(rows))
        dataset = tf.data.Dataset.zip((rows, tf.data.Dataset.from_tensors(inputs).repeat()))
        dataset = dataset.map(gathered, num_parallel_calls=tf.data.AUTOTUNE)
        options = tf.data.Options()
        options.experimental_optimization.apply_default_optimizations = False  # as Keras
        options.experimental_external_state_policy = (  # the numpy_function, as Keras' shuffle
            tf.data.experimental.ExternalStatePolicy.IGNORE)
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA)
        return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


class EpochIndex(keras.callbacks.Callback):
    """Tells a :class:`KeyedArrays` the epoch that begins (Keras' adapters are not told)."""

    def __init__(self, adapter):
        """The callback of one fit's adapter.

        Args:
            adapter: the :class:`KeyedArrays` of the fit.
        """
        super().__init__()
        self.adapter = adapter

    def on_epoch_begin(self, epoch, logs=None):
        """Sets the adapter's ``epoch`` (before Keras reads the epoch's first batch)."""
        self.adapter.epoch = epoch


def _gathered(arrays):
    """Whether ``KeyedArrays`` takes ``(x, y, sample_weight)``: Keras' arrays, none sparse
    or ragged (numpy, pandas, tensors and nests of them)."""
    sparse = (is_tensorflow_sparse, is_tensorflow_ragged, is_jax_sparse, is_scipy_sparse)
    return can_convert_arrays(arrays) and not any(
        is_sparse(leaf) for leaf in keras.tree.flatten(arrays) for is_sparse in sparse)


def keyed_arrays(model, kwargs):
    """``fit``'s arguments with shuffled arrays replaced by a :class:`KeyedArrays`.

    Only for a model compiled with a sampler (whose ``seed`` keys the
    order), ``shuffle`` true or ``"batch"``, and arrays (numpy, pandas,
    tensors, nests of them), none sparse or ragged; anything else is
    returned as it is (Keras shuffles it). An :class:`EpochIndex` is added
    to the callbacks.
    ``validation_split`` is taken here as Keras takes it: the last fraction
    of the arrays, before shuffling.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        kwargs: ``keras.Model.fit``'s arguments by name.

    Returns:
        dict: the arguments for ``keras.Model.fit``.

    Raises:
        ValueError: as Keras' ``fit`` on arrays: a ``validation_split`` that
            leaves no training or validation example, ``class_weight`` with
            ``sample_weight``.
    """
    shuffle = kwargs.get("shuffle", True)
    arrays = tuple(kwargs.get(name) for name in ("x", "y", "sample_weight"))
    if (not shuffle or not isinstance(model.optimizer, Sampler) or arrays[0] is None
            or not _gathered(arrays)):
        return kwargs
    kwargs = dict(kwargs)
    split = kwargs.pop("validation_split", 0.0)
    if split and kwargs.get("validation_data") is None:
        arrays, kwargs["validation_data"] = train_validation_split(
            arrays, validation_split=split)
    kwargs["x"] = KeyedArrays(model, *arrays, batch_size=kwargs.pop("batch_size", None),
                              steps=kwargs.get("steps_per_epoch"), shuffle=shuffle,
                              class_weight=kwargs.pop("class_weight", None))
    kwargs["y"] = kwargs["sample_weight"] = None
    kwargs["callbacks"] = [*(kwargs.get("callbacks") or []), EpochIndex(kwargs["x"])]
    return kwargs
