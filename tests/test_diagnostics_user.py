"""Diagnostics as a user of the field reads them: edge cases against their contracts."""

import math

import numpy as np
import pytest

from keras_bnn import diagnostics, directional_noise


def test_equal_per_example_gradients_have_no_noisy_direction():
    # Every example's gradient the same: no minibatch noise, R = 0. The
    # float32 mean of 7 rows of 0.1f is off by an ulp, and centring by it
    # gave a spurious direction (ratio 4.7e-12) and concentration 1.
    gradients = np.tile(np.float32([0.1, 0.3, 0.7, 1e-3, 5.1]), (7, 1))
    vectors, ratios = directional_noise.top_directions(gradients, 1.0, 100, 10)
    assert vectors.shape == (0, 5) and ratios.shape == (0,)
    spectrum = directional_noise.ratio_spectrum(gradients, np.ones(5), 100, 10)
    assert spectrum["top"] == [0.0, 0.0, 0.0] and spectrum["mean"] == 0.0
    assert math.isnan(spectrum["concentration"])


def test_ratio_spectrum_matches_the_dense_matrix_to_float64_precision():
    # R = diag(√c)·(n(n-b)/b)·cov(g)·diag(√c) formed densely in float64:
    # the Gram route agrees to round-off of float64 (it was 5e-9 relative,
    # float32's centring), so the tolerance is 1e-10.
    rng = np.random.default_rng(0)
    gradients = rng.normal(size=(50, 8)).astype(np.float32)
    coefficients = rng.uniform(0.1, 1.0, 8)
    n, b = 400, 20
    root = np.diag(np.sqrt(coefficients))
    dense = root @ (n * (n - b) / b * np.cov(gradients.astype(np.float64), rowvar=False)) @ root
    spectrum = directional_noise.ratio_spectrum(gradients, coefficients, n, b)
    np.testing.assert_allclose(spectrum["top"], np.linalg.eigvalsh(dense)[::-1][:3], rtol=1e-10)
    np.testing.assert_allclose(spectrum["mean"], np.trace(dense) / 8, rtol=1e-10)


@pytest.mark.parametrize("call, draws", [
    (diagnostics.convergence_summary, lambda x: x),
    (diagnostics.predictive_rhat, lambda x: x[..., None, :]),
    (diagnostics.predictive_ess, lambda x: x[1][:, None, :])])
def test_a_diverged_chain_is_named_with_its_first_bad_draw(call, draws):
    # Four chains of 20 draws, chain 1 diverging from draw 5 on: the error
    # said only "non-finite values" (which of the chains, from when?). The
    # one-chain form ([S, N, K]) is chain 0 of itself.
    chains = np.random.default_rng(0).uniform(size=(4, 20, 3))
    chains[1, 5:, 2] = np.nan
    chains[1, 9, 0] = np.inf
    where = "chain 0, draw 5" if call is diagnostics.predictive_ess else "chain 1, draw 5"
    with pytest.raises(ValueError, match=f"got 16 non-finite values, the first at {where}"):
        call(draws(chains))
