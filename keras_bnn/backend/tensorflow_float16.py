"""A sampler's float16 gradients on TensorFlow: scaled, unscaled, never skipped.

Under ``"mixed_float16"`` the backward pass runs in float16, whose gradients
of the mean-form potential ``U/n`` underflow. :func:`keras_bnn.backend.
tensorflow.value_and_gradients` differentiates ``S·U/n`` (``S`` from
:func:`keras_bnn.precision.gradient_scale`) and :func:`unscaled` divides by
S, recomputing at ``S/2^m`` where a gradient overflows, inside the same
traced step: no step is skipped, so the chain stays reproducible from its
seed.
"""

import tensorflow as tf


def unscaled(gradients, potential, scale, gradients_at):
    """Gradients of ``S·U/n`` (``S = scale``) divided by S, recomputed where they overflow.

    ``∇(s·U/n)/s`` at the largest ``s = S/2^m`` (m ≥ 0, s ≥ 1) where every
    gradient is finite; one not finite at s = 1, or a non-finite
    ``potential``, is left to :mod:`keras_bnn.nonfinite`. The
    ``tf.while_loop`` carries the scale only (no iteration when the first
    gradients are finite; sparse gradients stay ``IndexedSlices``), and a
    ``tf.cond`` takes the gradients again at the scale found. Dividing by a
    power of two is exact in float32.

    Args:
        gradients: gradients of ``S·U/n`` (``None`` entries kept).
        potential: ``U/n``.
        scale: S, a Python float (a power of two).
        gradients_at: ``s -> gradients of s·U/n`` at the same weights and batch.

    Returns:
        The gradients of ``U/n``.
    """
    scale = tf.constant(scale, tf.float32)
    present = [i for i, g in enumerate(gradients) if g is not None]

    def finite(values):
        return tf.reduce_all(tf.stack([tf.reduce_all(tf.math.is_finite(
            values[i].values if isinstance(values[i], tf.IndexedSlices) else values[i]))
            for i in present]))

    found, _ = tf.while_loop(
        lambda s, ok: tf.logical_and(tf.logical_not(ok), s > 1.0),
        lambda s, ok: (s / 2.0, finite(gradients_at(s / 2.0))),
        (scale, tf.logical_or(finite(gradients), tf.logical_not(tf.math.is_finite(potential)))))
    chosen = tf.cond(tf.equal(found, scale), lambda: [gradients[i] for i in present],
                     lambda: [gradients_at(found)[i] for i in present])
    result = list(gradients)
    for i, g in zip(present, chosen):
        divisor = tf.cast(found, g.dtype)
        result[i] = (tf.IndexedSlices(g.values / divisor, g.indices, g.dense_shape)
                     if isinstance(g, tf.IndexedSlices) else g / divisor)
    return result
