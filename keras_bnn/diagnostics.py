"""Convergence diagnostics for SG-MCMC chains.

Function space: R-hat and effective sample size (ESS) of each predicted class
probability p(k|x_n) across chains (or across independent cycles of a cyclical
schedule, treated as chains). Weight space: the same for selected weights.
Both come from tensorflow-probability (`tfp.mcmc.potential_scale_reduction`,
`tfp.mcmc.effective_sample_size`) and are summarised over all components.

R-hat here is the potential scale reduction factor R̂ = sqrt(V̂/W). With m
chains of n draws, W the mean within-chain variance and B/n the variance of the
chain means, TFP returns the *variance* ratio (Brooks & Gelman 1998)
V̂/W = ((m+1)/m)·σ̂²₊/W - (n-1)/(m·n),  σ̂²₊ = ((n-1)/n)·W + B/n;
we take its square root so the usual thresholds 1.1 (Gelman) and 1.01 (Vehtari
et al. 2021) apply. Split R-hat (each chain halved, so m = 2C and n = S/2) is
the default.

Across chains, :func:`convergence_summary` gives the rank-normalised split
R-hat and bulk/tail ESS of Vehtari et al. (2021) through ArviZ (TFP has no
rank normalisation), reported at the thresholds 1.01 and 1.1;
:func:`to_inference_data` turns stored chains into an ``arviz.InferenceData``.

Thermostat check: with Gaussian momenta p_i ~ N(0, M·T) (mass M), the kinetic
temperature T_kin = (1/d) Σ_i p_i²/M of d momenta is distributed as
T·χ²_d/d; `temperature_band` gives its central confidence interval and
`kinetic_temperature_report` checks per-variable estimates against it.
"""

import math
from typing import NamedTuple

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp
from scipy import stats

from keras_bnn.likelihoods import LIKELIHOODS
from keras_bnn.validation import check_choice


def _as_chains(states, ndim, name, shape_text):
    x = np.asarray(states, dtype=np.float64)
    if x.ndim != ndim:
        raise ValueError(f"{name} must have shape {shape_text}, got shape {x.shape}")
    if 0 in x.shape:
        raise ValueError(f"{name} must not have empty dimensions, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains non-finite values")
    return x


def _varying(chains):
    """Flattened components of [C, S, ...] that are not constant over all draws,
    and the number that are (their R-hat and ESS are 0/0)."""
    flat = chains.reshape(chains.shape[0], chains.shape[1], -1)
    varying = np.ptp(flat, axis=(0, 1)) > 0
    return flat[:, :, varying], int(np.sum(~varying))


def _ess(flat):
    """ESS of each column of [C, S, D] (summed over chains when C >= 2), with
    Geyer's initial-positive-sequence truncation of the autocorrelations.

    With few, anticorrelated draws the estimate of τ = 1 + 2 Σ_t ρ_t can come
    out ≤ 0 (an ESS that is negative or huge); as in Stan (Vehtari et al.
    2021) τ is bounded below by 1/log10(C·S), i.e. ESS ≤ C·S·log10(C·S).
    """
    states = tf.constant(np.swapaxes(flat, 0, 1))  # TFP wants [S, C, D].
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("ERROR")  # TFP's FFT autocorrelation warns on a complex cast
    try:
        ess = tfp.mcmc.effective_sample_size(
            states, filter_beyond_positive_pairs=True,
            cross_chain_dims=1 if flat.shape[0] >= 2 else None).numpy()
    finally:
        logger.setLevel(level)
    ess = ess if flat.shape[0] >= 2 else ess[0]
    draws = flat.shape[0] * flat.shape[1]
    cap = draws * math.log10(draws)
    return np.where((ess < 0) | (ess > cap), cap, ess)


def _ess_summary(flat, num_constant):
    ess = _ess(flat) if flat.shape[-1] else np.array([])
    num_draws = flat.shape[0] * flat.shape[1]
    summary = {"num_draws": int(num_draws), "num_components": int(ess.size),
               "num_constant": num_constant}
    if ess.size == 0:
        return summary | {"ess_min": float("nan"), "ess_median": float("nan"),
                          "ess_mean": float("nan")}
    return summary | {"ess_min": float(ess.min()),
                      "ess_median": float(np.median(ess)),
                      "ess_mean": float(ess.mean())}


def _rhat_summary(chains, split, name):
    num_chains, num_draws = chains.shape[:2]
    if num_chains * (2 if split else 1) < 2:
        raise ValueError(f"{name} needs at least 2 chains, or split=True with 1 "
                         f"chain; got {num_chains} chain(s) with split={split}")
    if num_draws < (4 if split else 2):
        raise ValueError(f"{name} needs at least {4 if split else 2} draws per "
                         f"chain with split={split}, got {num_draws}")
    flat, num_constant = _varying(chains)
    summary = _ess_summary(flat, num_constant)
    if flat.shape[-1] == 0:
        nan = float("nan")
        return summary | {"rhat_mean": nan, "rhat_median": nan, "rhat_max": nan,
                          "frac_rhat_gt_1.1": nan, "frac_rhat_gt_1.01": nan}
    # A component whose chains are each constant but differ has W = 0: R-hat = inf.
    rhat = np.sqrt(tfp.mcmc.potential_scale_reduction(
        tf.constant(np.swapaxes(flat, 0, 1)), independent_chain_ndims=1,
        split_chains=split).numpy())
    return summary | {"rhat_mean": float(rhat.mean()),
                      "rhat_median": float(np.median(rhat)),
                      "rhat_max": float(rhat.max()),
                      "frac_rhat_gt_1.1": float(np.mean(rhat > 1.1)),
                      "frac_rhat_gt_1.01": float(np.mean(rhat > 1.01))}


def predictive_ess(member_probs):
    """Effective sample size of the predicted probabilities.

    For each component p(k|x_n), ESS = S / (1 + 2 Σ_t ρ_t) over its draws, with
    the autocorrelations ρ_t truncated by Geyer's initial positive sequence;
    with C >= 2 chains the cross-chain ESS of Vehtari et al. (2021) (summed over
    chains). Components constant over all draws are left out and counted.

    Args:
      member_probs: [S, N, K] probabilities of S successive samples of one
        chain, or [C, S, N, K] for C chains.

    Returns:
      dict: "ess_min", "ess_median", "ess_mean" (floats), "num_draws" (C·S),
      "num_components" (components scored), "num_constant" (left out).

    Raises:
      ValueError: if `member_probs` is not 3-D or 4-D, empty or non-finite.
    """
    x = np.asarray(member_probs, dtype=np.float64)
    if x.ndim == 3:
        x = x[np.newaxis]
    chains = _as_chains(x, 4, "member_probs", "[S, N, K] or [C, S, N, K]")
    return _ess_summary(*_varying(chains))


def predictive_rhat(chains_probs, split=True):
    """R-hat and ESS of the predicted probabilities across chains.

    R-hat = sqrt(V̂/W) per component p(k|x_n) (see module docstring), then
    summarised over the N·K components that vary.

    Args:
      chains_probs: [C, S, N, K] probabilities from C chains (or cycles) of S
        samples each.
      split: split each chain in half (split R-hat), doubling the chains.

    Returns:
      dict: "rhat_mean", "rhat_median", "rhat_max", "frac_rhat_gt_1.1",
      "frac_rhat_gt_1.01", plus the keys of `predictive_ess` (cross-chain ESS).
      A component whose chains are each constant but differ has R-hat = inf.

    Raises:
      ValueError: if `chains_probs` is not 4-D, or there are fewer than 2
        (split) chains, or too few draws (2, or 4 when split).
    """
    chains = _as_chains(chains_probs, 4, "chains_probs", "[C, S, N, K]")
    return _rhat_summary(chains, split, "chains_probs")


def weight_rhat(chains_weights, split=True):
    """R-hat and ESS of selected weights across chains.

    Args:
      chains_weights: [C, S, D] values of D chosen weights in S samples of C
        chains. (Weight-space R-hat is pessimistic for neural networks: label
        switching and other symmetries let chains sample equivalent modes.)
      split: split each chain in half (split R-hat).

    Returns:
      dict with the same keys as `predictive_rhat`.

    Raises:
      ValueError: as for `predictive_rhat`.
    """
    chains = _as_chains(chains_weights, 3, "chains_weights", "[C, S, D]")
    return _rhat_summary(chains, split, "chains_weights")


def temperature_band(d, temperature, confidence=0.99):
    """Central confidence band of the kinetic temperature of d Gaussian momenta.

    If p_i ~ N(0, M·T) independently (mass M), then
    T_kin = (1/d) Σ_{i<=d} p_i²/M ~ T·χ²_d/d, so T_kin lies in
    [T·q_{(1-c)/2}/d, T·q_{(1+c)/2}/d] with probability c, q_α being the
    α-quantile of χ²_d. (For relativistic momenta p·∇K(p) is not
    χ²-distributed and this band does not apply.)

    Args:
      d: number of momentum components, a positive integer.
      temperature: target temperature T > 0.
      confidence: coverage c in (0, 1).

    Returns:
      (lo, hi) floats.

    Raises:
      ValueError: if d, temperature or confidence is out of range.
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
        raise ValueError(f"d must be a positive integer, got {d!r}")
    if not np.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be positive and finite, got {temperature!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    lo, hi = stats.chi2.ppf([(1 - confidence) / 2, (1 + confidence) / 2], df=d)
    return float(temperature * lo / d), float(temperature * hi / d)


class KineticTemperatureRow(NamedTuple):
    """One variable's kinetic temperature against its confidence band."""
    name: str
    d: int
    t_kin: float
    lo: float
    hi: float
    inside_band: bool


def kinetic_temperature_report(per_variable, temperature, confidence=0.99):
    """Checks each variable's kinetic temperature against `temperature_band`.

    With many variables, about a fraction 1 - confidence of them fall outside
    by chance even when the sampler is correct.

    Args:
      per_variable: dict name -> (T_kin, d): the kinetic temperature estimate of
        a variable and its number of elements; or a sequence of
        (name, T_kin, d) triples, as `Sampler.kinetic_temperatures()` returns.
      temperature: target temperature T > 0.
      confidence: coverage of each band, in (0, 1).

    Returns:
      list of KineticTemperatureRow(name, d, t_kin, lo, hi, inside_band), in the
      dict's order; `row._asdict()` gives a JSON-ready dict.

    Raises:
      ValueError: if an entry is not a (T_kin, d) pair, or as for
        `temperature_band`.
    """
    if not isinstance(per_variable, dict):
        per_variable = {name: (t_kin, d) for name, t_kin, d in per_variable}
    rows = []
    for name, entry in per_variable.items():
        if np.ndim(entry) != 1 or len(entry) != 2:
            raise ValueError(f"per_variable[{name!r}] must be a (T_kin, d) pair, "
                             f"got {entry!r}")
        t_kin, d = float(entry[0]), np.asarray(entry[1]).item()
        lo, hi = temperature_band(d, temperature, confidence)
        rows.append(KineticTemperatureRow(str(name), int(d), t_kin, lo, hi,
                                          bool(lo <= t_kin <= hi)))
    return rows


# ------------------------------------------------- rank-normalised R-hat (ArviZ)
#: R-hat thresholds reported by :func:`convergence_summary`: Vehtari et al.
#: (2021) recommend 1.01; 1.1 is the older, looser rule (Gelman & Rubin).
RHAT_THRESHOLDS = (1.01, 1.1)


def convergence_summary(chains, name="chains", max_components=1000):
    """Rank-normalised split R-hat and bulk/tail ESS of every component, summarised.

    Per component, ArviZ's estimators of Vehtari et al. (2021): R-hat is the
    maximum of the split R-hat of the rank-normalised draws and of their
    folded ranks (``az.rhat(method="rank")``); bulk ESS is the ESS of the
    rank-normalised draws, tail ESS the smaller ESS of the 5 % and 95 %
    quantile indicators (``az.ess(method="bulk" / "tail")``). Components
    that are constant over all draws (R-hat 0/0) are left out and counted.
    ArviZ loops over components in Python (about 1.5 ms per component for
    the three estimators), so at most ``max_components`` evenly spaced
    components of the varying ones are scored: the summary of a network's
    weights or of a large test set is an estimate from that subset.

    Args:
        chains: array ``[C, S, ...]``: S draws of C chains (C = 1 works: the
            chain's halves are compared), any component shape.
        name: the argument's name, for errors.
        max_components: score at most this many components (None: all).

    Returns:
        dict: ``median``, ``max`` (of R-hat), ``frac_below_1.01``,
        ``frac_below_1.1``, ``ess_bulk_min``, ``ess_bulk_median``,
        ``ess_tail_min``, ``ess_tail_median``, ``num_chains``,
        ``num_draws`` (per chain), ``num_components`` (varying),
        ``num_scored`` (of them), ``num_constant`` (left out). Statistics are NaN when every
        component is constant.

    Raises:
        ValueError: if ``chains`` has fewer than 2 axes, fewer than 4 draws
            per chain, or non-finite values.
    """
    import arviz as az  # noqa: PLC0415 - heavy import, only needed here

    x = np.asarray(chains, dtype=np.float64)
    if x.ndim < 2 or x.shape[1] < 4 or 0 in x.shape:
        raise ValueError(
            f"`{name}` must have shape [chains, draws, ...] with at least 4 draws per "
            f"chain; got shape {x.shape}."
        )
    if not np.all(np.isfinite(x)):
        raise ValueError(f"`{name}` contains non-finite values.")
    flat, num_constant = _varying(x)
    summary = {"num_chains": int(x.shape[0]), "num_draws": int(x.shape[1]),
               "num_components": int(flat.shape[-1]), "num_constant": num_constant}
    if max_components is not None and flat.shape[-1] > max_components:
        flat = flat[..., np.linspace(0, flat.shape[-1] - 1, max_components).astype(int)]
    summary["num_scored"] = int(flat.shape[-1])
    keys = ["median", "max", *(f"frac_below_{t}" for t in RHAT_THRESHOLDS),
            "ess_bulk_min", "ess_bulk_median", "ess_tail_min", "ess_tail_median"]
    if flat.shape[-1] == 0:
        return summary | dict.fromkeys(keys, float("nan"))
    dataset = az.convert_to_dataset({"x": flat})
    rhat = az.rhat(dataset, method="rank")["x"].values
    bulk = az.ess(dataset, method="bulk")["x"].values
    tail = az.ess(dataset, method="tail")["x"].values
    values = [np.median(rhat), rhat.max(), *(np.mean(rhat < t) for t in RHAT_THRESHOLDS),
              bulk.min(), np.median(bulk), tail.min(), np.median(tail)]
    return summary | {key: float(value) for key, value in zip(keys, values)}


def _common_draws(stores):
    """The last S samples of each chain, S the shortest chain's length."""
    draws = min(len(store) for store in stores)
    return [[store[i] for i in range(len(store) - draws, len(store))] for store in stores]


def chain_weights(stores):
    """Weights of every chain, ``[C, S, D]`` (all weights flattened, in order).

    Chains of different lengths are cut to the last S draws, S the shortest.

    Args:
        stores: list of :class:`keras_bnn.SampleStore`, one per chain.

    Returns:
        float64 array.
    """
    return np.array([[np.concatenate([np.ravel(w) for w in sample.weights]) for sample in chain]
                     for chain in _common_draws(stores)], dtype=np.float64)


def chain_predictions(stores, x, likelihood="categorical"):
    """Each sample's prediction on ``x``, per chain: ``[C, S, N, units]``.

    Chains of different lengths are cut to the last S draws, S the shortest.

    Args:
        stores: list of :class:`keras_bnn.SampleStore`, one per chain.
        x: inputs (array or dataset) accepted by ``keras.Model.predict``.
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS` (see
            :meth:`keras_bnn.PosteriorEnsemble.predict_members`).

    Returns:
        numpy array.
    """
    from keras_bnn.ensemble import PosteriorEnsemble  # noqa: PLC0415 - import cycle

    model = stores[0].build_model()
    return np.stack([
        PosteriorEnsemble(model, [s.weights for s in chain], likelihood=likelihood,
                          member_loop="map").predict_members(x)
        for chain in _common_draws(stores)
    ])


def to_inference_data(source, x=None, likelihood="categorical"):
    """The chains of a run as an ``arviz.InferenceData``.

    ``posterior`` holds every weight of the model (one variable per weight,
    named after its path, dims ``(chain, draw, *shape)``);
    ``posterior_predictive`` (when ``x`` is given) holds the predictions of
    every draw on ``x`` (``"probabilities"``, or ``"outputs"`` ``[μ, log σ²]``
    for a Gaussian head). ``az.summary``, ``az.plot_trace``, ``az.plot_rank`` and
    ``az.rhat`` then work as for any PPL's output. Chains of different
    lengths are cut to the last S draws, S the shortest.

    Args:
        source: a run directory (one chain, or ``chain-k`` subdirectories),
            a :class:`keras_bnn.SampleStore`, or a list of stores / paths
            (see :func:`keras_bnn.chains.stores_of`).
        x: optional inputs for the posterior predictive.
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS` (see
            :func:`chain_predictions`).

    Returns:
        ``arviz.InferenceData``.

    Raises:
        ValueError: for empty stores, chains of different architectures or
            an unknown ``likelihood``.
    """
    import arviz as az  # noqa: PLC0415 - heavy import, only needed here

    from keras_bnn import chains as chains_lib  # noqa: PLC0415 - import cycle

    check_choice(likelihood, "likelihood", LIKELIHOODS)
    stores = chains_lib.stores_of(source)
    model = stores[0].build_model()
    names = [w.path.replace("/", "_") for w in model.weights]
    draws = _common_draws(stores)
    posterior = {
        name: np.array([[sample.weights[j] for sample in chain] for chain in draws])
        for j, name in enumerate(names)
    }
    groups = {"posterior": posterior}
    if x is not None:
        key = "outputs" if likelihood == "gaussian" else "probabilities"
        groups["posterior_predictive"] = {key: chain_predictions(stores, x, likelihood)}
    return az.from_dict(**groups)
