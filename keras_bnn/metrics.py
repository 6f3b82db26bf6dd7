"""Predictive-performance metrics: classes, binary outcomes, regression.

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
Gaussian, :func:`evaluate_gaussian_members` of an ensemble's Gaussian mixture.

* accuracy  = (1/N) Σ_i 1[argmax_k p_ik = y_i]
* nll       = (1/N) Σ_i -log max(p_{i,y_i}, PROB_FLOOR)
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
The Gaussian metrics read the last axis as the D targets of a position
(``target_axis=-1``): one target per token ``[N, T]`` is per position only under
a mask of that shape or with ``target_axis=None`` (else it is N examples of D = T).

Everything here is numpy and scipy: importing or calling this module needs
no TensorFlow, on any Keras backend.
"""

import numpy as np
import scipy.special

from keras_bnn import positions
from keras_bnn.metric_inputs import (as_numbers, check_probabilities, take_labels, take_weights,
                                     two_class)
from keras_bnn.paired import paired_difference  # noqa: F401 - kb.metrics.paired_difference
from keras_bnn.validation import argument_error, check_choice, check_fraction, check_int

# Smallest probability used inside a log: a predicted probability of exactly 0
# for the true class costs -log(PROB_FLOOR) ≈ 87.3 nats instead of infinity.
PROB_FLOOR = float(np.finfo(np.float32).tiny)

METRIC_NAMES = ("accuracy", "nll", "ece", "brier")

#: The Gaussian metrics' ``target_axis``: -1, the last axis holds D targets;
#: None, no target axis (one target per position).
TARGET_AXES = (-1, None)


def _check(probs, labels, mask=None, sample_weight=None):
    """``(p [M, K], y [M], positions, w [M] or None)``: the scored positions of ``probs``
    [N, ..., K], ``labels`` [N, ...] and ``sample_weight``, checked."""
    p = two_class(probs)
    at = positions.select(p.shape[:-1], mask)
    p = check_probabilities(at.take(p, "probs"))
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
    return float(np.average(np.argmax(p, axis=1) == y, weights=w))


def nll(probs, labels, mask=None, sample_weight=None):
    """Mean negative log-likelihood of the labels, in nats.

    nll = (1/N) Σ_i -log max(p_{i,y_i}, PROB_FLOOR); the floor (float32 `tiny`)
    keeps one zero probability from making the mean infinite. With weights
    the mean is Σ_i w_i nll_i / Σ_i w_i (sklearn's ``log_loss``).

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example).
      labels: [N, ...] integer labels in [0, K).
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      float >= 0.

    Raises:
      ValueError: as for `accuracy`.
    """
    p, y, _, w = _check(probs, labels, mask, sample_weight)
    return float(np.average(_nll_terms(p, y), weights=w))


def _nll_terms(p, y):
    return -np.log(np.maximum(p[np.arange(p.shape[0]), y], PROB_FLOOR))


def nll_per_example(probs, labels, mask=None):
    """Each example's negative log-likelihood, in nats: the terms of :func:`nll`.

    nll_i = -log max(p_{i,y_i}, PROB_FLOOR).

    Args:
      probs: [N, ..., K] class probabilities ([N, K]: one per example).
      labels: [N, ...] integer labels in [0, K).
      mask: optional [N, ...] booleans, True = scored (module docstring).

    Returns:
      float64 numpy array [N, ...] (the positions' shape), or [M] with a mask:
      compare two models' [M] with ``paired_difference(a, b, mask=mask)``,
      whose SE then treats each example's positions as one cluster.

    Raises:
      ValueError: as for `accuracy`.
    """
    p, y, at, _ = _check(probs, labels, mask)
    return at.restore(_nll_terms(p, y))


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
    binary = np.shape(probs)[-1] == 1  # after the check: a scalar has no last axis
    onehot = np.eye(p.shape[1])[y]
    return float(np.average(np.sum((p - onehot) ** 2, axis=1), weights=w)
                 / (2.0 if binary else 1.0))


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
      mask: optional [N, ...] booleans, True = scored (module docstring).
      num_bins: number B of equal-width bins on [0, 1], B >= 1.
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      float in [0, 1].

    Raises:
      ValueError: as for `accuracy`, or if `num_bins` is not a positive integer.
    """
    stats = reliability(probs, labels, num_bins, mask, sample_weight)
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
      mask: optional [N, ...] booleans, True = scored (module docstring).
      num_bins: number B of equal-width bins on [0, 1], B >= 1.
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
      mask: optional [N, ...] booleans, True = scored (module docstring).
      num_bins: bins for `ece`.
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      dict with float values for the keys METRIC_NAMES
      ("accuracy", "nll", "ece", "brier").

    Raises:
      ValueError: as for `ece`.
    """
    w = sample_weight
    return {"accuracy": accuracy(probs, labels, mask, w), "nll": nll(probs, labels, mask, w),
            "ece": ece(probs, labels, num_bins, mask, w), "brier": brier(probs, labels, mask, w)}


def evaluate_members(member_probs, labels, num_bins=15, mask=None, sample_weight=None):
    """Scores each member, the ensemble, and the ensemble as members are added.

    The ensemble's predictive distribution is the mean of the member
    probabilities, p̄ = (1/S) Σ_s p_s; the running ensemble of the first s
    members is p̄_s = (1/s) Σ_{r<=s} p_r.

    Args:
      member_probs: [S, N, ..., K] class probabilities of S members (posterior
        samples) on the same N examples, or [S, N, ..., 1] binary p(y=1).
      labels: [N, ...] integer labels in [0, K).
      num_bins: bins for `ece`.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      sample_weight: optional weights w_i ≥ 0, [N] or [N, ...] (module docstring).

    Returns:
      dict with
        "members": list of S dicts from `evaluate_probs` (single samples);
        "ensemble": `evaluate_probs` of p̄ (equal to the last entry of the curve);
        "metric_vs_num_samples": dict of lists, "num_samples" = [1..S] and one
          list per name in METRIC_NAMES, the metrics of p̄_s.

    Raises:
      ValueError: if `member_probs` is not [S, N, ..., K] probabilities, or as
        for `ece`.
    """
    probs = as_numbers(member_probs, "member_probs")
    if probs.ndim < 3:
        raise argument_error("member_probs", "be an array of shape [S, N, ..., K]", None,
                             got=f"shape {probs.shape}")
    at = positions.select(probs.shape[1:-1], mask, "member_probs")
    probs = at.take(probs, "member_probs", lead=1)
    classes = check_probabilities(two_class(probs), name="member_probs").shape[-1]
    labels, w = take_labels(labels, at, classes), take_weights(sample_weight, at)
    members = [evaluate_probs(p, labels, num_bins, sample_weight=w) for p in probs]
    curve = {"num_samples": []}
    curve.update({name: [] for name in METRIC_NAMES})
    running_sum = np.zeros_like(probs[0])
    for s, p in enumerate(probs, start=1):
        running_sum += p
        scores = evaluate_probs(running_sum / s, labels, num_bins, sample_weight=w)
        curve["num_samples"].append(s)
        for name in METRIC_NAMES:
            curve[name].append(scores[name])
    ensemble = {name: curve[name][-1] for name in METRIC_NAMES}
    return {"members": members, "ensemble": ensemble,
            "metric_vs_num_samples": curve}


def evaluate_gaussian(mean, variance, targets, levels=(0.5, 0.9, 0.95), mask=None,
                      target_axis=-1, sample_weight=None):
    """Metrics of a Gaussian predictive distribution N(mean, variance) (regression).

    With D targets per example (summed over d in the NLL, averaged elsewhere):

    * nll      = (1/N) Σ_i Σ_d ½[log(2π σ²_id) + (y_id − μ_id)²/σ²_id]
    * rmse     = sqrt((1/(N·D)) Σ_i Σ_d (y_id − μ_id)²)
    * coverage_<level> = fraction of y_id inside the central interval
      μ_id ± z·σ_id, z = Φ⁻¹((1 + level)/2) (z = 1.645 for level 0.9); a
      calibrated predictive gives ≈ level.

    With ``sample_weight`` each mean over i is Σ_i w_i (·) / Σ_i w_i (the rmse
    is then sklearn's ``mean_squared_error(..., sample_weight=w) ** 0.5``).

    For a posterior ensemble, whose predictive is a mixture of Gaussians,
    use :func:`evaluate_gaussian_members` (this function scores one
    Gaussian, e.g. the moment-matched one of ``predict_uncertainty``).

    Args:
      mean, variance: [N], [N, D] or [N, ..., D] predictive means and
        variances (> 0); [N, ...] under a ``mask`` of that shape means D = 1.
      targets: observed values, of the same shape.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      levels: central-interval probabilities in (0, 1), or one such number;
        distinct in their keys ``coverage_<level:g>`` (6 significant digits).
      target_axis: -1 (default): the last axis of a 2-D or larger array
        holds the D targets of one position, so [N, T] without a mask is N
        examples of D = T targets (an NLL summed over T); None: there is no
        target axis, every entry is one position's target (D = 1), so [N, T]
        is N·T positions, a per-timestep regression (a ``mask`` is optional).
      sample_weight: optional weights w_i ≥ 0 of the examples [N] (or of the
        positions [N, ...]): as for :func:`accuracy`.

    Returns:
      dict with "nll", "rmse" and "coverage_<level>" per level (e.g.
      "coverage_0.9"), Python floats.

    Raises:
      ValueError: if the shapes differ, a value is not finite, a variance
        is not positive, a level is outside (0, 1) or two share a key,
        ``target_axis`` is not one of :data:`TARGET_AXES`, or naming
        ``sample_weight`` as for :func:`accuracy`.
    """
    mu, var, y, at = _check_gaussian(mean, variance, targets, mask=mask,
                                     target_axis=target_axis)
    return _regression_scores(-_gaussian_nll(mu, var, y), mu,
                              scipy.special.ndtr((y - mu) / np.sqrt(var)), y, _levels(levels),
                              take_weights(sample_weight, at))


def _levels(levels):
    """``levels`` (one number, or a sequence) as checked floats with distinct keys."""
    if np.ndim(levels) == 0:
        return [check_fraction(levels, "levels")]
    checked = [check_fraction(level, f"levels[{i}]") for i, level in enumerate(levels)]
    keys = [f"coverage_{level:g}" for level in checked]
    if len(set(keys)) < len(keys):
        raise argument_error("levels", "be distinct at 6 significant digits (each is a key "
                             "coverage_<level:g> of the result)", levels)
    return checked


def _regression_scores(log_likelihood, mean, cdf, y, levels, w=None):
    """The metrics of :func:`evaluate_gaussian` from the predictive's per-example
    log-likelihood [N], mean [N, D] and CDF at the targets F(y) [N, D], each
    example weighed by ``w`` [N] (None: equally).

    y lies in the central interval of probability L of a continuous
    predictive, [F⁻¹((1 − L)/2), F⁻¹((1 + L)/2)], exactly when
    |F(y) − ½| ≤ L/2: no quantile has to be solved for.
    """
    result = {"nll": float(-np.average(log_likelihood, weights=w)),
              "rmse": float(np.sqrt(np.average(np.mean((y - mean) ** 2, axis=-1), weights=w)))}
    for level in levels:
        inside = np.mean(np.abs(cdf - 0.5) <= level / 2, axis=-1)
        result[f"coverage_{level:g}"] = float(np.average(inside, weights=w))
    return result


def _check_gaussian(mean, variance, targets, names=("mean", "variance"), mask=None,
                    target_axis=-1):
    """``(mean, variance, targets)`` as checked float64 [M, D] arrays of the scored
    positions, and their :class:`Positions` (:func:`evaluate_gaussian`); errors name
    the first two ``names``."""
    check_choice(target_axis, "target_axis", TARGET_AXES)
    named = ((mean, names[0]), (variance, names[1]), (targets, "targets"))
    mu, var, y = (as_numbers(value, name) for value, name in named)
    rank = 1 if mask is None else np.ndim(mask)  # [N, ...] alone: D = 1
    mu, var, y = (v[..., None] if target_axis is None or v.ndim == rank else v
                  for v in (mu, var, y))
    if not mu.shape == var.shape == y.shape or mu.size == 0:
        raise argument_error(
            "targets", "be non-empty and of the shape [N], [N, ..., D] of `{}` and `{}`".format(
                *names),
            None, got=f"shapes {np.shape(mean)}, {np.shape(variance)}, {np.shape(targets)}")
    at = positions.select(mu.shape[:-1], mask, names[0])
    mu, var, y = (at.take(v, name) for v, name in ((mu, names[0]), (var, names[1]),
                                                   (y, "targets")))
    for name, values in ((names[0], mu), (names[1], var), ("targets", y)):
        if not np.all(np.isfinite(values)):
            raise argument_error(name, "be finite", values, got="NaN or inf values")
    if var.min() <= 0:
        raise argument_error(names[1], "be positive", variance, got=f"minimum {var.min():.4g}")
    return mu, var, y, at


def _gaussian_nll(mu, var, y):
    return np.sum(0.5 * (np.log(2 * np.pi * var) + (y - mu) ** 2 / var), axis=-1)


def gaussian_nll_per_example(mean, variance, targets, mask=None, target_axis=-1):
    """Each example's Gaussian NLL: the terms of :func:`evaluate_gaussian`'s ``nll``.

    nll_i = Σ_d ½[log(2π σ²_id) + (y_id − μ_id)²/σ²_id].

    Args:
      mean, variance: [N], [N, D] or [N, ..., D] predictive means and
        variances (> 0); [N, ...] under a ``mask`` of that shape means D = 1.
      targets: observed values, of the same shape.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      target_axis: as for :func:`evaluate_gaussian` (None: [N, T] is per position).

    Returns:
      float64 numpy array [N, ...] (the positions' shape), or [M] with a mask.

    Raises:
      ValueError: as for :func:`evaluate_gaussian`.
    """
    mu, var, y, at = _check_gaussian(mean, variance, targets, mask=mask,
                                     target_axis=target_axis)
    return at.restore(_gaussian_nll(mu, var, y))


def _check_members(member_means, member_variances, targets, mask, target_axis):
    """The S members' ``(means, variances)`` [S, M, D], ``targets`` [M, D] and their
    :class:`Positions`, checked."""
    mu = as_numbers(member_means, "member_means")
    var = as_numbers(member_variances, "member_variances")
    if mu.ndim < 2 or mu.shape != var.shape or 0 in mu.shape:
        raise argument_error("member_variances", "be non-empty arrays of the same shape "
                             "[S, N] or [S, N, ..., D] as `member_means`", None,
                             got=f"shapes {mu.shape} and {var.shape}")
    names = ("member_means", "member_variances")
    checked = [_check_gaussian(m, v, targets, names, mask, target_axis) for m, v in zip(mu, var)]
    return (np.stack([m for m, _, _, _ in checked]), np.stack([v for _, v, _, _ in checked]),
            *checked[0][2:])


def gaussian_mixture_nll_per_example(member_means, member_variances, targets, mask=None,
                                     target_axis=-1):
    """Each example's NLL under the equal-weight mixture of S Gaussians.

    nll_i = −log (1/S) Σ_s Π_d N(y_id; μ_sid, σ²_sid), a log-sum-exp of
    the members' log-densities (finite wherever each member's is): the
    posterior predictive of a Gaussian ensemble, as :func:`nll_per_example`
    of the mean probabilities is a classifier's.

    Args:
      member_means, member_variances: [S, N] or [S, N, ..., D] means and
        variances (> 0) of S members.
      targets: [N] or [N, ..., D] observed values.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      target_axis: as for :func:`evaluate_gaussian`, of ``targets`` (None:
        members [S, N, T] and targets [N, T] are per position).

    Returns:
      float64 numpy array [N, ...] (the positions' shape), or [M] with a mask.

    Raises:
      ValueError: as for :func:`evaluate_gaussian`, naming the members'
        arrays when their shapes differ.
    """
    mu, var, y, at = _check_members(member_means, member_variances, targets, mask, target_axis)
    return at.restore(np.log(len(mu)) - scipy.special.logsumexp(-_gaussian_nll(mu, var, y),
                                                                axis=0))


def evaluate_gaussian_members(member_means, member_variances, targets,
                              levels=(0.5, 0.9, 0.95), mask=None, target_axis=-1,
                              sample_weight=None):
    """Scores each Gaussian member, their mixture, and the mixture as members are added.

    The predictive of S members is the mixture p(y) = (1/S) Σ_s N(y; μ_s, σ²_s)
    (the regression counterpart of :func:`evaluate_members`), scored exactly:

    * nll: :func:`gaussian_mixture_nll_per_example`, averaged;
    * rmse: of the mixture mean (1/S) Σ_s μ_s;
    * coverage_<level>: fraction of y_id inside the mixture's central
      interval of probability ``level`` (per target d), i.e. with
      |F(y_id) − ½| ≤ level/2 for the mixture CDF
      F(y) = (1/S) Σ_s Φ((y − μ_sd)/σ_sd).

    A mixture is not its moment-matched Gaussian: the Gaussian of the same
    mean and variance scores another NLL and other intervals (two members at
    ±3 with unit variance: its 50 % interval covers 10 % of the mixture's
    draws, not 50 %). For S = 1 the numbers are :func:`evaluate_gaussian`'s.

    Args:
      member_means, member_variances: [S, N] or [S, N, ..., D] means and
        variances (> 0) of S members on the same N examples.
      targets: [N] or [N, ..., D] observed values.
      mask: optional [N, ...] booleans, True = scored (module docstring).
      levels: central-interval probabilities in (0, 1), or one such number;
        distinct in their keys ``coverage_<level:g>`` (6 significant digits).
      target_axis: as for :func:`gaussian_mixture_nll_per_example`.
      sample_weight: optional weights w_i ≥ 0, as for :func:`evaluate_gaussian`.

    Returns:
      dict with "members" (S dicts of :func:`evaluate_gaussian`),
      "ensemble" (the S-member mixture's "nll", "rmse", "coverage_<level>")
      and "metric_vs_num_samples" (dict of lists: "num_samples" = [1..S] and
      each metric of the mixture of the first s members).

    Raises:
      ValueError: as for :func:`gaussian_mixture_nll_per_example`, or for
        ``levels`` or ``sample_weight`` as :func:`evaluate_gaussian` says.
    """
    mu, var, y, at = _check_members(member_means, member_variances, targets, mask, target_axis)
    levels, w = _levels(levels), take_weights(sample_weight, at)
    count = np.arange(1, len(mu) + 1)
    log_density = -_gaussian_nll(mu, var, y)  # [S, N]
    cdf = scipy.special.ndtr((y - mu) / np.sqrt(var))  # [S, N, D]
    running_log = np.logaddexp.accumulate(log_density, axis=0) - np.log(count)[:, None]
    running_mean = np.cumsum(mu, axis=0) / count[:, None, None]
    running_cdf = np.cumsum(cdf, axis=0) / count[:, None, None]
    rows = [_regression_scores(*row, y, levels, w)
            for row in zip(running_log, running_mean, running_cdf)]
    curve = {"num_samples": count.tolist()}
    curve.update({name: [row[name] for row in rows] for name in rows[0]})
    members = [_regression_scores(*row, y, levels, w) for row in zip(log_density, mu, cdf)]
    return {"members": members, "ensemble": rows[-1], "metric_vs_num_samples": curve}
