"""The JAX backend's sampler noise under the JAX random-number settings a user may choose.

``jax_default_prng_impl`` (``"rbg"`` and ``"unsafe_rbg"`` are JAX's faster
generators on TPUs, set by ``JAX_DEFAULT_PRNG_IMPL``) and
``jax_threefry_partitionable`` (``JAX_THREEFRY_PARTITIONABLE=0``: the layout
of JAX before 0.5) change what ``jax.random.normal`` returns. The samplers'
noise is Threefry-2x32 in the partitionable layout on both backends
(:mod:`keras_bnn.backend.threefry`), whatever those settings are. Before,
the JAX backend took the key and the layout from them: under either setting
its float32 noise was other numbers than TensorFlow's (the chain another
chain), and under ``rbg`` HMC's accept draw (float64 without 64-bit arrays)
failed with ``ValueError: too many values to unpack (expected 2)``.
"""

import contextlib
import json

import jax
import numpy as np
import pytest
import tensorflow as tf
from scipy.stats import norm

import test_jax_user
from keras_bnn import backend
from keras_bnn.backend import jax as jax_backend
from test_jax_user import _jax_process, hmc_chain

#: test_jax_user's fixture: the initial weights of its HMC chain.
initial_weights = test_jax_user.initial_weights

#: (prng impl, partitionable) settings other than JAX's defaults.
SETTINGS = [("rbg", True), ("unsafe_rbg", True), ("threefry2x32", False), ("rbg", False)]
#: The JAX process of test_jax_user's HMC chain (full-batch HMC on a small MLP).
JAX_RUN = ("import json, sys; sys.path.insert(0, sys.argv[1]); import numpy as np; "
           "from test_jax_user import hmc_chain; initial = [np.asarray(w, 'float32') "
           "for w in json.loads(sys.argv[2])]; "
           "print('RESULT ' + json.dumps(hmc_chain(initial)))")


def _jax_settings(impl, partitionable):
    stack = contextlib.ExitStack()
    stack.enter_context(jax.default_prng_impl(impl))
    stack.enter_context(jax.threefry_partitionable(partitionable))
    return stack


@pytest.mark.parametrize("impl, partitionable", SETTINGS)
def test_float32_noise_is_the_tensorflow_draw_under_any_jax_random_setting(impl, partitionable):
    """Float32 noise, eager and jitted: the TensorFlow backend's draw bit for
    bit (tests/test_threefry.py: JAX's default settings give it). Before,
    ``rbg`` gave e.g. -1.186 for TensorFlow's -0.540 (seed 3, variable 2,
    step 7), ``partitionable=False`` -0.175."""
    shape, seed, index, step = (7, 3), 3, 2, 7
    expected = backend.stateless_normal(shape, seed, index, tf.constant(step, tf.int64),
                                        "float32").numpy()
    with _jax_settings(impl, partitionable):
        eager = jax_backend.stateless_normal(shape, seed, index, np.int32(step), "float32")
        jitted = jax.jit(lambda s: jax_backend.stateless_normal(shape, seed, index, s,
                                                                "float32"))(np.int32(step))
    np.testing.assert_array_equal(np.asarray(eager), expected)
    np.testing.assert_array_equal(np.asarray(jitted), expected)


@pytest.mark.parametrize("impl, partitionable", SETTINGS)
def test_hmc_accept_draw_is_the_tensorflow_draw_under_any_jax_random_setting(
        impl, partitionable):
    """HMC's accept draw (float64, computed in float32 without 64-bit arrays):
    Φ(z) as TensorFlow's to float32 rounding, as test_jax_user checks at the
    defaults. Before, ``rbg`` raised ``ValueError: too many values to unpack``
    (its key holds 4 words, not Threefry's 2)."""
    assert not jax.config.read("jax_enable_x64")
    expected = backend.stateless_normal((5,), 1, 4, tf.constant(5, tf.int64), "float64").numpy()
    with _jax_settings(impl, partitionable):
        ours = jax_backend.stateless_normal((5,), 1, 4, np.int32(5), "float64")
    np.testing.assert_allclose(norm.cdf(ours), norm.cdf(expected), rtol=0, atol=1e-6)


@pytest.mark.parametrize("impl, partitionable", SETTINGS)
def test_float64_noise_with_x64_is_the_tensorflow_draw_under_any_jax_random_setting(
        impl, partitionable):
    """With 64-bit arrays on, the float64 draw (64 random bits an element) is
    TensorFlow's bit for bit too."""
    expected = backend.stateless_normal((9,), 5, 1, tf.constant(3, tf.int64), "float64").numpy()
    with jax.enable_x64(True), _jax_settings(impl, partitionable):
        ours = np.asarray(jax_backend.stateless_normal((9,), 5, 1, np.int32(3), "float64"))
    assert ours.dtype == np.float64
    np.testing.assert_array_equal(ours, expected)


# A JAX process and an HMC fit on each backend: 10 s on a loaded 2-core machine.
def test_hmc_chain_under_the_old_threefry_layout_is_the_tensorflow_chain(initial_weights):
    """``JAX_THREEFRY_PARTITIONABLE=0``: test_jax_user's HMC chain (6
    full-batch transitions, accept decisions included) is the TensorFlow
    chain to float rounding (1e-5; measured 3.6e-7 at JAX's defaults).
    Before, its momenta were other draws: all 396 weights of the 6 states
    differed, by up to 2.4. (Under ``JAX_DEFAULT_PRNG_IMPL=rbg`` Keras 3.15
    cannot initialise a ``Dense`` layer: its 2-word seeds are not ``rbg``
    keys.)"""
    chain = _jax_process(JAX_RUN, json.dumps(initial_weights), JAX_THREEFRY_PARTITIONABLE="0")
    reference = hmc_chain([np.asarray(w, "float32") for w in initial_weights])
    np.testing.assert_allclose(chain["states"], reference["states"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(chain["acceptance"], reference["acceptance"], rtol=0,
                               atol=1e-4)
