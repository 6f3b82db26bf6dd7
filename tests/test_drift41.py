"""The collected epochs of ``CollectSamples(start_epoch="auto")`` are tested for a
drift when ``fit`` ends (:mod:`keras_bnn.collection_drift`).

Before: a slow drift passes the adjacent-window start test in most chains (0.3 sd
an epoch: 64 of 100) and nothing judged the collected epochs afterwards; on dev
this file fails at its import (``ImportError: cannot import name
'collection_drift' from 'keras_bnn'``)."""

import warnings

import keras
import numpy as np
import pytest
from scipy import stats

import keras_bnn as kb
from keras_bnn import collection_drift, equilibrium
from keras_bnn.runs.fitting import collection_report

QUANTITIES = equilibrium.QUANTITIES
TRIALS = 300


def _ar1(rng, n, rho):
    """n stationary AR(1) values of unit variance."""
    x = np.empty(n)
    x[0] = rng.normal()
    for i in range(1, n):
        x[i] = rho * x[i - 1] + np.sqrt(1.0 - rho ** 2) * rng.normal()
    return x


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.9])
def test_stationary_collections_rarely_warn(rho):
    """False alarms over TRIALS stationary collections of the four quantities (100
    epochs) stay within the binomial tolerance of the level 0.01: at most the
    0.999 quantile of Binomial(TRIALS, 0.01) (7 of 300; measured 0, 1, 1)."""
    rng = np.random.default_rng(41)
    alarms = sum(collection_drift.drift_test({q: _ar1(rng, 100, rho) for q in QUANTITIES},
                                             10).drifting for _ in range(TRIALS))
    assert alarms <= stats.binom.ppf(0.999, TRIALS, collection_drift.DRIFT_FALSE_ALARM)


def test_a_slow_drift_that_passes_the_start_test_is_caught():
    """Prior drifting 0.05 sd an epoch over 100 collected epochs (5 sd in all): the
    adjacent-window start test passes it in many chains, the collection's trend
    catches it in nearly all (measured 195 of 200; at least 90 of 100 here)."""
    rng = np.random.default_rng(7)
    caught = passed_start = 0
    for _ in range(100):
        series = {q: _ar1(rng, 100, 0.0) for q in QUANTITIES}
        series["prior"] = series["prior"] + 0.05 * np.arange(100)
        start = {q: v[:20] for q, v in series.items()}
        passed_start += equilibrium.stationarity_test(start, 1.0, band=10.0).stationary
        verdict = collection_drift.drift_test(series, 10)
        caught += verdict.drifting
        assert not verdict.drifting or set(
            name for name, s in verdict.statistics.items() if s.drifting) == {"prior"}
    assert passed_start > 50 and caught >= 90


def test_short_collections_are_not_tested_and_bad_arguments_are_named():
    too_short = collection_drift.MIN_BATCH * collection_drift.MIN_WINDOWS * 10 - 1
    verdict = collection_drift.drift_test({"prior": np.arange(too_short) * 1.0}, 10)
    assert not verdict.tested and not verdict.drifting and "not tested" in verdict.reason
    with pytest.raises(ValueError, match="window"):
        collection_drift.drift_test({"prior": np.zeros(100)}, 3)
    with pytest.raises(ValueError, match="false_alarm"):
        collection_drift.drift_test({"prior": np.zeros(100)}, 10, false_alarm=1.5)
    nan = collection_drift.drift_test({"prior": np.r_[np.zeros(99), np.nan]}, 10)
    assert nan.drifting and "prior" in nan.reason


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    return x, (x[:, 0] + x[:, 1] > 0).astype("int32")


def _fit(tmp_path, ramp):
    """An SGLD fit (4 steps an epoch) with auto collection (window 4: tested from 32
    collected epochs); a callback before CollectSamples adds ``ramp`` per collected epoch to the
    logged prior (the logs dict is shared), a drift the chain itself lacks."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
    model.compile(train_size=32, sampler=kb.samplers.SGLD(step_size=5e-3, seed=0),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    collect = kb.callbacks.CollectSamples(kb.SampleStore(str(tmp_path / "s")), window=4)

    def drift(epoch, logs):
        if collect.start_epoch is not None and epoch >= collect.start_epoch:
            logs["prior"] += ramp * (epoch - collect.start_epoch)

    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=80, verbose=0,
              callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=drift), collect])
    return model, collect


def test_a_drifting_collection_warns_at_the_fit_line_and_is_reported(tmp_path):
    with pytest.warns(kb.NotConvergedWarning, match=r"collected epochs drifted.*prior "
                      r"[+]\S+ an epoch \(.*sd an epoch.*--burn-in-epochs") as caught:
        model, collect = _fit(tmp_path, ramp=5.0)
    assert [w.filename for w in caught if "drifted" in str(w.message)] == [__file__]
    assert collect.drift.tested and collect.drift.statistics["prior"].drifting
    report = collection_report(model, collect)["drift"]
    assert report["drifting"] and report["statistics"]["prior"]["slope"] > 4.0


def test_a_collection_without_drift_does_not_warn(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NotConvergedWarning)
        model, collect = _fit(tmp_path, ramp=0.0)
    assert collect.drift.tested and not collect.drift.drifting
    assert collection_report(model, collect)["drift"]["tested"]
