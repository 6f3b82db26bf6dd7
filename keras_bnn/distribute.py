"""tf.distribute helpers: who writes files, and the Keras 3 multi-worker workaround.

Everything specific to running ``fit`` under a distribution strategy lives
here. The sampler side needs nothing special: noise is keyed on (seed,
variable, step), so every replica and worker injects the same noise.
"""


def is_chief(strategy):
    """Whether this process should write files (samples, exports).

    True without a multi-worker cluster; under ``MultiWorkerMirroredStrategy``
    only for the ``chief`` task, or worker 0 when the cluster has no chief.

    Args:
        strategy: a ``tf.distribute.Strategy`` (``model.distribute_strategy``).

    Returns:
        bool.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    task_type = getattr(resolver, "task_type", None)
    if task_type is None:
        return True
    if task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "worker" and resolver.task_id == 0 and not has_chief
