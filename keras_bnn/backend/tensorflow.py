"""TensorFlow implementations of the backend operations."""

import contextlib
import math
import threading

import keras
import tensorflow as tf

from keras_bnn import nonfinite, precision
from keras_bnn.backend import tensorflow_distribute, tensorflow_float16, threefry


def wide_float():
    """The widest float dtype (HMC's energies are summed in it).

    Returns:
        ``"float64"``.
    """
    return "float64"


# Trace-time flag: set while `apply_if_finite` traces an update whose
# gradients it has already found finite (thread-local: traces may run in
# several threads under tf.distribute).
_trace_state = threading.local()


def stateless_normal(shape, seed, index, step, dtype):
    """Standard normal noise that is a pure function of (seed, index, step).

    The draw of :mod:`keras_bnn.backend.threefry` (JAX's Threefry-2x32 and
    ``√2·erfinv``), compiled with XLA into one loop: for a float32 variable
    the same numbers as the JAX backend's draw, at less than half the CPU
    time of TensorFlow's Philox kernel on a CPU. The key folds ``index`` and then
    ``step`` into ``seed``: distinct for every variable and every step.
    Every replica and every worker computes the same key and so the same
    noise; a resumed run (same ``iterations``) continues the chain. Float
    dtypes other than float32 and float64 are drawn in float32 and cast.

    The draw is created without control dependencies: the noise needs only
    the step counter, not the gradients, so in a traced step TensorFlow runs
    it alongside the forward and backward pass instead of after the gradient
    check (on CPU this hides part of its cost on otherwise idle cores).
    Inside a step that is already XLA-compiled the draw is inlined.

    Args:
        shape: shape of the draw.
        seed: Python int in [0, 2³¹), the sampler's seed.
        index: Python int, the variable's index in the optimizer.
        step: integer scalar tensor, the optimizer's ``iterations``.
        dtype: floating dtype of the draw.

    Returns:
        Tensor of ``shape`` with i.i.d. N(0, 1) entries.
    """
    dtype = tf.as_dtype(dtype)
    draw_dtype = dtype if dtype in (tf.float32, tf.float64) else tf.float32
    shape = tuple(shape)
    with tf.control_dependencies(None):
        draw = _compiled_normal(tf.constant([seed, index], tf.int64), tf.cast(step, tf.int64),
                                tf.constant(math.prod(shape), tf.int64), dtype=draw_dtype)
        return tf.cast(tf.reshape(draw, shape), dtype)


def fused(function):
    """Compiles an elementwise update function into one XLA kernel.

    The noise draw (:mod:`keras_bnn.backend.threefry`) is one. The
    thermostat update (SGNHT/ATMC) is some twenty elementwise operations
    over every parameter; TensorFlow's executor runs each as a separate pass
    over memory, XLA fuses them into one loop (on 2 CPU cores: 13.6 → 7.7 ms
    for a 670k-parameter MLP). The few operations of SGLD and SGHMC are not
    fused: there XLA's single-threaded CPU loop was no faster than
    TensorFlow's multi-threaded kernels. Inside a step that is already
    XLA-compiled (``jit_compile=True``) the function is simply inlined.

    Args:
        function: a pure function of tensors (Python values in its arguments
            select a variant and are traced as constants).

    Returns:
        A callable running the compiled ``tf.function``; Keras variables among
        its positional arguments are passed as their current values. Its
        ``tracing_count()`` is the number of traces of that function.
    """
    compiled = tf.function(function, jit_compile=True, autograph=False)

    def call(*args, **kwargs):
        return compiled(
            *[tf.convert_to_tensor(a.value) if isinstance(a, keras.Variable) else a
              for a in args],
            **kwargs,
        )

    call.tracing_count = compiled.experimental_get_tracing_count
    return call


#: The noise draw: traced once per dtype, its size a tensor that XLA takes as a
#: compile-time constant (one executable per (size, dtype), kept for the process).
#: Every train function (each new model's) builds an XLA kernel of each traced
#: function it calls, and TensorFlow keeps it: traced per size (a Python int),
#: the draws of an MLP of 3 sizes kept 3.1 MB per new train function, one trace
#: 0.26 MB (2026-11-29; a new model's SGHMC fit: 2.95 → 0.97 MB kept).
_compiled_normal = fused(threefry.normal)


def to_numpy(value):
    """A tensor or variable's value as a NumPy array, read on the host.

    ``keras.ops.convert_to_numpy`` calls ``np.array``, which a
    ``tf.distribute`` mirrored variable refuses inside ``strategy.scope()``
    ("object __array__ method not producing an array"); its ``numpy()``
    reads the value every replica holds.
    """
    value = value.value if isinstance(value, keras.Variable) else value
    return value.numpy() if hasattr(value, "numpy") else keras.ops.convert_to_numpy(value)


def value_and_gradients(model, x, y, sample_weight):
    """Forward pass, mean-form potential and its gradients at the current weights.

    The potential is :meth:`keras_bnn.BayesianModel.potential_terms`'
    ``mean NLL + (1/n)·(-log p(θ))``. In graph mode a NaN/Inf potential
    stops the step here (``check_numerics`` with
    :data:`keras_bnn.nonfinite.MARKER`); XLA compiles that check away and
    the model's step skips the update instead. The gradients are those of
    ``model.optimizer.scale_loss(potential)``: of the potential itself, but
    for the ``LossScaleOptimizer`` Keras wraps a baseline optimizer in under
    ``"mixed_float16"``, which unscales them. A sampler computing in float16
    differentiates ``S·potential`` and divides by S instead
    (:func:`keras_bnn.precision.gradient_scale`;
    :func:`keras_bnn.backend.tensorflow_float16.unscaled` recomputes
    an overflowing gradient at ``S/2^m``). Under ``tf.distribute`` Keras
    divides each replica's terms by the replica count and the optimizer
    SUM-reduces gradients; each replica's loss is weighted by its share of
    the batch (:func:`keras_bnn.backend.tensorflow_distribute.shard_weight`),
    so the applied gradient is the global batch's, evenly split or not.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        x, y, sample_weight: the unpacked batch.

    Returns:
        ``(y_pred, loss, prior_term, gradients)``: the predictions, this
        replica's potential and prior term ``(1/n)·(-log p(θ))`` (not divided
        by the replica count) and the gradients for
        ``model.trainable_variables``.
    """
    scale = precision.gradient_scale(model)
    with tf.GradientTape() as tape:
        y_pred = model(x, training=True)
        nll, prior_term = model.potential_terms(y, y_pred, sample_weight, model.losses)
        loss = tf.debugging.check_numerics(nll + prior_term, nonfinite.MARKER)
        weight = tensorflow_distribute.shard_weight(y_pred, loss.dtype)
        # `loss` itself but for a LossScaleOptimizer
        scaled = model.optimizer.scale_loss(loss * weight)
        if scale is not None:
            scaled = scaled * scale
    gradients = tape.gradient(scaled, model.trainable_variables)
    if scale is not None:
        values = [variable.value for variable in model.trainable_variables]
        gradients = tensorflow_float16.unscaled(
            gradients, loss, scale,
            lambda s: _stateless_gradients(model, values, x, y, sample_weight, s * weight)[-1])
    replicas = float(tensorflow_distribute.num_replicas())
    return y_pred, loss * replicas, prior_term * replicas, gradients


def _stateless_gradients(model, values, x, y, sample_weight, scale):
    """This replica's ``(y_pred, potential, prior_term, gradients)`` at weights ``values``:
    a forward pass in a ``keras.StatelessScope`` (nothing assigned), the gradients of
    ``scale·potential`` (of the potential where ``scale`` is None)."""
    with tf.GradientTape() as tape:
        tape.watch(values)
        with keras.StatelessScope(state_mapping=list(zip(model.trainable_variables, values))):
            y_pred = model(x, training=True)
            nll, prior_term = model.potential_terms(y, y_pred, sample_weight, model.losses)
            potential = nll + prior_term
        scaled = potential if scale is None else potential * scale
    return y_pred, potential, prior_term, tape.gradient(scaled, values)


def run_train_step(model, step, data):
    """Runs the model's step ``step(data)``: Keras' TensorFlow trainer is stateful.

    Args:
        model: the :class:`keras_bnn.BayesianModel` (unused here; the JAX
            version maps its variables).
        step: callable ``step(data) -> logs``.
        data: the batch.

    Returns:
        The step's logs.
    """
    del model
    return step(data)


def values_kept(model):
    """A no-op context: TensorFlow's loops leave the variables' values in place."""
    del model
    return contextlib.nullcontext()


def finite_guard(tensors, messages):
    """Context under which every new op runs after all ``tensors`` are checked.

    The returned context adds a control dependency on the check, so no update
    created inside it (of any variable, nor the step counter) runs when one
    tensor holds a NaN or Inf: the step fails as a whole with
    ``InvalidArgumentError`` (the message of the first bad tensor) and leaves
    every variable unchanged. Eagerly the checks run (and raise) right here.

    Cost: this runs on every gradient at every step, so the common case is one
    reduction per tensor (a sum is NaN/Inf whenever an element is); only when
    a sum is not finite (a bad element, or rarely finite values whose sum
    overflows) does ``check_numerics`` run on every tensor to decide and to
    name the variable. ``check_numerics`` on every tensor unconditionally
    costs about twice as much (measured on CPU).

    Under XLA (``jit_compile=True``) TensorFlow compiles ``check_numerics``
    to a no-op, so this guard could not stop a step there; the XLA path of
    ``train_step`` (:func:`apply_if_finite`) checks first and traces the
    update with the guard switched off, saving a pass over the gradients.

    Args:
        tensors: list of floating tensors (``None`` entries are skipped).
        messages: one message per tensor, included in the error.

    Returns:
        A context manager.
    """
    present = [(t, m) for t, m in zip(tensors, messages) if t is not None]
    if not present or getattr(_trace_state, "checked", False):
        return tf.control_dependencies([])
    if tf.executing_eagerly():
        for t, m in present:
            tf.debugging.check_numerics(t, m)
        return tf.control_dependencies([])
    sums_finite = tf.reduce_all(
        tf.stack([tf.math.is_finite(tf.reduce_sum(t)) for t, _ in present])
    )

    def exact():
        checks = [tf.debugging.check_numerics(t, m) for t, m in present]
        with tf.control_dependencies(checks):
            return tf.constant(True)

    checked = tf.cond(sums_finite, lambda: tf.constant(True), exact)
    return tf.control_dependencies([checked])


def apply_if_finite(optimizer, loss, gradients, variables):
    """Applies one optimizer step only when the potential and gradients are finite.

    The XLA path of ``BayesianModel.train_step``: XLA compiles
    ``check_numerics`` away, so instead of raising, a non-finite step is
    skipped whole (no weight, state or step-counter change) and counted;
    ``BayesianModel.fit`` stops at the end of the epoch when the count is > 0.

    Args:
        optimizer: the sampler or optimizer (built here if needed, outside
            the conditional, so its variables can be lifted).
        loss: the potential of this step.
        gradients: gradients for ``variables``.
        variables: the trainable variables.

    Returns:
        Float scalar: 1.0 when the step was skipped, else 0.0.
    """
    if not optimizer.built:
        optimizer.build(variables)
    finite = tf.reduce_all(
        tf.stack(
            [tf.reduce_all(tf.math.is_finite(loss))]
            + [tf.reduce_all(tf.math.is_finite(g)) for g in gradients if g is not None]
        )
    )

    def apply():
        _trace_state.checked = True  # `finite` holds here: no second scan
        try:
            optimizer.apply(gradients, variables)
        finally:
            _trace_state.checked = False
        return tf.constant(0.0)

    return tf.cond(finite, apply, lambda: tf.constant(1.0))


def potential_and_gradients(model, values, x, y, sample_weight):
    """Mean-form potential and its gradients at weights ``values`` (not assigned).

    The forward pass and the loss run in a ``keras.StatelessScope`` that maps
    the model's trainable variables to ``values``, so the priors (layer
    losses) are evaluated at ``values`` too and no variable is written: the
    leapfrog trajectory of :class:`keras_bnn.samplers.HMC` moves tensors,
    and only its end point (or the old state) is ever assigned.

    A sampler computing in float16 takes the gradients scaled, as
    :func:`value_and_gradients` (each replica unscales its own before the
    sum). Under ``tf.distribute`` the loss and gradients are summed over replicas,
    each weighted by its share of the batch, so every replica gets the
    global-batch value ``mean NLL + (1/n)·(-log p(θ))``, evenly split or not.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.
        values: tensors, one per ``model.trainable_variables``.
        x, y, sample_weight: the unpacked batch.

    Returns:
        ``(loss, gradients, (y_pred, local_loss, local_prior))``: the global
        potential and gradients (identical on every replica), and this
        replica's predictions, potential (not divided by the replica count)
        and prior term ``(1/n)·(-log p(θ))``.
    """
    scale = precision.gradient_scale(model)
    y_pred, scaled, prior_term, gradients = _stateless_gradients(
        model, values, x, y, sample_weight, scale)
    if scale is not None:
        gradients = tensorflow_float16.unscaled(
            gradients, scaled, scale,
            lambda s: _stateless_gradients(model, values, x, y, sample_weight, s)[-1])
    replicas = tensorflow_distribute.num_replicas()
    scaled_sum = scaled
    if replicas > 1:
        # Keras divides each replica's mean by R, which weighs the examples of a
        # smaller shard more (15 on 2: 8 + 7, each weighed 15/16 or 15/14: HMC
        # sampled another posterior). Weighted by R·b_r and divided by B = Σ b_r,
        # reduced in the same call, the sum is the global batch's.
        shard = tensorflow_distribute.shard_size(y_pred, scaled.dtype)
        weight = float(replicas) * shard
        batch, scaled_sum, *gradients = tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM,
            [shard, scaled * weight, *(g * tf.cast(weight, g.dtype) for g in gradients)])
        scaled_sum = scaled_sum / batch
        gradients = [g / tf.cast(batch, g.dtype) for g in gradients]
    return scaled_sum, gradients, (y_pred, scaled * float(replicas),
                                   prior_term * float(replicas))


def batch_gradients(model):
    """A compiled ``(x, y) -> gradients`` of a batch's mean-form potential.

    The gradients of :func:`potential_and_gradients` at the model's current
    trainable values (read at each call), traced once per input shape
    (``tf.function``): a diagnostic that takes the gradient of many small
    batches (:mod:`keras_bnn.directional_noise`) pays the graph's cost, not
    eager execution's, per batch.

    Args:
        model: the :class:`keras_bnn.BayesianModel`.

    Returns:
        A callable ``(x, y)`` → list of gradient tensors, one per trainable
        variable.
    """

    @tf.function(autograph=False, reduce_retracing=True)
    def gradients(x, y):
        values = [variable.value for variable in model.trainable_variables]
        return potential_and_gradients(model, values, x, y, None)[1]

    return gradients


def predict_graph(function, example_shape, dtype, jit_compile):
    """``function`` of a batch as one graph for any batch size, for Keras' predict loop.

    ``function`` is traced once, with the batch axis unknown (the concrete
    function of ``TensorSpec((None, *example_shape), dtype)``), and Keras'
    predict loop is to call that graph on every batch without tracing its own
    step (``run_eagerly``). Keras' predict step is a ``tf.function`` traced
    for the first batch's size and again for a last batch of another size,
    and TensorFlow counts the traces of every model's predict step as those
    of one function (they share its code): a few ensembles made, or one
    predicting three ways, and it warned of "tf.function retracing".

    Args:
        function: a function of one ``[batch, *example_shape]`` tensor (a
            list or dict of them for several inputs).
        example_shape: one example's shape (no batch axis), or a list or
            dict of them (a member of several inputs).
        dtype: the examples' dtype, or a list or dict of them alike.
        jit_compile: whether the graph is compiled by XLA (the ensemble's
            ``jit_compile``, as Keras' own predict step would take it).

    Returns:
        ``(graph, run_eagerly)``: the traced graph, a callable of such a
        tensor, and the ``run_eagerly`` of the ``keras.Model`` that calls it
        (True).
    """
    if isinstance(example_shape, dict):
        spec = {k: tf.TensorSpec((None, *example_shape[k]), dtype[k]) for k in example_shape}
    elif isinstance(example_shape, list):
        spec = [tf.TensorSpec((None, *shape), d) for shape, d in zip(example_shape, dtype)]
    else:
        spec = tf.TensorSpec((None, *example_shape), dtype)
    graph = tf.function(function, autograph=False, jit_compile=bool(jit_compile))
    concrete = graph.get_concrete_function(spec)
    # A concrete function does not bind a list or dict argument (it asks for the
    # traced function's defaults too, `training`): the tf.function, which runs
    # that one trace for every batch of such inputs, is called instead.
    return (graph if isinstance(spec, (list, dict)) else concrete), True


def map_members(function, stacks):
    """``keras.ops.map`` of ``function`` over the members, each run exactly once.

    Keras' ``ops.map`` runs ``function`` once more, outside ``tf.map_fn``, for
    its output signature (eagerly: S + 1 members). Here the first member's
    outputs give it and are kept; ``tf.map_fn`` runs the other S - 1.

    Args:
        function: a function of a list of one member's slices, returning a list of tensors.
        stacks: list of [S, ...] tensors.

    Returns:
        list of [S, ...] tensors, ``function``'s outputs stacked.
    """
    first = function([stack[0] for stack in stacks])
    if stacks[0].shape[0] == 1:
        return [leaf[None] for leaf in first]
    rest = tf.map_fn(function, [stack[1:] for stack in stacks],
                     fn_output_signature=[tf.TensorSpec.from_tensor(leaf) for leaf in first])
    return [tf.concat([leaf[None], more], 0) for leaf, more in zip(first, rest)]
