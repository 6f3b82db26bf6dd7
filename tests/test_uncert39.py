"""The ensemble's uncertainty outputs and the reliability plots, against numpy/scipy.

Each check restates the quantity independently (float64 numpy/scipy) and
compares. Two defects were found and fixed (each test says how it failed):

* bfloat16 labels were refused by the metrics (``np.issubdtype(bfloat16,
  np.floating)`` is False: ``labels must be integer class indices; got dtype
  bfloat16``) where float16/float32 labels are scored;
* ``plots`` took a bytes path to ``str.endswith`` (``TypeError: endswith first
  arg must be bytes``) and a directory named ``*.png`` to ``os.replace``
  (``IsADirectoryError`` after rendering and writing a temp file).
"""

import os

import ml_dtypes
import numpy as np
import pytest
import scipy.optimize
import scipy.special
import scipy.stats
from keras import ops

from keras_bnn import metrics, plots, uncertainty


def _entropy(p):
    """−Σ p log p over the last axis, 0 · log 0 = 0 (float64)."""
    return -np.sum(scipy.special.xlogy(p, p), axis=-1)


def _reference(members, likelihood):
    """(p̄ [N, K], H[p̄], mean_s H[p_s], class std) in float64 numpy."""
    f = np.asarray(members, np.float64)
    if likelihood == "bernoulli":
        p = np.concatenate([scipy.special.expit(-f), scipy.special.expit(f)], axis=-1)
    else:
        p = scipy.special.softmax(f, axis=-1)
    mean = p.mean(axis=0)
    return mean, _entropy(mean), _entropy(p).mean(axis=0), p.std(axis=0)


_RNG = np.random.default_rng(39)
_CLASS_CASES = {
    "softmax": (3.0 * _RNG.standard_normal((5, 9, 4)), "categorical"),
    "sigmoid": (3.0 * _RNG.standard_normal((5, 9, 1)), "bernoulli"),
    "softmax_0_or_1": (np.array([[[1e3, -1e3, 0.0]], [[-1e3, 1e3, 0.0]]]), "categorical"),
    "sigmoid_0_or_1": (np.array([[[1e3]], [[-1e3]], [[50.0]]]), "bernoulli"),
    "ruled_out_class": (np.array([[[0.0, -np.inf, 1.0]], [[2.0, -np.inf, 1.0]]]),
                        "categorical"),
    "one_member": (_RNG.standard_normal((1, 9, 4)), "categorical"),
    "same_softmax": (np.repeat(_RNG.standard_normal((1, 9, 4)), 4, axis=0), "categorical"),
    "same_sigmoid": (np.repeat(_RNG.standard_normal((1, 9, 1)), 4, axis=0), "bernoulli"),
}


@pytest.mark.parametrize("case", sorted(_CLASS_CASES))
def test_entropy_decomposition_matches_numpy(case):
    """H[p̄] = E_s H[p_s] + MI, each ≥ 0, no NaN; MI = 0 for one member or equal ones."""
    members, likelihood = _CLASS_CASES[case]
    members = members.astype(np.float32)
    got = {key: ops.convert_to_numpy(value).astype(np.float64)
           for key, value in uncertainty.summary(ops.convert_to_tensor(members),
                                                 likelihood).items()}
    mean, total, aleatoric, std = _reference(members, likelihood)
    assert not any(np.isnan(value).any() for value in got.values())
    binary = likelihood == "bernoulli"
    np.testing.assert_allclose(got["probabilities"], mean[..., 1:] if binary else mean,
                               atol=1e-6)
    np.testing.assert_allclose(got["predictive_entropy"], total, atol=1e-6)
    np.testing.assert_allclose(got["expected_entropy"], aleatoric, atol=1e-6)
    np.testing.assert_allclose(got["mutual_information"], np.maximum(total - aleatoric, 0.0),
                               atol=1e-6)
    np.testing.assert_allclose(got["probability_std" if binary else "class_std"],
                               std[..., 1:] if binary else std, atol=1e-6)
    for key in ("predictive_entropy", "expected_entropy", "mutual_information"):
        assert got[key].min() >= 0.0
    if case.startswith(("one", "same")):
        assert np.all(got["mutual_information"] == 0.0)


@pytest.mark.parametrize("dtype, atol", [("float16", 3e-3), ("bfloat16", 3e-2)])
def test_low_precision_members_decompose_within_their_precision(dtype, atol):
    """float16/bfloat16 members (summary in their dtype): the numpy decomposition of the
    rounded logits within a few of the dtype's eps times the entropy's size (log 4)."""
    members, _ = _CLASS_CASES["softmax"]
    low = ops.cast(ops.convert_to_tensor(members.astype(np.float32)), dtype)
    got = {key: ops.convert_to_numpy(ops.cast(value, "float64"))
           for key, value in uncertainty.summary(low, "categorical").items()}
    mean, total, aleatoric, _ = _reference(ops.convert_to_numpy(ops.cast(low, "float64")),
                                           "categorical")
    np.testing.assert_allclose(got["probabilities"], mean, atol=atol)
    np.testing.assert_allclose(got["predictive_entropy"], total, atol=atol)
    np.testing.assert_allclose(got["expected_entropy"], aleatoric, atol=atol)
    np.testing.assert_allclose(got["mutual_information"], total - aleatoric, atol=2 * atol)


@pytest.mark.parametrize("noise", ["heteroscedastic", "fixed"])
def test_gaussian_mixture_moments_match_numpy(noise):
    """mean = E_s μ_s, variance = E_s σ²_s + Var_s μ_s, and the predictive's log-variance."""
    rng = np.random.default_rng(1)
    means = rng.standard_normal((6, 20, 2))
    log_vars = rng.standard_normal((6, 20, 2)) if noise == "heteroscedastic" else (
        np.full((6, 20, 2), -1.0))
    members = np.concatenate([means, log_vars], axis=-1).astype(np.float32)
    f = members.astype(np.float64)
    aleatoric, epistemic = np.exp(f[..., 2:]).mean(0), f[..., :2].var(0)
    got = {key: ops.convert_to_numpy(value).astype(np.float64)
           for key, value in uncertainty.summary(ops.convert_to_tensor(members),
                                                 "gaussian").items()}
    np.testing.assert_allclose(got["mean"], f[..., :2].mean(0), atol=1e-6)
    np.testing.assert_allclose(got["aleatoric_variance"], aleatoric, rtol=1e-6)
    np.testing.assert_allclose(got["epistemic_variance"], epistemic, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got["variance"], aleatoric + epistemic, rtol=1e-6)
    predictive = ops.convert_to_numpy(uncertainty.predictive(ops.convert_to_tensor(members),
                                                             "gaussian"))
    np.testing.assert_allclose(predictive[..., 2:], np.log(aleatoric + epistemic), atol=1e-6)


def _mixture_cdf(t, mu, var, q):
    """(1/S) Σ_s Φ((t − μ_s)/σ_s) − q: zero at the mixture's q-quantile."""
    return np.mean(scipy.stats.norm.cdf(t, mu, np.sqrt(var))) - q


def test_mixture_intervals_match_root_found_quantiles_and_cover_nominally():
    """Coverage of the mixture's central intervals: per example as the brentq-solved
    quantiles of (1/S) Σ Φ say, and on draws from the mixture itself nominal within
    4 binomial standard errors sqrt(L(1 − L)/N)."""
    rng = np.random.default_rng(7)
    s, n = 4, 20000
    mu, var = 2.0 * rng.standard_normal((s, n)), np.exp(rng.standard_normal((s, n)))
    pick = rng.integers(0, s, n)
    y = mu[pick, np.arange(n)] + np.sqrt(var[pick, np.arange(n)]) * rng.standard_normal(n)
    levels = (0.5, 0.9, 0.95)
    scores = metrics.evaluate_gaussian_members(mu, var, y, levels=levels)["ensemble"]
    for level in levels:
        error = np.sqrt(level * (1 - level) / n)
        assert abs(scores[f"coverage_{level:g}"] - level) < 4 * error
    few = 60
    inside = np.empty(few, bool)
    for i in range(few):
        lo, hi = (scipy.optimize.brentq(_mixture_cdf, -60, 60, (mu[:, i], var[:, i], q),
                                        xtol=1e-12) for q in (0.05, 0.95))
        inside[i] = lo <= y[i] <= hi
    got = metrics.evaluate_gaussian_members(mu[:, :few], var[:, :few], y[:few], levels=0.9)
    assert got["ensemble"]["coverage_0.9"] == inside.mean()


def test_reliability_plot_draws_the_bins_the_ece_sums(tmp_path, monkeypatch):
    """The bars drawn are `reliability`'s bins (empty ones drawn as no bar, weight-0
    ones left out as the ECE leaves them), and the title's ECE is theirs."""
    figures = []
    save = plots._save_png
    monkeypatch.setattr(plots, "_save_png", lambda fig, path: figures.append(fig) or save(
        fig, path))
    probs = np.array([[0.95, 0.05], [0.55, 0.45], [0.72, 0.28], [0.6, 0.4], [1.0, 0.0]])
    labels, weights = np.array([0, 1, 0, 1, 0]), np.array([0.5, 2.0, 0.0, 1.0, 3.0])
    plots.reliability_diagram(probs, labels, tmp_path / "r.png", num_bins=10,
                              sample_weight=weights)
    stats = metrics.reliability(probs, labels, 10, sample_weight=weights)
    ece = metrics.ece(probs, labels, 10, sample_weight=weights)
    top, bottom = figures[0].axes
    filled = stats["weight"] > 0
    heights = [patch.get_height() for patch in top.patches]
    np.testing.assert_allclose(heights[:filled.sum()], stats["accuracy"][filled])
    np.testing.assert_allclose(heights[filled.sum():],
                               (stats["confidence"] - stats["accuracy"])[filled])
    np.testing.assert_allclose([patch.get_x() for patch in top.patches[:filled.sum()]],
                               stats["bin_lower"][filled])
    np.testing.assert_allclose([patch.get_height() for patch in bottom.patches],
                               stats["weight"])
    assert f"ECE = {ece:.4f}" in top.get_title()
    gaps = np.abs(stats["accuracy"] - stats["confidence"])[filled]
    assert ece == pytest.approx(np.sum(stats["weight"][filled] * gaps) / weights.sum())


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16, np.float32])
def test_float_labels_of_any_precision_are_scored(dtype):
    """Failed before for bfloat16: ``ValueError: `labels` must be integer class indices;
    got dtype bfloat16 values [2 1 2].`` (float16 and float32 passed)."""
    rng = np.random.default_rng(3)
    probs = scipy.special.softmax(rng.standard_normal((50, 3)), axis=1)
    labels = rng.integers(0, 3, 50)
    assert metrics.evaluate_probs(probs, labels.astype(dtype)) == metrics.evaluate_probs(
        probs, labels)
    assert metrics.accuracy(probs, labels.astype(dtype)[:, None]) == metrics.accuracy(
        probs, labels)
    with pytest.raises(ValueError, match="`labels` must be integer class indices"):
        metrics.accuracy(probs, (labels + 0.5).astype(dtype))


def test_a_bytes_plot_path_is_written(tmp_path):
    """Failed before: ``TypeError: endswith first arg must be bytes or a tuple of bytes``."""
    target = tmp_path / "r.png"
    written = plots.reliability_diagram(np.array([[0.7, 0.3]]), np.array([0]),
                                        os.fsencode(target))
    assert written == str(target) and target.stat().st_size > 0


def test_a_directory_plot_path_is_refused_naming_path(tmp_path):
    """Failed before: ``IsADirectoryError: [Errno 21] Is a directory: cannot write
    .../d.png`` (an OSError, raised after drawing and writing a temp file)."""
    (tmp_path / "d.png").mkdir()
    with pytest.raises(ValueError, match="`path` must be a file to write, not a directory"):
        plots.reliability_diagram(np.array([[0.7, 0.3]]), np.array([0]), tmp_path / "d.png")
    assert os.listdir(tmp_path / "d.png") == [] and os.listdir(tmp_path) == ["d.png"]
