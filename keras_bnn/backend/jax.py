"""JAX implementations of the backend operations."""

import contextlib

import jax
import jax.numpy as jnp


def stateless_normal(shape, seed, index, step, dtype):
    """Standard normal noise that is a pure function of (seed, index, step).

    Args:
        shape: shape of the draw.
        seed: Python int, the sampler's seed.
        index: Python int, the variable's index in the optimizer.
        step: integer scalar array, the optimizer's ``iterations``.
        dtype: floating dtype of the draw.

    Returns:
        Array of ``shape`` with i.i.d. N(0, 1) entries.
    """
    key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), index), step)
    return jax.random.normal(key, shape, dtype=dtype)


def _assert_finite(x, message):
    """Returns ``x``; raises ``FloatingPointError`` (via a host callback) on NaN/Inf.

    Args:
        x: floating array.
        message: text of the error.

    Returns:
        ``x``.
    """

    def _check(ok):
        if not bool(ok):
            raise FloatingPointError(message)

    jax.debug.callback(_check, jnp.all(jnp.isfinite(x)))
    return x


def fused(function):
    """Returns ``function``: JAX compiles the whole training step, fusing it.

    Args:
        function: a pure function of arrays.

    Returns:
        ``function`` unchanged.
    """
    return function


def finite_guard(tensors, messages):
    """Checks every tensor for NaN/Inf (see :func:`_assert_finite`).

    JAX updates are functional: when a check raises, the compiled step fails
    and none of its new values is assigned, so no control dependencies are
    needed.

    Args:
        tensors: list of floating arrays (``None`` entries are skipped).
        messages: one message per tensor.

    Returns:
        A no-op context manager.
    """
    for t, m in zip(tensors, messages):
        if t is not None:
            _assert_finite(t, m)
    return contextlib.nullcontext()
