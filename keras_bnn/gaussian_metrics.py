"""Gaussian (regression) predictive metrics: NLL, RMSE, interval coverage.

:func:`evaluate_gaussian` scores one Gaussian predictive N(mean, variance),
:func:`evaluate_gaussian_members` an ensemble's equal-weight mixture of S
Gaussians (exactly: a mixture is not its moment-matched Gaussian);
``gaussian_nll_per_example`` / ``gaussian_mixture_nll_per_example`` give the
terms of their NLL, for :func:`keras_bnn.paired.paired_difference`.
:mod:`keras_bnn.metrics` re-exports every name here (``kb.metrics.X``).

Arrays are numpy arrays, eager tensors or lists; results are Python floats
or numpy arrays. ``sample_weight`` and ``mask`` are read as in
:mod:`keras_bnn.metrics`: weighted means Σ_i w_i x_i / Σ_i w_i, and the
positions where ``mask`` is True. The last axis holds the D targets of a
position (``target_axis=-1``): one target per token ``[N, T]`` is per position
only under a mask of that shape or with ``target_axis=None`` (else it is N
examples of D = T).

Everything here is numpy and scipy: importing or calling this module needs
no TensorFlow, on any Keras backend.
"""

import numpy as np
import scipy.special

from keras_bnn import positions
from keras_bnn.metric_inputs import as_numbers, take_weights
from keras_bnn.validation import argument_error, check_choice, check_fraction


#: The Gaussian metrics' ``target_axis``: -1, the last axis holds D targets;
#: None, no target axis (one target per position).
TARGET_AXES = (-1, None)


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
        positions [N, ...]): as for :func:`keras_bnn.metrics.accuracy`.

    Returns:
      dict with "nll", "rmse" and "coverage_<level>" per level (e.g.
      "coverage_0.9"), Python floats.

    Raises:
      ValueError: if the shapes differ, a value is not finite, a variance
        is not positive, a level is outside (0, 1) or two share a key,
        ``target_axis`` is not one of :data:`TARGET_AXES`, or naming
        ``sample_weight`` as for :func:`keras_bnn.metrics.accuracy`.
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
    posterior predictive of a Gaussian ensemble, as
    :func:`keras_bnn.metrics.nll_per_example` of the mean probabilities is a
    classifier's.

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
    (the regression counterpart of :func:`keras_bnn.metrics.evaluate_members`),
    scored exactly:

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
