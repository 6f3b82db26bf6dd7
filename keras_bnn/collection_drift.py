"""Whether the collected epochs drifted: a trend test over the whole collection.

Numpy and SciPy only. :class:`keras_bnn.callbacks.CollectSamples` with
``start_epoch="auto"`` starts collecting when two adjacent windows of the
epoch logs show no trend (:func:`keras_bnn.equilibrium.stationarity_test`).
Adjacent windows have little power against a slow drift (0.3 sd an epoch
passes that test in about 60 % of chains), so when ``fit`` ends the epochs
collected since then are tested again, as a whole, by :func:`drift_test`.

**The test.** For each watched series ``x`` (:data:`keras_bnn.equilibrium.QUANTITIES`
that the run logs) over the ``n`` collected epochs:

* the least-squares slope ``b`` of ``x`` on the epoch index (a line through
  all ``n`` epochs: the first and last epochs, the furthest apart, weigh
  most, so it has more power against a drift than two adjacent windows);
* its standard error under the AR(1) noise of :mod:`keras_bnn.equilibrium`
  (its ``_noise``, no copy: ρ̂ raised by one standard error and capped,
  σ̂², ν, from blocks each detrended by its own line, so the drift being
  tested does not inflate the noise), blocks of ``max(w, min(n/2, 50))``
  points: longer blocks than the start test's w measure a high ρ better
  (the lag-1 ratio of a detrended 10-value block moves from 0.18 to 0.23
  as ρ goes from 0.7 to 0.9; of a 50-value block, from 0.61 to 0.78);
  ``z = b / sqrt(σ̂²·cᵀΣ(ρ̂)c)``, ``c`` the slope's weights
  (``c_t = (t − t̄)/Σ(t − t̄)²``), ``Σ(ρ)_ij = ρ^|i−j|/(1 − ρ²)``;
* epoch means correlated past what AR(1) with ρ ≤ 0.9 describes (the
  prior of real runs: lag-1 autocorrelation 0.97–0.99, 0.5–0.9 at lag 10)
  would pass for a trend, so the test is repeated on means of batches of
  g = 1, 2, 4, ... epochs while the batches fill :data:`MIN_WINDOWS`
  windows of w, and the least significant g is kept (``|z|/z*`` smallest).

A series drifts when ``|z| > z* = t_ν⁻¹(1 − α/(2m))`` over the ``m``
series (Bonferroni) and the line moves it by at least :data:`DRIFT_SIZE` sd
over the collection (``|b|·(n − 1) ≥ sd``, the sd of the epoch means about
the line: a drift of D sd widens the collected spread by D²/12 of its
variance, 8 % at 1 sd; smaller ones are not worth a warning). The
collection is tested from ``MIN_BATCH·MIN_WINDOWS·w`` epochs (80 for
w = 10): batches of 4 epochs (ρ = 0.9 falls to 0.75 between them,
below the 0.9 cap of ρ̂) in two windows.

**The level.** A warning at the end of a run must be rare on a chain that is
fine, or users learn to ignore it: :data:`DRIFT_FALSE_ALARM` = 0.01 over all
series together (0.0025 a series for the four), five times below the start
test's 0.05, whose false alarm only delays collection by an epoch while this
one is shown to the user. Measured on stationary AR(1) series of the four
quantities (300 per cell, fixed seed): at 80, 150
and 500 collected epochs, 0–1 false alarms for ρ = 0 and 0.5, 3, 0, 0 for
ρ = 0.8, 7, 1, 0 for ρ = 0.9; epoch means correlated over ~30 epochs
(ρ = 0.97) give 29, 14, 1: a short collection of so slow a chain holds a
few independent values and is warned about more often. A drift of 0.05 sd
an epoch, which the start test passes in 98 of 100 chains, is caught in 90
of 100 at 80 collected epochs and in 98 of 100 at 100; 0.02 sd an epoch in
all of 100 at 150. None of twelve real ATMC runs (session 40: wine,
diabetes, breast cancer, digits; 148–1001 collected epochs) warns.
"""

import math
import sys
from typing import NamedTuple

import numpy as np
from scipy import stats

from keras_bnn import equilibrium
from keras_bnn.validation import check_fraction, check_int

#: Probability that a stationary chain's collection is reported as drifting (all series).
DRIFT_FALSE_ALARM = 0.01
#: The noise is measured in at least this many windows (of epochs, or of batches of them).
MIN_WINDOWS = 2
#: The collection is tested once batches of this many epochs fill ``MIN_WINDOWS`` windows.
MIN_BATCH = 4
NOISE_BLOCK = 50
#: A significant trend warns only when it moves the series by this many of its sds
#: over the collection.
DRIFT_SIZE = 1.0


class DriftStatistic(NamedTuple):
    """The trend of one series over the collected epochs.

    Attributes:
        name: the log key.
        epochs: n, the collected epochs tested.
        slope: b, the least-squares change per epoch.
        sd: the sd of the epoch means under the AR(1) noise, sqrt(σ̂²/(1 − ρ̂²)).
        z: b over its standard error.
        threshold: the bound |z| was held to.
        rho: ρ̂, the lag-1 autocorrelation of the epoch means.
        dof: ν, the effective degrees of freedom of σ̂².
        group: the epochs averaged into each point the slope was fit to.
        drifting: ``|z| > threshold`` (or a non-finite z).
    """

    name: str
    epochs: int
    slope: float
    sd: float
    z: float
    threshold: float
    rho: float
    dof: float
    group: int
    drifting: bool

    def describe(self):
        """One phrase: the drift per epoch, in sd, and over the collection."""
        per_sd = self.slope / self.sd if self.sd > 0 else math.copysign(math.inf, self.slope)
        return (f"{self.name} {self.slope:+.3g} an epoch ({per_sd:+.3g} sd an epoch, "
                f"{per_sd * (self.epochs - 1):+.3g} sd over the {self.epochs} collected "
                f"epochs; z = {self.z:+.2f}, |z| > {self.threshold:.2f})")


class DriftVerdict(NamedTuple):
    """The outcome of :func:`drift_test`.

    Attributes:
        tested: whether the collection spanned ``MIN_BATCH·MIN_WINDOWS·window`` epochs.
        drifting: whether any series drifted.
        reason: one sentence saying what was found.
        statistics: ``{name: DriftStatistic}`` (empty when not tested).
    """

    tested: bool
    drifting: bool
    reason: str
    statistics: dict

    def as_dict(self):
        """A JSON-friendly summary (for run reports)."""
        return {"tested": self.tested, "drifting": self.drifting, "reason": self.reason,
                "statistics": {name: s._asdict() for name, s in self.statistics.items()}}


def _slope_variance(epochs, rho):
    """``cᵀΣ(ρ)c`` for the slope weights ``c`` of ``epochs`` equally spaced values.

    Lags past where ρ^lag < 1e-12 add nothing, so the sum is O(n·lags).
    """
    t = np.arange(epochs, dtype=np.float64)
    c = (t - t.mean()) / np.sum((t - t.mean()) ** 2)
    lags = epochs if rho <= 0.0 else min(epochs, int(math.log(1e-12) / math.log(rho)) + 1)
    total = float(c @ c)
    for lag in range(1, lags):
        total += 2.0 * rho ** lag * float(c[:-lag] @ c[lag:])
    return total / (1.0 - rho ** 2)


def _coarse_trend(values, window):
    """``(slope, its standard error, ρ̂, ν)`` of ``values`` against AR(1) noise."""
    n = len(values)
    block = max(window, min(n // MIN_WINDOWS, NOISE_BLOCK))
    sums = [equilibrium._residual_sums(values[n - (k + 1) * block:n - k * block])
            for k in range(n // block)]
    index, innovation, dof = equilibrium._noise(sums, block)
    rho = float(equilibrium._RHO_GRID[index])
    slope = float(np.polyfit(np.arange(n, dtype=np.float64), values, 1)[0])
    return slope, math.sqrt(innovation * _slope_variance(n, rho)), rho, float(dof)


def trend(values, window, name="x", false_alarm=DRIFT_FALSE_ALARM, series=1):
    """The slope of one series and its z against AR(1) noise (see module doc).

    Args:
        values: 1-D sequence of epoch means, oldest first, at least
            ``MIN_BATCH·MIN_WINDOWS·window`` long.
        window: w ≥ 4, the shortest block the noise is estimated in.
        name: the series' name, stored in the result.
        false_alarm: α in (0, 1) over ``series`` series.
        series: m ≥ 1, the series tested together (Bonferroni).

    Returns:
        A :class:`DriftStatistic`.

    Raises:
        ValueError: for ``window < 4``, a bad ``false_alarm`` or ``series``,
            or a series shorter than ``MIN_BATCH·MIN_WINDOWS·window``.
    """
    owner = "trend"
    window = check_int(window, "window", 4, owner=owner)
    false_alarm = check_fraction(false_alarm, "false_alarm", owner)
    series = check_int(series, "series", 1, owner=owner)
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or len(values) < MIN_BATCH * MIN_WINDOWS * window:
        raise ValueError(f"trend: `values` must hold at least {MIN_BATCH * MIN_WINDOWS}·window"
                         f" = {MIN_BATCH * MIN_WINDOWS * window} values; got {values.size}.")
    n = len(values)
    t = np.arange(n, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        return DriftStatistic(name, n, math.nan, math.nan, math.nan, math.inf, math.nan,
                              math.nan, 1, True)
    # Epoch means correlated past what a window measures (AR(1) ρ̂ capped):
    # batch them by 1, 2, 4, ... epochs while MIN_WINDOWS windows of batches
    # remain, and keep the least significant slope.
    best = None
    for group in 2 ** np.arange(int(math.log2(n // (MIN_WINDOWS * window))) + 1):
        coarse = values[n % group:].reshape(-1, int(group)).mean(axis=1)  # the newest
        slope, error, rho, dof = _coarse_trend(coarse, window)
        z = slope / error if error > 0.0 else (
            0.0 if slope == 0.0 else math.copysign(math.inf, slope))
        threshold = float(stats.t.ppf(1.0 - false_alarm / (2 * series), dof))
        if best is None or abs(z) / threshold < abs(best[1]) / best[2]:
            best = (slope / group, z, threshold, rho, dof, int(group))
    sd = float(np.std(values - np.polyval(np.polyfit(t, values, 1), t)))
    slope, z, threshold, rho, dof, group = best
    return DriftStatistic(name, n, slope, sd, z, threshold, rho, dof, group,
                          abs(z) > threshold and abs(slope) * (n - 1) >= DRIFT_SIZE * sd)


def drift_test(series, window=equilibrium.WINDOW, false_alarm=DRIFT_FALSE_ALARM):
    """Whether the collected epochs behind ``series`` drifted (see module doc).

    Args:
        series: ``{name: sequence of epoch means}`` over the collected
            epochs, oldest first; the keys of
            :data:`keras_bnn.equilibrium.QUANTITIES` present are tested.
        window: w ≥ 4 epochs, the block the noise is estimated in.
        false_alarm: α in (0, 1) over all tested series.

    Returns:
        A :class:`DriftVerdict`; ``tested`` is False (nothing drifts) while
        the series hold fewer than ``MIN_BATCH·MIN_WINDOWS·window`` epochs (80
        at w = 10) or none of
        the quantities is present.

    Raises:
        ValueError: for a bad ``window`` or ``false_alarm``.
    """
    owner = "drift_test"
    window = check_int(window, "window", 4, owner=owner)
    false_alarm = check_fraction(false_alarm, "false_alarm", owner)
    names = [name for name in equilibrium.QUANTITIES if name in series]
    have = min((len(series[name]) for name in names), default=0)
    if not names or have < MIN_BATCH * MIN_WINDOWS * window:
        return DriftVerdict(False, False, f"not tested: {have} collected epochs, fewer than "
                            f"{MIN_BATCH * MIN_WINDOWS * window} ({MIN_WINDOWS} windows of "
                            f"{window} batches of {MIN_BATCH})", {})
    statistics = {name: trend(series[name][-have:], window, name, false_alarm, len(names))
                  for name in names}
    drifting = [s for s in statistics.values() if s.drifting]
    if drifting:
        reason = "drift over the collection: " + "; ".join(s.describe() for s in drifting)
    else:
        reason = (f"no drift over the {have} collected epochs (|z| = "
                  + ", ".join(f"{abs(s.z):.2f}/{s.threshold:.2f}"
                              for s in statistics.values()) + ")")
    return DriftVerdict(True, bool(drifting), reason, statistics)


def fit_caller_stacklevel():
    """The ``stacklevel`` that names the line calling ``fit``, for a
    ``warnings.warn`` issued by the function that calls this one (a
    callback's ``on_train_end``): the caller of the outermost ``fit`` of a
    ``keras`` or ``keras_bnn`` module on the stack, else 2.

    Returns:
        int ≥ 2.
    """
    frame, level, found = sys._getframe(1), 1, None
    while frame is not None:
        if frame.f_code.co_name == "fit" and frame.f_globals.get(
                "__name__", "").startswith("keras"):
            found = level + 1
        frame, level = frame.f_back, level + 1
    return found or 2
