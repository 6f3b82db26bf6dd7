"""A badly scaled chain's frozen step raised after its transient (samplers.step_rise).

Found 2026-11-30 on breast_cancer standardised then ×1000 (a 30-32-2 MLP,
library defaults, batches of 64): the warm-up measured the gradient noise far
from the posterior, where it is far larger, and froze h = 2.9e-9 (SGLD) and
1.2e-5 (ATMC), 8–350 times below steps that reach the posterior with a noise
ratio below r*. The chains crawled: NLL 3.6 (SGLD) and 8.4 (ATMC) 9 000
steps in, against 0.003–0.05 with explicit steps 1e-6 and 1e-4. Before, h
stayed frozen for good (``test_a_badly_scaled_chain_rises`` with the rise
switched off: AssertionError on ``h_end > 2·h_frozen``). Now, where the noise
spread is above ``NOISE_SPREAD`` at the freeze, ``fit`` raises h at epoch ends
by the warm-up's noise law until the noise stops falling (SGLD 2.9e-9 →
2.4e-7, ATMC 1.2e-5 → 2.0e-4; NLL 0.0008 and 0.0004 at step 9 000).
"""

import warnings

import numpy as np
import keras
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import samplers
from keras_bnn.samplers import step_rise
from test_stiff37 import _standardised


def _fit(sampler, scale, steps, per_epoch=50, callbacks=(), **kwargs):
    """``steps`` steps on breast_cancer ×``scale`` (30-32-2 MLP, batches of 64);
    returns the model and h at each epoch's end."""
    x, y = _standardised("breast_cancer", scale)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(x.shape[1:], 2, hidden=(32,))
    model.compile(sampler=samplers.get(sampler, seed=0, **kwargs), train_size=len(x),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).repeat().batch(64)
    steps_h = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda *_: steps_h.append(model.optimizer.step_size_value))
    with pytest.warns(kb.StiffnessWarning) if scale >= 1000 else _nothing():
        model.fit(data, steps_per_epoch=per_epoch, epochs=steps // per_epoch, verbose=0,
                  callbacks=[record, *callbacks])
    return model, steps_h


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _number(variable):
    return float(keras.ops.convert_to_numpy(variable))


def test_the_rise_follows_the_noise_law():
    """``a_v = r_v/(h·s_v)^k``; h' = (r*/ā)^{1/k} within [floor, min(RISE_LIMIT^rises·h,
    ceiling)]; factors as at the freeze."""
    target, h, inf = 0.05, 1e-6, float("inf")
    scales = step_rise.noise_scales(h, [0.5, 1.0, 1.0], [0.01, 0.02, 0.0], 2)
    assert scales == pytest.approx([0.01 / (0.5 * h) ** 2, 0.02 / h ** 2, 0.0])
    # k = 1, both of size 1: the mean ratio fell to r*/1.5.
    scales = step_rise.noise_scales(h, [1.0, 1.0], [target / 1.5 * 1.5, target / 1.5 * 0.5], 1)
    assert step_rise.raised_step(h, h, inf, scales, [1, 1], target, 1, 1.0) == pytest.approx(
        1.5 * h)
    assert step_rise.raised_step(h, h, 1.2 * h, scales, [1, 1], target, 1, 1.0) == 1.2 * h
    assert step_rise.raised_step(h, h, inf, [1e-9], [1], target, 1, 1.0) == (
        step_rise.RISE_LIMIT * h)
    assert step_rise.raised_step(h, 0.5 * h, inf, [1e9], [1], target, 1, 1.0) == 0.5 * h
    assert step_rise.raised_step(h, h, inf, [0.0], [1], target, 1, 1.0) == h
    assert step_rise.frozen_factors(1.5 * h, scales, target, 1) == pytest.approx(
        [1.0 / 1.5, 1.0])
    assert step_rise.frozen_factors(h, [0.0], target, 2) == [1.0]


def test_a_badly_scaled_chain_rises():
    """×1000, SGLD, warm-up of 300 steps: before, h stayed at the frozen
    value; now it rises at the epoch ends after the one that judged the
    spread, and every window of noise_averaging_steps steps is counted."""
    model, steps_h = _fit("sgld", 1000.0, 1500, warmup_steps=300)
    frozen = steps_h[5]
    assert steps_h[6] == frozen  # the warm-up's end is judged first
    assert steps_h[-1] > 2.0 * frozen
    rising = model.optimizer.warmup.rising  # windows of 300 steps: may be done
    assert rising == step_rise.DONE or rising >= step_rise.RISING + 1


@pytest.mark.parametrize("start_epoch", [8, "auto"])
def test_no_rise_where_a_collector_may_collect(tmp_path, start_epoch):
    """An int ``start_epoch`` ends the rise at once; an auto one while
    collecting (here: before it starts, so h rises)."""
    collect = kb.callbacks.CollectSamples(kb.SampleStore(tmp_path / "s"),
                                          start_epoch=start_epoch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the chain is not at equilibrium
        model, steps_h = _fit("sgld", 1000.0, 1500, callbacks=[collect], warmup_steps=300)
    if start_epoch == "auto":
        assert collect.start_epoch is None and steps_h[-1] > steps_h[5]
    else:
        assert steps_h[-1] == steps_h[5]
        assert model.optimizer.warmup.rising == step_rise.DONE


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["sgld", "sghmc", "atmc"])
def test_a_standardised_chain_runs_as_before(monkeypatch, sampler):
    """Spread within NOISE_SPREAD: the same h and bit-identical weights as
    with the rise switched off, and the rise is done at the warm-up's end."""
    runs = []
    for off in (False, True):
        if off:
            monkeypatch.setattr(step_rise.StepRise, "after_epoch", lambda self, c: None)
        model, steps_h = _fit(sampler, 1.0, 600, warmup_steps=200)
        runs.append((steps_h, [np.array(w) for w in model.get_weights()],
                     model.optimizer.warmup.rising))
    (h_on, w_on, rising), (h_off, w_off, _) = runs
    assert rising == step_rise.DONE
    assert h_on == h_off and len(set(h_on[4:])) == 1
    assert all(np.array_equal(a, b) for a, b in zip(w_on, w_off))
