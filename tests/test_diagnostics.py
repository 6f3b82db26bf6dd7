"""Tests of keras_bnn.diagnostics on chains with known behaviour."""

import math

import keras
import numpy as np
import pytest
from scipy import integrate, stats

from keras_bnn import diagnostics


def _ar1(rng, shape, phi):
    """Stationary AR(1) along axis -2: x_t = φ x_{t-1} + sqrt(1-φ²) ε_t,
    unit marginal variance, integrated autocorrelation time (1+φ)/(1-φ)."""
    eps = rng.standard_normal(shape)
    x = np.empty(shape)
    x[..., 0, :] = eps[..., 0, :]
    for t in range(1, shape[-2]):
        x[..., t, :] = phi * x[..., t - 1, :] + math.sqrt(1 - phi**2) * eps[..., t, :]
    return x


def _as_binary_probs(z):
    """p = 0.5 + 0.05 z, exactly linear in z so it keeps z's autocorrelation;
    |z| < 10 holds with probability 1 - 1e-22 per draw, so p stays in (0, 1)."""
    p = 0.5 + 0.05 * z
    return np.stack([p, 1 - p], axis=-1)


def _softmax(z):
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _expected_rank_rhat(means, draws_per_split_chain):
    """Population value of ArviZ's rank-normalised split R-hat for chains
    N(means[c], 1), each split in two halves, computed by quadrature.

    Rank normalisation maps a draw x to z = Φ⁻¹(F(x)), F the pooled CDF
    (1/C) Σ_c Φ(x − means[c]); the folded version maps |x − median| through
    its pooled CDF the same way. With m = 2C split chains of n draws, chain
    means μ_j of z and mean within-chain variance W,
    R̂ = sqrt((n−1)/n + Var_{ddof=1}(μ_1..μ_m)/W); ArviZ reports the larger
    of the bulk and folded values.
    """
    means = np.asarray(means, dtype=float)
    median = float(np.median(means))  # of the pooled law, for symmetric means

    def bulk(x):
        return stats.norm.ppf(np.clip(np.mean(stats.norm.cdf(x - means)), 1e-15, 1 - 1e-15))

    def folded(x):
        y = abs(x - median)
        mass = np.mean(stats.norm.cdf(median + y - means) - stats.norm.cdf(median - y - means))
        return stats.norm.ppf(np.clip(mass, 1e-15, 1 - 1e-15))

    def rhat(score):
        moments = []
        for c in means:
            density = stats.norm(c, 1).pdf
            mean = integrate.quad(lambda x: score(x) * density(x), c - 12, c + 12, limit=200)[0]
            var = integrate.quad(lambda x: (score(x) - mean) ** 2 * density(x),
                                 c - 12, c + 12, limit=200)[0]
            moments.append((mean, var))
        chain_means = np.repeat([m for m, _ in moments], 2)  # both halves of a chain
        within = np.mean([v for _, v in moments])
        n = draws_per_split_chain
        return math.sqrt((n - 1) / n + np.var(chain_means, ddof=1) / within)

    return max(rhat(bulk), rhat(folded))


# Iid chains: with m (split) chains of n draws of normal scores,
# R̂² − 1 ≈ (1/n)[((m+1)/m) χ²_{m-1}/(m-1) − 1], so R-hat − 1 is about half
# of that. For C=4 chains of S=1000 (m=8, n=500), R-hat > 1.01 needs χ²_7 >
# 68, probability ~1e-11 per component and estimator (bulk and folded):
# every component must be within 0.01 of 1.
def test_weight_rhat_is_one_for_iid_chains():
    rng = np.random.default_rng(0)
    result = diagnostics.weight_rhat(rng.standard_normal((4, 1000, 50)))
    assert abs(result["rhat_max"] - 1) < 0.01
    assert result["rhat_median"] > 0.99
    assert result["frac_rhat_gt_1.01"] == 0.0
    assert result["num_draws"] == 4000 and result["num_components"] == 50


def test_weight_rhat_detects_shifted_chain_means():
    # Chain c has mean c: the population rank-normalised R-hat is 1.535 by
    # quadrature (the bulk one; the folded one is smaller). Noise: W has
    # relative sd sqrt(2/(m(n-1))) ≈ 0.02 and each chain mean of normal scores
    # sd ≈ 1/sqrt(n) ≈ 0.045, moving R-hat by ~0.015 (the sd over the 50
    # components, measured 0.014-0.016 for 3 seeds); the median of 50 has sd
    # ≈ 0.003, so tolerance 0.02 is > 5 sd.
    rng = np.random.default_rng(1)
    chains = rng.standard_normal((4, 1000, 50)) + np.arange(4)[:, None, None]
    result = diagnostics.weight_rhat(chains)
    expected = _expected_rank_rhat([0, 1, 2, 3], draws_per_split_chain=500)
    assert expected == pytest.approx(1.535, abs=0.005)
    assert result["rhat_median"] == pytest.approx(expected, abs=0.02)
    assert result["frac_rhat_gt_1.1"] == 1.0
    # Non-mixing chains: the cross-chain ESS collapses far below 4000 draws.
    assert result["ess_median"] < 100


def test_rhat_is_the_convergence_summary_under_other_keys():
    # One implementation: the keys `keras-bnn evaluate` prints are the numbers
    # of convergence_summary (same components, same ArviZ estimators).
    chains = np.random.default_rng(8).standard_normal((3, 40, 20)) + np.arange(3)[:, None, None]
    legacy = diagnostics.weight_rhat(chains)
    summary = diagnostics.convergence_summary(chains)
    assert legacy["rhat_median"] == summary["median"] and legacy["rhat_max"] == summary["max"]
    assert legacy["frac_rhat_gt_1.1"] == 1 - summary["frac_below_1.1"]
    assert legacy["ess_min"] == summary["ess_bulk_min"]
    assert legacy["ess_median"] == summary["ess_bulk_median"]


def test_single_chain_rhat_compares_its_halves():
    # A chain whose second half is shifted by 3 sd has not mixed: its halves
    # disagree (R-hat ≫ 1.1); an iid chain of 400 draws has R-hat within
    # 0.01 of 1 (four quarter-chains of 100: R-hat − 1 ≈ (1/200)(χ²_3/3·5/4 − 1),
    # > 0.01 needs χ²_3 > 7.2, p ≈ 0.07 per component; the median of 30 is
    # far inside). Fewer than 8 draws leave no R-hat (NaN) but an ESS.
    rng = np.random.default_rng(9)
    iid = diagnostics.weight_rhat(rng.standard_normal((1, 400, 30)))
    assert abs(iid["rhat_median"] - 1) < 0.01
    stuck = rng.standard_normal((1, 400, 30))
    stuck[:, 200:] += 3.0
    assert diagnostics.weight_rhat(stuck)["frac_rhat_gt_1.1"] == 1.0
    short = diagnostics.convergence_summary(rng.standard_normal((1, 6, 3)))
    assert math.isnan(short["median"]) and math.isnan(short["frac_below_1.1"])
    assert short["ess_bulk_min"] > 0


def test_predictive_rhat_iid_versus_shifted_chains():
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((4, 1000, 20, 3))
    # Same tolerance argument as for weights (chain means of bounded draws
    # are close to Gaussian at n = 500).
    iid = diagnostics.predictive_rhat(_softmax(logits))
    assert abs(iid["rhat_max"] - 1) < 0.01
    # Chain c favours class 0 by 1.5c nats: chains disagree on every component.
    shift = np.zeros((4, 1, 1, 3))
    shift[:, 0, 0, 0] = 1.5 * np.arange(4)
    shifted = diagnostics.predictive_rhat(_softmax(logits + shift))
    assert shifted["frac_rhat_gt_1.1"] == 1.0
    assert shifted["rhat_median"] > 1.3


def test_constant_components_are_counted_not_nan():
    rng = np.random.default_rng(3)
    probs = np.tile([[[0.5, 0.5]]], (2, 10, 3, 1))  # [C=2, S=10, N=3, K=2]
    probs[:, :, 0, 0] = rng.uniform(0.2, 0.8, size=(2, 10))
    probs[:, :, 0, 1] = 1 - probs[:, :, 0, 0]
    result = diagnostics.predictive_rhat(probs)
    assert result["num_constant"] == 4 and result["num_components"] == 2
    assert all(np.isfinite(v) for v in result.values())


def test_chains_that_are_each_constant_but_differ_have_infinite_rhat():
    chains = np.zeros((2, 8, 1))
    chains[1] = 1.0
    result = diagnostics.weight_rhat(chains)
    assert result["rhat_max"] == math.inf and result["frac_rhat_gt_1.1"] == 1.0


# Iid draws: ESS/S per component has sd ≈ 0.1 (a few noisy autocorrelations of
# sd 1/sqrt(S) kept by Geyer's truncation), so the median over 50 independent
# components has sd ≈ 1.25·0.1/sqrt(50) ≈ 0.02; the truncation biases it down
# by a few per cent. The band ±15% is more than 5 sd beyond that bias.
def test_predictive_ess_of_iid_draws_is_close_to_num_draws():
    rng = np.random.default_rng(4)
    result = diagnostics.predictive_ess(_as_binary_probs(rng.standard_normal((1000, 50))))
    assert result["num_draws"] == 1000
    assert 0.85 * 1000 < result["ess_median"] < 1.15 * 1000


# AR(1) with φ = 0.9: IAT τ = 19, expected ESS = S/τ. The relative sd of one
# component's estimate is ≈ sqrt(2(2M+1)/S) with a window M of a few τ, about
# 0.2-0.3 at S=4000; the median over 50 independent components has sd ≈ 0.04,
# so the band ±20% is about 5 sd.
def test_predictive_ess_of_ar1_chain_matches_its_autocorrelation_time():
    phi, num_draws = 0.9, 4000
    expected = num_draws * (1 - phi) / (1 + phi)  # ≈ 210, far below S = 4000
    rng = np.random.default_rng(5)
    result = diagnostics.predictive_ess(_as_binary_probs(_ar1(rng, (num_draws, 50), phi)))
    assert 0.8 * expected < result["ess_median"] < 1.2 * expected


def test_cross_chain_ess_of_ar1_chains_sums_over_chains():
    # 4 chains of 4000 draws: expected ESS 4·S/τ ≈ 842; same ±20% band.
    phi = 0.9
    expected = 4 * 4000 * (1 - phi) / (1 + phi)
    rng = np.random.default_rng(6)
    result = diagnostics.weight_rhat(_ar1(rng, (4, 4000, 50), phi))
    assert 0.8 * expected < result["ess_median"] < 1.2 * expected


@pytest.mark.parametrize("call, match", [
    (lambda: diagnostics.predictive_rhat(np.full((2, 10, 3), 0.5)), "chains_probs"),
    (lambda: diagnostics.predictive_rhat(np.full((2, 3, 3, 2), 0.5)), "chains_probs"),
    (lambda: diagnostics.predictive_rhat(np.full((2, 10, 3, 2), np.nan)), "chains_probs"),
    (lambda: diagnostics.weight_rhat(np.zeros((2, 3, 4))), "chains_weights"),
    (lambda: diagnostics.weight_rhat(np.zeros((2, 0, 4))), "chains_weights"),
    (lambda: diagnostics.predictive_ess(np.full((10, 3), 0.5)), "member_probs"),
])
def test_invalid_shapes_raise_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_temperature_band_closed_form_for_two_dimensions():
    # χ²_2 is exponential with mean 2: quantile q_α = -2 log(1 - α), so
    # T·q_α/2 = -T log(1 - α).
    lo, hi = diagnostics.temperature_band(2, temperature=0.5, confidence=0.99)
    assert lo == pytest.approx(-0.5 * math.log(0.995), rel=1e-9)
    assert hi == pytest.approx(-0.5 * math.log(0.005), rel=1e-9)


@pytest.mark.parametrize("confidence", [0.9, 0.99])
def test_temperature_band_coverage_on_simulated_gaussian_momenta(confidence):
    # 20000 replications of d=50 momenta p ~ N(0, m·T), T_kin = mean(p²)/m.
    # The fraction inside is Binomial(20000, c)/20000: sd sqrt(c(1-c)/20000)
    # (0.0021 for c=0.9, 0.0007 for c=0.99); tolerance 5 sd.
    d, temperature, mass, reps = 50, 0.3, 2.5, 20000
    rng = np.random.default_rng(7)
    momenta = rng.normal(0.0, math.sqrt(mass * temperature), size=(reps, d))
    t_kin = np.mean(momenta**2, axis=1) / mass
    lo, hi = diagnostics.temperature_band(d, temperature, confidence)
    coverage = np.mean((t_kin >= lo) & (t_kin <= hi))
    assert abs(coverage - confidence) < 5 * math.sqrt(confidence * (1 - confidence) / reps)


def test_kinetic_temperature_report_flags_wrong_temperature():
    # d = 10000: the 99% band is T(1 ± 2.58·sqrt(2/d)) = T(1 ± 0.036), so a
    # layer running 10% hot is outside and one exactly at T is inside.
    rows = diagnostics.kinetic_temperature_report(
        {"dense/kernel": (1.1, 10000), "dense/bias": (1.0, np.int64(10000))},
        temperature=1.0)
    assert [r.name for r in rows] == ["dense/kernel", "dense/bias"]
    assert [r.inside_band for r in rows] == [False, True]
    assert rows[0].lo == pytest.approx(1 - 2.576 * math.sqrt(2 / 10000), abs=2e-3)
    assert rows[0].hi == pytest.approx(1 + 2.576 * math.sqrt(2 / 10000), abs=2e-3)
    assert rows[1]._asdict()["d"] == 10000


@pytest.mark.parametrize("args, match", [
    ((0, 1.0), "d"), ((2.5, 1.0), "d"), ((10, 0.0), "temperature"),
    ((10, 1.0, 1.0), "confidence"), ((10, 1.0, 0.0), "confidence"),
])
def test_temperature_band_validates(args, match):
    with pytest.raises(ValueError, match=match):
        diagnostics.temperature_band(*args)


def test_kinetic_temperature_report_accepts_sampler_triples():
    # The samplers' kinetic_temperatures() gives (path, scalar tensor, d).
    rows = diagnostics.kinetic_temperature_report(
        [("w", keras.ops.convert_to_tensor(0.5), 10000),
         ("b", keras.ops.convert_to_tensor(1.01), 10000)],
        temperature=1.0)
    assert [(r.name, r.inside_band) for r in rows] == [("w", False), ("b", True)]
    assert rows[0].t_kin == 0.5


def test_kinetic_temperature_report_validates_entries():
    with pytest.raises(ValueError, match="per_variable"):
        diagnostics.kinetic_temperature_report({"w": 1.0}, temperature=1.0)
    # A sequence holds (name, T_kin, d) triples; a pair used to fail unpacking.
    for bad in ([("w", 1.0)], [3]):
        with pytest.raises(ValueError, match=r"`per_variable\[0\]` must be a \(name, T_kin, d\) "
                                             r"triple"):
            diagnostics.kinetic_temperature_report(bad, temperature=1.0)


def test_ess_of_strongly_anticorrelated_short_chains_is_bounded_like_stan():
    """Alternating draws give τ̂ ≤ 0; ArviZ caps the ESS at S·log10(S), never < 0."""
    draws = np.tile([0.2, 0.8], 5)[:, None, None]  # [S=10, N=1, K=1], ρ1 = -1
    noise = np.random.default_rng(0).normal(scale=1e-3, size=draws.shape)
    result = diagnostics.predictive_ess(draws + noise)
    assert 0 < result["ess_min"] <= 10 * np.log10(10) + 1e-9


def test_numpy_modules_import_without_tensorflow_under_jax():
    """metrics, diagnostics, data, likelihoods and validation import no
    TensorFlow (nor TFP) under KERAS_BACKEND=jax. The package's __init__ is
    bypassed (an empty package module), so the test sees these modules' own
    imports, whatever the other submodules import."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = (
        "import importlib, sys, types\n"
        f"package = types.ModuleType('keras_bnn'); package.__path__ = [{root!r} + '/keras_bnn']\n"
        "sys.modules['keras_bnn'] = package\n"
        "for name in ('validation', 'likelihoods', 'metrics', 'diagnostics', 'data'):\n"
        "    importlib.import_module('keras_bnn.' + name)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'tensorflow_probability')))\n"
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout


def test_undefined_rhat_components_are_counted_not_propagated():
    # One chain of 50 draws: halves of 25, which ArviZ splits again into
    # quarters of 12, dropping each half's middle draw (index 12). A
    # component that differs only there (a probability saturated at 0 but
    # for one draw: seen in the digits demo) is constant in every quarter:
    # R-hat is 0/0. It must be counted, not turn the summary into NaN.
    rng = np.random.default_rng(3)
    spike = np.zeros(50)
    spike[12] = 1e-33
    draws = np.stack([spike, rng.standard_normal(50)], axis=-1)
    summary = diagnostics.convergence_summary(draws[np.newaxis])
    assert summary["num_rhat_undefined"] == 1 and summary["num_scored"] == 2
    assert np.isfinite(summary["median"]) and np.isfinite(summary["max"])
    assert summary["frac_below_1.1"] in (0.0, 1.0)  # one defined component


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_convergence_summary_names_a_bad_max_components(bad):
    """0 scored nothing and the verdict then said "none of the components varies"."""
    chains = np.random.default_rng(0).normal(size=(2, 20, 5))
    with pytest.raises(ValueError, match="convergence_summary: `max_components` must be an int"):
        diagnostics.convergence_summary(chains, max_components=bad)
