"""JAX implementations of the backend operations."""

import contextlib
import math

import jax
import jax.extend.random
import jax.numpy as jnp
import keras
import numpy as np

from keras_bnn import nonfinite, precision
from keras_bnn.keras_private import get_keras_mask, set_keras_mask  # as Keras' losses


def wide_float():
    """The widest float dtype (HMC's energies are summed in it).

    float64 only with 64-bit arrays enabled, read at each call: enabling
    them after import (``jax.config.update("jax_enable_x64", True)``)
    counts too.

    Returns:
        ``"float64"`` or ``"float32"``.
    """
    return "float64" if jax.config.read("jax_enable_x64") else "float32"


def stateless_normal(shape, seed, index, step, dtype):
    """Standard normal noise that is a pure function of (seed, index, step).

    ``jax.random.normal(fold_in(fold_in(key(seed), index), step), shape)``;
    the TensorFlow backend computes the same numbers for float32 and float64
    (:mod:`keras_bnn.backend.threefry`). A float64 draw without 64-bit arrays
    (HMC's accept draw, :func:`wide_float`) is that float64 draw in float32
    (:func:`_float64_draw_in_float32`), not JAX's float32 draw, which is
    other numbers. The key is Threefry-2x32's and the draw takes its bits in
    the partitionable layout whatever JAX's ``jax_default_prng_impl`` (``rbg``
    on TPUs) and ``jax_threefry_partitionable`` say: under those settings
    ``jax.random.normal`` returns other numbers (and an ``rbg`` key has 4
    words, which the float64 draw cannot hash).

    Args:
        shape: shape of the draw.
        seed: Python int, the sampler's seed.
        index: Python int, the variable's index in the optimizer.
        step: integer scalar array, the optimizer's ``iterations``.
        dtype: floating dtype of the draw.

    Returns:
        Array of ``shape`` with i.i.d. N(0, 1) entries (float32 for a float64
        draw without 64-bit arrays).
    """
    key = jax.random.key(seed, impl="threefry2x32")
    key = jax.random.fold_in(jax.random.fold_in(key, index), step)
    if jnp.dtype(dtype) == jnp.float64 and wide_float() == "float32":
        return _float64_draw_in_float32(key, tuple(shape))
    with jax.threefry_partitionable(True):
        return jax.random.normal(key, shape, dtype=dtype)


def _float64_draw_in_float32(key, shape):
    """JAX's float64 normal draw of ``key`` computed in float32, to float32 rounding.

    The float64 draw reads 64 random bits ``b1·2³² + b2`` per element (the
    float32 draw reads ``b1 ^ b2``): ``(b1, b2) = H_key(0, i)``, the
    Threefry-2x32 hash of element i's counter. Here the unit
    ``f = (b1 + b2·2⁻³²)·2⁻³²`` in float32 (kept below 1), then, as JAX:
    ``u = max(lo, f·(1 - lo) + lo)`` with ``lo`` the float next to -1
    towards 0, and ``z = √2·erfinv(u)``.

    Args:
        key: a JAX PRNG key.
        shape: tuple, the shape of the draw.

    Returns:
        float32 array of ``shape``.
    """
    size = math.prod(shape)
    counters = jnp.concatenate([jnp.zeros(size, jnp.uint32), jnp.arange(size, dtype=jnp.uint32)])
    bits = jax.extend.random.threefry_2x32(jax.random.key_data(key), counters)
    high, low = bits[:size].astype(jnp.float32), bits[size:].astype(jnp.float32)
    unit = jnp.minimum((high + low * 2.0**-32) * 2.0**-32, np.nextafter(np.float32(1), 0))
    lo = np.nextafter(np.float32(-1), np.float32(0))
    uniform = jnp.maximum(lo, unit * (1 - lo) + lo)
    return (np.float32(np.sqrt(2)) * jax.lax.erf_inv(uniform)).reshape(shape)


def fused(function):
    """Returns ``function``: JAX compiles the whole training step, fusing it.

    Args:
        function: a pure function of arrays.

    Returns:
        ``function`` unchanged.
    """
    return function


def finite_guard(tensors, messages):
    """A no-op context: under JAX the model's step checks finiteness itself.

    A compiled JAX step cannot raise without a host round-trip on every
    step, so :func:`apply_if_finite` skips a non-finite step instead (see
    :mod:`keras_bnn.nonfinite`).

    Args:
        tensors, messages: unused (the TensorFlow guard's signature).

    Returns:
        A no-op context manager.
    """
    del tensors, messages
    return contextlib.nullcontext()


@contextlib.contextmanager
def values_kept(model):
    """Puts back, should the body raise, the values Keras' JAX loop took out of
    ``model``'s variables.

    Keras' JAX ``predict`` and ``evaluate`` take the weights out of the
    variables at their first batch (one copy on the device) and put them back
    only at a normal end: a batch that fails (one JAX cannot shard) left the
    model without weights, and every later use failed with
    ``TypeError: 'NoneType' object is not callable``.
    Where a batch ran, its step was given (donated) the arrays and returned
    them in Keras' ``_jax_state``, which ``jax_state_sync`` assigns; where
    none ran, the values read before the loop are put back.

    Args:
        model: a Keras model.

    Yields:
        None.
    """
    kept = [(v, v.value) for v in [*model.trainable_variables, *model.non_trainable_variables,
                                   *model.metrics_variables]]
    try:
        yield
    except BaseException:
        model.jax_state_sync()
        for variable, value in kept:
            if variable._value is None:  # taken out before a batch ran
                variable._value = value
        model._jax_state = None  # as at the end of Keras' loop
        raise


def num_replicas():
    """1: under JAX a data-parallel step works on global (sharded) arrays."""
    return 1


def adopt_current_strategy(optimizer):
    """Nothing under JAX: ``keras.distribution`` has no per-object strategy."""
    del optimizer


def to_numpy(value):
    """A tensor or variable's value as a NumPy array, read on the host.

    A Keras variable is read through its ``value`` (its own ``__array__``
    takes no ``copy`` argument, and NumPy 2 warns of it).
    """
    return keras.ops.convert_to_numpy(getattr(value, "value", value))


def _potential_and_gradients(model, x, y, sample_weight):
    """``jax.value_and_grad`` of the batch's mean-form potential in the trainable values.

    The returned function maps trainable values to ``((loss, y_pred,
    prior_term, non_trainable_values, metric_values), gradients)``: a
    stateless forward pass at those values (the non-trainable ones read
    now), and :meth:`keras_bnn.BayesianModel.potential_terms`' ``mean NLL +
    (1/n)·(-log p(θ))``. ``metric_values`` are ``model.metrics_variables``
    after the compiled loss updated its trackers (a multi-output model's
    per-output losses), for the caller to keep or drop. ``y_pred`` keeps
    each output's Keras mask (``Embedding(mask_zero=True)``), which
    ``jax.value_and_grad``'s outputs lose: carried out as an auxiliary
    output and set again, so that the step's metrics and its count of a
    per-timestep loss's terms (:func:`keras_bnn.loss_terms.step_positions`) read
    the masked mean, as on TensorFlow. A sampler computing in float16
    differentiates ``S·loss`` and divides by S
    (:func:`keras_bnn.precision.gradient_scale`, :func:`_unscaled`).
    """
    non_trainable_values = [v.value for v in model.non_trainable_variables]
    metric_mapping = [(v, v.value) for v in model.metrics_variables]

    # As Keras' JAX trainer: a subclass's `call` without `training` is not given it.
    training = {"training": True} if model._call_has_training_arg else {}

    def potential(values, scale):
        y_pred, new_values, losses = model.stateless_call(
            values, non_trainable_values, x, return_losses=True, **training)
        with keras.StatelessScope(state_mapping=metric_mapping) as scope:
            nll, prior_term = model.potential_terms(y, y_pred, sample_weight, losses)
        metric_values = [old if (new := scope.get_current_value(v)) is None else new
                         for v, old in metric_mapping]
        loss = nll + prior_term
        masks = [get_keras_mask(output) for output in keras.tree.flatten(y_pred)]
        return loss * scale, (loss, y_pred, prior_term, new_values, metric_values, masks)

    gradient = jax.value_and_grad(potential, has_aux=True)
    scale = precision.gradient_scale(model)

    def value_and_gradient(values):
        (_, aux), gradients = gradient(values, 1.0 if scale is None else scale)
        if scale is not None:
            gradients = _unscaled(gradients, aux[0], scale, lambda s: gradient(values, s)[1])
        *aux, masks = aux
        for output, mask in zip(keras.tree.flatten(aux[1]), masks):
            set_keras_mask(output, mask)
        return tuple(aux), gradients

    return value_and_gradient


def _unscaled(gradients, potential, scale, gradients_at):
    """Gradients of ``S·U/n`` (``S = scale``) divided by S, recomputed where they overflow.

    ``g = ∇(s·U/n)/s`` for the largest ``s = S/2^m`` (m ≥ 0) at which every
    gradient is finite, down to s = 1 (as on TensorFlow; a non-finite
    ``potential`` at once): a ``lax.while_loop`` that runs no iteration when
    the first gradients are finite. The division by a power of two is exact
    in float32.

    Args:
        gradients: gradients of ``S·U/n``.
        potential: ``U/n``.
        scale: S, a Python float (a power of two).
        gradients_at: ``s -> gradients of s·U/n`` at the same weights and batch.

    Returns:
        The gradients of ``U/n``.
    """
    def again(carry):
        s, values = carry
        return jnp.isfinite(potential) & (s > 1.0) & ~nonfinite.all_finite(0.0, values)

    def halve(carry):
        s = carry[0] / 2.0
        return s, list(gradients_at(s))

    found, chosen = jax.lax.while_loop(again, halve, (jnp.float32(scale), list(gradients)))
    return [g / found.astype(g.dtype) for g in chosen]


def value_and_gradients(model, x, y, sample_weight):
    """Forward pass, mean-form potential and its gradients at the current weights.

    Reads the weights' current values (those of the enclosing
    ``StatelessScope`` in :func:`run_train_step`) and differentiates
    :meth:`keras_bnn.BayesianModel.potential_terms`' ``mean NLL +
    (1/n)·(-log p(θ))`` with ``jax.value_and_grad`` (scaled under float16:
    :func:`_potential_and_gradients`); the forward pass's
    non-trainable updates, and the compiled loss's tracker updates (a
    multi-output model's per-output losses, as on TensorFlow), are assigned
    back.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        x, y, sample_weight: the unpacked batch.

    Returns:
        ``(y_pred, loss, prior_term, gradients)`` as on TensorFlow.
    """
    (loss, y_pred, prior_term, new_values, metric_values), gradients = \
        _potential_and_gradients(model, x, y, sample_weight)(
            [v.value for v in model.trainable_variables])
    for variable, value in zip([*model.non_trainable_variables, *model.metrics_variables],
                               [*new_values, *metric_values]):
        variable.assign(value)
    return y_pred, loss, prior_term, gradients


def potential_and_gradients(model, values, x, y, sample_weight):
    """Mean-form potential and its gradients at weights ``values`` (not assigned).

    A pure function of ``values`` (the forward pass's non-trainable updates
    are dropped), so HMC's leapfrog trajectory can run it inside
    ``lax.fori_loop``. Under ``keras.distribution`` the batch is one global
    (sharded) array: the value is already the global batch's.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        values: arrays, one per ``model.trainable_variables``.
        x, y, sample_weight: the unpacked batch.

    Returns:
        ``(loss, gradients, (y_pred, loss, prior_term))`` as on TensorFlow.
    """
    (loss, y_pred, prior_term, _, _), gradients = _potential_and_gradients(
        model, x, y, sample_weight)(list(values))
    return loss, gradients, (y_pred, loss, prior_term)


def batch_gradients(model):
    """A compiled ``(x, y) -> gradients`` of a batch's mean-form potential.

    The gradients of :func:`potential_and_gradients` at the model's current
    trainable and non-trainable values (both read at each call and passed to
    the compiled function as arguments), compiled once per input shape
    (``jax.jit``), as on TensorFlow. Read inside the compiled function, the
    non-trainable values were its constants: a frozen layer's weights
    assigned after the first call (or another sample loaded) left the
    gradients those of the old values.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.

    Returns:
        A callable ``(x, y)`` → list of gradient arrays, one per trainable
        variable.
    """
    def gradients_at(values, fixed, x, y):
        with keras.StatelessScope(state_mapping=list(zip(model.non_trainable_variables, fixed))):
            return potential_and_gradients(model, values, x, y, None)[1]

    compiled = jax.jit(gradients_at)

    def gradients(x, y):
        return compiled([variable.value for variable in model.trainable_variables],
                        [variable.value for variable in model.non_trainable_variables], x, y)

    return gradients


def loss_as_shard(value, y_pred, sample_weight, reduction, labels_counted=None):
    """``value``: under ``keras.distribution`` the batch is one global array, so
    each output's loss is already the global batch's (see the TensorFlow
    version).

    Args:
        value: one output's compiled loss.
        y_pred, sample_weight, reduction, labels_counted: unused.

    Returns:
        ``value``.
    """
    del y_pred, sample_weight, reduction, labels_counted
    return value


def predict_graph(function, example_shape, dtype, jit_compile):
    """``function`` itself: Keras' predict loop compiles its step (``jax.jit``,
    the variables passed as arguments; the calling model's ``jit_compile``),
    once per batch shape; JAX does not warn of compiling again.

    Args:
        function: a function of one ``[batch, *example_shape]`` array (a
            list or dict of them for several inputs).
        example_shape, dtype, jit_compile: unused (TensorFlow's graph takes
            them; here the model's predict step compiles).

    Returns:
        ``(function, run_eagerly)`` with ``run_eagerly`` False.
    """
    del example_shape, dtype, jit_compile
    return function, False


def map_members(function, stacks):
    """``keras.ops.map`` (``jax.lax.map``) of ``function`` over the members.

    Args:
        function: a function of a list of one member's slices, returning a list of tensors.
        stacks: list of [S, ...] arrays.

    Returns:
        list of [S, ...] arrays, ``function``'s outputs stacked.
    """
    return list(keras.ops.map(function, stacks))


def assign_replicated(variables, values):
    """Assigns ``values`` to ``variables``: one global array serves every device.

    Args:
        variables: Keras variables.
        values: arrays, one per variable.
    """
    for variable, value in zip(variables, values):
        variable.assign(value)


def assign_where(condition, variables, values):
    """Assigns ``values`` to ``variables`` where the scalar ``condition`` holds.

    ``jax.lax.cond`` picks the new or the old arrays, so when ``condition``
    is false no element is computed (see the TensorFlow version).

    Args:
        condition: boolean scalar.
        variables: Keras variables.
        values: callables, one per variable, returning its new value.
    """
    old = [variable.value for variable in variables]
    chosen = jax.lax.cond(condition, lambda: [make() for make in values], lambda: old)
    for variable, value in zip(variables, chosen):
        variable.assign(value)


def apply_if_finite(optimizer, loss, gradients, variables):
    """Applies one optimizer step, keeping every old value when it is not finite.

    The step is applied, then each trainable and optimizer variable (the
    step counter included) is set to ``where(finite, new, old)``: XLA fuses
    the select into the update, and a non-finite step changes nothing.

    Args:
        optimizer: the sampler or optimizer.
        loss: the potential of this step.
        gradients: gradients for ``variables``.
        variables: the trainable variables.

    Returns:
        Float scalar: 1.0 when the step was skipped, else 0.0.
    """
    finite = nonfinite.all_finite(loss, gradients)
    state = list(variables) + list(optimizer.variables)
    old = [v.value for v in state]
    optimizer.apply(gradients, variables)
    for variable, value in zip(state, old):
        variable.assign(jnp.where(finite, variable.value, value))
    return 1.0 - finite.astype("float32")


def run_train_step(model, step, state, data):
    """Runs the model's stateful ``step(data)`` as Keras' JAX trainer calls it: purely.

    Keras' JAX ``train_step(state, data)`` receives every variable's value
    and returns the new values. The step is written statefully (it assigns
    weights, sampler state and metric trackers, as on TensorFlow); inside a
    ``StatelessScope`` mapping each variable to its value in ``state`` those
    assignments are recorded instead of performed, and read back here.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        step: callable ``step(data) -> logs``.
        state: ``(trainable, non_trainable, optimizer, metrics)`` value lists.
        data: the batch.

    Returns:
        ``(logs, new_state)``.
    """
    groups = (model.trainable_variables, model.non_trainable_variables,
              model.optimizer.variables, model.metrics_variables)
    mapping = [pair for variables, values in zip(groups, state)
               for pair in zip(variables, values)]
    with keras.StatelessScope(state_mapping=mapping) as scope:
        logs = step(data)
    new_state = tuple(
        [value if (value := scope.get_current_value(v)) is not None else old
         for v, old in zip(variables, values)]
        for variables, values in zip(groups, state))
    return logs, new_state
