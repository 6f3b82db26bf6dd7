"""Defects of the priors and prior-aware layers found by a sweep at extreme values (session 37).

Each test failed on the code before its fix; the failure is quoted in its docstring.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings, strategies as st
from scipy import special, stats

from keras_bnn import layers, priors


def _value_and_gradient(prior, x):
    variable = tf.Variable(x)
    with tf.GradientTape() as tape:
        value = prior.log_prob(variable)
    return float(value), tape.gradient(value, variable).numpy()


# --- StudentT: large ν far in the tail ------------------------------------------


@pytest.mark.parametrize("df", [400.0, 1e6])
def test_student_t_of_large_df_is_finite_far_in_the_tail(df):
    """((w-μ)/s)² was squared before its division by ν and overflowed float32 below the
    switch to 2·log|u| for ν > 324: before the fix StudentT(1e6).log_prob(1e20) was -inf
    (scipy: -3.9e7) and its gradient 0."""
    prior = priors.StudentT(df=df, scale=2.0, loc=0.5)
    x = np.array([0.5, 3.0, 3.9e19, 1e20, -1e30, 3e38], np.float32)
    value, gradient = _value_and_gradient(prior, x)
    wide = x.astype(float)
    np.testing.assert_allclose(value, stats.t(df, loc=0.5, scale=2.0).logpdf(wide).sum(),
                               rtol=1e-6)
    u = wide - 0.5
    # atol: at 3e38 the gradient -(ν+1)/w (3.3e-33) passes through 1/w, subnormal in
    # float32, which TensorFlow flushes to 0.
    np.testing.assert_allclose(gradient, -(df + 1.0) * u / (4.0 * df + u**2),
                               rtol=1e-5, atol=1e-32)


@pytest.mark.parametrize("df, scale", [(1e14, 1.5), (1e22, 1.5), (1e22, 1e10)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_student_t_of_huge_df_is_the_normal_density(df, scale, dtype):
    """At ν → ∞ the t density is the normal one (here within z⁴/4ν < 1e-10). Before the
    fix the constant lgamma((ν+1)/2) - lgamma(ν/2), a difference of two numbers of
    1.6e15 at ν = 1e14, lost its digits: log p of these 4 weights was -796.398 (ν = 1e14)
    and -896.239 (ν = 1e22) in place of -796.312; and where the switch 1e18·s·√ν lay
    beyond float32 (s = 1e10, ν = 1e22) log_prob raised "Can't convert Python sequence
    with a value out of range"."""
    x = np.array([0.0, 1.0, -2.5, 40.0], dtype) * scale
    value = float(priors.StudentT(df=df, scale=scale, loc=0.5).log_prob(tf.constant(x)))
    expected = stats.norm(0.5, scale).logpdf(x.astype(float)).sum()
    np.testing.assert_allclose(value, expected, rtol=1e-6 if dtype is np.float32 else 1e-10)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(log_df=st.floats(-2.0, 30.0), log_scale=st.floats(-20.0, 20.0),
       z=st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=4))
def test_student_t_matches_its_density_at_any_df(log_df, log_scale, z):
    """Float64 weights, ν in [0.01, 1e30]: the density with the lgamma ratio taken by
    scipy's poch(ν/2, ½) = Γ(ν/2 + ½)/Γ(ν/2), which does not cancel. Before the fix it
    failed from ν = 1e8 (relative error 1.1e-8 in log p), and raised at s = 1e20,
    ν = 100 (the switch 1e18·s·√ν beyond float32)."""
    df, scale = 10.0**log_df, 10.0**log_scale
    x = np.array(z) * scale + 0.25
    u2 = ((x - 0.25) / scale) ** 2 / df
    expected = np.sum(np.log(special.poch(df / 2.0, 0.5)) - 0.5 * np.log(df * np.pi)
                      - np.log(scale) - 0.5 * (df + 1.0) * np.log1p(u2))
    value = float(priors.StudentT(df=df, scale=scale, loc=0.25).log_prob(tf.constant(x)))
    np.testing.assert_allclose(value, expected, rtol=1e-9, atol=1e-9)


# --- GroupLaplace: group norms at extreme scales ----------------------------------


def _group_laplace_reference(x, scale):
    """log p and its gradient in float64, from the closed form (axis -1 groups)."""
    wide = x.astype(float)
    d = wide.shape[0]
    norms = np.array([np.linalg.norm(wide[:, j] / np.abs(wide[:, j]).max()) *
                      np.abs(wide[:, j]).max() for j in range(wide.shape[1])])
    normaliser = priors.GroupLaplace(scale)._log_normaliser(d)
    return -norms.sum() / scale - wide.shape[1] * normaliser, -wide / (scale * norms)


@pytest.mark.parametrize("magnitude", [1e-30, 1e-25, 1e20, 1e37])
def test_group_laplace_norms_neither_overflow_nor_underflow(magnitude):
    """‖θ_g‖² overflowed float32 past ‖θ_g‖ = 1.8e19 and underflowed below ~1e-19: before
    the fix log p was -inf at 1e20 (float64: -1.06e20) with gradient 0 or NaN, and at
    1e-30 the gradient was 0 in place of -θ_g/(b‖θ_g‖) (-0.11 per element here)."""
    x = (magnitude * np.array([[1.0, -2.0], [2.0, 0.5], [-2.0, 1.0]])).astype(np.float32)
    value, gradient = _value_and_gradient(priors.GroupLaplace(5.0), x)
    expected_value, expected_gradient = _group_laplace_reference(x, 5.0)
    np.testing.assert_allclose(value, expected_value, rtol=1e-6)
    np.testing.assert_allclose(gradient, expected_gradient, rtol=1e-5)


def test_group_laplace_keeps_a_zero_gradient_at_an_all_zero_group():
    x = np.array([[0.0, 3.0], [0.0, 4.0]], np.float32)
    value, gradient = _value_and_gradient(priors.GroupLaplace(2.0), x)
    assert np.isfinite(value)
    np.testing.assert_allclose(gradient, [[0.0, -0.3], [0.0, -0.4]], rtol=1e-6)
    rank_one = np.array([0.0, -1e-30, 3e38], np.float32)
    _, gradient = _value_and_gradient(priors.GroupLaplace(2.0), rank_one)
    np.testing.assert_allclose(gradient, [0.0, 0.5, -0.5])


# --- Ties and kinks: the same gradient under TensorFlow and JAX -------------------

_JAX_GRADIENTS = """
import json
import jax, keras, numpy as np
from keras_bnn import layers, priors
x = np.array([[[0.0, 1.0], [0.0, -1.0]]], "float32")
tlu = layers.TLU()
tlu.build(x.shape)
def tlu_sum(tau, inputs):
    return keras.ops.sum(tlu.stateless_call([tau], [], inputs)[0])
tau, inputs = jax.grad(tlu_sum, argnums=(0, 1))(tlu.tau.value, x)
w = np.array([0.0, 1.0, -1.0], "float32")
laplace = jax.grad(lambda v: priors.Laplace(2.0).log_prob(v))(w)
group = jax.grad(lambda v: priors.GroupLaplace(2.0).log_prob(v))(w)
print("RESULT " + json.dumps({"tau": np.asarray(tau).tolist(),
                              "inputs": np.asarray(inputs).ravel().tolist(),
                              "laplace": np.asarray(laplace).tolist(),
                              "group": np.asarray(group).tolist()}))
"""


def test_kinks_and_ties_have_the_tensorflow_gradient_under_jax():
    """JAX's abs has gradient 1 at 0 and its maximum splits a tie half and half, where
    TensorFlow's give 0 and all to x: before the fix, under JAX, a Laplace prior pushed
    zero-initialised biases by -1/b (gradient [-0.5, -0.5, 0.5], TensorFlow: [0, -0.5,
    0.5]) and a TLU's τ took 0.5 per input equal to it ([1, 1], TensorFlow: [0, 1]), so
    the chains of the two backends parted at the first step."""
    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", _JAX_GRADIENTS], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    jax_result = json.loads(line[len("RESULT "):])

    x = tf.Variable([[[0.0, 1.0], [0.0, -1.0]]])
    tlu = layers.TLU()
    tlu.build(x.shape)
    with tf.GradientTape() as tape:
        out = tf.reduce_sum(tlu(x))
    tau, inputs = tape.gradient(out, [tlu.tau, x])
    w = np.array([0.0, 1.0, -1.0], np.float32)
    np.testing.assert_array_equal(jax_result["tau"], tau.numpy())
    np.testing.assert_array_equal(jax_result["tau"], [0.0, 1.0])
    np.testing.assert_array_equal(jax_result["inputs"], inputs.numpy().ravel())
    np.testing.assert_array_equal(jax_result["laplace"],
                                  _value_and_gradient(priors.Laplace(2.0), w)[1])
    np.testing.assert_array_equal(jax_result["laplace"], [0.0, -0.5, 0.5])
    np.testing.assert_array_equal(jax_result["group"],
                                  _value_and_gradient(priors.GroupLaplace(2.0), w)[1])


# --- Layer arguments -----------------------------------------------------------


@pytest.mark.parametrize("make, argument", [
    (lambda value: layers.FRN(use_tlu=value), "use_tlu"),
    (lambda value: layers.WeightNormDense(3, use_bias=value), "use_bias"),
    (lambda value: layers.WeightNormConv2D(3, 2, use_bias=value), "use_bias"),
])
@pytest.mark.parametrize("value", ["no", "False", 0, None])
def test_switches_of_the_layers_take_true_or_false_only(make, argument, value):
    """They were ``bool(value)``: before the fix FRN(use_tlu="False") applied the TLU and
    WeightNormDense(3, use_bias="no") made a bias, without a word."""
    with pytest.raises(ValueError, match=f"`{argument}` must be True or False"):
        make(value)
    assert make(np.bool_(False)).get_config()[argument] is False


@pytest.mark.parametrize("strides", [True, 2.0])
def test_resnet_pp_block_names_itself_for_bad_strides(strides):
    """``check_choice`` let True (== 1) and 2.0 (== 2) through: before the fix the error
    came from the block's convolution, naming another layer ("WeightNormConv2D:
    `strides` must be an int >= 1 or a pair of ints >= 1; got True.")."""
    with pytest.raises(ValueError, match=r"ResNetPPBlock: `strides` must be an int in \[1, 2\]"):
        layers.ResNetPPBlock(8, strides=strides)
