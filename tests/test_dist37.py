"""The samplers under MirroredStrategy (2 logical CPUs, tests/conftest.py) against one device.

Measured at the library defaults (``step_size="auto"``, ``CollectSamples()``)
on a 4-8-3 MLP, 256 rows in batches of 32, same seed and global batch: the
frozen h (0.0077813 for SGHMC after a 200-step warm-up), the step factors,
every epoch's ``gradient_noise_ratio``, kinetic and configurational
temperature, ``loss``, ``nll``, ``prior`` and the per-variable
temperatures agree to ≤ 1.3e-5 relative and the weights to 1.2e-7, with
both replicas' copies of every variable equal: V̂ and the ratio read the
global batch's gradient and the noise is drawn once per (seed, variable,
step). These tests hold what was not covered elsewhere.
"""

import contextlib
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

N = 101


def _rows(n, features=4, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    return x, (x[:, 0] - x[:, 1] + 0.5 * rng.normal(size=n) > 0).astype("int32")


def _regression(sampler, strategy, train_size=N, units=2):
    keras.utils.set_random_seed(0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        inputs = keras.Input((4,))
        outputs = keras.layers.Dense(units, kernel_regularizer=kb.priors.Normal(0, 1),
                                     bias_regularizer=kb.priors.Normal(0, 1))(inputs)
        model = kb.BayesianModel(inputs, outputs)
        model.compile(sampler=sampler, train_size=train_size,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _hmc_warnings(model, x, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train_on_batch(x, y)
    return [str(w.message) for w in caught if issubclass(w.category, kb.MinibatchHMCWarning)]


def test_hmc_train_on_batch_counts_the_batch_once_under_mirrored_strategy(new_strategy):
    """Keras hands every replica the whole batch of ``train_on_batch``; the traced
    step counted it once per replica: 60 of 101 examples on 2 replicas ran HMC
    with no MinibatchHMCWarning (120 ≥ 101), and 50 warned of "a minibatch of
    100" (on one device each warns with its own length)."""
    x, y = _rows(N)
    model = _regression(kb.samplers.HMC(0.05, num_leapfrog_steps=2, seed=5), new_strategy())
    assert _hmc_warnings(model, x, y) == []  # the full batch
    got = _hmc_warnings(model, x[:60], y[:60])
    assert len(got) == 1 and f"minibatch of 60 < train_size={N}" in got[0], got


@pytest.mark.slow  # two logical CPUs: 25-70 s on a shared machine
@pytest.mark.filterwarnings("ignore::keras_bnn.ShortWarmupWarning")  # 40 steps, on purpose
def test_lowered_step_factors_keep_the_single_device_chain(new_strategy):
    """The host-side lowerings of ``CollectSamples`` (the second noise measurement
    and the noisy-chain lowering, ATMC's thermostat carried across) under the
    strategy, after an ``"auto"`` warm-up: the same chain as on one device (measured
    with an 80-step warm-up: weights equal bit for bit, h 2.56e-6 and factors
    0.204/0.408 on both, both replicas' copies equal)."""
    x, y = _rows(256, seed=0)
    runs = []
    for strategy in (None, new_strategy()):
        model = _regression(kb.samplers.ATMC(seed=3, warmup_steps=40), strategy, 256)
        model.fit(x, y, batch_size=32, epochs=6, verbose=0, shuffle=False)
        sampler, names = model.optimizer, [v.path for v in model.trainable_variables]
        lowered = [sampler.lower_step_factors({names[0]: 0.2, names[1]: 0.01}),
                   sampler.lower_noisy_step_factors({name: 0.3 for name in names}, 0.1)]
        history = model.fit(x, y, batch_size=32, epochs=2, verbose=0, shuffle=False).history
        runs.append((lowered, history, model.get_weights(), sampler.step_size_factors(),
                     sampler.step_size_value))
        if strategy is not None:
            for variable in model.trainable_variables + sampler.variables:
                copies = [np.asarray(t) for t in variable.value.values]
                np.testing.assert_array_equal(copies[0], copies[1])
    (lowered, history, weights, factors, step), mirrored = runs
    assert [len(change) for change in lowered] == [1, 2]
    assert mirrored[4] == step
    assert list(mirrored[3].values()) == pytest.approx(list(factors.values()), rel=1e-6)
    for key in ("gradient_noise_ratio", "kinetic_temperature", "configurational_temperature"):
        np.testing.assert_allclose(mirrored[1][key], history[key], rtol=1e-4)
    for single, copy in zip(weights, mirrored[2]):
        np.testing.assert_allclose(copy, single, rtol=0, atol=1e-5)
