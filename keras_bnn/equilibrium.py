"""When a chain is at equilibrium: a two-window stationarity test on epoch logs.

Numpy and SciPy only. :class:`keras_bnn.callbacks.CollectSamples`
runs :func:`stationarity_test` at every epoch end (``start_epoch="auto"``) on
the epoch means that ``BayesianModel.fit`` logs, and starts collecting at the
first epoch where it passes.

**The test.** Take the last ``2w`` epochs (``w = window``) of each watched
series ``x`` (:data:`QUANTITIES` that the run logs: the configurational and
kinetic temperature, ``prior`` = −log p(θ), ``nll``) and split them into an
older window A and a recent window B. For each series:

* Noise model: the epoch means are AR(1), ``x_t = μ + ρ(x_{t−1} − μ) + ε_t``,
  ``ε ~ N(0, σ²)``. ρ and σ² are estimated from the latest
  ``k ≤ NOISE_WINDOWS`` windows of w epochs, each detrended by its own
  least-squares line (residuals ``e``), so that a trend cannot pass for
  autocorrelation (which would inflate the error and hide the trend).
  Detrending biases the raw moments, so they are matched to their exact
  expectations under AR(1) (:func:`_ar1_moments`, with ``Σ(ρ)`` the AR(1)
  covariance and ``M`` the residual maker of a line fit):
  ``Σe_t·e_{t+1} / Σe² = tr(MSMΣ(ρ)) / tr(MΣ(ρ))`` gives ρ̂, raised by one
  standard error ``sqrt((1 − ρ̂²)/(k(w − 2)))`` (an underestimated ρ
  understates the error and raises false alarms), and
  ``σ̂² = Σe² / (k·tr(MΣ(ρ̂)))``, with ``ν = k(w − 2)(1 − ρ̂²)/(1 + ρ̂²)``
  effective degrees of freedom.
* Few windows cannot measure a high ρ: with k = 2 (16 residual pairs)
  ρ̂ has a standard error of 0.25, and a ρ̂ near 1 makes the error of the
  window difference several times that of independent epochs. So ρ̂ is
  capped where ν would fall below :data:`MIN_DOF` = 5 (the fewest degrees
  of freedom at which t_ν has a finite fourth moment; σ̂²'s relative sd
  ``sqrt(2/ν)`` is then at most 63 %): at 0.72 for k = 2, 0.80 for k = 3,
  0.85 for k = 4, 0.88 for k = 5, :data:`MAX_AUTOCORRELATION` = 0.9 from
  k = 6. Short windows, with fewer than 2·MIN_DOF residual pairs, keep
  ν ≥ half their pairs instead (ρ̂ ≤ 1/√3: w = 4 until k = 5). A
  chain whose epoch means really are that correlated gets more false alarms
  while k is small; a drift whose residuals happen to look correlated no
  longer passes (1 sd an epoch of drift, independent noise: 11 of 100
  chains passed within 100 epochs with the uncapped ρ̂ at ν ≥ 3, none now).
* One σ² over the k windows is assumed. A decaying transient leaves the
  older windows' residuals (its curvature) far larger than the recent
  ones', which would inflate σ̂² and hide the transient's tail; when the
  older windows' mean residual square exceeds the tested two's by more
  than the ``1 − HOMOGENEITY_LEVEL`` quantile of ``F(ν_old, ν_AB)``
  (``ν`` split per window), only the tested two windows estimate the noise
  (``e^{−t/τ}`` transients over unit noise, τ = 5, 10, 20: they passed at
  epochs 19, 29, 69, though under 3 sd only from 63, 127, 254; now at
  76 and not within 100 epochs).
* Geweke-style z between the windows:
  ``z = (x̄_B − x̄_A) / sqrt(σ̂²·aᵀΣ(ρ̂)a)``, ``a`` the contrast of the two
  window means (``aᵀΣa`` is the exact variance of the difference of the
  means of 2w AR(1) values).

The chain is stationary when every ``|z| ≤ z*`` with the Bonferroni bound
``z* = t_ν⁻¹(1 − α/(2m))`` over the ``m`` series (``α = false_alarm``;
Student-t with ν, ``scipy.stats.t``), and each temperature's recent mean lies
within a loose band ``|T̄_B/T − 1| ≤ band`` of the target T. The band is
loose on purpose: at a finite step the configurational temperature of a
stationary chain sits a few per cent off T, so T is only a sanity bound (a
chain at 0.4·T is not at equilibrium); stationarity is what the z-test
decides.

**Error rates** (w = 10, four series of 40 epochs, measured on 1000 AR(1)
draws per cell and three seeds; ``tests/test_equilibrium.py`` checks them):
a stationary chain fails the test with probability 0.010–0.013 for
independent epoch means, 0.07–0.08 at ρ = 0.5 and 0.20–0.21 at ρ = 0.8
(epoch means correlated over ~9 epochs; ρ̂ is then uncertain, and capped).
A false alarm only delays collection: the test runs again at the next epoch
end (chains stationary from the start, tested at every epoch: mean first
pass at epoch 19.0, 19.1 and 19.6 for ρ = 0, 0.5, 0.8, as before the cap;
the first test is at 19). A linear trend of ``s`` per epoch moves ``x̄_B − x̄_A`` by ``s·w``
and is rejected once that exceeds about ``z*`` standard errors of the
difference; with independent noise of sd σ a drift of 0.3σ an epoch still
passes some epoch within 100 in about 60 % of chains, as before the cap
(the first two windows cannot tell it from ρ ≈ 0.7 noise).
"""

import functools
import math
from typing import NamedTuple

import numpy as np
from scipy import stats

from keras_bnn.validation import check_fraction, check_int, check_positive

#: The epoch-log series the test watches, where the run logs them.
QUANTITIES = ("configurational_temperature", "kinetic_temperature", "prior", "nll")
#: Those of :data:`QUANTITIES` that estimate T at equilibrium.
TEMPERATURES = ("configurational_temperature", "kinetic_temperature")
#: Default window w in epochs (the test needs 2w epochs after warm-up).
WINDOW = 10
#: Default probability that a stationary chain is declared not stationary (per test).
FALSE_ALARM = 0.05
#: Default half-width of the band around T, relative: |T̄/T − 1| ≤ band.
TEMPERATURE_BAND = 0.15
#: The noise (σ̂², ρ̂) is estimated from at most this many of the latest windows.
NOISE_WINDOWS = 8
#: ρ̂ is clipped here: above it w epochs hold under ~1 effective draw.
MAX_AUTOCORRELATION = 0.9
#: ρ̂ is capped where σ̂²'s effective degrees of freedom ν would fall below this.
MIN_DOF = 5.0
#: Older noise windows are dropped when noisier than the tested two at this level (F-test).
HOMOGENEITY_LEVEL = 0.05


class SeriesStatistic(NamedTuple):
    """The two-window comparison of one series.

    Attributes:
        name: the log key.
        mean_old: x̄_A, the mean of the older window.
        mean_new: x̄_B, the mean of the recent window.
        z: the Geweke-style z of x̄_B − x̄_A.
        rho: ρ̂, the lag-1 autocorrelation of the epoch means.
        dof: the effective degrees of freedom of σ̂².
        windows: the number of w-epoch windows σ̂² and ρ̂ came from.
    """

    name: str
    mean_old: float
    mean_new: float
    z: float
    rho: float
    dof: float
    windows: int


class Verdict(NamedTuple):
    """The outcome of :func:`stationarity_test`.

    Attributes:
        stationary: True when every |z| ≤ threshold and every temperature
            lies in its band.
        reason: one sentence saying why (which series failed, or that all
            passed).
        statistics: ``{name: SeriesStatistic}`` for every tested series.
        thresholds: ``{name: z*}``, the bound each |z| was held to.
        temperature_ratios: ``{name: T̄_B/T}`` for the logged temperatures.
    """

    stationary: bool
    reason: str
    statistics: dict
    thresholds: dict
    temperature_ratios: dict

    def as_dict(self):
        """A JSON-friendly summary (for run reports)."""
        return {
            "stationary": self.stationary, "reason": self.reason,
            "thresholds": self.thresholds, "temperature_ratios": self.temperature_ratios,
            "statistics": {name: s._asdict() for name, s in self.statistics.items()},
        }


_RHO_GRID = np.linspace(0.0, MAX_AUTOCORRELATION, 91)


@functools.lru_cache(maxsize=8)
def _ar1_moments(window):
    """Expected statistics of detrended windows of a unit-innovation AR(1), per ρ on the grid.

    With ``Σ(ρ)_ij = ρ^|i−j|/(1−ρ²)``, ``M`` the residual maker of a line
    fit to one window of w values, ``S`` the symmetric lag-1 pairing and
    ``a`` the contrast ``x̄_B − x̄_A`` of two adjacent windows:
    ``E[Σe²] = tr(MΣ)``, ``E[Σe_t·e_{t+1}] = tr(MSMΣ)`` (one window) and
    ``Var(x̄_B − x̄_A) = aᵀΣa`` (2w values).

    Returns:
        ``(sum_squares, lagged, contrast)``: arrays over :data:`_RHO_GRID`.
    """
    t = np.arange(window, dtype=np.float64)
    design = np.stack([np.ones(window), t], axis=1)
    m = np.eye(window) - design @ np.linalg.pinv(design)
    msm = m @ (0.5 * (np.eye(window, k=1) + np.eye(window, k=-1))) @ m
    contrast = np.concatenate([-np.ones(window), np.ones(window)]) / window
    lags = np.abs(np.subtract.outer(np.arange(2 * window), np.arange(2 * window)))
    moments = []
    for rho in _RHO_GRID:
        sigma = rho ** lags / (1.0 - rho ** 2)
        one = sigma[:window, :window]
        moments.append((np.trace(m @ one), np.trace(msm @ one), contrast @ sigma @ contrast))
    return tuple(np.array(column) for column in zip(*moments))


def _residual_sums(block):
    """``(Σe², Σe_t·e_{t+1})`` of one window after removing its least-squares line."""
    t = np.arange(len(block), dtype=np.float64)
    e = block - np.polyval(np.polyfit(t, block, 1), t)
    return float(np.sum(e * e)), float(np.sum(e[1:] * e[:-1]))


def _noise(sums, window):
    """ρ̂ (raised by one SE), σ̂² and ν from the residual sums of ``len(sums)`` windows.

    Returns:
        ``(index into _RHO_GRID, σ̂², ν)``.
    """
    expected_squares, expected_lagged, _ = _ar1_moments(window)
    total_squares = sum(squares for squares, _ in sums)
    ratio = 0.0 if total_squares == 0.0 else sum(lag for _, lag in sums) / total_squares
    residual_dof = len(sums) * (window - 2)
    estimate = int(np.argmin(np.abs(expected_lagged / expected_squares - ratio)))
    # One standard error up (Bartlett: se(ρ̂) ≈ sqrt((1 − ρ²)/N)): an
    # underestimated ρ understates the error, the costly direction.
    upper = _RHO_GRID[estimate] + math.sqrt((1.0 - _RHO_GRID[estimate] ** 2) / residual_dof)
    # At most the ρ that leaves ν ≥ MIN_DOF: a ρ̂ that few windows cannot
    # measure must not inflate the error enough to hide a trend.
    # (Half the pairs where they are fewer than 2·MIN_DOF: short windows.)
    floor = min(MIN_DOF, 0.5 * residual_dof)
    measurable = math.sqrt((residual_dof - floor) / (residual_dof + floor))
    index = int(np.searchsorted(_RHO_GRID, min(upper, measurable, MAX_AUTOCORRELATION)
                                + 1e-9) - 1)
    rho = _RHO_GRID[index]
    return (index, total_squares / (len(sums) * expected_squares[index]),
            residual_dof * (1.0 - rho ** 2) / (1.0 + rho ** 2))


def compare_windows(values, window, name="x"):
    """Two-window z of the last ``2·window`` values of one series (see module doc).

    Args:
        values: 1-D sequence of epoch means, oldest first, at least
            ``2·window`` long; every complete window before the last two
            sharpens the estimate of ρ.
        window: w ≥ 4 (a line through each window leaves w − 2 residual dof).
        name: the series' name, stored in the result.

    Returns:
        A :class:`SeriesStatistic`.

    Raises:
        ValueError: for ``window < 4`` or a series shorter than ``2·window``.
    """
    window = check_int(window, "window", 4, owner="compare_windows")
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) < 2 * window:
        raise ValueError(f"compare_windows: `values` must hold at least 2·window = "
                         f"{2 * window} values; got {values.size}.")
    blocks = [values[len(values) - (k + 1) * window:len(values) - k * window]
              for k in range(min(len(values) // window, NOISE_WINDOWS))]  # [0]: newest
    sums = [_residual_sums(block) for block in blocks]
    index, innovation, dof = _noise(sums, window)
    if len(sums) > 2:
        # One σ² over the k windows is assumed: older windows noisier than the
        # two tested (a decaying transient's curvature) would inflate it.
        spread = (sum(squares for squares, _ in sums[2:]) / (len(sums) - 2)
                  / (0.5 * (sums[0][0] + sums[1][0]) or math.inf))
        per_window = dof / len(sums)
        if spread > stats.f.isf(HOMOGENEITY_LEVEL, (len(sums) - 2) * per_window,
                                2 * per_window):
            sums = sums[:2]
            index, innovation, dof = _noise(sums, window)
    _, _, contrast = _ar1_moments(window)
    old, new = blocks[1], blocks[0]
    difference = float(new.mean() - old.mean())
    error = math.sqrt(innovation * contrast[index])
    if error == 0.0:
        z = 0.0 if difference == 0.0 else math.copysign(math.inf, difference)
    else:
        z = difference / error
    return SeriesStatistic(name, float(old.mean()), float(new.mean()), z,
                           float(_RHO_GRID[index]), float(dof), len(sums))


def stationarity_test(series, temperature, window=WINDOW, false_alarm=FALSE_ALARM,
                      band=TEMPERATURE_BAND):
    """Whether the chain behind ``series`` is stationary over its last ``2·window`` epochs.

    Args:
        series: ``{name: sequence of epoch means}``, oldest first; the keys
            of :data:`QUANTITIES` present are tested (others are ignored).
        temperature: the target T > 0.
        window: w ≥ 4 epochs.
        false_alarm: α in (0, 1), the probability that a stationary chain
            fails the z-tests (Bonferroni over the series).
        band: the relative band around T for the temperatures, > 0.

    Returns:
        A :class:`Verdict`; ``stationary`` is False (with the reason) while
        any tested series holds fewer than ``2·window`` epochs or none of
        :data:`QUANTITIES` is present.

    Raises:
        ValueError: for bad ``temperature``, ``window``, ``false_alarm`` or
            ``band``.
    """
    owner = "stationarity_test"
    temperature = check_positive(temperature, "temperature", owner)
    window = check_int(window, "window", 4, owner=owner)
    false_alarm = check_fraction(false_alarm, "false_alarm", owner)
    band = check_positive(band, "band", owner)
    names = [name for name in QUANTITIES if name in series]
    have = min((len(series[name]) for name in names), default=0)
    if not names or have < 2 * window:
        reason = f"{2 * window} epochs after warm-up are needed (window {window}); have {have}"
        return Verdict(False, reason, {}, {}, {})
    statistics = {name: compare_windows(series[name], window, name) for name in names}
    probability = 1.0 - false_alarm / (2 * len(names))
    thresholds = {name: float(stats.t.ppf(probability, s.dof))
                  for name, s in statistics.items()}
    ratios = {name: statistics[name].mean_new / temperature
              for name in TEMPERATURES if name in statistics}
    failures = [f"{name} trends (z = {s.z:+.2f}, |z| > {thresholds[name]:.2f})"
                if not math.isnan(s.z) else f"{name} holds a NaN or infinite epoch mean"
                for name, s in statistics.items() if not abs(s.z) <= thresholds[name]]
    failures += [f"{name} reads {ratio:.3f}·T, outside 1 ± {band:g}"
                 for name, ratio in ratios.items() if not abs(ratio - 1.0) <= band]
    if failures:
        return Verdict(False, "; ".join(failures), statistics, thresholds, ratios)
    reason = (f"no trend between the last two {window}-epoch windows of "
              f"{', '.join(names)} (|z| = "
              + ", ".join(f"{abs(s.z):.2f}/{thresholds[n]:.2f}" for n, s in statistics.items())
              + ")")
    if ratios:
        reason += "; temperatures " + ", ".join(f"{ratio:.3f}·T" for ratio in ratios.values())
    return Verdict(True, reason, statistics, thresholds, ratios)
