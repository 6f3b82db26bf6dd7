"""JAX's normal noise in TensorFlow ops: Threefry-2x32, then the inverse error function.

The TensorFlow backend draws the samplers' noise with this module, so a
chain's noise is the same number for number on both Keras backends: for a
float32 variable, :func:`normal` returns exactly what the JAX backend's
``jax.random.normal(fold_in(fold_in(key(seed), index), step), shape)``
returns (a Threefry key and the ``jax_threefry_partitionable`` layout, which
the JAX backend uses whatever JAX's settings are), and for
float64 what JAX returns with 64-bit types on (``jax.enable_x64``); both
tested in ``tests/test_threefry.py``.

It is also the faster draw on a CPU. Compiled with XLA (one fused loop, the
backend's ``stateless_normal``), the 269 322 normals of the Fashion-MNIST
MLP take 2.1 CPU-ms on a 2-core machine, against 4.1 for TensorFlow's
Philox ``stateless_normal`` kernel and 38 for that kernel's XLA lowering
(2026-11-27, each with ~0.5 ms of call overhead; ``python
benchmarks/sampler_overhead.py --models fmnist_mlp --breakdown``, rows
"draw: ...").

The algorithm (Salmon et al. 2011, "Parallel random numbers: as easy as 1,
2, 3"; JAX's ``threefry2x32``):

* the hash ``H_k(x1, x2)``: 20 rounds of ``x1 += x2; x2 = rotl(x2, r) ^ x1``
  on 32-bit words, with the key schedule ``(k1, k2, k1 ^ k2 ^ 0x1BD11BDA)``
  injected every four rounds;
* the key of (seed, index, step): ``k = (0, seed)``, then
  ``fold_in(k, d) = H_k(0, d)`` for ``d = index``, then ``d = step``
  (modulo 2³²);
* element i of the draw: ``b = H_k(0, i)`` (both words), 32 random bits
  ``b1 ^ b2`` (float64: ``b1·2³² + b2``);
* the uniform ``u`` in ``(-1, 1)``: the top mantissa bits under the exponent
  of 1.0 give ``f`` in ``[0, 1)``, ``u = max(lo, f·(1 - lo) + lo)`` with
  ``lo`` the float next to -1 towards 0;
* the normal: ``z = √2·erfinv(u)``.
"""

import numpy as np
import tensorflow as tf

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_KEY_PARITY = 0x1BD11BDA
# (bits of the draw, random bits kept as the mantissa, the bits of 1.0) per dtype.
_FLOAT_LAYOUT = {
    tf.float32: (tf.uint32, 23, 0x3F800000),
    tf.float64: (tf.uint64, 52, 0x3FF0000000000000),
}


def _rotate_left(x, bits):
    return tf.bitwise.bitwise_or(tf.bitwise.left_shift(x, tf.constant(bits, tf.uint32)),
                                 tf.bitwise.right_shift(x, tf.constant(32 - bits, tf.uint32)))


def hash_2x32(key, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of the word pairs ``(x1, x2)``.

    Args:
        key: pair ``(k1, k2)`` of uint32 scalars.
        x1, x2: uint32 tensors of one shape.

    Returns:
        The pair of hashed uint32 tensors.
    """
    k1, k2 = key
    schedule = (k1, k2, tf.bitwise.bitwise_xor(tf.bitwise.bitwise_xor(k1, k2),
                                               tf.constant(_KEY_PARITY, tf.uint32)))
    x1, x2 = x1 + schedule[0], x2 + schedule[1]
    for block in range(5):
        for bits in _ROTATIONS[block % 2]:
            x1 = x1 + x2
            x2 = tf.bitwise.bitwise_xor(x1, _rotate_left(x2, bits))
        x1 = x1 + schedule[(block + 1) % 3]
        x2 = x2 + schedule[(block + 2) % 3] + tf.constant(block + 1, tf.uint32)
    return x1, x2


def fold_in(key, data):
    """The key of ``data`` under ``key``: ``H_key(0, data)`` (JAX's ``fold_in``).

    Args:
        key: pair of uint32 scalars.
        data: integer scalar tensor, taken modulo 2³².

    Returns:
        The new key, a pair of uint32 scalars.
    """
    return hash_2x32(key, tf.constant(0, tf.uint32), tf.cast(data, tf.uint32))


def normal(seed_and_index, step, size, dtype):
    """``size`` i.i.d. N(0, 1) numbers, a pure function of (seed, index, step).

    Args:
        seed_and_index: int64 tensor ``[seed, index]``, both in [0, 2³²).
        step: integer scalar tensor (modulo 2³²).
        size: the number of draws, a Python int or an integer scalar tensor
            (under XLA a compile-time constant).
        dtype: ``tf.float32`` or ``tf.float64``.

    Returns:
        Flat tensor of ``size`` draws of ``dtype``.
    """
    bits_dtype, mantissa, one = _FLOAT_LAYOUT[dtype]
    seed_and_index = tf.cast(seed_and_index, tf.uint32)
    key = fold_in((tf.constant(0, tf.uint32), seed_and_index[0]), seed_and_index[1])
    key = fold_in(key, step)
    counter = tf.cast(tf.range(size, dtype=tf.int64), tf.uint32)
    b1, b2 = hash_2x32(key, tf.zeros_like(counter), counter)
    if bits_dtype == tf.uint32:
        bits = tf.bitwise.bitwise_xor(b1, b2)
    else:
        bits = tf.bitwise.bitwise_or(
            tf.bitwise.left_shift(tf.cast(b1, tf.uint64), tf.constant(32, tf.uint64)),
            tf.cast(b2, tf.uint64))
    width = 32 if bits_dtype == tf.uint32 else 64
    float_bits = tf.bitwise.bitwise_or(
        tf.bitwise.right_shift(bits, tf.constant(width - mantissa, bits_dtype)),
        tf.constant(one, bits_dtype))
    unit = tf.bitcast(float_bits, dtype) - tf.constant(1.0, dtype)  # in [0, 1)
    low = np.nextafter(np.array(-1.0, dtype.as_numpy_dtype), np.array(0.0, dtype.as_numpy_dtype))
    uniform = tf.maximum(tf.constant(low, dtype), unit * tf.constant(1.0 - low, dtype) + low)
    return tf.constant(np.sqrt(2.0), dtype) * tf.math.erfinv(uniform)
