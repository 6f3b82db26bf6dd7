"""The equilibrium test's noise model: ρ̂ capped at small k, transients' older windows dropped."""

import math

import numpy as np

from keras_bnn import equilibrium


def _first_stationary_epoch(series, false_alarm=equilibrium.FALSE_ALARM):
    """The first epoch (0-based) whose prefix passes the test, or None."""
    length = len(next(iter(series.values())))
    for end in range(2 * equilibrium.WINDOW, length + 1):
        prefix = {name: values[:end] for name, values in series.items()}
        if equilibrium.stationarity_test(prefix, 1.0, false_alarm=false_alarm).stationary:
            return end - 1
    return None


def test_two_windows_cannot_claim_an_autocorrelation_that_hides_a_drift():
    """A drift of 1 an epoch (x̄_B − x̄_A = 10) over a wave of amplitude 2: the
    line fits leave smooth residuals, read as ρ̂ at the 0.9 clip from 16
    pairs, whose error let the drift pass before (ν = 1.7 floored at 3:
    "no trend ... (|z| = 4.71/5.39)" at α = 0.0125, the four-series bound).
    ρ̂ is now capped where ν would fall under MIN_DOF = 5: 0.72 for two windows."""
    t = np.arange(20.0)
    values = t + 2.0 * np.sin(2.0 * np.pi * t / 10.0)
    verdict = equilibrium.stationarity_test({"nll": values}, 1.0, false_alarm=0.0125)
    assert not verdict.stationary and "nll trends" in verdict.reason
    statistic = verdict.statistics["nll"]
    assert statistic.rho <= math.sqrt(11 / 21) and statistic.dof >= 5


def test_older_noisier_windows_of_a_transient_do_not_set_the_noise():
    """NLL = 10⁶·e^(−t/20) over N(0, 1): under 3 sd only from epoch
    20·ln(10⁶/3) = 254. Before, the older windows' curvature (e^(1/2) larger
    per window) inflated the pooled σ̂² and the test passed at epoch 69
    (|z| = 3.27/3.55); now those windows fail the F-test against the tested
    two, which alone estimate the noise (|z| = 50 at epoch 69)."""
    nll = 1e6 * np.exp(-np.arange(100) / 20) + np.random.default_rng(0).normal(size=100)
    assert _first_stationary_epoch({"nll": nll}, false_alarm=0.0125) is None
    statistic = equilibrium.compare_windows(nll[:70], 10, "nll")
    assert statistic.windows == 2 and abs(statistic.z) > 10


def test_stationary_noise_keeps_every_window():
    """Independent epoch means over 80 epochs: no window is dropped, and ρ̂
    may rise to the 0.9 clip."""
    rng = np.random.default_rng(1)
    kept = [equilibrium.compare_windows(rng.normal(size=80), 10).windows for _ in range(100)]
    # The F-test drops older windows with probability HOMOGENEITY_LEVEL = 0.05
    # per series: ≤ 12 of 100 (Binomial(100, 0.05) exceeds 12 with p < 0.002).
    assert sum(k == 2 for k in kept) <= 12 and set(kept) <= {2, 8}


def test_slowly_mixing_stationary_chains_still_start_promptly():
    """The cap's cost: four AR(1) series with ρ = 0.8 (epoch means correlated
    over ~9 epochs) get more false alarms while k is small. Measured over
    100 chains: mean first pass 19.6, as before the cap; here
    40 chains must all pass by epoch 39 and average ≤ 23."""
    rng = np.random.default_rng(2)

    def ar1(n, rho=0.8):
        x = np.empty(n)
        x[0] = rng.normal() / math.sqrt(1.0 - rho ** 2)
        for t in range(1, n):
            x[t] = rho * x[t - 1] + rng.normal()
        return x

    starts = [_first_stationary_epoch({name: level + 0.01 * ar1(40) for name, level in zip(
        equilibrium.QUANTITIES, (1.0, 1.0, 500.0, 0.4))}) for _ in range(40)]
    assert None not in starts and np.mean(starts) <= 23


def test_short_windows_keep_half_their_pairs():
    """w = 4: two windows leave 4 residual pairs, fewer than 2·MIN_DOF: ρ̂
    is capped where ν keeps half of them (ρ ≤ 1/√3), not at ν ≥ 5, which
    would force ρ̂ = 0 until five windows and make a chain of correlated
    epochs fail (tests/test_warmup.py's window=4 chains then never started)."""
    values = np.cumsum(np.random.default_rng(3).normal(size=8))  # a random walk: ρ̂ high
    statistic = equilibrium.compare_windows(values, 4)
    assert 0.5 <= statistic.rho <= 1 / math.sqrt(3) and statistic.dof >= 2.0
    assert math.isfinite(statistic.z)
