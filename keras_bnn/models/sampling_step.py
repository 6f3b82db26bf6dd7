"""The body of ``BayesianModel``'s train step and the logs of its steps.

:func:`sampling_step` is the same step on every backend, written with
``keras.ops`` (``backend.run_train_step`` adapts it to the backend's
trainer); :func:`evaluation_logs` makes a test step's logs from Keras';
:func:`reducible` makes a step's logs those of the global batch under
``tf.distribute``; :func:`dropping_traced_gradients` keeps TensorFlow from
holding each trace of the train function. The model's methods keep Keras'
signatures and their documentation.
"""

import functools

import keras
from keras import ops

from keras_bnn import backend
from keras_bnn import distribute
from keras_bnn import label_checks
from keras_bnn import loss_shares
from keras_bnn import loss_terms
from keras_bnn.samplers import kernel as kernel_lib


def sampling_step(model, data):
    """One transition of the model's kernel on a batch, with its logs.

    Binds the batch into a :class:`~keras_bnn.samplers.kernel.BatchPotential`
    ``U(θ)/n`` (:meth:`keras_bnn.BayesianModel.potential_terms`), runs the
    model's ``transition_kernel`` under the NaN/Inf policy of
    :mod:`keras_bnn.nonfinite`, and updates the epoch-mean trackers: ``loss``,
    ``nll`` = loss - prior term, ``prior`` = n · prior term (``-log p(θ)``),
    the kernel's diagnostics and, where non-finite steps are skipped,
    ``nonfinite_steps``.

    Args:
        model: the compiled :class:`keras_bnn.BayesianModel`.
        data: the batch, as Keras' trainer gives it: ``x``, ``(x, y)`` or
            ``(x, y, sample_weight)``.

    Returns:
        dict: the step's logs (:func:`reducible`).
    """
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    # A replica's static length under tf.distribute is its shard of a distributed
    # dataset, or the whole batch, which train_on_batch hands every replica: not
    # the global batch (fit and train_on_batch check that on the host).
    batch = (None if loss_terms.counts_terms(model) or backend.num_replicas() > 1
             else keras.tree.flatten(x)[0].shape[0])
    potential = kernel_lib.BatchPotential(
        at_current=functools.partial(backend.value_and_gradients, model, x, y, sample_weight),
        at=functools.partial(backend.potential_and_gradients, model, x=x, y=y,
                             sample_weight=sample_weight),
        batch_size=batch)
    step = model.transition_kernel.transition(potential, model.trainable_variables,
                                              model._skips_nonfinite_steps())
    trackers = model._sampling_trackers
    if model._skips_nonfinite_steps():
        trackers["nonfinite_steps"].update_state(step.skipped)
    batch_size = ops.shape(keras.tree.flatten(x)[0])[0]
    model._loss_tracker.update_state(step.loss, sample_weight=batch_size)
    trackers["nll"].update_state(step.loss - step.prior_term, sample_weight=batch_size)
    trackers["prior"].update_state(step.prior_term * float(model.train_size))
    # fit's WarnOnEpochTotals: the weights, over the terms the loss counts, and the terms
    trackers["weight_totals"].update_step(model, y, step.y_pred, sample_weight, batch_size)
    # class indices out of range, 0/1 labels that are not: raised at the epoch's end
    label_checks.count_labels(model, y, step.y_pred, label_checks.TRAINING)
    for name, value in step.logs.items():
        trackers[name].update_state(value)
    if (model.transition_kernel.full_batch and model._compile_loss is not None
            and len(keras.tree.flatten(step.y_pred)) > 1):
        # HMC's potential is evaluated statelessly: the heads' loss trackers of a
        # model of several outputs are updated here, on the logged state's outputs.
        model._compile_loss(y, step.y_pred, sample_weight)
    return reducible(model, model.compute_metrics(x, y, step.y_pred, sample_weight=sample_weight))


def evaluation_logs(model, logs):
    """A test step's logs: ``nll`` = ``loss``, without the sampling trackers' keys.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        logs: dict, the logs Keras' test step (or its metrics) gave.

    Returns:
        dict: the logs without the keys of the model's sampling trackers
        (``prior``, the kernel's diagnostics), and ``nll`` = ``loss``, of
        several outputs the sum of their weighed losses
        (:func:`keras_bnn.loss_shares.evaluation_logs`).
    """
    trackers = getattr(model, "_sampling_trackers", {})
    logs = loss_shares.evaluation_logs(
        model, {name: value for name, value in logs.items() if name not in trackers})
    logs["nll"] = logs["loss"]
    return logs


def _multi_worker(model):
    return (keras.backend.backend() == "tensorflow"
            and distribute.is_multi_worker(model.distribute_strategy))


def reducible(model, logs):
    """A step's logs under ``tf.distribute``: the global batch's, reducible.

    The global batches' values (:func:`keras_bnn.distribute.global_logs`), and
    under several workers logs Keras can reduce (keras#20585 workaround 2, see
    :mod:`keras_bnn.distribute`). Elsewhere the logs as they are.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        logs: dict, the step's logs.

    Returns:
        dict: the logs to return from the step.
    """
    if keras.backend.backend() == "tensorflow":
        logs = distribute.global_logs(model, logs)
    return distribute.reducible_logs(logs) if _multi_worker(model) else logs


def dropping_traced_gradients(function):
    """``function``, each call removing the gradient functions its traces registered.

    TensorFlow's graph-mode ``tf.custom_gradient`` registers one per trace
    in a global registry (a dict: new entries come last) and never removes it.

    Args:
        function: the model's TensorFlow train function.

    Returns:
        A callable with ``function``'s arguments and results.
    """
    from tensorflow.python.framework import ops as tf_ops  # pylint: disable=import-outside-toplevel

    registry = tf_ops._gradient_registry._registry  # pylint: disable=protected-access

    def run(*args, **kwargs):
        known = len(registry)
        try:
            return function(*args, **kwargs)
        finally:
            if len(registry) > known:  # the call traced: O(1) otherwise, at every step
                for name in list(registry)[known:]:
                    del registry[name]

    return run
