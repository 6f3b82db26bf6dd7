"""Each output's compiled loss weighed by its share of the global batch.

Keras' compiled loss (``model._compile_loss``, a ``CompileLoss``) sums,
over the model's outputs ``k``, ``λ_k·L_k`` where ``L_k`` is the output's
loss reduced on this replica's shard: ``Σ_r ℓ / d_k,r`` with a denominator
of its own (the shard's number of loss values, of unmasked timesteps, of
labels not the loss's ``ignore_class``, or its sum of weights). Under
``tf.distribute`` the global batch's loss is ``Σ_k λ_k·Σ ℓ / D_k`` with
``D_k = Σ_r d_k,r``, so each output has to be rescaled by its own share
(:func:`keras_bnn.backend.tensorflow.loss_as_shard`)
before the outputs are summed: one factor for the sum cannot do it.
:func:`weigh_by_share` wraps each output's loss function in the compiled
loss, once it is built; the wrapper is the identity on one device and under
JAX. It also weighs the updates of Keras' tracker of each output's loss
(``<output>_loss``, a model of several outputs) by the shard's size, which
Keras reads from a static shape that TensorFlow's step graph leaves unknown.
:class:`keras_bnn.BayesianModel` (training, ``evaluate`` and validation) and
:class:`keras_bnn.PosteriorEnsemble` (``evaluate``) wrap their compiled loss so.
"""

import threading

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn.loss_terms import label_mask


def weigh_by_share(compile_loss):
    """Wraps each output's loss in ``compile_loss`` in :func:`backend.loss_as_shard`.

    ``Σ_k λ_k·L_k`` becomes ``Σ_k λ_k·L_k·(d_k,r/D_k)·(B/b_r)``: each output's
    loss weighs as a plain mean of the shard's ``b_r`` examples, which the
    step (and Keras' logged ``loss``) weighs by ``b_r/B``. Each output's
    loss tracker (a model of several) then adds ``b_r·L_k,r`` to its total
    and ``b_r`` to its count: its result over the replicas' summed totals is
    ``Σ ℓ / D_k``, the global batch's, an example mean over the epoch.

    Keras builds the compiled loss (its list of ``(path, loss, weight,
    name)`` per output) at its first call; an unbuilt one is wrapped right
    after its build.

    Args:
        compile_loss: the model's ``_compile_loss`` (Keras' ``CompileLoss``),
            or None (a model compiled without a loss).
    """
    if compile_loss is None:
        return
    if compile_loss.built:
        _wrap(compile_loss)
        return
    build = compile_loss.build

    def build_and_wrap(y_true, y_pred):
        build(y_true, y_pred)
        _wrap(compile_loss)

    compile_loss.build = build_and_wrap


def _wrap(compile_loss):
    entries = compile_loss._flat_losses
    # Keras tracks each loss of a model of several outputs (its `<output>_loss`), in order.
    trackers = list(compile_loss.metrics) or [None] * len(entries)
    entries[:] = [entry._replace(loss=_share_of_global_batch(entry.loss, tracker))
                  for entry, tracker in zip(entries, trackers)]


def _share_of_global_batch(loss, tracker):
    reduction = getattr(loss, "reduction", "sum_over_batch_size")
    # b_r of this call, for the tracker's update that follows it in Keras' call: per
    # thread, as MirroredStrategy traces each replica's step in a thread of its own.
    shard = threading.local()
    if tracker is not None:
        _weigh_by_shard(tracker, shard)

    def call(y_true, y_pred, sample_weight=None):
        if tracker is not None:
            shard.size = ops.cast(ops.shape(keras.tree.flatten(y_pred)[0])[0], "float32")
        return backend.loss_as_shard(loss(y_true, y_pred, sample_weight), y_pred,
                                     sample_weight, reduction,
                                     label_mask(loss, y_true, y_pred))

    return call


def _weigh_by_shard(tracker, shard):
    """Weighs an output's loss tracker's updates by the shard's b_r, which Keras reads
    from the predictions' static batch size: None in TensorFlow's graph of unknown
    batch size, so each batch's mean weighed 1 (a ragged last batch as much as a full
    one), and under tf.distribute each replica's, and ``<output>_loss`` logged the
    replicas' mean of means. Weighed by b_r (summed over the replicas when read,
    :func:`keras_bnn.distribute.global_logs`) it is the mean over the examples, as
    ``loss`` and ``nll`` are, and as under JAX (static shapes)."""
    update = tracker.update_state

    def update_state(values, sample_weight=None):
        size = getattr(shard, "size", None)
        shard.size = None
        return update(values, sample_weight=sample_weight if size is None else size)

    tracker.update_state = update_state
