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
"""

import functools

import keras
import numpy as np
from keras.src.trainers.data_adapters import array_slicing
from keras.src.trainers.data_adapters import data_adapter_utils as utils
from keras.src.trainers.data_adapters.array_data_adapter import (ArrayDataAdapter,
                                                                 can_convert_arrays)

from keras_bnn.callbacks import current_step
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


class KeyedArrays(ArrayDataAdapter):
    """Keras' array adapter, each pass ordered by :func:`pass_order`.

    The step counter is read where each epoch begins (Keras calls
    :meth:`on_epoch_begin` before it reads a batch; a ``BackupAndRestore``
    backup is restored by then), and a pass's order is drawn when its first
    batch is read: in the input pipeline (TensorFlow, once a pass: a
    ``numpy_function``) or the iterator (JAX). A pass begins where an epoch
    does (Keras' array epochs never span two passes), so its key is the step
    counter at its first batch.
    """

    def __init__(self, model, *args, shuffle=True, **kwargs):
        """Keras' adapter of the arrays, and the model whose sampler keys their order.

        Args:
            model: the model compiled with a sampler (its ``seed`` and step
                counter key each pass).
            *args, shuffle, **kwargs: as ``ArrayDataAdapter``'s (``x``, ``y``,
                ``sample_weight``, ``batch_size``, ``steps``, ``class_weight``);
                ``shuffle``: True or ``"batch"``.

        Raises:
            ValueError: as ``ArrayDataAdapter`` (``class_weight`` with
                ``sample_weight``, arrays of different lengths).
        """
        super().__init__(*args, shuffle=shuffle, **kwargs)
        self._model = model
        self._step = 0  # set by on_epoch_begin, before any pass is read

    def on_epoch_begin(self):
        """Reads the step counter: the key of a pass that begins in this epoch."""
        self._step = current_step(self._model.optimizer)

    def _order(self):
        return pass_order(self._model.optimizer.seed, self._step, self._num_samples,
                          self._batch_size, self._shuffle)

    def _get_iterator(self, slice_and_convert_fn, inputs):
        order = self._order()  # a generator's body: runs at the pass's first batch
        for start in range(0, self._num_samples, self._batch_size):
            take = functools.partial(slice_and_convert_fn,
                                     indices=order[start:start + self._batch_size])
            yield keras.tree.map_structure(take, inputs, none_is_leaf=False)

    def get_tf_dataset(self):
        """The ``tf.data.Dataset`` of one pass's batches (gathered in the pipeline).

        Returns:
            ``tf.data.Dataset``.
        """
        import tensorflow as tf  # the TensorFlow backend's pipeline

        size, batch = self._num_samples, self._batch_size
        inputs = keras.tree.lists_to_tuples(
            array_slicing.convert_to_sliceable(self._inputs, target_backend="tensorflow"))
        orders = tf.data.Dataset.range(1).map(
            lambda _: tf.ensure_shape(tf.numpy_function(self._order, [], tf.int64), [size]))
        indices = orders.flat_map(lambda order: tf.data.Dataset.range(0, size, batch).map(
            lambda start: order[start:start + batch]))
        dataset = tf.data.Dataset.zip((indices, tf.data.Dataset.from_tensors(inputs).repeat()))
        dataset = dataset.map(lambda i, data: keras.tree.map_structure(
            lambda value: tf.gather(value, i, axis=0), data), num_parallel_calls=tf.data.AUTOTUNE)
        options = tf.data.Options()
        options.experimental_external_state_policy = (  # the numpy_function, as Keras' shuffle
            tf.data.experimental.ExternalStatePolicy.IGNORE)
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.DATA)
        return dataset.with_options(options).prefetch(tf.data.AUTOTUNE)


def _gathered(arrays):
    """Whether ``KeyedArrays`` takes ``(x, y, sample_weight)``: Keras' arrays, none sparse
    or ragged (numpy, pandas, tensors and nests of them)."""
    sparse = (utils.is_tensorflow_sparse, utils.is_tensorflow_ragged, utils.is_jax_sparse,
              utils.is_scipy_sparse)
    return can_convert_arrays(arrays) and not any(
        is_sparse(leaf) for leaf in keras.tree.flatten(arrays) for is_sparse in sparse)


def keyed_arrays(model, kwargs):
    """``fit``'s arguments with shuffled arrays replaced by a :class:`KeyedArrays`.

    Only for a model compiled with a sampler (whose ``seed`` keys the
    order), ``shuffle`` true or ``"batch"``, and arrays (numpy, pandas,
    tensors, nests of them), none sparse or ragged; anything else is
    returned as it is (Keras shuffles it).
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
        arrays, kwargs["validation_data"] = array_slicing.train_validation_split(
            arrays, validation_split=split)
    kwargs["x"] = KeyedArrays(model, *arrays, batch_size=kwargs.pop("batch_size", None),
                              steps=kwargs.get("steps_per_epoch"), shuffle=shuffle,
                              class_weight=kwargs.pop("class_weight", None))
    kwargs["y"] = kwargs["sample_weight"] = None
    return kwargs
