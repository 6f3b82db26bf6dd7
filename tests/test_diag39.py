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
