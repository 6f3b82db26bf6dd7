"""tf.distribute helpers: who writes files, and the Keras 3 multi-worker workarounds; the
batches ``keras.distribution`` must split evenly on JAX (:func:`check_batches_split`).

Everything specific to running ``fit`` under a distribution strategy lives
here, with the one setting it refuses (:func:`check_jit_compile`). The
sampler side needs nothing special: noise is keyed on (seed, variable,
step), so every replica and worker injects the same noise.

Keras 3 ``fit`` under ``MultiWorkerMirroredStrategy`` fails out of the box
(keras-team/keras#20585), in two places; :class:`keras_bnn.BayesianModel`
routes both through this module:

1. ``_maybe_symbolic_build`` reduces the first distributed batch with
   ``strategy.reduce("MEAN", ..., axis=None)``, which fails for a multi-worker
   collective strategy, and under any strategy of several replicas when the
   batch does not split evenly (a batch of 33 on 2 replicas: shards of 17
   and 16, "Inputs to operation AddN ... must have the same size"; full-batch
   HMC on an odd number of examples). The batch is only used for its shapes
   and dtypes, so :func:`local_batch` takes this worker's first replica's
   values instead (:func:`needs_local_batch`).
2. Step logs are reduced with ``strategy.reduce("MEAN", v, axis=0)``, which
   fails for scalars. :func:`reducible_logs` gives each scalar a leading axis
   of length 1, so the reduction averages over replicas back to a scalar.

Remove both once the Keras version in use fixes the issue.

TensorFlow is imported inside the functions: under the JAX backend
``import keras_bnn`` imports no TensorFlow.
"""

import contextlib
import math
import re

from keras_bnn.fit_data import array_examples, batch_length


def is_multi_worker(strategy):
    """Whether ``strategy`` is a multi-worker collective strategy.

    Args:
        strategy: a ``tf.distribute.Strategy``.

    Returns:
        bool.
    """
    import tensorflow as tf

    return isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)


def needs_local_batch(strategy):
    """Whether Keras' reduce of the first batch can fail (workaround 1).

    Args:
        strategy: a ``tf.distribute.Strategy``.

    Returns:
        bool: for a multi-worker strategy, or one of several replicas.
    """
    return is_multi_worker(strategy) or strategy.num_replicas_in_sync > 1


def workers_per_batch(strategy):
    """How many workers' shares make one global batch of a distributed dataset.

    Under ``MultiWorkerMirroredStrategy`` a worker's
    ``strategy.experimental_distribute_dataset`` yields only its own
    replicas' shards of each global batch: the global batch is that share
    times ``num_replicas_in_sync`` over this worker's replica count.

    Args:
        strategy: a ``tf.distribute.Strategy``.

    Returns:
        int: the number of workers (1 without a multi-worker strategy).
    """
    if not is_multi_worker(strategy):
        return 1
    return strategy.num_replicas_in_sync // len(strategy.extended.worker_devices)


def is_chief(model):
    """Whether this process should write ``model``'s files (samples, exports).

    TensorFlow backend: true without a multi-worker cluster; under
    ``MultiWorkerMirroredStrategy`` only for the ``chief`` task, or worker 0
    when the cluster has no chief. JAX backend (no ``distribute_strategy``;
    multi-process runs use ``keras.distribution``): only process 0.

    Args:
        model: the Keras model being trained.

    Returns:
        bool.
    """
    import keras

    if keras.backend.backend() == "jax":
        import jax

        return jax.process_index() == 0
    return _is_chief_task(getattr(model.distribute_strategy, "cluster_resolver", None))


def _is_chief_task(resolver):
    """Whether a cluster resolver's task is the chief (or worker 0 of a cluster without one)."""
    task_type = getattr(resolver, "task_type", None)
    if task_type is None or task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and resolver.task_id == 0 and not has_chief


def cluster_task(strategy=None):
    """This TensorFlow process's task in its cluster, for files only the chief writes.

    Read from the cluster resolver of ``strategy`` (a
    ``MultiWorkerMirroredStrategy``'s), else of the strategy in scope, else
    from ``TF_CONFIG`` (``TFConfigClusterResolver``), as a model trained
    under the strategy and an object made outside its scope (an ensemble of
    its samples) run in the same worker process.

    Args:
        strategy: a ``tf.distribute.Strategy``, or None.

    Returns:
        ``(chief, task)``: whether this process writes the files (as
        :func:`is_chief`), and its task as ``"worker 1"`` (None outside a cluster).
    """
    import tensorflow as tf

    resolver = (getattr(strategy, "cluster_resolver", None)
                or getattr(tf.distribute.get_strategy(), "cluster_resolver", None)
                or tf.distribute.cluster_resolver.TFConfigClusterResolver())
    task = None if resolver.task_type is None else f"{resolver.task_type} {resolver.task_id}"
    return _is_chief_task(resolver), task


def wait_for_workers(model):
    """Returns on every worker of ``model``'s multi-worker strategy once all have called it.

    One all-reduce of a scalar over the workers: what the chief wrote before
    calling it (:func:`is_chief`) is on disk when any worker returns. A no-op
    without a multi-worker strategy (and on JAX).

    Args:
        model: the Keras model being trained.
    """
    import keras

    if keras.backend.backend() != "tensorflow" or not is_multi_worker(model.distribute_strategy):
        return
    import tensorflow as tf

    strategy = model.distribute_strategy

    @tf.function(autograph=False)
    def barrier():
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.constant(1.0)))

    barrier()


def local_batch(iterator, strategy):
    """Workaround 1: this worker's first batch, as plain tensors.

    Args:
        iterator: Keras' epoch iterator, as passed to ``_maybe_symbolic_build``.
        strategy: the model's strategy (:func:`needs_local_batch`).

    Returns:
        The first batch with every distributed value replaced by its first
        local replica's tensor.
    """
    import tensorflow as tf

    for _, _, data in iterator:
        batch = next(data)
        return tf.nest.map_structure(
            lambda v: strategy.experimental_local_results(v)[0], batch
        )
    return None


def reducible_logs(logs):
    """Workaround 2: scalar logs get shape ``[1]`` (call under a multi-worker strategy).

    Args:
        logs: dict of step results.

    Returns:
        ``logs`` with scalars reshaped to ``[1]``.
    """
    import tensorflow as tf

    return {
        key: tf.reshape(value, [1]) if value.shape.rank == 0 else value
        for key, value in logs.items()
    }


def global_logs(model, logs):
    """A step's logs read from the metrics' totals over every replica.

    Keras returns each replica's metric results (its own totals: for a mean,
    its shard's running sum over its running count) and averages them over
    the replicas, so the logs a callback's ``on_train_batch_end`` and
    ``on_test_batch_end`` receive weighed each replica's examples by
    ``1/(R·count_r)``: ``evaluate`` on 20 rows in batches of 7 (shards of
    4 + 3) logged ``loss`` 1.2384 after its second batch for the data's
    1.2323, and training's ``nll`` 1.2166 for 1.2042. The metrics'
    variables are summed over the replicas (one all-reduce, as Keras sums
    them to read the epoch's logs) and every log that is a metric's result
    is read from the sums, ``result(Σ_r state_r)``, the same on every
    replica; Keras' mean of equal values is that value. ``logs`` itself
    with one replica or outside a replica context.

    Args:
        model: the :class:`keras_bnn.BayesianModel` whose step made ``logs``.
        logs: dict of the step's results, read from ``model.metrics``.

    Returns:
        dict: ``logs`` with each metric's result over the global batches.
    """
    import keras
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if model.distribute_strategy.num_replicas_in_sync == 1 or context is None:
        return logs
    variables = [variable for metric in model.metrics for variable in metric.variables]
    # This replica's values, on its device: a read is colocated with its variable,
    # with no device of its own, and a multi-worker all-reduce needs one.
    local = [tf.identity(tf.convert_to_tensor(variable.value)) for variable in variables]
    totals = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
    with keras.StatelessScope(state_mapping=list(zip(variables, totals))):
        read = model.get_metrics_result()
    return {name: read.get(name, value) for name, value in logs.items()}


def check_jit_compile(model, owner="fit"):
    """Refuses ``jit_compile=True`` for a model made under a ``tf.distribute`` strategy.

    Training (``fit``, ``train_on_batch``): under XLA a non-finite step is
    skipped by a conditional around the optimizer's update
    (``keras_bnn.backend.apply_if_finite``), and that update is a
    cross-replica ``merge_call``, which TensorFlow cannot run inside a
    conditional of a compiled function ("`merge_call` called while defining
    a new graph"), on one device or several: refused under any strategy.

    Evaluation (``evaluate``, ``test_on_batch``, a :class:`keras_bnn.PosteriorEnsemble`'s):
    Keras compiles the replicas' test steps into one XLA function, which
    cannot read a replica's variables on another device: on 2 replicas both
    failed with TensorFlow's InvalidArgumentError "Trying to access resource
    dense/kernel/replica_1 ... located in device CPU:1 from device CPU:0" (plain
    Keras models too). Refused under several replicas; on one they run.
    ``predict`` compiles each replica's step apart and runs under XLA.

    Keras' default ``jit_compile="auto"`` leaves XLA off under ``tf.distribute``.

    Args:
        model: a compiled Keras model.
        owner: the method checking (``"fit"``, ``"train_on_batch"``, ``"evaluate"``,
            ``"test_on_batch"``), for the message.

    Raises:
        ValueError: naming ``jit_compile`` and the strategy.
    """
    strategy = getattr(model, "_distribute_strategy", None)  # as Keras reads it; TensorFlow's
    if model.jit_compile is not True or strategy is None:
        return
    if owner in ("fit", "train_on_batch"):
        why = ("the NaN/Inf policy's skipped step holds the optimizer's cross-replica update, "
               "which TensorFlow cannot compile inside a conditional")
    elif strategy.num_replicas_in_sync > 1:
        why = (f"Keras compiles its {strategy.num_replicas_in_sync} replicas' steps into one "
               "XLA function, which cannot read the variables of the replicas on other devices")
    else:
        return
    raise ValueError(
        f"{owner}: `jit_compile` must be False or 'auto' under "
        f"{type(strategy).__name__}: {why}; got jit_compile=True (compile without it; XLA "
        "on several devices: the JAX backend with keras.distribution.DataParallel).")


def each_example_once(model, outputs):
    """``predict_on_batch``'s outputs with each example's prediction once under ``tf.distribute``.

    Keras hands each of a worker's replicas the whole batch of
    ``predict_on_batch`` and concatenates their predictions: on 2 replicas
    (MirroredStrategy over 2 CPUs) 12 examples gave 24 rows, the batch's
    predictions twice, for a :class:`keras_bnn.BayesianModel` and a
    :class:`keras_bnn.PosteriorEnsemble`, with XLA or without.

    Args:
        model: the Keras model that predicted.
        outputs: Keras' ``predict_on_batch`` result (an array, or a structure of them).

    Returns:
        ``outputs``, each array cut to its first ``1/R`` of rows (``R``: this
        worker's replicas); as they are without a strategy (and on JAX).
    """
    import keras

    strategy = getattr(model, "distribute_strategy", None)  # TensorFlow's, or the scope's
    if strategy is None or strategy.num_replicas_in_sync == 1:
        return outputs
    local = len(strategy.extended.worker_devices)
    return keras.tree.map_structure(lambda leaf: leaf[:len(leaf) // local], outputs)


def check_variables(model, owner="fit"):
    """Refuses a model whose weights were made under another strategy than it runs in.

    ``kb.bayesian`` shares the Keras model's weights: a model built outside
    ``strategy.scope()`` and made Bayesian or compiled inside it (or built
    inside and compiled outside) failed at the sampler's first step with
    TensorFlow's "`colocate_vars_with` must only be passed a variable
    created in this tf.distribute.Strategy.scope()", and one built outside,
    compiled inside and fit outside with "DistributedVariable.numpy() is only
    available when eager execution is enabled" (plain Keras: an
    ``AssertionError``). ``compile`` in a strategy's scope checks against
    that strategy, ``fit`` against the model's.

    Args:
        model: a Keras model (TensorFlow backend).
        owner: the method checking (``"fit"``, ``"compile"``), for the message.

    Raises:
        ValueError: naming the weights and the strategy.
    """
    import tensorflow as tf

    if owner != "fit" and not tf.distribute.has_strategy():
        return  # compiled outside any scope: fit checks against the model's strategy
    strategy = model.distribute_strategy if owner == "fit" else tf.distribute.get_strategy()
    outside = [v.path for v in model.trainable_variables
               if not strategy.extended.variable_created_in_scope(v.value)]
    if outside:
        raise ValueError(
            f"{owner}: the model's weights must be made under the strategy it trains in "
            f"({type(strategy).__name__}); got {len(outside)} made under another, such as "
            f"{outside[0]!r}. Build the Keras model, call kb.bayesian and compile all inside "
            "`with strategy.scope():` (or all outside it, on one device).")


def batch_devices():
    """The devices ``keras.distribution`` splits each of this process's batches over (JAX).

    ``DataParallel`` (and ``ModelParallel``) shard a batch's first axis over
    the device mesh's batch axis, and JAX shards only evenly: a batch of 5 on
    2 devices fails with its ``IndivisibleError``.

    Returns:
        int: the batch axis's devices in this process; 1 without a distribution
        (or on TensorFlow, whose ``tf.distribute`` takes uneven batches).
    """
    import keras

    distribution = keras.distribution.distribution() if keras.backend.backend() == "jax" else None
    mesh = getattr(distribution, "device_mesh", None)
    if mesh is None or distribution.batch_dim_name not in mesh.axis_names:
        return 1
    import jax

    axis = mesh.shape[list(mesh.axis_names).index(distribution.batch_dim_name)]
    return max(1, axis // jax.process_count())


def _split_error(owner, argument, got, examples, devices):
    """The ``ValueError`` of batches ``keras.distribution`` cannot split over ``devices``."""
    fix = f"pass {argument} = a multiple of {devices} ({devices}, {2 * devices}, ...)"
    if examples is not None and examples % devices:  # every batch_size leaves an uneven one
        fix += (f", and give a multiple of {devices} examples (drop {examples % devices} of "
                f"the {examples}) or a dataset batched with drop_remainder=True")
    return ValueError(
        f"{owner}: `{argument}` must give batches that split evenly over the {devices} devices "
        f"of keras.distribution (JAX shards each batch's first axis in equal parts); got "
        f"{got}: {fix}.")


def check_batches_split(owner, argument, batch_size, examples=None):
    """Refuses, before any step, batches that ``keras.distribution`` cannot split (JAX).

    Args:
        owner: ``"fit"``, ``"evaluate"`` or ``"fit(validation_data)"``, for the message.
        argument: the argument the message names (``"batch_size"``).
        batch_size: the size of the batches (a dataset's first batch's).
        examples: the number of array examples batched (their last batch is
            checked too), or None (a dataset: its first batch only).

    Raises:
        ValueError: naming ``argument``, the device count and the allowed values
            (a multiple of it), when a batch does not split evenly.
    """
    devices = batch_devices()
    if devices == 1 or not batch_size:
        return
    sizes = {min(batch_size, examples or batch_size)}
    if examples and examples % batch_size:
        sizes.add(examples % batch_size)
    if any(size % devices for size in sizes):
        raise _split_error(owner, argument, f"{argument}={batch_size}" + (
            f" over {examples} examples" if examples else ""), examples, devices)


@contextlib.contextmanager
def explained_uneven_batches(owner):
    """Re-raises JAX's ``IndivisibleError`` of a batch ``keras.distribution`` cannot split
    (one :func:`check_batches_split` could not see before training: a dataset's ragged
    last batch) as a ``ValueError`` naming ``batch_size`` and the device count.

    Args:
        owner: ``"fit"`` or ``"evaluate"``, for the message.

    Yields:
        None.

    Raises:
        ValueError: for the ``IndivisibleError``, naming the batch's size.
    """
    try:
        yield
    except ValueError as error:
        if type(error).__name__ != "IndivisibleError":  # jax._src.sharding's, not public
            raise
        size = re.search(r"dimension size is (\d+)", str(error))
        got = (f"a batch of {size.group(1) if size else 'another number of'} examples (a "
               "dataset's ragged last batch? dataset.batch(b, drop_remainder=True) drops it)")
        raise _split_error(owner, "batch_size", got, None, batch_devices()) from error


def _array_batch(arguments, examples, size_name, steps_name):
    """The batch size Keras' array adapter takes: the argument's, else one of ``steps``
    batches, else 32."""
    steps = arguments.get(steps_name)
    return arguments.get(size_name) or (math.ceil(examples / steps) if steps else 32)


def check_data_batches(arguments, first, owner="fit"):
    """Refuses, before any step, data whose batches ``keras.distribution`` cannot split (JAX):
    arrays' (the last batch too; with ``fit``, ``validation_split``'s and array
    ``validation_data``'s), a dataset's, ``PyDataset``'s or generator's first batch
    (its last: :func:`explained_uneven_batches`).

    Args:
        arguments: ``fit``'s, ``evaluate``'s or ``predict``'s arguments by name.
        first: the first batch of a dataset (:func:`keras_bnn.fit_data.check_fit_data`),
            or None for arrays.
        owner: ``"fit"``, ``"evaluate"`` or a predict method's name (their
            arrays are batched as ``evaluate``'s).

    Raises:
        ValueError: as :func:`check_batches_split`.
    """
    if batch_devices() == 1:
        return
    if first is not None:
        check_batches_split(owner, "batch_size", batch_length(first[0]))
        return
    examples = array_examples(arguments.get("x"))
    if owner != "fit":
        if examples is not None:
            check_batches_split(owner, "batch_size", _array_batch(arguments, examples,
                                                                  "batch_size", "steps"), examples)
        return
    held_out, split = None, arguments.get("validation_split")
    if examples is not None:
        kept = int(examples * (1.0 - split)) if split else examples  # Keras' split point
        check_batches_split(owner, "batch_size", _array_batch(arguments, kept, "batch_size",
                                                              "steps_per_epoch"), kept)
        held_out = examples - kept if split else None
    validation = arguments.get("validation_data")
    if isinstance(validation, (tuple, list)):
        held_out = array_examples(validation[0])
    if held_out:  # Keras batches validation by validation_batch_size or batch_size
        name = "validation_batch_size" if arguments.get("validation_batch_size") else "batch_size"
        batch = arguments.get(name) or _array_batch(arguments, held_out, name,
                                                    "validation_steps")
        check_batches_split("fit(validation_data)", name, batch, held_out)
