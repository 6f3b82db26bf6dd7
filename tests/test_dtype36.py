"""Keras computes the loss, so the potential, in floatx: ``set_dtype_policy("float64")``
alone leaves it float32 and warns, ``set_floatx("float64")`` computes it in float64, a
float16 or bfloat16 floatx is refused; HMC warns of a low-precision forward pass."""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

N = 32


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, 6)), rng.integers(0, 3, size=N)


def _compiled():
    """An MLP and its loss made under the current floatx and policy, compiled with HMC."""
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((6,), 3, hidden=(8,))
    model.compile(sampler="hmc", train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.fixture
def floatx(request):
    """Sets keras.config.floatx for the test; float32 afterwards."""
    request.addfinalizer(lambda: keras.config.set_floatx("float32"))
    return keras.config.set_floatx


@pytest.fixture
def floatx64(floatx, policy):
    """floatx float64 and the float64 policy for the test; float32 afterwards."""
    floatx("float64")
    policy("float64")


def test_a_float64_policy_under_float32_floatx_warns_that_the_potential_is_float32(policy):
    # Found 2026-11-30: compiled silently, the NLL computed in float32 (Keras' loss dtype is
    # floatx) and the float64 prior cast down to it: with n = 2^20 and h = 1e-7 HMC rejected
    # up to 11% of its transitions on float32 rounding (0 with floatx float64).
    policy("float64")
    x, y = _data()
    with pytest.warns(UserWarning, match=r"(?s)floatx\(\) is 'float32'.*set_floatx\('float64'\)"):
        model = _compiled()
    nll, prior = model.potential_terms(y, model(x), None, model.losses)
    assert model(x).dtype == "float64" and nll.dtype == "float32"  # what the warning says


def test_float64_floatx_computes_the_potential_in_float64_without_a_warning(floatx64):
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        model = _compiled()
    logits = model(x)
    nll, prior = model.potential_terms(y, logits, None, model.losses)
    assert nll.dtype == "float64" and prior.dtype == "float64"
    log_p = keras.ops.convert_to_numpy(keras.ops.log_softmax(logits))
    exact = -np.mean(log_p[np.arange(N), y])
    # float64 rounding of a mean of N terms near 1 (float32's would be ~1e-7 off).
    np.testing.assert_allclose(float(nll), exact, rtol=N * 2.0 ** -52)


@pytest.mark.parametrize("dtype_policy", ["mixed_bfloat16", "mixed_float16"])
def test_hmc_under_a_low_precision_compute_dtype_warns_of_its_metropolis_test(
        policy, dtype_policy):
    # Found 2026-11-30: compiled silently; at n = 4096 (full batch) under mixed_bfloat16
    # HMC accepted 0.05-1 (mean 0.55) at h = 1e-4, where float32 accepts all, and its
    # adaptation ended at h = 3.6e-6 against float32's 0.0082.
    policy(dtype_policy)
    with pytest.warns(UserWarning, match=rf"(?s)computes in {dtype_policy[6:]}.*Metropolis"
                                         r".*'float32' or 'float64'"):
        _compiled()


def test_the_sg_samplers_and_float32_hmc_compile_without_the_metropolis_warning(policy):
    policy("mixed_bfloat16")
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        kb.models.mlp((6,), 3, hidden=(8,)).compile(
            sampler="sgld", train_size=N,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        policy("float32")
        _compiled()


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_a_low_precision_floatx_is_refused_under_a_mixed_policy(floatx, policy, low):
    # Found 2026-11-30: set_floatx("float16") with "mixed_bfloat16" compiled; the potential,
    # the prior term (8.7e-4) and the sampler's state were float16, the SGLD warm-up's
    # h = 8.7e-9 was 0 and 8 steps moved no weight.
    floatx(low)
    policy("mixed_bfloat16")
    with pytest.raises(ValueError, match=rf"(?s)floatx\(\) is '{low}'.*set_floatx\('float32'\)"):
        _compiled()
