"""The TensorFlow backend's ``tf.distribute`` helpers.

The replica count, a sampler's strategy taken at build time, each replica's
share of the global batch (:func:`shard_weight`, :func:`loss_as_shard`) and
the assignments that update every replica's copy of a variable
(:func:`assign_replicated`, :func:`assign_where`).
:mod:`keras_bnn.backend` takes the public ones from here, under the names
every backend has.
"""

import keras
import tensorflow as tf

from keras_bnn import loss_terms


def num_replicas():
    """Number of replicas of the current ``tf.distribute`` strategy.

    Returns:
        Python int, 1 without a strategy.
    """
    return tf.distribute.get_strategy().num_replicas_in_sync


def adopt_current_strategy(optimizer):
    """Gives ``optimizer`` the ``tf.distribute`` strategy it is built under.

    Keras' TensorFlow optimizer records the strategy current when it is
    constructed and creates its slots under that one, so a sampler made
    before ``strategy.scope()`` and compiled inside it failed at its first
    step ("Mixing different tf.distribute.Strategy objects"). Its step counter
    and learning-rate variable, made with it, were plain variables that each
    replica updated: on 2 replicas ``iterations`` went up by 2 a step (the
    noise keys skipped every other step, the warm-up lasted half its steps).
    They are made again under the current strategy, keeping their values and
    their places among the optimizer's variables (its checkpoint order).
    Called when the sampler builds its state, inside the model's strategy scope.

    Args:
        optimizer: the sampler (a Keras TensorFlow optimizer); changed in place.
    """
    strategy = tf.distribute.get_strategy()
    if optimizer._distribution_strategy is strategy:
        return
    optimizer._distribution_strategy = strategy
    for attribute in ("_iterations", "_learning_rate"):
        old = getattr(optimizer, attribute)
        if not isinstance(old, keras.Variable):  # a schedule or a callable
            continue
        with keras.name_scope(optimizer.name, caller=optimizer):
            new = keras.Variable(old.numpy(), dtype=old.dtype, trainable=False,
                                 aggregation="only_first_replica", name=old.name)
        variables = [new if v is old else v for v in optimizer._variables]
        setattr(optimizer, attribute, new)  # Keras' tracker appends it
        optimizer._variables[:] = variables


def shard_size(y_pred, dtype):
    """This replica's number of examples b_r (the first axis of its predictions).

    Args:
        y_pred: this replica's predictions (a tensor, or a structure of them).
        dtype: dtype of the result.

    Returns:
        Scalar tensor of ``dtype``.
    """
    return tf.cast(tf.shape(tf.nest.flatten(y_pred)[0])[0], dtype)


def shard_weight(y_pred, dtype):
    """``R·b_r/B``: the weight that makes a replica's loss (Keras' mean over
    its b_r examples, divided by R) its share of the global batch's mean.

    Keras' own 1/R weighs the examples of a smaller shard more: a batch of 7
    on 2 replicas (4 + 3) made an SG step 24 % off the single-device step.
    One scalar all-reduce for B = Σ b_r (called in replica context); 1
    without a strategy of several replicas.

    Args:
        y_pred: this replica's predictions (a tensor, or a structure of them).
        dtype: dtype of the result.

    Returns:
        Scalar tensor of ``dtype``.
    """
    replicas = num_replicas()
    if replicas == 1:
        return tf.constant(1.0, dtype)
    shard = shard_size(y_pred, dtype)
    batch = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, shard)
    return float(replicas) * shard / batch


def loss_as_shard(value, y_pred, sample_weight, reduction, labels_counted=None):
    """One output's loss on a replica, rescaled to weigh as a plain mean of its shard.

    Keras divides a batch loss by its denominator ``d_r`` on this replica's
    shard: the number of loss values for a plain mean, the number of unmasked
    ones under a Keras mask (``Embedding(mask_zero=True)``: a per-timestep
    loss is a mean over the real timesteps) times the loss's own
    (``labels_counted``: labels not its ``ignore_class``), ``Σ_r w`` (times
    the masks) for ``"mean_with_sample_weight"``. The global batch's loss divides by
    ``D = Σ_r d_r``, so this replica's share of it is ``d_r/D``, not the
    ``b_r/B`` of a plain mean that the step weighs each replica's loss by
    (:func:`shard_weight`, and Keras' logged ``loss``, weighted by ``b_r``).
    Multiplied by ``(d_r/D)·(B/b_r)`` it weighs right in all of them, for
    each output of a model of several (each has its own denominator).
    Measured on a batch of 33 over 2 replicas (17 + 16), one SGLD step: a
    masked per-timestep loss (17 full sequences, 16 of one timestep) had its
    drift 14 % off the single-device step and ``nll`` read 1.0756 for
    1.0305; ``"mean_with_sample_weight"`` losses on two outputs with weights
    11 % and 1.9782 for 2.0510; labels padded with the loss's
    ``ignore_class`` (no Keras mask; 16 sequences of one label) until
    2026-11-29 counted as scored: drift 39 % off, ``nll`` 1.0994 for
    1.1025. One all-reduce of two scalars where ``d_r`` is not a fixed
    multiple of ``b_r``; ``value`` itself otherwise, without a strategy of
    several replicas or outside a replica context.

    Args:
        value: this output's loss on this replica (Keras' reduction of it,
            divided by the replica count R).
        y_pred: this output's predictions (their first axis counts b_r;
            their Keras mask, if any, is the loss's).
        sample_weight: this output's weights, or None.
        reduction: the loss's reduction (one of
            :data:`keras_bnn.loss_checks.MEAN_REDUCTIONS`).
        labels_counted: the loss's own mask of the labels it scores
            (:func:`keras_bnn.loss_terms.label_mask`), or None.

    Returns:
        The rescaled loss (0 for an empty shard or a denominator of 0).
    """
    context = tf.distribute.get_replica_context()
    # (Keras' TensorFlow tensors carry their mask as _keras_mask.)
    masked = getattr(y_pred, "_keras_mask", None) is not None or labels_counted is not None
    weighted = reduction == "mean_with_sample_weight" and sample_weight is not None
    if num_replicas() == 1 or context is None or (not masked and not weighted):
        return value
    counted = tf.cast(loss_terms.denominator(y_pred, sample_weight, reduction, labels_counted),
                      value.dtype)
    local = tf.stack([counted, shard_size(y_pred, value.dtype)])
    total = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
    return value * tf.math.divide_no_nan(local[0] * total[1], total[0] * local[1])


def assign_replicated(variables, values):
    """Assigns ``values`` (the same on every replica) to ``variables``.

    Outside a strategy a plain assignment; under ``tf.distribute`` (called in
    replica context, as ``train_step`` is) every copy of each mirrored
    variable is updated in a cross-replica ``merge_call``, as Keras'
    optimizers do.

    Args:
        variables: Keras (or TensorFlow) variables.
        values: tensors, one per variable.
    """
    variables = [v.value if isinstance(v, keras.Variable) else v for v in variables]

    def update(distribution, pairs):
        for variable, value in pairs:
            distribution.extended.update(
                variable, lambda v, new: v.assign(new), args=(value,), group=False
            )

    tf.__internal__.distribute.interim.maybe_merge_call(
        update, tf.distribute.get_strategy(), list(zip(variables, values))
    )


def assign_where(condition, variables, values):
    """Assigns ``values`` to ``variables`` where the scalar ``condition`` holds.

    ``variables[i] ← values[i]() if condition else variables[i]``: when
    ``condition`` is false (nearly every step) no element is computed, read
    or written. Outside a strategy one ``tf.cond`` holds every assignment;
    under ``tf.distribute`` each variable is updated on every replica (as
    :func:`assign_replicated`) under a ``tf.cond`` of its own.

    Args:
        condition: boolean scalar tensor, the same on every replica.
        variables: Keras (or TensorFlow) variables.
        values: callables, one per variable, returning its new value.
    """
    variables = [v.value if isinstance(v, keras.Variable) else v for v in variables]
    pairs = list(zip(variables, values))  # the same variables on every replica
    # Outside a strategy, or inside its variable update (no replica context:
    # Keras runs the optimizer's update steps there), one cond assigns.
    if not tf.distribute.has_strategy() or tf.distribute.get_replica_context() is None:
        tf.cond(condition, lambda: tf.group([v.assign(make()) for v, make in pairs]),
                tf.no_op)
        return

    def update(distribution, flag):
        for variable, make in pairs:
            def assign(target, flag, make=make):
                return tf.cond(flag, lambda: tf.group(target.assign(make())), tf.no_op)

            distribution.extended.update(variable, assign, args=(flag,), group=False)

    tf.__internal__.distribute.interim.maybe_merge_call(
        update, tf.distribute.get_strategy(), condition)
