"""Which axis is which: the layouts the metrics read, said explicitly.

Until 2026-11-29 four calls read a per-position array silently as another
layout: ``predictive_ess`` read a tagger's one chain [S, N, T, K] as C = S
chains, ``ood.uncertainty_scores`` read one network's [N, T, K] as S = N
members, the Gaussian metrics read one target per token [N, T] as N examples
of D = T targets, and ``paired_difference`` refused per-token differences (a
user's flattened tokens got an SE that assumed independent tokens). Each now
has an argument that says the layout (``chains``, ``members``,
``target_axis``, ``mask``), or refuses the call whose layout its shape does
not tell; every [N, K] / [S, N, K] / [N] result is unchanged.
"""

import numpy as np
import pytest
import scipy.special
import scipy.stats

from keras_bnn import diagnostics, metrics, ood

N, T, K, S = 6, 5, 3, 8


def simplex(rng, shape):
    return scipy.special.softmax(2.0 * rng.standard_normal(shape), axis=-1)


def padded(rng, n, length):
    """Each row has 1..length leading True entries."""
    return np.arange(length)[None, :] < rng.integers(1, length + 1, n)[:, None]


# --- 1. predictive_ess: chains or one chain --------------------------------------------------

def test_predictive_ess_refuses_a_4d_array_whose_layout_the_shape_does_not_tell():
    one_chain = simplex(np.random.default_rng(0), (S, N, T, K))  # a tagger's [S, N, T, K]
    with pytest.raises(ValueError, match=r"`chains` must be True \(\[C, S, N, \.\.\., K\]\) or "
                                         r"False \(\[S, N, \.\.\., K\]\) for a 4-D"):
        diagnostics.predictive_ess(one_chain)
    with pytest.raises(ValueError, match="`chains` must be True, False or None"):
        diagnostics.predictive_ess(one_chain, chains="no")


def test_predictive_ess_reads_the_layout_it_is_told():
    rng = np.random.default_rng(1)
    one_chain = simplex(rng, (S, N, T, K))
    flat = diagnostics.predictive_ess(one_chain.reshape(S, N * T, K))  # [S, N, K]: one chain
    told = diagnostics.predictive_ess(one_chain, chains=False)
    assert told == flat and told["num_draws"] == S
    assert diagnostics.predictive_ess(one_chain, mask=np.ones((N, T), bool)) == flat
    # The same array as C = 8 chains of S = 6 draws: other draws, other numbers.
    with pytest.warns(UserWarning, match=r"More chains \(8\) than draws \(6\)"):  # ArviZ
        as_chains = diagnostics.predictive_ess(one_chain, chains=True)
    assert as_chains["num_draws"] == S * N and as_chains != told
    # [S, N, K] without `chains` is one chain, as before.
    assert diagnostics.predictive_ess(one_chain[:, 0]) == diagnostics.predictive_ess(
        one_chain[:, 0], chains=False)


# --- 2. uncertainty_scores: members or one network -------------------------------------------

def entropy(p):
    return -np.sum(p * np.log(p), axis=-1)


def test_one_networks_positions_are_not_read_as_members():
    rng = np.random.default_rng(2)
    probs = simplex(rng, (N, T, K))  # one tagger network
    scores = ood.uncertainty_scores(probs, members=False)
    np.testing.assert_allclose(scores["entropy"], entropy(probs), rtol=1e-12)
    assert scores["entropy"].shape == (N, T) and np.all(scores["mutual_information"] == 0)
    mask = padded(rng, N, T)
    masked = ood.uncertainty_scores(probs, mask=mask)  # the mask's rank says: one network
    np.testing.assert_array_equal(masked["entropy"], scores["entropy"][mask])
    # Without either, the first axis is the members' (S = N), as documented.
    assert ood.uncertainty_scores(probs)["entropy"].shape == (T,)


def test_members_keep_their_layout_and_ood_auroc_takes_the_flag():
    rng = np.random.default_rng(3)
    members = simplex(rng, (S, N, K))
    default = ood.uncertainty_scores(members)
    for name, value in ood.uncertainty_scores(members, members=True).items():
        np.testing.assert_array_equal(value, default[name])
    inside, outside = simplex(rng, (N, T, K)), simplex(rng, (9, T, K))
    assert ood.ood_auroc(inside, outside, members=False) == ood.ood_auroc(
        inside[None], outside[None])
    with pytest.raises(ValueError, match="`members` must be True, False or None"):
        ood.uncertainty_scores(members, members=1)


# --- 3. Gaussian metrics: one target per position ---------------------------------------------

@pytest.fixture
def per_token():
    """Members' means and variances [S, N, T], targets [N, T]: one target per token."""
    rng = np.random.default_rng(4)
    return (rng.standard_normal((S, N, T)), rng.uniform(0.3, 2.0, (S, N, T)),
            rng.standard_normal((N, T)))


def test_gaussian_metrics_per_position_against_numpy(per_token):
    means, variances, y = per_token
    mu, var = means[0], variances[0]
    terms = metrics.gaussian_nll_per_example(mu, var, y, target_axis=None)
    np.testing.assert_allclose(terms, -scipy.stats.norm(mu, np.sqrt(var)).logpdf(y), rtol=1e-12)
    scores = metrics.evaluate_gaussian(mu, var, y, levels=(0.5, 0.9), target_axis=None)
    assert scores["nll"] == pytest.approx(terms.mean(), rel=1e-12)
    assert scores["rmse"] == pytest.approx(np.sqrt(np.mean((y - mu) ** 2)), rel=1e-12)
    for level in (0.5, 0.9):
        low, high = scipy.stats.norm(mu, np.sqrt(var)).interval(level)
        assert scores[f"coverage_{level:g}"] == np.mean((low <= y) & (y <= high))
    ones = np.ones((N, T), bool)
    assert scores == metrics.evaluate_gaussian(mu, var, y, levels=(0.5, 0.9), mask=ones)
    # The default reads [N, T] as N examples of D = T targets: an NLL summed over T.
    assert metrics.evaluate_gaussian(mu, var, y)["nll"] == pytest.approx(T * scores["nll"])


def test_gaussian_mixture_per_position_against_numpy(per_token):
    means, variances, y = per_token
    density = scipy.stats.norm(means, np.sqrt(variances)).pdf(y)  # [S, N, T]
    expected = -np.log(density.mean(axis=0))
    terms = metrics.gaussian_mixture_nll_per_example(means, variances, y, target_axis=None)
    np.testing.assert_allclose(terms, expected, rtol=1e-12)
    scored = metrics.evaluate_gaussian_members(means, variances, y, levels=(0.8,),
                                               target_axis=None)["ensemble"]
    assert scored["nll"] == pytest.approx(expected.mean(), rel=1e-12)
    cdf = scipy.stats.norm(means, np.sqrt(variances)).cdf(y).mean(axis=0)
    assert scored["coverage_0.8"] == np.mean(np.abs(cdf - 0.5) <= 0.4)
    joint = metrics.gaussian_mixture_nll_per_example(means, variances, y)  # default: D = T
    assert joint.shape == (N,)


def test_a_bad_target_axis_is_named_with_the_allowed_values(per_token):
    means, variances, y = per_token
    with pytest.raises(ValueError, match=r"`target_axis` must be one of -1, None; got 1"):
        metrics.evaluate_gaussian(means[0], variances[0], y, target_axis=1)


# --- 4. paired_difference: cluster-robust SE per position -------------------------------------

def cluster_se(d, mask):
    """The cluster-robust SE, written out example by example."""
    sums = [row[keep].sum() for row, keep in zip(d, mask) if keep.any()]
    sizes = [keep.sum() for keep in mask if keep.any()]
    n, total = len(sums), sum(sizes)
    mean = sum(sums) / total
    spread = sum((s - size * mean) ** 2 for s, size in zip(sums, sizes))
    return mean, np.sqrt(n / (n - 1) * spread) / total


def test_paired_difference_per_position_against_numpy():
    rng = np.random.default_rng(5)
    a, b = rng.exponential(size=(N, T)), rng.exponential(size=(N, T))
    mask = padded(rng, N, T)
    mask[2] = False  # an example with no scored token is no cluster
    diff = metrics.paired_difference(a, b, mask=mask)
    mean, se = cluster_se(a - b, mask)
    assert diff["mean"] == pytest.approx(mean, rel=1e-12)
    assert diff["se"] == pytest.approx(se, rel=1e-12)
    assert (diff["n"], diff["examples"]) == (mask.sum(), N - 1)
    assert diff["median"] == np.median((a - b)[mask])
    i, t = diff["largest_index"]
    assert mask[i, t] and diff["largest"] == (a - b)[i, t]
    assert abs(diff["largest"]) == np.max(np.abs(a - b)[mask])
    full = metrics.paired_difference(a, b)  # no mask: every token, the rows as clusters
    assert full["se"] == pytest.approx(cluster_se(a - b, np.ones((N, T), bool))[1], rel=1e-12)
    # One position per example: the cluster formula is sd/√N, the per-example SE.
    one = metrics.paired_difference(a[:, :1], b[:, :1])
    assert one["se"] == pytest.approx(metrics.paired_difference(a[:, 0], b[:, 0])["se"])
    with pytest.raises(ValueError, match="at least 2 examples"):
        metrics.paired_difference(a, b, mask=np.arange(N)[:, None] == np.zeros((1, T)))


# Correlated tokens: d_it = u_i + e_it, u_i ~ N(0, 1) shared by sequence i's
# tokens, e_it ~ N(0, 1), lengths n_i uniform on 1..20: the variance of the
# token mean is (E[n²]·1 + E[n]·1)/(E[n]·2) = (143.5 + 10.5)/21 ≈ 7.3 times the
# 2/M that sd/√M assumes (M = Σ n_i). The true expected difference is 0.
REPLICATES, SEQUENCES, LENGTH = 2000, 200, 20


def test_cluster_robust_se_covers_at_the_nominal_rate_where_the_token_se_does_not():
    rng = np.random.default_rng(6)
    z = scipy.stats.norm.ppf(0.975)
    covered = {"cluster": 0, "tokens": 0}
    for _ in range(REPLICATES):
        mask = padded(rng, SEQUENCES, LENGTH)
        d = rng.standard_normal((SEQUENCES, 1)) + rng.standard_normal((SEQUENCES, LENGTH))
        zeros = np.zeros_like(d)
        cluster = metrics.paired_difference(d, zeros, mask=mask)
        tokens = metrics.paired_difference(d[mask], zeros[mask])  # the SE of [M] tokens
        assert tokens["mean"] == pytest.approx(cluster["mean"], rel=1e-12, abs=1e-15)
        covered["cluster"] += abs(cluster["mean"]) <= z * cluster["se"]
        covered["tokens"] += abs(tokens["mean"]) <= z * tokens["se"]
    rate = {key: count / REPLICATES for key, count in covered.items()}
    # Tolerance: 4 Monte-Carlo sd of a rate of 0.95 over the replicates, plus
    # the finite-cluster shortfall of a ±z interval (a t with n − 1 = 199
    # degrees of freedom covers 0.9486 with z, not 0.95).
    shortfall = 0.95 - (2 * scipy.stats.t.cdf(z, SEQUENCES - 1) - 1)
    tolerance = 4 * np.sqrt(0.95 * 0.05 / REPLICATES) + shortfall
    assert abs(rate["cluster"] - 0.95) < tolerance, (rate, tolerance)
    # sd/√M is 1/√7.3 of the true SE: ±z of it covers ≈ 2Φ(1.96/√7.3) − 1 ≈ 0.53, some
    # 20 Monte-Carlo sd (≈ 0.011) below 0.75.
    assert rate["tokens"] < 0.75, rate


@pytest.mark.parametrize("function, argument", [(diagnostics.predictive_ess, "chains"),
                                                (ood.uncertainty_scores, "members")])
@pytest.mark.parametrize("value", ["yes", 1, 0.0])
def test_layout_flags_name_every_allowed_value(function, argument, value):
    """A layout flag that is not a bool or None is refused naming the three values."""
    with pytest.raises(ValueError, match=f"`{argument}` must be True, False or None"):
        function(np.full((3, 4, 5, 2), 0.5), **{argument: value})
