"""The thermostat's check: kinetic temperatures against their χ² band.

With Gaussian momenta p_i ~ N(0, M·T) (mass M), the kinetic temperature
T_kin = (1/d) Σ_i p_i²/M of d momenta is distributed as T·χ²_d/d;
:func:`temperature_band` gives its central confidence interval and
:func:`kinetic_temperature_report` checks per-variable estimates against it
(``keras-bnn train`` writes them to ``kinetic_temperatures.json``).

This module imports numpy and scipy only (no Keras, no TensorFlow).
"""

import numbers
from typing import NamedTuple

import numpy as np
from scipy import stats

from keras_bnn.validation import argument_error, check_fraction, check_int, check_positive


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
      ValueError: naming ``d``, ``temperature`` or ``confidence`` when it is
        out of range.
    """
    d = check_int(d, "d", 1)
    temperature = check_positive(temperature, "temperature")
    confidence = check_fraction(confidence, "confidence")
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


def _entry(name, entry):
    """``per_variable[name]`` as ``(T_kin, d)`` (float, int), or a ValueError naming it."""
    try:
        t_kin, d = (np.asarray(part).item() for part in entry)
        if isinstance(t_kin, (bool, str)) or not isinstance(t_kin, numbers.Real):
            raise TypeError(t_kin)
        return float(t_kin), check_int(d, "d", 1)
    except (TypeError, ValueError):  # not a pair, or not of a number and an int >= 1
        raise argument_error(f"per_variable[{name!r}]", "be a (T_kin, d) pair: T_kin a number, "
                             "d an int >= 1 (the variable's number of elements)", entry,
                             "kinetic_temperature_report") from None


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
      dict's or sequence's order, one per entry (two variables of one path, as
      a subclassed model's two layers of one name have, give two rows);
      `row._asdict()` gives a JSON-ready dict. A NaN T_kin (a diverged chain)
      is outside its band.

    Raises:
      ValueError: naming the entry (``per_variable['w']``) if it is not a
        (T_kin, d) pair of a number and an int >= 1 (a (name, T_kin, d)
        triple in a sequence: ``per_variable[i]``), or as for
        `temperature_band`.
    """
    if isinstance(per_variable, dict):
        entries = list(per_variable.items())
    else:  # (name, T_kin, d) triples: a name may repeat, each triple is a row
        entries = []
        for i, triple in enumerate(per_variable):
            if not isinstance(triple, (tuple, list)) or len(triple) != 3:
                raise argument_error(f"per_variable[{i}]", "be a (name, T_kin, d) triple",
                                     triple, "kinetic_temperature_report")
            entries.append((triple[0], triple[1:]))
    rows = []
    for name, entry in entries:
        t_kin, d = _entry(name, entry)
        lo, hi = temperature_band(d, temperature, confidence)
        rows.append(KineticTemperatureRow(str(name), d, t_kin, lo, hi, bool(lo <= t_kin <= hi)))
    return rows
