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
from keras_bnn.validation import argument_error


def _differences(a, b, mask):
    """``(d [M], flat [M], shape)``: the scored differences a − b, checked, their flat
    indices into the positions' ``shape`` (of ``a``, or of ``mask`` for scores [M])."""
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
    for name, values in (("a", a), ("b", b)):
        if not np.all(np.isfinite(values)):
            raise argument_error(name, "be finite", values, got="NaN or inf values")
    flat = np.arange(a.size) if at.index is None else at.index
    return a - b, flat, at.shape


def paired_difference(a, b, mask=None):
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

    Two more figures say *how* the models differ: the median difference (a
    systematic shift moves it; a few examples far apart do not) and the
    largest |d|, whose contribution d/M to Δ̄ says whether it carries Δ̄.

    Args:
      a, b: [N] per-example scores of two models on the same examples (e.g.
        :func:`keras_bnn.metrics.nll_per_example`), N ≥ 2; or per-position
        scores [N, ...] of the same shape, from at least 2 examples; or
        [M], the scores of the M positions where ``mask`` [N, ...] is True,
        in C order (``scores[mask]``).
      mask: optional [N, ...] booleans, True = scored (``x != 0``), of the
        shape of ``a``, or the mask that selected ``a`` [M]
        (:mod:`keras_bnn.positions`).

    Returns:
      dict with "mean" (Δ̄), "se", "n" (the number M of differences),
      "median" (the median difference), "largest_index" (the index of the
      largest |d| in ``a``, or in ``mask`` for scores [M]: an int for [N],
      a tuple for [N, ...]) and
      "largest" (that difference); per position also "examples" (n).
      Python floats / ints.

    Raises:
      ValueError: if the shapes differ, fewer than 2 examples are scored, a
        scored value is not finite, or ``mask`` is neither of the shape of
        ``a`` nor has as many True entries as ``a`` [M] has scores.
    """
    d, flat, shape = _differences(a, b, mask)
    example = flat // int(np.prod(shape[1:]))  # the cluster of each difference
    sums, sizes = np.bincount(example, d), np.bincount(example)
    sums, sizes = sums[sizes > 0], sizes[sizes > 0]
    if sums.size < 2:
        raise argument_error("b", "be a 1-D array of the same length as `a` (at least 2), or "
                             "per-position scores from at least 2 examples", b,
                             got=f"{sums.size} example scored")
    mean, largest = d.mean(), int(np.argmax(np.abs(d)))
    if len(shape) == 1:  # one position per example: n_i = 1
        se = d.std(ddof=1) / np.sqrt(d.size)
        index = int(flat[largest])
    else:
        se = np.sqrt(sums.size / (sums.size - 1) * np.sum((sums - sizes * mean) ** 2)) / d.size
        index = tuple(int(i) for i in np.unravel_index(flat[largest], shape))
    result = {"mean": float(mean), "se": float(se), "n": int(d.size),
              "median": float(np.median(d)), "largest_index": index,
              "largest": float(d[largest])}
    return result if len(shape) == 1 else result | {"examples": int(sums.size)}
