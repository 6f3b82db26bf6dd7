"""Every number the library reports, against an independent implementation.

scikit-learn (accuracy, log loss, Brier, ROC AUC), TensorFlow Probability
(ECE), SciPy (paired t test, entropy, Gaussian densities), ArviZ (R-hat, ESS)
and numpy by hand (the Gaussian mixture's density, a Monte-Carlo draw from it,
the configurational temperature of a softmax regression). Tests that agreed
on the code they were written against are regression guards (their
docstrings say so); the others failed there.
"""

import arviz as az
import hypothesis
import hypothesis.strategies as st
import numpy as np
import pytest
import scipy.special
import scipy.stats
import sklearn.metrics
import tensorflow as tf
import tensorflow_probability as tfp

from keras_bnn import diagnostics, metrics, ood
from keras_bnn.runs import evaluation

import fit_helpers

SETTINGS = hypothesis.settings(max_examples=40, deadline=None, derandomize=True)


def _binary(seed, n=300):
    """p(y=1) [n, 1] (some exactly 0 and 1) and labels drawn from it."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    p[:4] = [0.0, 1.0, 0.5, 0.25]
    return p[:, None], (rng.uniform(size=n) < p).astype(np.int64)


# ---------------------------------------------------------------- classification
def test_binary_sigmoid_and_two_softmax_outputs_score_alike_and_as_sklearn():
    """Regression guard: [N, 1] p(y=1) and the two-class rows [1 − p, p] give
    the same accuracy, NLL and ECE (TFP's on the two-class logits); Brier is
    sklearn's binary ``brier_score_loss`` for [N, 1], twice it for [N, 2]
    (summed over the two classes, as the README says)."""
    p, y = _binary(0)
    rows = np.concatenate([1 - p, p], axis=1)
    one, two = metrics.evaluate_probs(p, y), metrics.evaluate_probs(rows, y)
    for name in ("accuracy", "nll", "ece"):
        assert one[name] == pytest.approx(two[name], abs=1e-12)
    assert one["accuracy"] == sklearn.metrics.accuracy_score(y, np.argmax(rows, axis=1))
    binary_brier = sklearn.metrics.brier_score_loss(y, p[:, 0])
    assert sklearn.metrics.brier_score_loss(y, rows) == pytest.approx(binary_brier, rel=1e-12)
    assert one["brier"] == pytest.approx(binary_brier, rel=1e-12)
    assert two["brier"] == pytest.approx(2 * binary_brier, rel=1e-12)
    with np.errstate(divide="ignore"):
        logits = tf.constant(np.log(rows), tf.float32)  # log 0 = −inf: softmax still exact
    tfp_ece = float(tfp.stats.expected_calibration_error(15, logits=logits, labels_true=y))
    assert one["ece"] == pytest.approx(tfp_ece, abs=1e-5)  # float32 sums of 300 terms <= 1


def test_nll_and_brier_agree_with_sklearn_for_many_classes():
    """Regression guard: ``nll`` is sklearn's ``log_loss`` and, for K >= 3,
    ``brier`` is sklearn's multi-class ``brier_score_loss`` (summed over
    classes too). For K = 2 sklearn reports the binary score, half of
    ``brier``'s (the test above)."""
    rng = np.random.default_rng(1)
    probs = scipy.special.softmax(2 * rng.standard_normal((200, 4)), axis=1)
    labels = rng.integers(0, 4, size=200)
    assert metrics.nll(probs, labels) == pytest.approx(
        sklearn.metrics.log_loss(labels, probs, labels=range(4)), rel=1e-10)
    assert metrics.brier(probs, labels) == pytest.approx(
        sklearn.metrics.brier_score_loss(labels, probs, labels=range(4)), rel=1e-10)


def test_ensemble_nll_is_the_mixture_not_the_mean_of_member_nlls():
    """Regression guard: the ensemble's NLL is −(1/N) Σ_i log (1/S) Σ_s
    p_s(y_i|x_i), below the members' mean NLL (Jensen), and its terms are
    those ``evaluate --baseline-run-dir`` pairs."""
    rng = np.random.default_rng(2)
    members = scipy.special.softmax(3 * rng.standard_normal((5, 100, 3)), axis=-1)
    labels = rng.integers(0, 3, size=100)
    scored = metrics.evaluate_members(members, labels)
    mixture = -np.log(members[:, np.arange(100), labels].mean(axis=0))
    assert scored["ensemble"]["nll"] == pytest.approx(mixture.mean(), rel=1e-12)
    assert scored["ensemble"]["nll"] < np.mean([m["nll"] for m in scored["members"]])
    np.testing.assert_allclose(metrics.nll_per_example(members.mean(axis=0), labels), mixture,
                               rtol=1e-12)


def test_zero_probability_of_the_label_costs_the_stated_floor():
    """Regression guard: a probability of exactly 0 for the label costs
    −log(float32 tiny) ≈ 87.3 nats (documented), not inf; sklearn clips at
    its own eps, so it differs exactly there and agrees elsewhere."""
    probs = np.array([[1.0, 0.0], [0.0, 1.0], [0.3, 0.7]])
    terms = metrics.nll_per_example(probs, np.array([1, 1, 1]))
    assert terms[0] == pytest.approx(-np.log(metrics.PROB_FLOOR)) and np.isfinite(terms).all()
    assert terms[1:] == pytest.approx([0.0, -np.log(0.7)], abs=1e-15)
    scores = metrics.evaluate_probs(probs, np.array([1, 1, 1]))
    assert all(np.isfinite(value) for value in scores.values())


@hypothesis.given(st.data())
@SETTINGS
def test_paired_difference_is_scipy_s_paired_t_test(data):
    """Regression guard: SE = sd(a − b)/√n with n − 1 in the sd, so that
    mean/SE is ``scipy.stats.ttest_rel``'s statistic."""
    n = data.draw(st.integers(3, 40))
    seed = data.draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    a, b = rng.exponential(size=n), rng.exponential(size=n)
    diff = metrics.paired_difference(a, b)
    assert diff["se"] == pytest.approx(np.std(a - b, ddof=1) / np.sqrt(n), rel=1e-12)
    assert diff["mean"] / diff["se"] == pytest.approx(scipy.stats.ttest_rel(a, b).statistic,
                                                      rel=1e-9)


@pytest.mark.parametrize("units", [3, 1])
def test_ensemble_evaluate_loss_is_the_metrics_nll(units):
    """``PosteriorEnsemble.evaluate`` compiled with ``PredictiveNLL`` reports
    the predictive's NLL, also for confidently wrong members (one random
    kernel ×20, 25, 30: some p̄_y far below 1e-7), where Keras' clipped
    cross-entropy reported less (measured: 4.73 nats against 6.23 on members
    of three independent kernels): the exact log-mean-exp NLL in float64,
    which is ``kb.metrics.nll`` of its predictions for 3 classes; for one
    logit ``kb.metrics.nll`` reads 1 − p̄(y=1), which float32 rounds to 0
    (floored: 17.85 nats where evaluate's exact NLL is 11.66). float32
    sums of 30 terms: relative tolerance 1e-5."""
    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415

    x, y = fit_helpers.three_class_rows(30)
    y = y % units if units > 1 else (y > 0).astype("int32")
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
    kernel = np.random.default_rng(10).standard_normal((4, units)).astype("float32")
    weight_sets = [[scale * kernel, np.zeros(units, "float32")] for scale in (20, 25, 30)]
    ensemble = kb.PosteriorEnsemble(
        model, weight_sets, likelihood="categorical" if units > 1 else "bernoulli")
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    probs = ensemble.predict(x, verbose=0)
    logits = np.stack([x.astype(np.float64) @ kernel_ for kernel_, _ in weight_sets])
    if units == 1:  # the outcomes y = 0, 1 as logits [−f, 0]: softmax gives sigmoid(±f)
        logits = np.concatenate([-logits, np.zeros_like(logits)], axis=-1)
    log_probs = scipy.special.logsumexp(scipy.special.log_softmax(logits, axis=-1),
                                        axis=0) - np.log(len(weight_sets))
    expected = -np.mean(log_probs[np.arange(len(y)), y])
    if units > 1:
        assert metrics.nll(probs, y) == pytest.approx(expected, rel=1e-5)
    assert np.min(metrics.nll_per_example(probs, y)) < 16  # some examples are not clipped
    assert np.max(metrics.nll_per_example(probs, y)) > 16.2  # and some would be
    assert ensemble.evaluate(x, y, verbose=0) == pytest.approx(expected, rel=1e-5)


# ---------------------------------------------------------------- regression
def _mixture_reference(means, variances, targets):
    """NLL per example of (1/S) Σ_s N(y; μ_s, σ²_s) with scipy's densities (D = 1)."""
    density = scipy.stats.norm.pdf(targets, means, np.sqrt(variances)).mean(axis=0)
    return -np.log(density)


def _raw_members(means, variances):
    """A Gaussian head's raw [S, N, 2] outputs [μ, log σ²], float32 as predicted."""
    return np.stack([means, np.log(variances)], axis=-1).astype(np.float32)


def test_a_regression_run_is_scored_on_its_gaussian_mixture():
    """Two members at ±3 with unit variance, targets drawn from their mixture:
    the run's NLL is the mixture's (it was the moment-matched Gaussian's,
    2.57 against 2.12 here), and the central intervals cover their level
    (the moment-matched N(0, 10) 50 % interval covered 20 %). Tolerance:
    N = 4000 draws, binomial sd √(L(1−L)/N) <= 0.008, allowed 4 sd."""
    n, rng = 4000, np.random.default_rng(3)
    means = np.stack([np.full(n, -3.0), np.full(n, 3.0)])
    variances = np.ones((2, n))
    y = rng.choice([-3.0, 3.0], size=n) + rng.standard_normal(n)
    single, ensemble, curve, per_example = evaluation._gaussian_curve(
        _raw_members(means, variances), y)
    reference = _mixture_reference(means, variances, y)
    np.testing.assert_allclose(per_example, reference, rtol=1e-6)
    assert ensemble["nll"] == pytest.approx(reference.mean(), rel=1e-6)
    assert ensemble["rmse"] == pytest.approx(np.sqrt(np.mean(y**2)), rel=1e-6)
    for level in (0.5, 0.9, 0.95):
        tolerance = 4 * np.sqrt(level * (1 - level) / n)
        assert ensemble[f"coverage_{level:g}"] == pytest.approx(level, abs=tolerance)
    assert single == metrics.evaluate_gaussian(means[1], variances[1], y)
    assert curve["num_samples"] == [1, 2] and curve["nll"][-1] == ensemble["nll"]


def _two_member_ensemble():
    """A Gaussian ensemble of two members at ±3 with unit variance ([μ, log σ²] = [±3, 0]
    whatever the input)."""
    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415

    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    kernel = np.zeros((1, 2), "float32")
    return kb.PosteriorEnsemble(model, [[kernel, np.array([mu, 0.0], "float32")]
                                        for mu in (3.0, -3.0)], likelihood="gaussian")


@pytest.mark.parametrize("loss", ["GaussianNLL", "PredictiveGaussianNLL"])
def test_ensemble_evaluate_of_a_gaussian_ensemble_is_the_mixture_nll(loss):
    """``PosteriorEnsemble.evaluate`` of two members at ±3 with unit variance,
    on 4000 targets drawn from their mixture, reports the mixture's NLL by
    scipy's densities (2.12), not the moment-matched N(0, 10)'s (2.57, what
    it reported until 2026-11-29), with the loss the README recommended then
    and the mixture's own; weighted per example as Keras averages:
    Σ_i w_i·nll_i / N. float32: the terms (y − μ)²/2 reach 9× the mean NLL,
    each rounded at 2⁻²⁴ relative, and 4000-term sums: relative tolerance 2e-6."""
    import keras_bnn as kb  # noqa: PLC0415

    n, rng = 4000, np.random.default_rng(3)
    y = (rng.choice([-3.0, 3.0], size=n) + rng.standard_normal(n)).astype("float32")
    weights = rng.uniform(0.0, 2.0, size=n).astype("float32")
    x = np.zeros((n, 1), "float32")
    means = np.stack([np.full(n, 3.0), np.full(n, -3.0)])
    reference = _mixture_reference(means, np.ones((2, n)), y.astype(np.float64))
    moment_matched = -scipy.stats.norm.logpdf(y.astype(np.float64), 0.0, np.sqrt(10.0))
    ensemble = _two_member_ensemble()
    ensemble.compile(loss=getattr(kb.likelihoods, loss)())
    scored = ensemble.evaluate(x, y, verbose=0)
    assert scored == pytest.approx(reference.mean(), rel=2e-6)
    assert moment_matched.mean() - scored > 0.4
    weighted = ensemble.evaluate(x, y, sample_weight=weights, verbose=0)
    assert weighted == pytest.approx(np.sum(weights * reference) / n, rel=2e-6)
    np.testing.assert_allclose(ensemble.predict(x[:3], verbose=0),
                               [[0.0, np.log(10.0)]] * 3, rtol=1e-6)  # output unchanged


def test_mixture_interval_is_the_monte_carlo_central_interval():
    """The interval behind ``coverage_<level>`` is the mixture's central one:
    on a 40-point grid of targets, inside (|F(y) − ½| <= L/2) is exactly
    "between the (1 − L)/2 and (1 + L)/2 quantiles of 200 000 draws from
    the mixture", except within the quantiles' Monte-Carlo error (their sd
    is √(q(1−q)/M)/density <= 0.01 here; grid points nearer than 0.05 to
    an estimated quantile are left out)."""
    rng = np.random.default_rng(4)
    mu, sd = np.array([-1.0, 0.5, 4.0]), np.array([0.5, 1.0, 2.0])
    component = rng.integers(0, 3, size=200_000)
    draws = mu[component] + sd[component] * rng.standard_normal(200_000)
    grid = np.linspace(-3.0, 9.0, 40)
    means = np.repeat(mu[:, None], grid.size, axis=1)
    variances = np.repeat(sd[:, None] ** 2, grid.size, axis=1)
    for level in (0.5, 0.9):
        lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2])
        clear = (np.abs(grid - lo) > 0.05) & (np.abs(grid - hi) > 0.05)
        for y in grid[clear]:
            scored = metrics.evaluate_gaussian_members(means[:, :1], variances[:, :1], [y],
                                                       levels=(level,))
            assert scored["ensemble"][f"coverage_{level:g}"] == float(lo <= y <= hi), y


def test_far_from_zero_targets_are_scored_as_near_zero_ones():
    """Metrics are unchanged by shifting means and targets together; at an
    offset of 1000 with spreads of 0.01 the float32 one-pass variance
    E[σ² + μ²] − E[μ]² was negative and the run's evaluation stopped
    ("`variance` must be positive"). The near members are the far float32
    ones minus 1000, exactly (float64), so only float64 round-off differs:
    relative tolerance 1e-6."""
    rng = np.random.default_rng(5)
    far = _raw_members(1000.0 + 0.01 * rng.standard_normal((5, 20)), np.full((5, 20), 1e-4))
    near = far.astype(np.float64)
    near[..., 0] -= 1000.0
    y = 1000.0 + 0.01 * rng.standard_normal(20)
    scored_far = evaluation._gaussian_curve(far, y)[1]
    scored_near = evaluation._gaussian_curve(near, y - 1000.0)[1]
    assert scored_far == pytest.approx(scored_near, rel=1e-6)
    assert 0 < scored_near["coverage_0.5"] < 1  # the intervals are not trivially all or none


@hypothesis.given(st.data())
@SETTINGS
def test_one_member_mixture_is_the_gaussian(data):
    """For S = 1 (the last sample's row) the mixture's metrics are
    :func:`metrics.evaluate_gaussian`'s (new functions: on the old code
    only their absence fails)."""
    n = data.draw(st.integers(1, 30))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    mean, variance = rng.standard_normal(n), rng.uniform(0.1, 3.0, size=n)
    y = mean + rng.standard_normal(n) * 1.3
    scored = metrics.evaluate_gaussian_members(mean[None], variance[None], y)
    direct = metrics.evaluate_gaussian(mean, variance, y)
    assert scored["ensemble"] == pytest.approx(direct, rel=1e-12)
    np.testing.assert_allclose(metrics.gaussian_mixture_nll_per_example(
        mean[None], variance[None], y), metrics.gaussian_nll_per_example(mean, variance, y),
        rtol=1e-12)


# ---------------------------------------------------------------- OOD
@hypothesis.given(st.data())
@SETTINGS
def test_auroc_is_sklearn_roc_auc_with_ties(data):
    """Regression guard: scores on a coarse grid (many ties, counted half by
    both) give sklearn's ``roc_auc_score`` with OOD as the positive class."""
    n_in, n_out = data.draw(st.integers(1, 30)), data.draw(st.integers(1, 30))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    inside, outside = rng.integers(0, 4, size=n_in) / 4, rng.integers(0, 5, size=n_out) / 4
    expected = sklearn.metrics.roc_auc_score(np.r_[np.zeros(n_in), np.ones(n_out)],
                                             np.r_[inside, outside])
    assert ood.auroc(inside, outside) == pytest.approx(expected, abs=1e-12)


def test_auroc_names_a_score_that_is_not_finite():
    """A NaN score has no rank: sklearn refuses it; ``auroc`` returned NaN."""
    with pytest.raises(ValueError, match="`out_scores` must be finite"):
        ood.auroc([0.1, 0.2], [0.3, np.nan])


def test_entropy_and_information_are_scipy_s_and_binary_reads_as_two_classes():
    """Entropy and mutual information are ``scipy.stats.entropy`` of the mean
    and its excess over the members' mean entropy (regression guard), and a
    Bernoulli head's [S, N, 1] p(y=1) gives the numbers of the rows
    [1 − p, p] (it was refused as rows that do not sum to 1)."""
    rng = np.random.default_rng(6)
    p = rng.uniform(size=(4, 30, 1))
    p[0, 0] = 0.0  # a zero probability: 0·log 0 = 0
    rows = np.concatenate([1 - p, p], axis=-1)
    scores = ood.uncertainty_scores(rows)
    mean_entropy = scipy.stats.entropy(rows.mean(axis=0), axis=-1)
    np.testing.assert_allclose(scores["entropy"], mean_entropy, rtol=1e-12)
    np.testing.assert_allclose(scores["mutual_information"], mean_entropy
                               - scipy.stats.entropy(rows, axis=-1).mean(axis=0),
                               rtol=1e-9, atol=1e-15)
    binary = ood.uncertainty_scores(p)
    for name in ood.OOD_SCORES:
        np.testing.assert_allclose(binary[name], scores[name], rtol=1e-12)
    assert ood.ood_auroc(p[:, :15], p[:, 15:]) == ood.ood_auroc(rows[:, :15], rows[:, 15:])


@pytest.mark.parametrize("units", [3, 1])
def test_predict_uncertainty_and_the_ood_scores_are_one_decomposition(units):
    """Regression guard: the ensemble's ``predict_uncertainty`` (log space,
    float32, as served) and ``kb.ood.uncertainty_scores`` of its members
    (float64) give the same entropy and mutual information, for a softmax
    and a Bernoulli head. float32 logs of O(1) values: atol 1e-5."""
    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415

    x, _ = fit_helpers.three_class_rows(20)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(units)(inputs))
    rng = np.random.default_rng(11)
    ensemble = kb.PosteriorEnsemble(
        model, [[rng.standard_normal((4, units)).astype("float32"),
                 np.zeros(units, "float32")] for _ in range(4)],
        likelihood="categorical" if units > 1 else "bernoulli")
    served = ensemble.predict_uncertainty(x)
    scores = ood.uncertainty_scores(ensemble.predict_members(x))  # probabilities, p(y=1)
    np.testing.assert_allclose(served["predictive_entropy"], scores["entropy"], atol=1e-5)
    np.testing.assert_allclose(served["mutual_information"], scores["mutual_information"],
                               atol=1e-5)


# ---------------------------------------------------------------- diagnostics
def _arviz(draws, method):
    """ArviZ's rank R-hat or ESS of [C, S, M] draws, per component."""
    dataset = az.convert_to_dataset({"x": draws})
    if method == "rhat":
        return az.rhat(dataset, method="rank")["x"].values
    return az.ess(dataset, method=method)["x"].values


def test_rhat_and_ess_are_arviz_s_on_the_same_draws():
    """Regression guard: four chains, two of them shifted: the summary's
    R-hat and bulk/tail ESS statistics are those of ``arviz.rhat`` /
    ``arviz.ess`` on the same array."""
    rng = np.random.default_rng(7)
    draws = rng.standard_normal((4, 50, 6)) + np.array([0, 0, 0.5, 1.0])[:, None, None]
    summary = diagnostics.convergence_summary(draws)
    rhat = _arviz(draws, "rhat")
    assert summary["median"] == pytest.approx(np.median(rhat), rel=1e-12)
    assert summary["max"] == pytest.approx(rhat.max(), rel=1e-12)
    assert summary["frac_below_1.1"] == np.mean(rhat < 1.1)
    for method in ("bulk", "tail"):
        ess = _arviz(draws, method)
        assert summary[f"ess_{method}_min"] == pytest.approx(ess.min(), rel=1e-12)
        assert summary[f"ess_{method}_median"] == pytest.approx(np.median(ess), rel=1e-12)


def test_one_chain_is_arviz_on_its_halves_and_unequal_chains_on_their_last_draws():
    """Regression guard: ArviZ's R-hat of one chain is NaN (it needs two);
    the library's is ArviZ's on the chain's two halves (the middle draw of
    an odd length left out). Chains of unequal length are cut to the
    shortest's last draws (``chain_rhat``), which is ArviZ on that array."""
    rng = np.random.default_rng(8)
    chain = rng.standard_normal((1, 41, 3))
    assert np.isnan(_arviz(chain, "rhat")).all()  # logged: "Shape validation failed"
    halves = np.stack([chain[0, :20], chain[0, -20:]])
    summary = diagnostics.convergence_summary(chain)
    assert summary["max"] == pytest.approx(_arviz(halves, "rhat").max(), rel=1e-12)
    assert summary["ess_bulk_min"] == pytest.approx(_arviz(chain, "bulk").min(), rel=1e-12)
    long, short = rng.standard_normal((30, 2, 3)), rng.standard_normal((12, 2, 3))
    scored = evaluation.chain_rhat([long, short], [long[:, 0], short[:, 0]])["function"]
    common = np.stack([long[-12:], short]).reshape(2, 12, 6)
    assert scored["max"] == pytest.approx(_arviz(common, "rhat").max(), rel=1e-12)
    assert scored["num_draws"] == 12


def test_constant_predictions_are_counted_where_arviz_gives_nan():
    """Regression guard: a prediction constant over every draw has R-hat
    0/0 (ArviZ: NaN); the summary leaves it out, counts it in
    ``num_constant`` and, when nothing varies, gives NaN statistics that
    ``convergence_verdict`` reads as "not assessed"."""
    draws = np.full((2, 10, 3), 0.25)
    with np.errstate(invalid="ignore"):  # ArviZ's 0/0
        assert np.isnan(_arviz(draws, "rhat")).all()
    summary = diagnostics.convergence_summary(draws)
    assert summary["num_constant"] == 3 and summary["num_scored"] == 0
    assert np.isnan(summary["median"]) and np.isnan(summary["ess_bulk_min"])
    assert diagnostics.convergence_verdict(summary).reason.startswith("not assessed")
    draws[:, :, 0] = np.random.default_rng(9).standard_normal((2, 10))
    summary = diagnostics.convergence_summary(draws)
    assert summary["num_constant"] == 2 and summary["num_scored"] == 1
    assert summary["max"] == pytest.approx(_arviz(draws[..., :1], "rhat")[0], rel=1e-12)


# ---------------------------------------------------------------- temperatures
@pytest.mark.parametrize("integrator", ["symplectic_euler", "baoab"])
def test_configurational_and_kinetic_temperatures_by_hand(integrator):
    """Regression guard: after one full-batch SGHMC step of the 4→3 softmax
    regression with N(0, 1) priors, the logged configurational temperature
    is Σ θ·∇U(θ)/d at the step's starting weights, ∇U = Σ_i x_iᵀ(softmax_i −
    onehot_i) + θ (by hand, numpy), and each variable's kinetic temperature
    is mean(m_k²/M) of the integrator's kinetic momentum m_k: the half-step
    (m_old + m_new)/2 of symplectic Euler, the new m of BAOAB. float32
    steps: relative tolerance 1e-4."""
    import keras_bnn as kb  # noqa: PLC0415

    n, mass = 24, 2.0
    x, y = fit_helpers.three_class_rows(n)
    sampler = kb.samplers.SGHMC(step_size=1e-2, mass=mass, integrator=integrator, seed=0)
    model = fit_helpers.softmax_regression(sampler, train_size=n)
    model.fit(x, y, batch_size=n, epochs=1, shuffle=False, verbose=0)  # momenta not all 0
    kernel, bias = (np.asarray(w, np.float64) for w in model.get_weights())
    old = [np.asarray(sampler.state(v)["momentum"]) for v in model.trainable_variables]
    model.fit(x, y, batch_size=n, epochs=1, shuffle=False, verbose=0)
    new = [np.asarray(sampler.state(v)["momentum"]) for v in model.trainable_variables]

    residual = scipy.special.softmax(x @ kernel + bias, axis=1) - np.eye(3)[y]
    gradients = (x.T @ residual + kernel, residual.sum(axis=0) + bias)
    virial = sum(np.sum(w * g) for w, g in zip((kernel, bias), gradients))
    assert float(sampler.configurational_temperature()) == pytest.approx(virial / 15, rel=1e-4)
    for (_, t_kin, d), m_old, m_new in zip(sampler.kinetic_temperatures(), old, new):
        kinetic = 0.5 * (m_old + m_new) if integrator == "symplectic_euler" else m_new
        assert float(t_kin) == pytest.approx(np.mean(kinetic**2 / mass), rel=1e-4)
        assert d == m_new.size
