"""Collection at the defaults needs every variable's recent noise ratio at or below the limit.

``CollectSamples(start_epoch="auto")`` with ``step_size="auto"``: at a
stationary epoch after the second noise measurement, a variable whose
gradient-noise ratio averaged over the last ``window`` epoch-end readings is
above ``NOISE_RATIO_LIMIT`` (the level ``GradientNoiseWarning`` judges the
collected epochs by) lowers every factor, ``s_v ← s_v·(r*/max_u r̄_u)^{1/k}``,
and the equilibrium test restarts; collection starts at a stationary epoch where none is above.
The chain's epoch logs and ratios are fed to the callback directly, so the
rule is tested alone, on a real sampler's factors.
"""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.samplers import NOISE_RATIO_LIMIT, warmup

WINDOW = 4
STATIONARY_LOGS = {"configurational_temperature": 1.0, "prior": 10.0, "nll": 0.5}


def _sampled(sampler, tmp_path):
    """A Dense(1) regression past its warm-up (20 steps) and second measurement,
    and a collector at the defaults with window 4 on it."""
    keras.utils.set_random_seed(0)
    bnn = kb.bayesian(keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]))
    bnn.compile(sampler=sampler, train_size=32, loss="mse")
    x = np.random.default_rng(0).normal(size=(32, 2)).astype("float32")
    bnn.fit(x, x[:, :1], batch_size=8, epochs=6, verbose=0)
    if sampler.warmup is not None:
        assert sampler.lower_step_factors({}) == {}  # measured: nothing to lower
    collect = kb.callbacks.CollectSamples(kb.SampleStore(tmp_path / "samples"), window=WINDOW)
    collect.set_model(bnn)
    collect.on_train_begin()
    return bnn, collect


def _epochs(collect, first, count, ratios, monkeypatch):
    """``count`` stationary epochs from ``first`` whose every epoch-end reading is ``ratios``."""
    sampler = collect.model.optimizer
    readings = [(path, ratios[path], d) for path, _, d in sampler.gradient_noise_ratios()]
    monkeypatch.setattr(sampler, "gradient_noise_ratios", lambda: readings)
    for epoch in range(first, first + count):
        collect.on_epoch_begin(epoch)
        collect.on_epoch_end(epoch, dict(STATIONARY_LOGS))


def test_a_noisy_variable_is_lowered_before_collection_and_the_test_restarts(
        tmp_path, monkeypatch):
    """SGLD (k = 1): the kernel reads 0.2 (> 0.1) at the first stationary
    epoch, so both factors, the quiet bias's (0.01) too, go 1 → r*/0.2 =
    0.25, nothing is collected, and the test restarts: with the kernel at
    0.1 (the limit: "at or below" passes) collection starts 2w epochs later.
    On the code before, collection started at epoch 7 with the kernel at 0.2."""
    bnn, collect = _sampled(kb.samplers.SGLD(seed=0, warmup_steps=20), tmp_path)
    kernel, bias = (v.path for v in bnn.trainable_variables)
    _epochs(collect, 0, 2 * WINDOW, {kernel: 0.2, bias: 0.01}, monkeypatch)
    assert collect.started_epoch is None
    expected = warmup.TARGET_NOISE_RATIO / 0.2
    assert collect.noise_lowerings == [{
        "epoch": 2 * WINDOW - 1, "ratios": {kernel: pytest.approx(0.2), bias: pytest.approx(0.01)},
        "lowered": {kernel: [1.0, pytest.approx(expected)], bias: [1.0, pytest.approx(expected)]}}]
    factors = bnn.optimizer.step_size_factors()
    assert factors == {kernel: pytest.approx(expected), bias: pytest.approx(expected)}
    assert "lowered at epoch 7" in collect.reason and f"{kernel} 0.2)" in collect.reason
    _epochs(collect, 2 * WINDOW, 2 * WINDOW - 1, {kernel: NOISE_RATIO_LIMIT, bias: 0.01},
            monkeypatch)
    assert collect.started_epoch is None  # 2w epochs of the new kernel are needed
    _epochs(collect, 4 * WINDOW - 1, 1, {kernel: NOISE_RATIO_LIMIT, bias: 0.01}, monkeypatch)
    assert collect.started_epoch == 4 * WINDOW - 1
    assert len(collect.noise_lowerings) == 1
    assert bnn.optimizer.step_size_factors()[kernel] == pytest.approx(expected)


def test_an_explicit_step_size_is_not_lowered(tmp_path, monkeypatch):
    """An explicit ``step_size`` is the user's: the same noisy readings start
    collection at the first stationary epoch (GradientNoiseWarning then
    judges the samples), and ``lower_noisy_step_factors`` lowers nothing."""
    bnn, collect = _sampled(kb.samplers.SGLD(step_size=1e-3, seed=0), tmp_path)
    kernel, bias = (v.path for v in bnn.trainable_variables)
    _epochs(collect, 0, 2 * WINDOW, {kernel: 0.2, bias: 0.01}, monkeypatch)
    assert collect.started_epoch == 2 * WINDOW - 1 and collect.noise_lowerings == []
    assert bnn.optimizer.lower_noisy_step_factors({kernel: 1.0}, NOISE_RATIO_LIMIT) == {}


def test_a_target_above_the_limit_is_not_lowered_to_it(tmp_path, monkeypatch):
    """``target_noise_ratio=0.3`` asks for noise above the limit: readings
    above both (0.4) start collection at the first stationary epoch, as
    before the rule, with no factor lowered (GradientNoiseWarning judges)."""
    bnn, collect = _sampled(kb.samplers.SGLD(seed=0, warmup_steps=20,
                                             target_noise_ratio=0.3), tmp_path)
    kernel, bias = (v.path for v in bnn.trainable_variables)
    _epochs(collect, 0, 2 * WINDOW, {kernel: 0.4, bias: 0.01}, monkeypatch)
    assert collect.started_epoch == 2 * WINDOW - 1 and collect.noise_lowerings == []
    assert bnn.optimizer.step_size_factors()[kernel] == 1.0


def test_lower_noisy_step_factors_refuses_unknown_names(tmp_path):
    bnn, _ = _sampled(kb.samplers.SGLD(seed=0, warmup_steps=20), tmp_path)
    with pytest.raises(ValueError, match="lower_noisy_step_factors: `ratios` must name.*nope"):
        bnn.optimizer.lower_noisy_step_factors({"nope": 1.0}, NOISE_RATIO_LIMIT)
    with pytest.raises(ValueError, match="lower_noisy_step_factors.*`limit`"):
        bnn.optimizer.lower_noisy_step_factors({}, 0.0)


def test_a_lowering_is_kept_for_a_resumed_run_and_reported(tmp_path, monkeypatch, capsys):
    """The lowering is written to the store (``record-noise-lowerings-chain-0.json``),
    so the callback of a resumed run on the same store has it, and the run
    report prints one line for it (the ``collection.json`` entry
    ``noise_lowerings``); a run that appends a new chain 0 (second
    measurement pending again) starts with none."""
    from keras_bnn import console
    from keras_bnn.runs import fitting

    bnn, collect = _sampled(kb.samplers.SGLD(seed=0, warmup_steps=20), tmp_path)
    kernel, bias = (v.path for v in bnn.trainable_variables)
    _epochs(collect, 0, 2 * WINDOW, {kernel: 0.2, bias: 0.01}, monkeypatch)
    resumed = kb.callbacks.CollectSamples(collect.store, window=WINDOW)
    resumed.set_model(bnn)
    resumed.on_train_begin()
    assert resumed.noise_lowerings == collect.noise_lowerings != []
    report = fitting.collection_report(bnn, resumed)
    assert report["noise_lowerings"] == collect.noise_lowerings
    console._print_noise_lowerings(report["noise_lowerings"])
    assert capsys.readouterr().out == (
        "step factors lowered at epoch 7, every one x0.25: gradient-noise ratio over the "
        f"equilibrium window above 0.1 ({kernel} 0.2)\n")
    bnn.optimizer.warmup.remeasured.assign(0.0)  # a new chain's measurement is pending
    _epochs(resumed, 0, 1, {kernel: 0.2, bias: 0.01}, monkeypatch)
    assert resumed.noise_lowerings == []
