"""Convergence diagnostics for SG-MCMC chains: R-hat, ESS and their verdict.

One implementation of R-hat and ESS: ArviZ's estimators of Vehtari et al.
(2021), per component (a predicted probability p(k|x_n), or one weight):

* R-hat is the rank-normalised split R-hat, the larger of the split R-hat of
  the rank-normalised draws and of their folded ranks
  (``az.rhat(method="rank")``). With m split chains of n draws, W the mean
  within-chain variance of the normal scores and B/n the variance of the
  chain means, R̂ = sqrt(((n-1)/n·W + B/n)/W). It is read at the thresholds
  1.01 (Vehtari et al.) and 1.1 (the older rule), :data:`RHAT_THRESHOLDS`.
  ArviZ needs two chains: one chain is cut into its halves, which ArviZ
  splits again (four quarter-chains), so a single chain needs 8 draws
  (with 4 to 7 its R-hat is NaN; the ESS is still computed).
* Bulk ESS is the ESS of the rank-normalised split chains, tail ESS the
  smaller ESS of the 5 % and 95 % quantile indicators
  (``az.ess(method="bulk" / "tail")``): S_total/τ with
  τ = 1 + 2 Σ_t ρ_t truncated by Geyer's initial monotone sequence and
  bounded below by 1/log10(S_total) (so ESS ≤ S_total·log10(S_total)).

Components constant over all draws (R-hat 0/0) are left out and counted.
ArviZ loops over components in Python (about 1.5 ms per component for the
three estimators), so at most ``max_components`` evenly spaced components
of the varying ones are scored: the summary of a network's weights or of a
large test set is an estimate from that subset.

:func:`convergence_summary` gives the full summary; :func:`predictive_rhat`,
:func:`weight_rhat` and :func:`predictive_ess` are the same numbers under the
keys ``keras-bnn evaluate`` prints (``rhat_median``, ``ess_min``, ...).
The chains themselves, read from a run's stores (:func:`chain_weights`,
:func:`chain_predictions`, :func:`to_inference_data`), live in
:mod:`keras_bnn.stored_chains`, the thermostat's χ² band
(:func:`temperature_band`, :func:`kinetic_temperature_report`) in
:mod:`keras_bnn.temperature_report`; both are importable from here too.

This module imports numpy and Keras (ArviZ inside the functions that use
it), not TensorFlow under ``KERAS_BACKEND=jax``.
"""

from typing import NamedTuple

import numpy as np

from keras_bnn import positions
from keras_bnn.metric_inputs import as_numbers
from keras_bnn.stored_chains import chain_predictions, chain_weights, to_inference_data
from keras_bnn.temperature_report import (KineticTemperatureRow, kinetic_temperature_report,
                                          temperature_band)
from keras_bnn.validation import argument_error, check_bool, check_int

__all__ = [
    "RHAT_THRESHOLDS", "MAX_COMPONENTS", "ESS_PER_CHAIN", "ConvergenceVerdict",
    "convergence_summary", "convergence_verdict", "predictive_ess", "predictive_rhat",
    "weight_rhat",
    # keras_bnn.stored_chains, the chains read from a run's stores:
    "chain_weights", "chain_predictions", "to_inference_data",
    # keras_bnn.temperature_report, the thermostat's χ² band:
    "temperature_band", "KineticTemperatureRow", "kinetic_temperature_report",
]


#: R-hat thresholds reported by :func:`convergence_summary`: Vehtari et al.
#: (2021) recommend 1.01; 1.1 is the older, looser rule (Gelman & Rubin).
RHAT_THRESHOLDS = (1.01, 1.1)

#: Components scored by default (ArviZ costs ~1.5 ms per component).
MAX_COMPONENTS = 1000


def _chain_numbers(states, name):
    """``states`` (an array, or a list of one array per chain) as a float64 array; a
    ValueError naming ``name`` for chains of different shapes (lengths) or non-numbers."""
    if isinstance(states, (list, tuple)):
        shapes = sorted({np.shape(chain) for chain in states})
        if len(shapes) > 1:
            raise argument_error(name, "hold chains of one shape (of different lengths: keep "
                                 "each chain's last S draws, S the shortest)", None,
                                 got=f"shapes {', '.join(map(str, shapes))}")
    return as_numbers(states, name)


def _as_chains(states, name, shape_text, ndim=None):
    """``states`` as a float64 ``[C, S, ...]`` array with enough draws, or a ValueError."""
    x = _chain_numbers(states, name)
    # Components may be none ([C, S, 0]: no weight varies); predictions may not.
    empty = 0 in (x.shape[:2] if ndim is None else x.shape)
    if (x.ndim < 2 if ndim is None else x.ndim != ndim) or empty:
        raise argument_error(name, f"be an array of shape {shape_text} without empty axes",
                             states, got=f"shape {x.shape}")
    if x.shape[1] < 4:
        raise argument_error(name, f"have at least 4 draws per chain (shape {shape_text})",
                             states, got=f"shape {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():  # where: which chain diverged, and from which draw
        chain, draw = np.argwhere(bad)[0][:2]
        raise argument_error(name, "be finite", states, got=f"{bad.sum()} non-finite values, "
                             f"the first at chain {chain}, draw {draw}")
    return x


def _scores(chains, max_components, estimators=("rhat", "bulk", "tail")):
    """Per-component rank-normalised R-hat, bulk ESS and tail ESS (ArviZ).

    Args:
        chains: ``[C, S, ...]`` float64 draws, already checked.
        max_components: score at most this many varying components, or None.
        estimators: which of ``"rhat"``, ``"bulk"``, ``"tail"`` to compute.

    Returns:
        ``(counts, scores)``: counts is a dict with ``num_components``
        (varying), ``num_scored`` and ``num_constant``; scores maps each
        estimator to an array over the scored components.
    """
    import arviz as az  # noqa: PLC0415 - heavy import, only needed here

    flat = chains.reshape(*chains.shape[:2], int(np.prod(chains.shape[2:])))
    varying = np.ptp(flat, axis=(0, 1)) > 0
    flat = flat[:, :, varying]
    counts = {"num_components": int(flat.shape[-1]), "num_constant": int(np.sum(~varying))}
    if max_components is not None and flat.shape[-1] > max_components:
        flat = flat[..., np.linspace(0, flat.shape[-1] - 1, max_components).astype(int)]
    counts["num_scored"] = int(flat.shape[-1])
    if flat.shape[-1] == 0:
        return counts, {name: np.array([]) for name in estimators}
    scores = {}
    if "rhat" in estimators:
        half = flat.shape[1] // 2
        halves = flat if flat.shape[0] >= 2 else np.stack([flat[0, :half], flat[0, -half:]])
        if halves.shape[1] < 4:  # one chain of fewer than 8 draws: no R-hat
            scores["rhat"] = np.full(flat.shape[-1], np.nan)
        else:  # a component whose chains are each constant but differ has W = 0: R-hat = inf
            with np.errstate(divide="ignore", invalid="ignore"):
                scores["rhat"] = az.rhat(az.convert_to_dataset({"x": halves}),
                                         method="rank")["x"].values
            # 0/0: a component whose folded draws (|x - median|, the tail
            # R-hat) are constant, e.g. a probability saturated at two float32
            # values: its R-hat is undefined, counted and left out.
            counts["num_rhat_undefined"] = int(np.sum(np.isnan(scores["rhat"])))
            scores["rhat"] = scores["rhat"][~np.isnan(scores["rhat"])]
    dataset = az.convert_to_dataset({"x": flat})
    for name in {"bulk", "tail"} & set(estimators):
        scores[name] = az.ess(dataset, method=name)["x"].values
    return counts, scores


def _describe(values, prefix):
    """``{prefix_min, prefix_median, prefix_mean, prefix_max}`` of ``values``;
    NaN when there are none (every component constant, or no R-hat)."""
    keys = [f"{prefix}_{stat}" for stat in ("min", "median", "mean", "max")]
    if values.size == 0 or np.all(np.isnan(values)):
        return dict.fromkeys(keys, float("nan"))
    return dict(zip(keys, map(float, (values.min(), np.median(values), values.mean(),
                                      values.max()))))


def _fraction(rhat, predicate):
    """Fraction of components whose R-hat satisfies ``predicate`` (NaN without R-hat)."""
    if rhat.size == 0 or np.all(np.isnan(rhat)):
        return float("nan")
    return float(np.mean(predicate(rhat)))


def convergence_summary(chains, name="chains", max_components=MAX_COMPONENTS):
    """Rank-normalised split R-hat and bulk/tail ESS of every component, summarised.

    See the module docstring for the estimators (ArviZ, Vehtari et al. 2021).

    Args:
        chains: array ``[C, S, ...]``: S >= 4 draws of C chains, any
            component shape. C = 1 works: the chain's halves are compared
            (R-hat needs S >= 8, else it is NaN).
        name: the argument's name, for errors.
        max_components: score at most this many components (None: all).

    Returns:
        dict: ``median``, ``max`` (of R-hat), ``frac_below_1.01``,
        ``frac_below_1.1``, ``ess_bulk_min``, ``ess_bulk_median``,
        ``ess_tail_min``, ``ess_tail_median``, ``num_chains``,
        ``num_draws`` (per chain), ``num_components`` (varying),
        ``num_scored`` (of them), ``num_constant`` (left out),
        ``num_rhat_undefined`` (scored components whose R-hat is 0/0, left
        out of the R-hat statistics; present when R-hat is computed). Statistics are
        NaN when every component is constant, or there is none (``[C, S, 0]``).

    Raises:
        ValueError: naming ``name`` if ``chains`` has fewer than 2 axes, no
            chains, fewer than 4 draws per chain or non-finite values, or naming
            ``max_components`` for anything but None or an int ≥ 1.
    """
    if max_components is not None:
        max_components = check_int(max_components, "max_components", 1,
                                   owner="convergence_summary")
    x = _as_chains(chains, name, "[chains, draws, ...]")
    counts, scores = _scores(x, max_components)
    described = {}
    for estimator, values in scores.items():
        described.update(_describe(values, estimator))
    return ({"num_chains": int(x.shape[0]), "num_draws": int(x.shape[1])} | counts
            | {"median": described["rhat_median"], "max": described["rhat_max"]}
            | {f"frac_below_{t}": _fraction(scores["rhat"], lambda rhat, t=t: rhat < t)
               for t in RHAT_THRESHOLDS}
            | {f"ess_{estimator}_{stat}": described[f"{estimator}_{stat}"]
               for estimator in ("bulk", "tail") for stat in ("min", "median")})


#: Bulk and tail ESS per chain that Vehtari et al. (2021) ask before they
#: trust R-hat and the estimates (ESS > 400 with their 4 chains).
ESS_PER_CHAIN = 100


#: The keys of a :func:`convergence_summary` that :func:`convergence_verdict` reads.
_SUMMARY_KEYS = {"num_chains", "num_draws", "num_scored", "median", "max", "frac_below_1.01",
                 "ess_bulk_min", "ess_tail_min"}


class ConvergenceVerdict(NamedTuple):
    """Whether chains pass the rule of :func:`convergence_verdict`, and why."""

    converged: bool
    reason: str


def convergence_verdict(summary, what="components"):
    """Reads a :func:`convergence_summary` by Vehtari et al.'s (2021) rule.

    Converged when every scored component has ``R̂ < 1.01`` and the smallest
    bulk and tail ESS are at least ``ESS_PER_CHAIN · C`` over C chains (their
    recommendation: R̂ < 1.01 and ESS > 400 with four chains). A single
    chain is judged by its halves (:func:`convergence_summary`), against
    ``ESS_PER_CHAIN``.

    Args:
        summary: a dict returned by :func:`convergence_summary`.
        what: what the components are, for the sentence (e.g. "predicted
            probabilities").

    Returns:
        A :class:`ConvergenceVerdict`: ``converged`` and a one-line ``reason``
        that gives the figures the verdict rests on. Not converged, too,
        when R-hat is undefined (a single chain of fewer than 8 draws, or
        every scored component 0/0) or no component varies.

    Raises:
        ValueError: naming ``summary`` if it is not such a dict.
    """
    if not isinstance(summary, dict) or not _SUMMARY_KEYS <= set(summary):
        raise argument_error("summary", "be the dict convergence_summary returns, with keys "
                             + ", ".join(map(repr, sorted(_SUMMARY_KEYS))), summary,
                             owner="convergence_verdict")
    need = ESS_PER_CHAIN * summary["num_chains"]
    if not summary["num_scored"]:
        return ConvergenceVerdict(False, f"not assessed: none of the {what} varies")
    if np.isnan(summary["median"]) and summary.get("num_rhat_undefined"):
        return ConvergenceVerdict(False, f"not assessed: R-hat is 0/0 for all "
                                         f"{summary['num_scored']} {what} scored (each is "
                                         "constant within every split chain)")
    if np.isnan(summary["median"]):
        return ConvergenceVerdict(False, f"not assessed: R-hat is undefined "
                                         f"({summary['num_draws']} draws; one chain needs 8)")
    ess = min(summary["ess_bulk_min"], summary["ess_tail_min"])
    if summary["max"] < 1.01 and ess >= need:
        return ConvergenceVerdict(True, f"converged: R-hat < 1.01 for all {summary['num_scored']}"
                                        f" {what} scored (max {summary['max']:.4f}), ESS ≥ "
                                        f"{ess:.0f} (≥ {need} asked)")
    return ConvergenceVerdict(False, f"not converged: R-hat ≥ 1.01 for "
                                     f"{1 - summary['frac_below_1.01']:.0%} of the {what} "
                                     f"(max {summary['max']:.3g}), ESS down to {ess:.3g} "
                                     f"(≥ {need} asked)")


def _prediction_chains(probs, mask, name, chains):
    """``probs`` [C, S, N, ..., K] (``chains`` True) or [S, N, ..., K] (False) checked,
    as float64 [C, S, M, K] at the positions where ``mask`` [N, ...] is True (all of
    them without one; :mod:`keras_bnn.positions`). ``chains`` None: read from the
    shape where it tells, a 3-D array or a ``mask``'s rank, else a ValueError."""
    x = _chain_numbers(probs, name)
    chains = check_bool(chains, "chains", allow_none=True)
    if chains is None and mask is not None:
        chains = x.ndim >= np.ndim(mask) + 3  # other ranks fail the shape check below
    elif chains is None and x.ndim <= 3:
        chains = False  # [S, N, K] (fewer axes: the shape check below)
    elif chains is None:
        raise argument_error("chains", f"be True ([C, S, N, ..., K]) or False ([S, N, ..., K]) "
                             f"for a {x.ndim}-D `{name}` without a `mask` ([C, S, N, K] or a "
                             "tagger's [S, N, T, K]?)", None, got="None")
    if not chains:
        x = x[np.newaxis]
    rank = 1 if mask is None else np.ndim(mask)  # the positions' axes
    shape_text = "[C, S, N, ..., K]" if chains else "[S, N, ..., K]"
    x = _as_chains(x, name, shape_text, ndim=rank + 3 if mask is not None else max(x.ndim, 4))
    if mask is None:
        return x
    return positions.select(x.shape[2:-1], mask, name).take(x, name, lead=2)


def predictive_ess(member_probs, max_components=MAX_COMPONENTS, mask=None, chains=None):
    """Bulk effective sample size of the predicted probabilities.

    Per component p(k|x_n), ArviZ's bulk ESS (module docstring); with C >= 2
    chains it is the cross-chain ESS (summed over chains).

    Args:
        member_probs: [S, N, K] probabilities of S successive samples of one
            chain (S >= 4), or [C, S, N, K] for C chains; per position
            [S, N, ..., K] / [C, S, N, ..., K].
        max_components: score at most this many components (None: all).
        mask: optional [N, ...] booleans, True = scored: the components of
            those positions only (:mod:`keras_bnn.metrics`).
        chains: True: the first axis of ``member_probs`` is the chains';
            False: it is one chain's samples. None (default): read from the
            shape where it is unambiguous, a 3-D array ([S, N, K]) or an array
            of the ``mask``'s rank + 2 (one chain) or + 3 (chains); a 4-D or
            larger array without ``mask`` ([C, S, N, K], or a tagger's
            [S, N, T, K]?) is refused.

    Returns:
        dict: "ess_min", "ess_median", "ess_mean" (floats), "num_draws" (C·S),
        "num_components" (components that vary), "num_scored" (of them),
        "num_constant" (left out).

    Raises:
        ValueError: naming ``member_probs`` if it is not of those shapes,
            empty, has too few draws or non-finite values, ``mask`` if it
            is not of the positions' shape [N, ...], ``chains`` if it is not
            True, False or None, or None for an array whose layout the shape
            does not tell.
    """
    draws = _prediction_chains(member_probs, mask, "member_probs", chains)
    return _legacy_keys(draws, max_components, rhat=False)


def _legacy_keys(chains, max_components, rhat=True):
    """Bulk ESS (and R-hat) of ``[C, S, ...]`` under the keys of :func:`predictive_rhat`."""
    counts, scores = _scores(chains, max_components, ("rhat", "bulk") if rhat else ("bulk",))
    summary = ({"num_draws": int(chains.shape[0] * chains.shape[1])} | counts
               | {key: value for key, value in _describe(scores["bulk"], "ess").items()
                  if key != "ess_max"})
    if not rhat:
        return summary
    rhats = scores["rhat"]
    return (summary | {key: value for key, value in _describe(rhats, "rhat").items()
                       if key != "rhat_min"}
            | {f"frac_rhat_gt_{t}": _fraction(rhats, lambda rhat, t=t: rhat > t)
               for t in RHAT_THRESHOLDS})


def predictive_rhat(chains_probs, max_components=MAX_COMPONENTS, mask=None):
    """Rank-normalised split R-hat and bulk ESS of the predicted probabilities.

    The numbers of :func:`convergence_summary`, under the keys that
    ``keras-bnn evaluate`` prints.

    Args:
        chains_probs: [C, S, N, K] probabilities from C chains (or cycles) of S
            samples each (S >= 4; one chain needs S >= 8 for an R-hat, with
            fewer it is NaN); per position [C, S, N, ..., K]. The first axis
            is always the chains' (one chain's [S, N, ..., K]: ``probs[None]``).
        max_components: score at most this many components (None: all).
        mask: as for :func:`predictive_ess`.

    Returns:
        dict: "rhat_mean", "rhat_median", "rhat_max", "frac_rhat_gt_1.1",
        "frac_rhat_gt_1.01", plus the keys of :func:`predictive_ess`
        (cross-chain bulk ESS). A component whose chains are each constant
        but differ has R-hat = inf.

    Raises:
        ValueError: naming ``chains_probs`` if it is not [C, S, N, ..., K],
            empty, has too few draws or non-finite values, or ``mask`` as for
            :func:`predictive_ess`.
    """
    return _legacy_keys(_prediction_chains(chains_probs, mask, "chains_probs", chains=True),
                        max_components)


def weight_rhat(chains_weights, max_components=MAX_COMPONENTS):
    """Rank-normalised split R-hat and bulk ESS of selected weights across chains.

    Args:
        chains_weights: [C, S, D] values of D chosen weights in S samples of C
            chains. (Weight-space R-hat is pessimistic for neural networks: label
            switching and other symmetries let chains sample equivalent modes.)
        max_components: score at most this many components (None: all).

    Returns:
        dict with the same keys as :func:`predictive_rhat`.

    Raises:
        ValueError: as for :func:`predictive_rhat`, naming ``chains_weights``.
    """
    chains = _as_chains(chains_weights, "chains_weights", "[C, S, D]", ndim=3)
    return _legacy_keys(chains, max_components)
