"""The sampler diagnostics against independent references (ArviZ, numpy, exact
Gaussian draws, synthetic epoch traces with a known transient)."""

import warnings

import numpy as np
import pytest

from keras_bnn import diagnostics, equilibrium


def _arviz(chains):
    """ArviZ's rank R-hat, bulk and tail ESS of ``[C, S, M]`` draws."""
    import arviz as az  # noqa: PLC0415 - heavy import

    dataset = az.convert_to_dataset({"x": chains})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (az.rhat(dataset, method="rank")["x"].values,
                az.ess(dataset, method="bulk")["x"].values,
                az.ess(dataset, method="tail")["x"].values)


@pytest.mark.parametrize("chains, draws", [(4, 200), (3, 4), (3, 7), (2, 9)])
def test_summary_is_arviz_on_several_chains_and_regression_heads(chains, draws):
    """[C, S, N, 2] ([μ, log σ²] heads, one example off in one chain): every
    statistic equals ArviZ's on the flattened components, to 1e-12."""
    x = np.random.default_rng(draws).normal(size=(chains, draws, 5, 2))
    x[..., 1] = np.exp(x[..., 1])
    x[-1, :, 3, 0] += 1.0
    rhat, bulk, tail = _arviz(x.reshape(chains, draws, -1))
    summary = diagnostics.convergence_summary(x)
    expected = {"max": rhat.max(), "median": np.median(rhat), "ess_bulk_min": bulk.min(),
                "ess_bulk_median": np.median(bulk), "ess_tail_min": tail.min(),
                "frac_below_1.01": np.mean(rhat < 1.01)}
    assert {key: summary[key] for key in expected} == pytest.approx(expected, rel=1e-12)
    legacy = diagnostics.predictive_rhat(x)
    assert legacy["rhat_max"] == pytest.approx(rhat.max(), rel=1e-12)
    assert legacy["ess_min"] == pytest.approx(bulk.min(), rel=1e-12)


def test_one_chain_is_arviz_on_its_halves_and_short_chains_have_no_rhat():
    """ArviZ itself gives NaN for one chain; ours is ArviZ's R-hat of the two
    halves (a shift between them is seen), NaN below 8 draws, and the ESS is
    ArviZ's one-chain ESS at any S ≥ 4; fewer draws are refused by name."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 101, 3))
    x[0, 51:] += 1.0
    halves = np.stack([x[0, :50], x[0, -50:]])
    summary = diagnostics.convergence_summary(x)
    assert summary["max"] == pytest.approx(_arviz(halves)[0].max(), rel=1e-12)
    assert summary["max"] > 1.1
    for draws in (4, 7):
        short = rng.normal(size=(1, draws, 3))
        summary = diagnostics.convergence_summary(short)
        assert np.isnan(summary["median"]) and np.isnan(summary["max"])
        assert summary["ess_bulk_min"] == pytest.approx(_arviz(short)[1].min(), rel=1e-12)
        assert not diagnostics.convergence_verdict(summary).converged
    with pytest.raises(ValueError, match="`chains` must have at least 4 draws"):
        diagnostics.convergence_summary(rng.normal(size=(2, 3, 3)))


def test_constant_unequal_and_nan_predictions():
    """Constant components: ArviZ gives R-hat NaN and ESS S·C; ours leaves them
    out and counts them (NaN statistics, "not assessed"). Unequal lengths and
    NaN are refused naming the argument (and where the NaN is)."""
    rng = np.random.default_rng(1)
    summary = diagnostics.convergence_summary(np.full((2, 30, 4), 0.25))
    assert summary["num_constant"] == 4 and np.isnan(summary["ess_bulk_min"])
    assert "none of the" in diagnostics.convergence_verdict(summary).reason
    with pytest.raises(ValueError, match="`chains_probs` must hold chains of one shape"):
        diagnostics.predictive_rhat([rng.random((30, 5, 2)), rng.random((20, 5, 2))])
    probs = rng.random((2, 30, 5, 2))
    probs[1, 7, 3, 0] = np.nan
    with pytest.raises(ValueError, match="`chains_probs` must be finite.*chain 1, draw 7"):
        diagnostics.predictive_rhat(probs)


@pytest.mark.parametrize("chains, draws, spike", [(1, 50, 12), (2, 51, 25)])
def test_verdict_names_the_cause_of_an_undefined_rhat(chains, draws, spike):
    """Every scored component 0/0 (saturated but for a draw the split drops):
    the verdict said "R-hat is undefined (51 draws; one chain needs 8)" for
    2 chains of 51 draws, a cause that does not hold."""
    x = np.zeros((chains, draws, 1))
    x[:, spike] = 1e-33
    summary = diagnostics.convergence_summary(x)
    assert summary["num_rhat_undefined"] == summary["num_scored"] == 1
    verdict = diagnostics.convergence_verdict(summary, "predicted probabilities")
    assert not verdict.converged
    assert verdict.reason == ("not assessed: R-hat is 0/0 for all 1 predicted probabilities "
                              "scored (each is constant within every split chain)")


def _sgld_step_from_exact_draws(d, temperature, total=0.0, steps=1):
    """θ ~ N(0, T) exactly (U = θ²/2: train_size n, gradient θ/n), ``steps`` SGLD
    steps from the virial sums set to ``total``. Returns the sampler, the θ·∇U
    of each step in float64 and the sums before."""
    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415

    n = 100
    theta = keras.Variable(np.random.default_rng(d).normal(0.0, np.sqrt(temperature), d)
                           .astype("float32"), name="w")
    sampler = kb.samplers.SGLD(step_size=1e-3, temperature=temperature, train_size=n, seed=0)
    sampler.build([theta])
    sampler.slots("virial_total")[0].assign(total)
    begin, virials = sampler.virial_sums(), []
    for _ in range(steps):
        values = np.asarray(theta, np.float64)
        virials.append(float(np.sum(values * values)))
        sampler.apply([theta / n], [theta])
    return sampler, np.array(virials), begin


@pytest.mark.parametrize("d", [3, 100_000])
@pytest.mark.parametrize("temperature", [0.1, 1.0])
def test_configurational_temperature_of_exact_gaussian_draws(d, temperature):
    """On exact draws at T, Σθ·∇U/d ~ T·χ²_d/d (sd T·sqrt(2/d)): the readout is
    that sum (float32 rounding) and lies inside the 99.99 % χ² band, which
    kinetic_temperature_report prints for the same d and T."""
    sampler, virials, _ = _sgld_step_from_exact_draws(d, temperature)
    reading = float(sampler.configurational_temperature())
    assert reading == pytest.approx(virials[0] / d, rel=1e-5)
    (row,) = diagnostics.kinetic_temperature_report({"w": (reading, d)}, temperature, 0.9999)
    assert row.inside_band and (row.lo, row.hi) == diagnostics.temperature_band(
        d, temperature, 0.9999)
    assert abs(reading / temperature - 1) < 4 * np.sqrt(2 / d)


def test_epoch_configurational_temperature_after_a_million_steps():
    """An epoch's per-variable temperature from virial_sums after 10⁶ earlier
    steps of T = 1 (sums at 10⁶·d·T): 40 steps read 0.9830 for the 1.0019 of
    the exact per-step sums (d = 2·10⁵) while the sums were one float32 running
    sum; compensated (readouts.compensated_add), asked within 0.1 %."""
    d, steps = 200_000, 40
    sampler, virials, begin = _sgld_step_from_exact_draws(d, 1.0, total=1e6 * d, steps=steps)
    ((_, reading, _),) = sampler.configurational_temperatures_between(
        begin, sampler.virial_sums(), steps)
    assert reading == pytest.approx(virials.mean() / d, rel=1e-3)


def _first_stationary_epoch(series, temperature=1.0, window=10):
    """The epoch at whose end CollectSamples would start: the first prefix of
    ``series`` (2·window epochs or more) that the test passes; None if none."""
    length = len(next(iter(series.values())))
    for end in range(2 * window, length + 1):
        prefix = {name: values[:end] for name, values in series.items()}
        if equilibrium.stationarity_test(prefix, temperature, window=window).stationary:
            return end - 1
    return None


def _four_series(rng, epochs, temperature=1.0, nll=0.0):
    """The four watched series, stationary: temperatures at T (1 % noise), the
    prior and the NLL independent N(0, 1) epoch means, plus ``nll``."""
    return {"configurational_temperature": temperature * (1 + 0.01 * rng.normal(size=epochs)),
            "kinetic_temperature": temperature * (1 + 0.01 * rng.normal(size=epochs)),
            "prior": rng.normal(size=epochs), "nll": nll + rng.normal(size=epochs)}


@pytest.mark.parametrize("temperature", [0.1, 1.0])
def test_a_chain_stationary_from_step_0_starts_at_the_first_test(temperature):
    """The first test is at epoch 2w − 1 = 19; each test of a stationary chain
    fails with probability ≤ α = 0.05, so of 60 chains ≥ 50 start at 19
    (Binomial(60, 0.05) exceeds 10 with probability < 0.002), and all by 29."""
    rng = np.random.default_rng(7)
    starts = [_first_stationary_epoch(_four_series(rng, 40, temperature), temperature)
              for _ in range(60)]
    assert sum(start == 19 for start in starts) >= 50 and max(starts) <= 29


def test_a_drift_of_a_standard_deviation_an_epoch_is_never_stationary():
    """x̄_B − x̄_A = s·w = 10 sd against an SE of about 0.45 sd (z ≈ 22): no
    epoch of a chain that drifts for ever may pass. 4 of these 20 chains
    passed, at epochs 19-34, with z = 4.2-4.5 against z* = 4.9-5.4, while ρ̂
    could reach the 0.9 clip from 2-3 windows (now capped where ν < 5)."""
    rng = np.random.default_rng(8)
    for _ in range(20):
        assert _first_stationary_epoch(_four_series(rng, 100, nll=np.arange(100.0))) is None


def test_a_decaying_transient_is_over_when_collection_starts():
    """NLL = 10⁶·e^(−t/10) over N(0, 1) noise: the transient is under 3 sd only
    from epoch 10·ln(10⁶/3) = 127 on, so no start within 100 epochs is right.
    The test started at 29 (|z| = 4.58 against z* = 5.39), 5.5·10⁴ sd early:
    the older windows' curvature set σ̂² (now dropped by an F-test)."""
    rng = np.random.default_rng(9)
    series = _four_series(rng, 100, nll=1e6 * np.exp(-np.arange(100) / 10))
    assert _first_stationary_epoch(series) is None


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_non_finite_epoch_mean_is_named_not_called_a_trend(bad):
    """A diverged epoch (NaN or inf) fails the test; the reason said
    "nll trends (z = +nan, |z| > 2.04)", a trend the data do not show."""
    nll = np.random.default_rng(10).normal(size=40)
    nll[30] = bad
    verdict = equilibrium.stationarity_test({"nll": nll}, 1.0)
    assert not verdict.stationary
    assert verdict.reason == "nll holds a NaN or infinite epoch mean"
