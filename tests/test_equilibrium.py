"""The stationarity test that starts sample collection (keras_bnn/equilibrium.py)."""

import numpy as np
import pytest

from keras_bnn import equilibrium

W = equilibrium.WINDOW


def _ar1(n, rho, rng):
    x = np.empty(n)
    x[0] = rng.normal() / np.sqrt(1.0 - rho ** 2)
    for t in range(1, n):
        x[t] = rho * x[t - 1] + rng.normal()
    return x


def _series(n, rho, rng, scale=0.01, trend=0.0):
    """The four watched series around T = 1 (temperatures) and fixed levels."""
    t = np.arange(n)
    return {name: level + scale * (_ar1(n, rho, rng) + trend * t)
            for name, level in zip(equilibrium.QUANTITIES, (1.0, 1.0, 500.0, 0.4))}


@pytest.mark.parametrize("rho, limit", [(0.0, 0.05), (0.5, 0.13), (0.8, 0.28)])
def test_stationary_ar1_is_accepted_at_the_stated_rate(rho, limit):
    # α = 0.05 nominal; with ρ̂ raised by one standard error (and capped at
    # ν ≥ MIN_DOF) the measured false-alarm rate is 0.010–0.013 for
    # independent epochs, 0.07–0.08 at ρ = 0.5 and 0.20–0.21 at ρ = 0.8
    # (3 × 1000 draws). 300 draws: binomial sd ≤ 0.024; limits ≈ 2.5 sd above.
    rng = np.random.default_rng(0)
    rejected = [not equilibrium.stationarity_test(_series(4 * W, rho, rng), 1.0).stationary
                for _ in range(300)]
    assert np.mean(rejected) <= limit


def test_finding_3_a_climbing_temperature_is_not_stationary():
    # Digits defaults: T_conf 0.37 → 0.89 over 150 epochs in 25-epoch blocks
    # and −log p(θ) 12.9k → 30.1k. Even the last 2w epochs of that climb
    # (≈ 0.87 → 0.89, −log p still rising) must be rejected.
    rng = np.random.default_rng(1)
    blocks = [0.37, 0.67, 0.77, 0.82, 0.87, 0.89]
    t_conf = np.interp(np.arange(150), 12.5 + 25 * np.arange(6), blocks)
    prior = np.interp(np.arange(150), [0, 149], [12.9e3, 30.1e3])
    series = {"configurational_temperature": t_conf + 0.005 * rng.normal(size=150),
              "kinetic_temperature": 1.0 + 0.002 * rng.normal(size=150),
              "prior": prior + 50 * rng.normal(size=150),
              "nll": 0.3 + 0.005 * rng.normal(size=150)}
    for end in range(2 * W, 151):
        verdict = equilibrium.stationarity_test({k: v[:end] for k, v in series.items()}, 1.0)
        assert not verdict.stationary, end
    assert "prior trends" in verdict.reason


def test_a_linear_trend_of_two_standard_errors_per_window_is_rejected():
    # Slope s per epoch moves x̄_B − x̄_A by s·w: with independent noise of sd
    # σ the difference has sd σ·sqrt(2/w); 4 such sds (s = 4σ·sqrt(2/w)/w)
    # exceed the Bonferroni bound (≈ 2.6) in most draws.
    rng = np.random.default_rng(2)
    slope = 4.0 * np.sqrt(2.0 / W) / W
    rejected = [not equilibrium.stationarity_test(_series(4 * W, 0.0, rng, trend=slope),
                                                  1.0).stationary for _ in range(100)]
    assert np.mean(rejected) >= 0.8


def test_a_temperature_far_from_t_fails_the_band_and_short_series_wait():
    rng = np.random.default_rng(3)
    series = _series(4 * W, 0.0, rng)
    series["configurational_temperature"] = series["configurational_temperature"] * 0.5
    verdict = equilibrium.stationarity_test(series, 1.0)
    assert not verdict.stationary and "outside 1 ± 0.15" in verdict.reason
    series["kinetic_temperature"] = series["kinetic_temperature"] * 0.5
    assert equilibrium.stationarity_test(series, 0.5).stationary  # at T = 0.5 both are right
    short = equilibrium.stationarity_test(_series(2 * W - 1, 0.0, rng), 1.0)
    assert not short.stationary and "20 epochs" in short.reason


def test_verdict_reports_its_statistics():
    verdict = equilibrium.stationarity_test(_series(4 * W, 0.0, np.random.default_rng(4)), 1.0)
    assert verdict.stationary
    summary = verdict.as_dict()
    assert set(summary["statistics"]) == set(equilibrium.QUANTITIES)
    assert all(abs(s["z"]) <= summary["thresholds"][n] for n, s in summary["statistics"].items())
    assert "no trend" in verdict.reason


@pytest.mark.parametrize("kwargs, match", [
    (dict(temperature=0.0), "temperature"), (dict(window=3), "window"),
    (dict(false_alarm=1.0), "false_alarm"), (dict(band=-1), "band")])
def test_bad_arguments_are_named(kwargs, match):
    args = dict(series={}, temperature=1.0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        equilibrium.stationarity_test(**args)
