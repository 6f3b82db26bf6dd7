"""Predictive-performance metrics of classifiers: class and binary outcomes.

Every classification function takes ``probs`` of shape ``[N, K]`` (rows are
predictive class distributions p(k|x_i)) and integer ``labels`` of shape
``[N]`` (or ``[N, 1]``, and booleans for two classes, as Keras' sparse losses
take them: :mod:`keras_bnn.metric_inputs`), as numpy arrays or eager tensors,
and returns Python floats or numpy arrays, so results can be printed,
compared and written to JSON directly.

Binary (Bernoulli) predictions are ``probs`` of shape ``[N, 1]`` holding
p(y=1|x_i) (what a ``likelihood="bernoulli"`` ensemble outputs) with labels
in {0, 1}: every function reads them as the two-class rows [1 − p, p]
(confidence max(p, 1 − p) for the ECE), except that ``brier`` is the usual
binary Brier score (1/N) Σ_i (p_i − y_i)², half the two-class sum.
Regression: :func:`evaluate_gaussian` (NLL, RMSE, interval coverage) of one
Gaussian, :func:`evaluate_gaussian_members` of an ensemble's Gaussian mixture,
defined in :mod:`keras_bnn.gaussian_metrics` and re-exported here.

* accuracy  = (1/N) Σ_i 1[argmax_k p_ik = y_i]
* nll       = (1/N) Σ_i -log max(p_{i,y_i}, PROB_FLOOR)
              (of log-probabilities, ``log_probs=True``: (1/N) Σ_i -log p_{i,y_i}, exact)
* brier     = (1/N) Σ_i Σ_k (p_ik - 1[k = y_i])²   (not divided by K; in [0, 2])
* ece       = Σ_b (n_b/N) |acc_b - conf_b|         (Guo et al. 2017, eq. 3)

where bin b holds the examples whose confidence c_i = max_k p_ik falls in
[b/B, (b+1)/B) (the last bin also holds c_i = 1), acc_b is their accuracy and
conf_b their mean confidence.

``sample_weight`` (w_i ≥ 0, ``[N]``, or ``[N, ...]`` per position) turns
each mean into the weighted mean Σ_i w_i x_i / Σ_i w_i, as sklearn's
``accuracy_score``, ``log_loss`` and ``brier_score_loss`` weigh (and Keras'
losses under ``reduction="mean_with_sample_weight"``; its default divides
by N, not Σ w_i): an integer weight counts as that many copies of the
example. For the ECE, n_b/N becomes W_b/W (W_b = Σ_{i∈b} w_i) and acc_b,
conf_b the bin's weighted means.

The NLL of an ensemble is exact only in log space: where members are certain
of a wrong class, p̄_{i,y_i} underflows float32 (and is floored at
PROB_FLOOR, 87.3 nats). From the members' log-probabilities log p_s
(log-softmax of their logits; a Bernoulli member's two outcomes
[log σ(−f), log σ(f)]), :func:`predictive_log_probs` gives

    log p̄ = logsumexp_s log p_s − log S,

which ``nll(..., log_probs=True)`` and ``nll_per_example(..., log_probs=True)``
score without a floor, and ``evaluate_members(..., member_log_probs=...)``
scores the members', the ensemble's and the curve's NLL so
(``PosteriorEnsemble.predict_members(x, log_probabilities=True)`` gives them).

``nll_per_example`` / ``gaussian_nll_per_example`` /
``gaussian_mixture_nll_per_example`` give the terms of the NLL, and
``paired_difference`` (:mod:`keras_bnn.paired`) compares two models on the same
examples or positions (mean difference and its standard error).

``evaluate_members`` scores the S members of a posterior ensemble one by one,
their average (the posterior predictive), and the running average of the first
s members for s = 1..S (how the ensemble improves with more samples).

Per-position predictions (a tagger's ``[N, T, K]``, per pixel ``[N, H, W, K]``;
members ``[S, N, ..., K]``, labels ``[N, ...]``) are scored per position, over
the positions where the optional ``mask`` ``[N, ...]`` is True (``x != 0``):
``f(probs, labels, mask=m) == f(probs[m], labels[m])``, :mod:`keras_bnn.positions`.
Per-example results come in the positions' shape, or ``[M]`` under a mask.

Everything here is numpy and scipy: importing or calling this module needs
no TensorFlow, on any Keras backend.
"""

import numpy as np
from scipy.special import logsumexp

from keras_bnn import positions
from keras_bnn.gaussian_metrics import (TARGET_AXES, evaluate_gaussian, evaluate_gaussian_members,
                                        gaussian_mixture_nll_per_example,
                                        gaussian_nll_per_example)
from keras_bnn.metric_inputs import (as_numbers, check_log_probabilities, check_probabilities,
                                     row_tolerance, take_labels, take_weights, two_class)
from keras_bnn.paired import paired_difference
from keras_bnn.validation import argument_error, check_int

__all__ = [
    "PROB_FLOOR", "METRIC_NAMES", "accuracy", "nll", "nll_per_example", "predictive_log_probs",
    "brier", "ece", "reliability", "evaluate_probs", "evaluate_members", "paired_difference",
    # keras_bnn.gaussian_metrics, the regression metrics:
    "TARGET_AXES", "evaluate_gaussian", "gaussian_nll_per_example",
    "gaussian_mixture_nll_per_example", "evaluate_gaussian_members",
]

# Smallest probability used inside a log: a predicted probability of exactly 0
# for the true class costs -log(PROB_FLOOR) ≈ 87.3 nats instead of infinity.
PROB_FLOOR = float(np.finfo(np.float32).tiny)

METRIC_NAMES = ("accuracy", "nll", "ece", "brier")


def _check(probs, labels, mask=None, sample_weight=None, log_probs=False):
    """``(p [M, K], y [M], positions, w [M] or None)``: the scored positions of ``probs``
    [N, ..., K] (log-probabilities for ``log_probs``), ``labels`` [N, ...] and
    ``sample_weight``, checked."""
    p = as_numbers(probs, "probs") if log_probs else two_class(probs)
    at = positions.select(p.shape[:-1], mask)
    check = check_log_probabilities if log_probs else check_probabilities
    p = check(at.take(p, "probs"), atol=row_tolerance(probs))
    return p, take_labels(labels, at, p.shape[1]), at, take_weights(sample_weight, at)


def accuracy(probs, labels, mask=None, sample_weight=None):
    """Fraction of examples whose most probable class is the label.

    accuracy = (1/N) Σ_i 1[argmax_k p_ik = y_i]  (ties go to the lowest index);
    with weights Σ_i w_i 1[argmax_k p_ik = y_i] / Σ_i w_i.

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example).
      labels: [N, ...] integer labels in [0, K).
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      float in [0, 1].

    Raises:
      ValueError: if the shapes disagree (``mask`` and ``sample_weight``
        included), rows are not probabilities, a label is out of range, or
        a weight is negative or not finite, or all scored weights are 0.
    """
    p, y, _, w = _check(probs, labels, mask, sample_weight)
    return _accuracy(p, y, w)


def _accuracy(p, y, w):
    """`accuracy` of checked rows ``p`` [M, K], labels ``y`` [M] and weights ``w``."""
    return float(np.average(np.argmax(p, axis=1) == y, weights=w))


def nll(probs, labels, mask=None, sample_weight=None, log_probs=False):
    """Mean negative log-likelihood of the labels, in nats.

    nll = (1/N) Σ_i -log max(p_{i,y_i}, PROB_FLOOR); the floor (float32 `tiny`)
    keeps one zero probability from making the mean infinite, and caps an
    example's term at 87.3 nats. ``log_probs=True`` reads log p instead:
    nll = (1/N) Σ_i -log p_{i,y_i}, exact (no floor; an ensemble's log p̄ is
    :func:`predictive_log_probs` of its members'). With weights the mean is
    Σ_i w_i nll_i / Σ_i w_i (sklearn's ``log_loss``).

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example), or
        with ``log_probs`` their logs (K >= 2: a binary prediction as its
        two outcomes [log(1 − p), log p]).
      labels: [N, ...] integer labels in [0, K).
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).
      log_probs: whether ``probs`` holds log-probabilities.

    Returns:
      float >= 0 (inf with ``log_probs`` where a label's log p is -inf).

    Raises:
      ValueError: as for `accuracy` (with ``log_probs``, naming ``probs`` when
        its rows are not log-probabilities).
    """
    p, y, _, w = _check(probs, labels, mask, sample_weight, log_probs)
    return float(np.average(_nll_terms(p, y, log_probs), weights=w))


def _nll_terms(p, y, log_probs=False):
    """−log p_{i,y_i} of probabilities (floored at PROB_FLOOR) or of log-probabilities."""
    picked = p[np.arange(p.shape[0]), y]
    return 0.0 - picked if log_probs else -np.log(np.maximum(picked, PROB_FLOOR))


def nll_per_example(probs, labels, mask=None, log_probs=False):
    """Each example's negative log-likelihood, in nats: the terms of :func:`nll`.

    nll_i = -log max(p_{i,y_i}, PROB_FLOOR); with ``log_probs`` -log p_{i,y_i}.

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example), or
        with ``log_probs`` their logs (as for :func:`nll`).
      labels: [N, ...] integer labels in [0, K).
      mask: optional [N, ...] booleans, True = scored (module docstring).
      log_probs: whether ``probs`` holds log-probabilities.

    Returns:
      float64 numpy array [N, ...] (the positions' shape), or [M] with a mask:
      compare two models' [M] with ``paired_difference(a, b, mask=mask)``,
      whose SE then treats each example's positions as one cluster.

    Raises:
      ValueError: as for `accuracy`.
    """
    p, y, at, _ = _check(probs, labels, mask, log_probs=log_probs)
    return at.restore(_nll_terms(p, y, log_probs))


def predictive_log_probs(member_log_probs):
    """The log of an ensemble's predictive, exact where p̄ underflows.

    log p̄_k = logsumexp_s log p_{s,k} − log S (at most 0), in float64: the
    log of p̄ = (1/S) Σ_s p_s without forming p_s. Give it to :func:`nll`
    with ``log_probs=True``.

    Args:
      member_log_probs: [S, N, ..., K] log-probabilities of S members, K >= 2
        (log-softmax of their logits; a Bernoulli member's two outcomes
        [log σ(−f), log σ(f)]): ``PosteriorEnsemble.predict_members(x,
        log_probabilities=True)``.

    Returns:
      float64 numpy array [N, ..., K].

    Raises:
      ValueError: naming ``member_log_probs`` for an array of another rank,
        or rows that are not log-probabilities.
    """
    lp = as_numbers(member_log_probs, "member_log_probs")
    if lp.ndim < 3:
        raise argument_error("member_log_probs", "be an array of shape [S, N, ..., K]", None,
                             got=f"shape {lp.shape}")
    lp = check_log_probabilities(lp, "member_log_probs", row_tolerance(member_log_probs))
    return np.minimum(logsumexp(lp, axis=0) - np.log(lp.shape[0]), 0.0)


def brier(probs, labels, mask=None, sample_weight=None):
    """Multi-class Brier score, summed over classes and averaged over examples.

    brier = (1/N) Σ_i Σ_k (p_ik - 1[k = y_i])².  It is *not* divided by K, so
    it lies in [0, 2]: 0 for a confident correct prediction, 2 for a confident
    wrong one. For binary ``probs`` [N, 1] = p(y=1) it is the binary Brier
    score (1/N) Σ_i (p_i − y_i)², in [0, 1]. With weights the mean over i
    is Σ_i w_i (·) / Σ_i w_i (sklearn's ``brier_score_loss``).

    Args:
      probs, labels: [N, ..., K] class probabilities, or [N, ..., 1] binary
        p(y=1), and their [N, ...] integer labels in [0, K) (as for `accuracy`).
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      float in [0, 2] ([0, 1] for binary ``probs``).

    Raises:
      ValueError: as for `accuracy`.
    """
    p, y, _, w = _check(probs, labels, mask, sample_weight)
    return _brier(p, y, w, np.shape(probs)[-1] == 1)  # after the check: a scalar has no axis


def _brier(p, y, w, binary):
    """`brier` of checked rows ``p`` [M, K] (two-class rows of ``binary`` p(y=1))."""
    # Σ_k (p_k - 1[k = y])² = Σ_k p_k² - 2 p_y + 1, without a one-hot copy of p;
    # >= 0 up to rounding (it is Σ_{k≠y} p_k² + (1 - p_y)²).
    terms = np.einsum("ik,ik->i", p, p) - 2.0 * p[np.arange(p.shape[0]), y] + 1.0
    return float(np.average(np.maximum(terms, 0.0), weights=w) / (2.0 if binary else 1.0))


def ece(probs, labels, num_bins=15, mask=None, sample_weight=None):
    """Expected calibration error with equal-width confidence bins.

    ece = Σ_b (n_b/N) |acc_b - conf_b| over the non-empty bins of
    `reliability` (Guo et al. 2017, eq. 3), with the argmax as the decision.
    Weighted: ece = Σ_b (W_b/W) |acc_b - conf_b|, W_b = Σ_{i∈b} w_i,
    W = Σ_i w_i, acc_b = Σ_{i∈b} w_i 1[ŷ_i = y_i] / W_b and
    conf_b = Σ_{i∈b} w_i c_i / W_b, over the bins with W_b > 0 (an integer
    weight counts as that many copies of the example).
    Numpy: the bins of ``tfp.stats.expected_calibration_error`` (float32
    confidences), float64 sums; the tests check the two agree (TFP's numpy
    substrate lacks ``unsorted_segment_sum``, its JAX one fails to import).

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example).
      labels: [N, ...] integer labels in [0, K).
      num_bins: number B of equal-width bins on [0, 1], B >= 1.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      float in [0, 1].

    Raises:
      ValueError: as for `accuracy`, or if `num_bins` is not a positive integer.
    """
    return _ece(reliability(probs, labels, num_bins, mask, sample_weight))


def _ece(stats):
    """`ece` of the bins of `reliability`."""
    filled = stats["weight"] > 0
    weights = stats["weight"][filled] / np.sum(stats["weight"])
    return float(np.sum(weights * np.abs(stats["accuracy"][filled] - stats["confidence"][filled])))


def reliability(probs, labels, num_bins=15, mask=None, sample_weight=None):
    """Per-bin statistics of a reliability diagram.

    Bin b = 0..B-1 holds the examples whose confidence c_i = max_k p_ik lies in
    [b/B, (b+1)/B) (c_i = 1 goes to the last bin), the same binning as
    `tf.histogram_fixed_width_bins` and hence as `ece`.

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example).
      labels: [N, ...] integer labels in [0, K).
      num_bins: number B of equal-width bins on [0, 1], B >= 1.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      dict of numpy arrays of length B:
        "bin_lower", "bin_upper": bin edges;
        "count": number of examples n_b in the bin (int64);
        "weight": their weight W_b = Σ_{i∈b} w_i (float64; n_b without weights);
        "confidence": (weighted) mean confidence conf_b of the bin (NaN when W_b = 0);
        "accuracy": (weighted) fraction acc_b of correct predictions (NaN when W_b = 0).
      Σ_b (weight_b/W)|accuracy_b - confidence_b| over bins with W_b > 0 is `ece`.

    Raises:
      ValueError: as for `ece`.
    """
    num_bins = check_int(num_bins, "num_bins", 1)
    p, y, _, w = _check(probs, labels, mask, sample_weight)
    return _reliability(p, y, w, num_bins)


def _reliability(p, y, w, num_bins):
    """`reliability` of checked rows ``p`` [M, K], labels ``y`` [M] and weights ``w``."""
    w = np.ones(len(y)) if w is None else w
    predicted = np.argmax(p, axis=1)
    confidence = p[np.arange(p.shape[0]), predicted]
    # Bins from float32 confidences, as TFP's and `tf.histogram_fixed_width_bins`
    # assign them at bin edges; the means below stay in float64.
    bins = np.floor(confidence.astype(np.float32) * np.float32(num_bins))
    bins = np.clip(bins, 0, num_bins - 1)
    bins = bins.astype(np.int64)
    count = np.bincount(bins, minlength=num_bins)
    weight = np.bincount(bins, weights=w, minlength=num_bins)
    correct = np.bincount(bins, weights=w * (predicted == y), minlength=num_bins)
    conf_sum = np.bincount(bins, weights=w * confidence, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_conf = np.where(weight > 0, conf_sum / weight, np.nan)
        mean_acc = np.where(weight > 0, correct / weight, np.nan)
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    return {"bin_lower": edges[:-1], "bin_upper": edges[1:], "count": count,
            "weight": weight, "confidence": mean_conf, "accuracy": mean_acc}


def evaluate_probs(probs, labels, num_bins=15, mask=None, sample_weight=None):
    """All metrics of one predictive distribution.

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example).
      labels: [N, ...] integer labels in [0, K).
      num_bins: bins for `ece`.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      dict with float values for the keys METRIC_NAMES
      ("accuracy", "nll", "ece", "brier").

    Raises:
      ValueError: as for `ece`.
    """
    num_bins = check_int(num_bins, "num_bins", 1)
    p, y, _, w = _check(probs, labels, mask, sample_weight)
    return _scores(p, y, w, num_bins, np.shape(probs)[-1] == 1)


def _scores(p, y, w, num_bins, binary):
    """`evaluate_probs` of checked rows ``p`` [M, K] (two-class rows of ``binary``
    p(y=1)), labels ``y`` [M] and weights ``w``: each row is checked once, at the
    tolerance of the dtype it was given in (a bfloat16 softmax's)."""
    return {"accuracy": _accuracy(p, y, w), "nll": float(np.average(_nll_terms(p, y), weights=w)),
            "ece": _ece(_reliability(p, y, w, num_bins)), "brier": _brier(p, y, w, binary)}


def evaluate_members(member_probs, labels, num_bins=15, mask=None, sample_weight=None,
                     member_log_probs=None):
    """Scores each member, the ensemble, and the ensemble as members are added.

    The ensemble's predictive distribution is the mean of the member
    probabilities, p̄ = (1/S) Σ_s p_s; the running ensemble of the first s
    members is p̄_s = (1/s) Σ_{r<=s} p_r. Given ``member_log_probs``, every
    NLL (each member's, the ensemble's, the curve's) is exact, from log p_s:
    −log p_{s,y}, and −log p̄_s,y = −(logsumexp_{r<=s} log p_{r,y} − log s),
    where the probabilities' NLL floors p̄ at PROB_FLOOR (87.3 nats); the
    other metrics read ``member_probs``.

    Args:
      member_probs: [S, N, ..., K] class probabilities of S members (posterior
        samples) on the same N examples, or [S, N, ..., 1] binary p(y=1).
      labels: [N, ...] integer labels in [0, K).
      num_bins: bins for `ece`.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).
      member_log_probs: optional [S, N, ..., K] log-probabilities of the same
        members (for binary ``member_probs`` [S, N, ..., 1] the two outcomes
        [log(1 − p), log p], [S, N, ..., 2]), e.g. from
        ``PosteriorEnsemble.predict_members(x, log_probabilities=True)``.

    Returns:
      dict with
        "members": list of S dicts from `evaluate_probs` (single samples);
        "ensemble": `evaluate_probs` of p̄ (equal to the last entry of the curve);
        "metric_vs_num_samples": dict of lists, "num_samples" = [1..S] and one
          list per name in METRIC_NAMES, the metrics of p̄_s.

    Raises:
      ValueError: if `member_probs` is not [S, N, ..., K] probabilities, naming
        `member_log_probs` if it is not their log-probabilities' shape or not
        log-probabilities, or as for `ece`.
    """
    probs = as_numbers(member_probs, "member_probs")
    if probs.ndim < 3:
        raise argument_error("member_probs", "be an array of shape [S, N, ..., K]", None,
                             got=f"shape {probs.shape}")
    num_bins = check_int(num_bins, "num_bins", 1)
    at = positions.select(probs.shape[1:-1], mask, "member_probs")
    binary = probs.shape[-1] == 1
    probs = check_probabilities(two_class(at.take(probs, "member_probs", lead=1)),
                                "member_probs", row_tolerance(member_probs))  # [S, M, K]
    labels, w = take_labels(labels, at, probs.shape[-1]), take_weights(sample_weight, at)
    members = [_scores(p, labels, w, num_bins, binary) for p in probs]
    exact = None if member_log_probs is None else _label_log_probs(
        member_log_probs, probs.shape, at, labels)
    curve = {"num_samples": []}
    curve.update({name: [] for name in METRIC_NAMES})
    running_sum = np.zeros_like(probs[0])
    for s, p in enumerate(probs, start=1):
        running_sum += p
        scores = _scores(running_sum / s, labels, w, num_bins, binary)
        curve["num_samples"].append(s)
        for name in METRIC_NAMES:
            curve[name].append(scores[name])
    if exact is not None:  # [S, M]: log p_{s,y}; the running log-sums log Σ_{r<=s} p_{r,y}
        running = np.logaddexp.accumulate(exact, axis=0) - np.log(curve["num_samples"])[:, None]
        for scores, terms in zip(members, exact):
            scores["nll"] = float(np.average(0.0 - terms, weights=w))
        curve["nll"] = [float(np.average(0.0 - terms, weights=w)) for terms in running]
    ensemble = {name: curve[name][-1] for name in METRIC_NAMES}
    return {"members": members, "ensemble": ensemble,
            "metric_vs_num_samples": curve}


def _label_log_probs(member_log_probs, shape, at, labels):
    """[S, M]: log p_{s,y} of the M scored positions' labels, from ``member_log_probs``
    of ``shape`` [S, M, K] at the positions ``at`` (checked, naming the argument)."""
    lp = as_numbers(member_log_probs, "member_log_probs")
    if lp.ndim < 3 or lp.shape[0] != shape[0] or lp.shape[-1] != shape[-1]:
        raise argument_error("member_log_probs", f"have the shape of the members' "
                             f"log-probabilities, [{shape[0]}, N, ..., {shape[-1]}]", None,
                             got=f"shape {lp.shape}")
    lp = check_log_probabilities(at.take(lp, "member_log_probs", lead=1), "member_log_probs",
                                 row_tolerance(member_log_probs))
    return lp[:, np.arange(len(labels)), labels]
