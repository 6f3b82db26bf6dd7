"""Each output's compiled loss weighed by its share of the global batch, and its tracker.

Keras' compiled loss (``model._compile_loss``, a ``CompileLoss``) sums,
over the model's outputs ``k``, ``λ_k·L_k`` where ``L_k`` is the output's
loss reduced on this replica's shard: ``Σ_r ℓ / d_k,r`` with a denominator
of its own (the shard's number of loss values, of unmasked timesteps, of
labels not the loss's ``ignore_class``, or its sum of weights). Under
``tf.distribute`` the global batch's loss is ``Σ_k λ_k·Σ ℓ / D_k`` with
``D_k = Σ_r d_k,r``, so each output has to be rescaled by its own share
(:func:`keras_bnn.backend.tensorflow_distribute.loss_as_shard`)
before the outputs are summed: one factor for the sum cannot do it.
:func:`weigh_by_share` wraps each output's loss function in the compiled
loss, once it is built; the wrapper is the identity on one device and under
JAX.

It also sets the weights of the updates of each output's loss tracker
(``<output>_loss``, a model of several outputs; the model's ``loss`` tracker
for one output). In training each update weighs by the shard's examples
``b_r``, which Keras reads from a static shape that TensorFlow's step graph
leaves unknown: the epoch's mean of the minibatch losses. In a test step
(:func:`counting_terms`: ``evaluate``, validation) it is the shard's loss
``L_k,r`` weighed by its denominator ``d_k,r``
(:func:`keras_bnn.loss_terms.denominator`), so that the tracker's total
over the batches and replicas is ``Σ ℓ`` and its count ``Σ d``: the set's
mean over the terms its loss counts, for any batch size, where a mean
weighed by the examples was not (masked tokens, an ``ignore_class``,
``"mean_with_sample_weight"``). The ``loss`` of a model of several outputs,
``Σ_k λ_k·L_k``, is no mean of one tracker: :func:`evaluation_logs` makes
it from the outputs'.
:class:`keras_bnn.BayesianModel` (training, ``evaluate`` and validation) and
:class:`keras_bnn.PosteriorEnsemble` (``evaluate``) wrap their compiled loss so.
"""

import contextlib
import threading

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import loss_terms
from keras_bnn.keras_private import unscale_loss_for_distribution

#: Per thread (MirroredStrategy traces each replica's step in a thread of its own):
#: ``counting`` (in a test step) and ``pending``, each tracker's next update by id.
_state = threading.local()


@contextlib.contextmanager
def counting_terms():
    """Within it (a test step's trace), loss trackers weigh by the terms of the loss.

    Yields:
        None.
    """
    _state.counting, _state.pending = True, {}
    try:
        yield
    finally:
        _state.counting, _state.pending = False, {}


def weigh_by_share(model):
    """Wraps each output's loss in the model's compiled loss, and its loss trackers.

    ``Σ_k λ_k·L_k`` becomes ``Σ_k λ_k·L_k·(d_k,r/D_k)·(B/b_r)``: each output's
    loss weighs as a plain mean of the shard's ``b_r`` examples, which the
    step (and Keras' logged ``loss``) weighs by ``b_r/B``
    (:func:`backend.loss_as_shard`). Each output's loss tracker (the model's
    ``loss`` tracker for one output) then adds, in training, ``b_r·L_k,r``
    to its total and ``b_r`` to its count, an example mean over the epoch;
    in a test step (:func:`counting_terms`) ``d_k,r·L_k,r`` and ``d_k,r``,
    the mean over the set's counted terms.

    Keras builds the compiled loss (its list of ``(path, loss, weight,
    name)`` per output) at its first call; an unbuilt one is wrapped right
    after its build.

    Args:
        model: the compiled model (its ``_compile_loss``, Keras' ``CompileLoss``
            or None for a model compiled without a loss, and ``_loss_tracker``).
    """
    compile_loss = model._compile_loss
    if compile_loss is None:
        return
    if compile_loss.built:
        _wrap(compile_loss, model._loss_tracker)
        return
    build = compile_loss.build

    def build_and_wrap(y_true, y_pred):
        build(y_true, y_pred)
        _wrap(compile_loss, model._loss_tracker)

    compile_loss.build = build_and_wrap


def evaluation_logs(model, logs):
    """A test step's logs with ``loss`` the sum of its outputs' weighed losses.

    ``Σ_k λ_k·<output>_loss`` for a model of several outputs (each the mean
    over the set's counted terms); ``logs`` as they are for one output (its
    ``loss`` tracker is weighed so) or without a compiled loss.

    Args:
        model: the model whose test step made ``logs``.
        logs: dict, the step's (or the epoch's) logs.

    Returns:
        dict: the logs.
    """
    compile_loss = model._compile_loss
    if compile_loss is None or not compile_loss.built or not compile_loss.metrics:
        return logs
    parts = [_weight(entry) * logs[tracker.name]
             for entry, tracker in zip(compile_loss._flat_losses, compile_loss.metrics)]
    return dict(logs, loss=sum(parts[1:], parts[0]))


def _weight(entry):
    return 1.0 if entry.loss_weights is None else entry.loss_weights


def _wrap(compile_loss, loss_tracker):
    entries = compile_loss._flat_losses
    # Keras tracks each loss of a model of several outputs (its `<output>_loss`), in
    # order, unweighted; the model's loss tracker, the one output's λ·L.
    trackers = list(compile_loss.metrics) or [None] * len(entries)
    weights = [1.0] * len(entries)
    if len(entries) == 1 and loss_tracker is not None:
        trackers, weights = [loss_tracker], [_weight(entries[0])]
    for tracker in trackers:
        if tracker is not None:
            _weigh_updates(tracker)
    entries[:] = [entry._replace(loss=_share_of_global_batch(entry.loss, tracker, weight,
                                                             per_output=len(entries) > 1))
                  for entry, tracker, weight in zip(entries, trackers, weights)]


def _share_of_global_batch(loss, tracker, weight, per_output):
    """The loss rescaled to its share, setting its tracker's next update: in a test
    step ``(λ·L_r, d_r)``, else the weight ``b_r`` of an output's tracker of several
    (``per_output``; the train step weighs the model's ``loss`` tracker itself)."""
    reduction = getattr(loss, "reduction", "sum_over_batch_size")

    def call(y_true, y_pred, sample_weight=None):
        labels_counted = loss_terms.label_mask(loss, y_true, y_pred)
        local = loss(y_true, y_pred, sample_weight)
        if tracker is not None and getattr(_state, "counting", False):
            _pending()[id(tracker)] = (
                ops.cast(unscale_loss_for_distribution(local), "float32") * weight,
                loss_terms.denominator(y_pred, sample_weight, reduction, labels_counted))
        elif tracker is not None and per_output:
            _pending()[id(tracker)] = (None, ops.cast(
                ops.shape(keras.tree.flatten(y_pred)[0])[0], "float32"))
        return backend.loss_as_shard(local, y_pred, sample_weight, reduction, labels_counted)

    return call


def _pending():
    if not hasattr(_state, "pending"):
        _state.pending = {}
    return _state.pending


def _weigh_updates(tracker):
    """Makes the tracker's next update the one its loss set (:func:`_share_of_global_batch`).

    Keras weighs an output's loss tracker's updates by the predictions'
    static batch size: None in TensorFlow's graph of unknown batch size, so
    each batch's mean weighed 1 (a ragged last batch as much as a full one),
    and under tf.distribute each replica's, and ``<output>_loss`` logged the
    replicas' mean of means; the model's ``loss`` tracker by the batch's
    examples. Weighed by b_r or d_r (summed over the replicas when read,
    :func:`keras_bnn.distribute.global_logs`) it is the mean over the
    examples or the counted terms. An update no loss set is left as it is.
    """
    update = tracker.update_state

    def update_state(values, sample_weight=None):
        value, weight = _pending().pop(id(tracker), (None, sample_weight))
        return update(values if value is None else value, sample_weight=weight)

    tracker.update_state = update_state
