"""The TensorFlow backend's noise: JAX's Threefry normal, number for number.

``keras_bnn.backend.tensorflow.stateless_normal`` must return, for a float32
variable, exactly the JAX backend's ``jax.random.normal`` draw of the same
(seed, variable index, step), so that a chain's noise does not depend on the
Keras backend; and it must be N(0, 1).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from keras_bnn.backend import tensorflow as tf_backend


def jax_normal(shape, seed, index, step):
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), index), step)
    return np.asarray(jax.random.normal(key, shape, dtype=jnp.float32))


@pytest.mark.parametrize("shape, seed, index, step", [
    ((), 0, 0, 0),
    ((1,), 7, 3, 1),
    ((7, 3), 2**31 - 1, 5, 12_345),  # odd size, the largest seed
    ((784, 256), 0, 0, 2**31 + 17),  # a step past int32 is taken modulo 2³² by both
    ((3, 3, 16, 16), 11, 68, 469),
])
def test_the_draw_is_jax_random_normal_bit_for_bit(shape, seed, index, step):
    ours = tf_backend.stateless_normal(shape, seed, index, tf.constant(step, tf.int64), "float32")
    assert ours.shape == shape and ours.dtype == tf.float32
    np.testing.assert_array_equal(ours.numpy(), jax_normal(shape, seed, index, step))


def test_a_float64_draw_is_jax_random_normal_with_x64_bit_for_bit():
    with jax.enable_x64(True):  # JAX draws float64 only with 64-bit types on
        key = jax.random.fold_in(jax.random.fold_in(jax.random.key(5), 2), 77)
        expected = np.asarray(jax.random.normal(key, (9, 5), dtype=jnp.float64))
    ours = tf_backend.stateless_normal((9, 5), 5, 2, tf.constant(77, tf.int64), "float64")
    assert expected.dtype == np.float64 and ours.dtype == tf.float64
    np.testing.assert_array_equal(ours.numpy(), expected)


def test_the_draw_is_the_same_eagerly_traced_and_under_xla():
    def draw(step):
        return tf_backend.stateless_normal((5, 4), 3, 2, step, "float32")

    step = tf.constant(9, tf.int64)
    eager = draw(step).numpy()
    np.testing.assert_array_equal(tf.function(draw)(step).numpy(), eager)
    np.testing.assert_array_equal(tf.function(draw, jit_compile=True)(step).numpy(), eager)


def test_seed_index_and_step_each_change_the_draw():
    def draw(seed, index, step):
        return tf_backend.stateless_normal((1000,), seed, index, tf.constant(step),
                                           "float32").numpy()

    base = draw(1, 2, 3)
    for other in (draw(2, 2, 3), draw(1, 3, 3), draw(1, 2, 4)):
        # Independent N(0, 1) draws: the correlation of 1000 pairs has sd 1/√1000.
        assert abs(np.corrcoef(base, other)[0, 1]) < 5 / math.sqrt(1000)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_the_draw_is_standard_normal(dtype):
    n = 200_000
    draw = tf_backend.stateless_normal((n,), 0, 1, tf.constant(2), dtype)
    assert draw.dtype == tf.as_dtype(dtype)
    z = draw.numpy().astype(np.float64)
    # Mean and variance within 5 standard errors (sd 1/√n and √(2/n)).
    assert abs(z.mean()) < 5 / math.sqrt(n)
    assert abs(z.var() - 1.0) < 5 * math.sqrt(2.0 / n)
    if dtype != "float16":  # float16 rounding makes ties a KS test would see
        # A fixed draw: the KS test's p-value is a fixed number; N(0, 1) gives
        # p ≥ 0.001 with probability 0.999.
        assert stats.kstest(z, "norm").pvalue > 1e-3
