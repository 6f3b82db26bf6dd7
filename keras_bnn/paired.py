"""Paired comparison of two models scored on the same examples, or the same positions.

:func:`paired_difference` (also ``kb.metrics.paired_difference``) gives the
mean per-example (or per-position) difference of two models' scores and its
standard error. Per position (a tagger's per-token NLL ``[N, T]`` with its
``mask``), the tokens of one sequence are not independent: the standard
error is the cluster-robust one, with the examples as the clusters.

Numpy only: importing this module does not import TensorFlow.
"""

import numpy as np

from keras_bnn import positions
from keras_bnn.metric_inputs import as_numbers, take_weights
from keras_bnn.validation import argument_error


def _differences(a, b, mask, sample_weight):
    """``(d [M], w [M], flat [M], shape)``: the differences a − b of positive weight,
    checked, their weights (ones without ``sample_weight``) and flat indices into the
    positions' ``shape`` (of ``a``, or of ``mask`` for scores [M])."""
    a, b = (np.asarray(v, dtype=np.float64) for v in (a, b))
    if a.shape != b.shape or a.ndim == 0:
        raise argument_error("b", "be a 1-D array of the same length as `a` (at least 2), or "
                             "per-position scores of its shape [N, ...]", b,
                             got=f"shapes {a.shape} and {b.shape}")
    scored = mask is not None and a.ndim == 1 and np.shape(mask) != a.shape  # the [M] form
    at = positions.select(np.shape(mask) if scored else a.shape, mask, "a")
    if scored and a.size != at.index.size:
        raise argument_error("a", f"hold one score per True entry of `mask` ({at.index.size}), "
                             f"or per position of its shape {list(np.shape(mask))}", None,
                             got=f"shape {list(a.shape)}")
    a, b = (v if scored else at.take(v, name, event=False) for v, name in ((a, "a"), (b, "b")))
    w = take_weights(_score_weights(sample_weight, at) if scored else sample_weight, at)
    w = np.ones(a.size) if w is None else w
    kept = w > 0  # a zero weight leaves its example out, as a False entry of `mask`
    for name, values in (("a", a), ("b", b)):
        if not np.all(np.isfinite(values[kept])):
            raise argument_error(name, "be finite", values, got="NaN or inf values")
    flat = np.arange(a.size) if at.index is None else at.index
    return (a - b)[kept], w[kept], flat[kept], at.shape


def _score_weights(sample_weight, at):
    """The weights of scores ``[M]`` selected by a mask (:class:`keras_bnn.positions.Positions`
    ``at``): weights ``[M]``, one per score, laid out at the mask's positions; other
    shapes (``[N]``, the mask's) as given. Weights ``[M]`` with M = N that would
    weigh the scores otherwise as one per example are refused."""
    if sample_weight is None or np.shape(sample_weight) != at.index.shape:
        return sample_weight
    w = as_numbers(sample_weight, "sample_weight")
    example = at.index // int(np.prod(at.shape[1:]))
    if w.size == at.shape[0] and not np.array_equal(w[example], w, equal_nan=True):
        raise argument_error(
            "sample_weight", f"not be of length {w.size}, both the number of scores and of "
            "examples, unless both readings agree: pass one weight per example as "
            "np.broadcast_to(w[:, None], mask.shape), or one per score as an array of the "
            "mask's shape holding them where it is True", None, got=f"shape {list(w.shape)}")
    positions = np.zeros(int(np.prod(at.shape)))
    positions[at.index] = w
    return positions.reshape(at.shape)


def _weighted_median(d, w):
    """The median of ``d`` under weights ``w`` > 0: ``np.median`` of each d_i
    repeated w_i times for integer weights (the mean of the two middle values
    when the total weight is even)."""
    order = np.argsort(d, kind="stable")
    cumulative = np.cumsum(w[order])
    half = cumulative[-1] / 2
    lower, upper = np.searchsorted(cumulative, half, side="left"), np.searchsorted(
        cumulative, half, side="right")
    return (d[order[lower]] + d[order[upper]]) / 2


def paired_difference(a, b, mask=None, sample_weight=None):
    """Mean of a per-example difference between two models, with its standard error.

    Per example (``a``, ``b`` of shape [N]), with d_i = a_i − b_i:

        Δ̄ = (1/N) Σ_i d_i,   SE = sd(d)/√N   (sd with N − 1 in the denominator),

    the standard error of Δ̄ over test examples drawn independently, so that
    Δ̄ ± 2·SE is an approximate 95 % interval (central limit theorem) for
    the difference of the two models' expected per-example scores. Pairing
    (both models scored on the same examples) removes the examples' own
    spread, which dominates each model's mean.

    Per position (``a``, ``b`` of shape [N, ...], e.g. a tagger's per-token
    NLL [N, T]; the positions where ``mask`` is True, all without one), with
    d_it the difference at scored position t of example i, n_i the number of
    them and n the number of examples with n_i ≥ 1:

        Δ̄ = Σ_i Σ_t d_it / Σ_i n_i   (the positions' mean, as the metrics'),
        SE² = n/(n − 1) · Σ_i (Σ_t d_it − n_i Δ̄)² / (Σ_i n_i)²,

    the cluster-robust (sandwich) standard error of a ratio estimator with
    the examples as clusters: the tokens of one sequence are correlated, the
    examples are independent. sd(d)/√M over the M tokens assumes independent
    tokens and is too small when they are positively correlated. With one
    position per example (n_i = 1) the two formulas are the same. The
    scored positions alone, ``[M]`` (what ``nll_per_example(..., mask=mask)``
    returns), are clustered the same way when ``mask`` comes with them: a
    flat ``[M]`` without it reads as M independent examples.

    With ``sample_weight`` (w ≥ 0, the metrics' weights), Δ̄ is the weighted
    mean Σ w d / Σ w (the difference of the two models' weighted metrics),
    and the same ratio estimator, with W_i = Σ_t w_it in place of n_i and
    Σ_t w_it d_it in place of Σ_t d_it, gives its SE; per example

        SE² = n/(n − 1) · Σ_i w_i² (d_i − Δ̄)² / (Σ_i w_i)²,

    its delta-method variance over examples drawn independently, each with
    its weight (importance or class weights: the SE does not change when all
    weights are scaled). When w and d are independent this is Kish's
    sd_w(d)²/n_eff (sd_w the weighted standard deviation, effective n
    n_eff = (Σ w)²/Σ w²); when they are not (a reweighted class whose
    differences spread more) Kish's is too small. A zero weight leaves its
    example out. An integer weight counts as that many copies of the example
    in Δ̄ and the median, not in the SE: copies are not independent draws.

    Two more figures say *how* the models differ: the median difference (a
    systematic shift moves it; a few examples far apart do not) and the
    largest |d|, whose contribution d/M (w d/Σ w) to Δ̄ says whether it carries Δ̄.

    Args:
      a, b: [N] per-example scores of two models on the same examples (e.g.
        :func:`keras_bnn.metrics.nll_per_example`), N ≥ 2; or per-position
        scores [N, ...] of the same shape, from at least 2 examples; or
        [M], the scores of the M positions where ``mask`` [N, ...] is True,
        in C order (``scores[mask]``).
      mask: optional [N, ...] booleans, True = scored (``x != 0``), of the
        shape of ``a``, or the mask that selected ``a`` [M]
        (:mod:`keras_bnn.positions`).
      sample_weight: optional weights w ≥ 0 of the examples [N], or of the
        positions [N, ...] (of the shape of ``mask`` for scores [M]), as
        :func:`keras_bnn.metrics.nll` takes them; for scores [M] also [M],
        one per score (``w[mask]``). Weights of length M = N (as many scores
        as examples) are refused where the two readings, per example and per
        score, differ: pass them in the mask's shape then.

    Returns:
      dict with "mean" (Δ̄), "se", "n" (the number M of differences of
      positive weight), "median" (the (weighted) median difference),
      "largest_index" (the index of the largest |d| in ``a``, or in
      ``mask`` for scores [M]: an int for [N], a tuple for [N, ...]) and
      "largest" (that difference), "largest_share" (its contribution
      w d/Σ w to Δ̄; d/M unweighted); per position also "examples" (n); with
      ``sample_weight`` also "effective_n" ((Σ_i W_i)²/Σ_i W_i²).
      Python floats / ints.

    Raises:
      ValueError: if the shapes differ, fewer than 2 examples are scored
        (with positive weight), a scored value is not finite, ``mask`` is
        neither of the shape of ``a`` nor has as many True entries as ``a``
        [M] has scores, or naming ``sample_weight`` for another shape, a
        negative, NaN or infinite weight, all weights 0, or weights [M] of
        M = N that read otherwise per example than per score.
    """
    d, w, flat, shape = _differences(a, b, mask, sample_weight)
    example = flat // int(np.prod(shape[1:]))  # the cluster of each difference
    sums, sizes = np.bincount(example, w * d), np.bincount(example, w)
    sums, sizes = sums[sizes > 0], sizes[sizes > 0]
    if sums.size < 2:
        raise argument_error("b", "be a 1-D array of the same length as `a` (at least 2), or "
                             "per-position scores from at least 2 examples", b,
                             got=f"{sums.size} example scored")
    total, largest = sizes.sum(), int(np.argmax(np.abs(d)))
    mean = sums.sum() / total
    se = np.sqrt(sums.size / (sums.size - 1) * np.sum((sums - sizes * mean) ** 2)) / total
    index = (int(flat[largest]) if len(shape) == 1
             else tuple(int(i) for i in np.unravel_index(flat[largest], shape)))
    result = {"mean": float(mean), "se": float(se), "n": int(d.size),
              "median": float(_weighted_median(d, w)), "largest_index": index,
              "largest": float(d[largest]), "largest_share": float(w[largest] * d[largest] / total)}
    if sample_weight is not None:
        result["effective_n"] = float(total ** 2 / np.sum(sizes ** 2))
    return result if len(shape) == 1 else result | {"examples": int(sums.size)}
