"""StiffnessWarning's second cause: badly scaled inputs make the noisiest
variables set an h far below the step the others' noise allows.

Found 2026-11-30 on breast_cancer with standardised inputs ×1000 (a 30-32-2
MLP, library defaults, batches of 64): no blow-up capped h, so the first
cause (:func:`keras_bnn.samplers.warmup.stiffness_gap`) stayed silent, but
the first layer's and output layer's noise set h = 2.9e-9 (SGLD) and the
first layer's bias then had a noise ratio 1.2·10⁶ times below theirs (ATMC:
1.0·10⁶); the chain's NLL was still 10 (SGLD) and 22 (ATMC) 2 000 steps
past the warm-up, against 0.01 at ×100 and with explicit steps 8–350 times
the frozen h. Measured at the defaults, the spread (the noisiest variable's
ratio over the quietest's, :func:`~keras_bnn.samplers.warmup.noise_spread`)
is at most 12 on standardised 30-32-c MLPs, a CNN, an LSTM, a GRU, ResNet++
and an embedding model (100 on 128-128-128 MLPs whose h a blow-up capped),
700–820 at ×30 and 7 800–9 300 at ×100, 2·10⁵–1.5·10⁶ at ×1000.
"""

import warnings

import keras
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import samplers
from keras_bnn.samplers import warmup
from test_stiff37 import _fit, _standardised


def test_the_noise_spread_rule():
    """``noise_spread``: max r_v/min r_v at ``r_v = (h·s_v)^k·a_v``, unmeasured
    variables (a_v = 0) left out, 0 up to NOISE_SPREAD."""
    target, h = 0.05, 1e-3
    quiet = target / (2.0 * warmup.NOISE_SPREAD) / h**2  # r_v = r*/(2·NOISE_SPREAD)
    spread, ratios = warmup.noise_spread(h, [target / h**2 / 0.25, quiet, 0.0],
                                         [0.5, 1.0, 1.0], 2)
    assert spread == pytest.approx(2.0 * warmup.NOISE_SPREAD)
    assert ratios == pytest.approx([target, target / (2.0 * warmup.NOISE_SPREAD), 0.0])
    half = 2.0 * target / (warmup.NOISE_SPREAD * h)  # k = 1: r_v = r*/(NOISE_SPREAD/2)
    assert warmup.noise_spread(h, [target / h, half], [1.0, 1.0], 1)[0] == 0
    assert warmup.noise_spread(h, [0.0, 0.0], [1.0, 1.0], 1)[0] == 0


def _number(variable):
    return float(keras.ops.convert_to_numpy(variable))


@pytest.mark.parametrize("sampler", ["sgld", "atmc"])
def test_inputs_scaled_x1000_warn(sampler):
    """breast_cancer ×1000, 30-32-2 MLP, defaults. Before: no warning at all
    (no blow-up, so ``stiffness_gap`` is 0). Now one StiffnessWarning naming
    the variables that set h, the quietest one and the spread."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = _fit("breast_cancer", sampler, (32,), steps=1100, scale=1000.0)
    assert _number(model.optimizer.warmup.blow_ups) == 0.0
    (message,) = [str(w.message) for w in caught if w.category is kb.StiffnessWarning]
    frozen = model.optimizer._frozen_warmup()
    assert warmup.stiffness_gap(*frozen)[0] == 0.0  # the first cause is silent
    factors = list(model.optimizer.step_size_factors().values())
    spread, _ = warmup.noise_spread(frozen[0], frozen[2], factors, frozen[5])
    assert spread > 5.0 * warmup.NOISE_SPREAD  # measured 1.0–1.2e6
    assert f"froze h = {frozen[0]:.3g}, set by the gradient noise of dense_0/kernel" in message
    assert f"noise ratio of dense_0/bias is {spread:.3g} times below theirs" in message
    for advice in ("badly scaled", "Standardise the inputs", "sampler='hmc'",
                   "explicit `step_size`"):
        assert advice in message


def _digits_model(kind):
    x, y = _standardised("digits")
    keras.utils.set_random_seed(0)
    if kind == "cnn":
        x = x.reshape(-1, 8, 8, 1)
        model = kb.models.cnn((8, 8, 1), 10, filters=(8, 16), kernel_size=3, dense=32)
    else:
        x = x.reshape(-1, 8, 8)
        model = kb.bayesian(keras.Sequential([keras.Input((8, 8)), keras.layers.LSTM(32),
                                              keras.layers.Dense(10)]))
    return model, x, y


def _spread_after_warmup(model, x, y, sampler):
    """Fits 1100 steps (batches of 64) with StiffnessWarning as an error; returns the spread."""
    model.compile(sampler=samplers.get(sampler, seed=0), train_size=len(x),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=0).repeat().batch(64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.StiffnessWarning)
        model.fit(data, steps_per_epoch=100, epochs=11, verbose=0)
    step, _, scales, _, _, exponent = model.optimizer._frozen_warmup()
    ratios = warmup.noise_spread(step, scales, model.optimizer.step_size_factors().values(),
                                 exponent)[1]
    return max(ratios) / min(r for r in ratios if r > 0.0)


@pytest.mark.parametrize("name", ["breast_cancer", "wine", "digits"])
def test_standardised_mlps_do_not_warn(name):
    """Standardised 30-32-2 / 13-32-3 / 64-32-10 MLPs, SGLD: no StiffnessWarning.
    Measured spreads 2.4, 5.4, 1.5 (ATMC: 2.0, 4.2, 1.5)."""
    x, y = _standardised(name)
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(x.shape[1:], int(y.max()) + 1, hidden=(32,))
    spread = _spread_after_warmup(model, x, y, "sgld")
    assert 1.0 <= spread < warmup.NOISE_SPREAD / 100.0


@pytest.mark.parametrize("kind, sampler", [("cnn", "sgld"), ("cnn", "atmc"), ("lstm", "sgld"),
                                           ("lstm", "atmc")])
def test_a_cnn_and_an_lstm_do_not_warn(kind, sampler):
    """A digits CNN (8×8 images) and LSTM (8 rows of 8): no StiffnessWarning.
    Measured spreads: CNN 7.9 (SGLD) and 12 (ATMC), LSTM 1.8 and 1.6."""
    spread = _spread_after_warmup(*_digits_model(kind), sampler)
    assert 1.0 <= spread < warmup.NOISE_SPREAD / 100.0
