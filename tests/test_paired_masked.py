"""``paired_difference`` of a masked tagger's per-token scores ``[M]``: clustered by sequence.

``nll_per_example(probs, labels, mask=mask)`` returns the M scored tokens
flat; the tokens of one sequence are correlated, so the standard error of
their mean difference must come from the sequences' sums (cluster-robust),
not from sd/√M. Until 2026-11-29 ``paired_difference(a_M, b_M, mask=mask)``
was refused (mask of another shape), and without the mask the flat tokens
read as M independent examples.
"""

import numpy as np
import pytest

from keras_bnn import metrics

N, T = 200, 20


def _tagger(rng, shift_sd=1.0):
    """Two models' probabilities [N, T, 2] (true class 0) and a mask of lengths 1..T: model
    a's logit is b's plus a per-sequence shift u_i ~ N(0, shift_sd²) plus token noise."""
    mask = np.arange(T) < rng.integers(1, T + 1, N)[:, None]
    base = rng.normal(1.0, 1.0, (N, T))
    shifted = base + shift_sd * rng.standard_normal((N, 1)) + rng.standard_normal((N, T))
    return _probs(shifted), _probs(base), np.zeros((N, T), int), mask


def _probs(logit):
    """Two-class rows [σ(z), σ(−z)]."""
    return np.stack([1 / (1 + np.exp(-logit)), 1 / (1 + np.exp(logit))], axis=-1)


def _direct_se(d, mask):
    """Cluster-robust SE computed sequence by sequence: the sum and count of each
    sequence's differences, then n/(n − 1) Σ_i (S_i − n_i Δ̄)² / (Σ_i n_i)²."""
    sums, counts, start = [], [], 0
    for length in mask.sum(axis=1):
        sums.append(d[start:start + length].sum())
        counts.append(length)
        start += length
    sums, counts = np.array(sums), np.array(counts)
    mean = sums.sum() / counts.sum()
    return np.sqrt(len(sums) / (len(sums) - 1) * np.sum((sums - counts * mean) ** 2)) / d.size


def test_flat_token_scores_with_their_mask_are_clustered_by_sequence():
    probs_a, probs_b, labels, mask = _tagger(np.random.default_rng(0))
    a = metrics.nll_per_example(probs_a, labels, mask=mask)  # [M]
    b = metrics.nll_per_example(probs_b, labels, mask=mask)
    assert a.shape == (mask.sum(),)
    clustered = metrics.paired_difference(a, b, mask=mask)
    # The same as the [N, T] form with its mask, and as the sequence-by-sequence formula.
    full = metrics.paired_difference(metrics.nll_per_example(probs_a, labels),
                                     metrics.nll_per_example(probs_b, labels), mask=mask)
    index = clustered.pop("largest_index")
    assert mask[index] and index == full.pop("largest_index")  # an index into [N, T]
    assert clustered == pytest.approx(full, rel=1e-12)
    assert clustered["se"] == pytest.approx(_direct_se(a - b, mask), rel=1e-12)
    assert clustered["examples"] == N and clustered["n"] == mask.sum()
    # The flat tokens read as independent understate it: the design effect
    # 1 + (Σn²/Σn − 1)·ρ with ρ ≈ 0.5 and Σn²/Σn ≈ 14 is ≈ 7, an SE ratio ≈ 0.38.
    naive = metrics.paired_difference(a, b)
    assert naive["se"] == pytest.approx(np.std(a - b, ddof=1) / np.sqrt(a.size), rel=1e-12)
    assert naive["se"] / clustered["se"] < 0.6


def test_clustered_interval_covers_at_the_nominal_rate():
    """400 test sets of d_it = u_i + e_it (true mean 0, intra-sequence correlation 0.5):
    Δ̄ ± 1.96 SE covers 0 at 0.95 ± 3 Monte-Carlo sd (0.033) clustered, far less naive."""
    rng = np.random.default_rng(1)
    covered = {"clustered": 0, "naive": 0}
    for _ in range(400):
        mask = np.arange(T) < rng.integers(1, T + 1, N)[:, None]
        d = (rng.standard_normal((N, 1)) + rng.standard_normal((N, T)))[mask]
        zeros = np.zeros_like(d)
        for key, result in (("clustered", metrics.paired_difference(d, zeros, mask=mask)),
                            ("naive", metrics.paired_difference(d, zeros))):
            covered[key] += abs(result["mean"]) <= 1.96 * result["se"]
    assert abs(covered["clustered"] / 400 - 0.95) <= 3 * np.sqrt(0.95 * 0.05 / 400)
    assert covered["naive"] / 400 < 0.75


def test_flat_scores_of_another_count_than_the_mask_are_refused():
    mask = np.arange(4) < np.array([[1], [3], [4]])
    with pytest.raises(ValueError, match=r"`a` must hold one score per True entry of `mask` \(8\)"):
        metrics.paired_difference(np.zeros(7), np.ones(7), mask=mask)
