"""The warm-up on a stiff, badly scaled model: blow-ups, the anchor, StiffnessWarning.

Found 2026-11-30 on breast_cancer with standardised inputs ×1000 (a
30-32-2 MLP, SGLD at library defaults, batches of 64): the first ratio the
warm-up measures (step 2, one gradient difference, at h = 1.15e-8 never
fitted to the noise) read r̂ = 0.27 > 4·r* and was taken for a blow-up, so
h was capped for good at 2.9e-9 (5 000 times below the noise-limited step
measured at the warm-up's end, 1.5e-5), and the recovery set every weight
to 0: the anchor it returns to is confirmed at step 5, and before that it
was the slot's initial zeros. Explicit steps of 1.15e-8 to 1e-6 ran that
model stably for 500 steps: it was no instability.
"""

import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

import keras_bnn as kb
from keras_bnn import samplers
from keras_bnn.samplers import warmup
from test_warmup import _small_model

LOADERS = {"breast_cancer": load_breast_cancer, "wine": load_wine, "digits": load_digits}


def _standardised(name, scale=1.0):
    x, y = LOADERS[name](return_X_y=True)
    x = (x - x.mean(axis=0)) / np.maximum(x.std(axis=0), 1e-8)
    return (scale * x).astype("float32"), y.astype("int32")


def _fit(name, sampler, hidden, steps, scale=1.0, **kwargs):
    """``steps`` steps (batches of 64) of ``sampler`` at its defaults on a standardised
    ``name`` ×``scale``; returns the model."""
    x, y = _standardised(name, scale)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(x.shape[1:], int(y.max()) + 1, hidden=hidden)
    model.compile(sampler=samplers.get(sampler, seed=0, **kwargs), train_size=len(x),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).repeat().batch(64)
    per_epoch = min(steps, 100)
    model.fit(data, steps_per_epoch=per_epoch, epochs=steps // per_epoch, verbose=0)
    return model


def _number(variable):
    return float(keras.ops.convert_to_numpy(variable))


def test_the_first_measured_ratio_is_not_taken_for_a_blow_up():
    """Before: ``blow_ups == 1`` at step 2, ceiling 2.87e-9, every weight 0
    (see the module doc). Now the noise law cuts h at that step, as at any
    other: no blow-up, the weights where the chain is."""
    model = _fit("breast_cancer", "sgld", (32,), steps=12, scale=1000.0)
    sampler = model.optimizer
    assert _number(sampler.warmup.blow_ups) == 0.0
    assert math.isinf(_number(sampler.warmup.ceiling))
    assert sampler.step_size_value < warmup.INITIAL_STEP_SIZE  # the noise law cut it
    assert all(np.any(w != 0.0) for w in model.get_weights())


def test_a_blow_up_before_the_first_anchor_returns_to_the_start_not_to_zeros(monkeypatch):
    """The anchor is confirmed at step ``ANCHOR_CONFIRM``; a blow-up before
    that returned every weight to the anchor slot's initial zeros (before:
    ``after`` below was all 0). Now the anchor until then is the chain after
    step 0. Every measured r̂ is taken for a blow-up here
    (``BLOW_UP_RATIO = 0``): the first is judged at step 3."""
    monkeypatch.setattr(warmup, "BLOW_UP_RATIO", 0.0)
    model, x, y = _small_model("sgld", warmup_steps=300)
    sampler = model.optimizer
    model.train_on_batch(x[:32], y[:32])
    start = [np.array(w) for w in model.get_weights()]
    t = 1
    while t < warmup.ANCHOR_CONFIRM and not _number(sampler.warmup.blow_ups):
        model.train_on_batch(x[32 * t:32 * (t + 1)], y[32 * t:32 * (t + 1)])
        t += 1
    assert _number(sampler.warmup.blow_ups) == 1.0, "no blow-up before the first anchor"
    assert all(np.any(w != 0.0) for w in start)
    for after, before in zip(model.get_weights(), start):
        np.testing.assert_array_equal(after, before)


def test_the_stiffness_rule():
    """``stiffness_gap``: only a frozen h at its ceiling, and only where the
    step that blew up (ceiling/BLOW_UP_BACKOFF) is more than STIFFNESS_GAP
    below ``h_r``."""
    sizes, target = [10, 30], 0.05
    limited = math.sqrt(target)  # ā = 1, k = 2
    ceiling = 1e-3 * limited
    gap, h_r = warmup.stiffness_gap(ceiling, ceiling, [1.0, 1.0], sizes, target, 2)
    assert h_r == pytest.approx(limited)
    assert gap == pytest.approx(limited * warmup.BLOW_UP_BACKOFF / ceiling)
    assert warmup.stiffness_gap(0.5 * ceiling, ceiling, [1.0, 1.0], sizes, target, 2)[0] == 0
    assert warmup.stiffness_gap(ceiling, math.inf, [1.0, 1.0], sizes, target, 2)[0] == 0
    near = warmup.BLOW_UP_BACKOFF * limited / warmup.STIFFNESS_GAP  # blew up 10× below h_r
    assert warmup.stiffness_gap(near, near, [1.0, 1.0], sizes, target, 2)[0] == 0
    assert warmup.stiffness_gap(0.9 * near, 0.9 * near, [1.0, 1.0], sizes, target, 2)[0] > 0
    assert warmup.stiffness_gap(ceiling, ceiling, [0.0, 0.0], sizes, target, 2) == (0, math.inf)


def test_a_warm_up_capped_far_below_its_noise_target_warns(monkeypatch):
    """Every measured r̂ taken for a blow-up (``BLOW_UP_RATIO = 0``): h is
    cut ×4 every 4 steps and frozen at its ceiling, orders of magnitude
    below ``h_r``. Before: no warning (ShortWarmupWarning leaves out an h
    at its ceiling, and nothing else looked)."""
    monkeypatch.setattr(warmup, "BLOW_UP_RATIO", 0.0)
    model, x, y = _small_model("atmc", warmup_steps=40)
    with pytest.warns(kb.StiffnessWarning) as caught:
        model.fit(x, y, batch_size=32, epochs=6, verbose=0, shuffle=False)
    sampler = model.optimizer
    step, ceiling = sampler.step_size_value, _number(sampler.warmup.ceiling)
    assert step == pytest.approx(ceiling) and _number(sampler.warmup.blow_ups) >= 5
    (message,) = [str(w.message) for w in caught if w.category is kb.StiffnessWarning]
    assert f"froze h = {step:.3g} at its stability ceiling" in message
    assert f"blew up at h = {ceiling / warmup.BLOW_UP_BACKOFF:.3g}" in message
    for advice in ("stiff or badly scaled", "Standardise the inputs", "sampler='hmc'",
                   "explicit `step_size`"):
        assert advice in message
    assert not [w for w in caught if w.category is kb.ShortWarmupWarning]


#: The largest gap measured: SGHMC on wine (blew up at 0.035, h_r = 0.081).
CASES = [(name, sampler) for name in LOADERS for sampler in ("sgld", "atmc")] + [
    ("wine", "sghmc")]


@pytest.mark.slow  # 20–40 s each on the shared 2-core machine
@pytest.mark.parametrize("name, sampler", CASES)
def test_well_scaled_problems_do_not_warn(name, sampler):
    """Standardised breast_cancer, wine and digits, a 128-128-128 MLP at the
    samplers' defaults: the warm-up (1000 steps) ends without a
    StiffnessWarning or ShortWarmupWarning. Measured: four blew up, at
    0.37–2.3 times below h_r (SGLD on breast_cancer 0.37, on wine 0.7,
    ATMC on breast_cancer 1.6, SGHMC on wine 2.3: at 0.035 with
    h_r = 0.081), against the STIFFNESS_GAP of 10."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.StiffnessWarning)
        warnings.simplefilter("error", kb.ShortWarmupWarning)
        model = _fit(name, sampler, (128, 128, 128), steps=1100)
    frozen = model.optimizer._frozen_warmup()
    gap, limited = warmup.stiffness_gap(*frozen)
    print(f"{name} {sampler}: h = {frozen[0]:.3g}, ceiling = {frozen[1]:.3g}, h_r = {limited:.3g}")
    assert gap == 0.0 and model.optimizer.step_size_value > 1e-5
