"""``step_size="auto"``: the warm-up that chooses the step (keras_bnn.samplers.warmup).

Fast checks; the judgement against NUTS is tests/test_warmup_gold.py (slow).

1. On K independent unit Gaussians with injected gradient noise of known
   variance V, the chosen h is the one the noise law predicts
   (``r = c·h^k·V/T = r*``), it is frozen after the warm-up, the same for
   the same seed, and the steady-state ratio is at the target.
2. ``SGLD()`` on a 784-256-256-10 MLP with n = 60000 (the issue's
   Fashion-MNIST MLP, on a 2048-row stand-in): the old default
   ``step_size=1e-4`` diverges within 20 steps; the auto step does not, and
   ends at the target ratio.
3. API: the default is ``"auto"``, an explicit step is exact, a cycle runs
   around the frozen h, the config records the chosen h, bad arguments are
   named; the same h under MirroredStrategy, and the warm-up under JAX.
"""

import contextlib
import json
import math
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import samplers
from keras_bnn.samplers import warmup
from sampler_harness import run_chains

CHAINS, DIM = 32, 8
NOISE_SD = 30.0  # sd of the injected noise in G = n·∇ (n = 100)
TRAIN_SIZE = 100
WARMUP = 600


def _noisy_gaussian_gradient(seed):
    """∇ of the mean-form loss of U = ½‖θ‖², plus N(0, V) noise in G (V = NOISE_SD²)."""
    def gradient(theta, step):
        key = tf.stack([tf.constant(seed, tf.int64), tf.cast(step, tf.int64)])
        noise = tf.random.stateless_normal(tf.shape(theta), seed=key)
        return (theta + NOISE_SD * noise) / TRAIN_SIZE
    return gradient


def _law_step(name, temperature, target):
    """The h at which ``r = target`` for noise variance V (the samplers' ratios).

    SGLD ``r = h·V/(2T)``; SGHMC ``r = h²V/(2γhT)`` with ``γ = 0.1/h``;
    SGNHT/ATMC ``r = h·V/(2T·D)`` with ``D = -log(0.9)/h``.
    """
    variance = NOISE_SD**2
    if name == "SGLD":
        return 2.0 * temperature * target / variance
    rate = 0.1 if name == "SGHMC" else -math.log(0.9)
    return math.sqrt(2.0 * rate * temperature * target / variance)


def _run(name, temperature, seed, steps=WARMUP + 400):
    sampler = getattr(samplers, name)(seed=seed, warmup_steps=WARMUP)
    sampler.configure(train_size=TRAIN_SIZE, temperature=temperature)
    start = np.random.default_rng(seed).normal(size=(CHAINS, DIM)) * math.sqrt(temperature)

    def record(theta, step):
        return tf.stack([sampler.learning_rate, sampler.gradient_noise_ratio()])

    trace, _ = run_chains(sampler, start.astype(np.float32), _noisy_gaussian_gradient(seed),
                          steps, record=record)
    return sampler, trace


@pytest.mark.parametrize("name", ["SGLD", "SGHMC", "SGNHT", "ATMC"])
@pytest.mark.parametrize("temperature", [1.0, 0.01])
def test_auto_step_follows_the_noise_law_and_freezes(name, temperature):
    sampler, trace = _run(name, temperature, seed=3)
    steps, ratios = trace[:, 0], trace[:, 1]
    chosen = sampler.step_size_value
    # Chosen where the noise law puts the target (V̂ also holds the motion
    # H·Δθ, ~h·T per coordinate here: ≲ 1 % of V at these steps).
    assert chosen == pytest.approx(_law_step(name, temperature, warmup.TARGET_NOISE_RATIO),
                                   rel=0.1)
    # Frozen after the warm-up (the step of step t is recorded after it).
    np.testing.assert_array_equal(steps[WARMUP:], np.float32(chosen))
    assert len(np.unique(steps[:WARMUP])) > 50  # it did adapt
    # Steady state at the target, well below the warning level.
    assert np.mean(ratios[-200:]) == pytest.approx(warmup.TARGET_NOISE_RATIO, rel=0.15)
    assert np.max(ratios[WARMUP:]) < samplers.NOISE_RATIO_LIMIT


def test_auto_step_is_a_function_of_the_seed():
    first, _ = _run("ATMC", 1.0, seed=5, steps=WARMUP + 5)
    again, _ = _run("ATMC", 1.0, seed=5, steps=WARMUP + 5)
    other, _ = _run("ATMC", 1.0, seed=6, steps=WARMUP + 5)
    assert first.step_size_value == again.step_size_value
    assert first.step_size_value != other.step_size_value


def test_the_update_rule_grows_jumps_and_backs_off():
    def step(h, ceiling, ratio):
        return [float(v) for v in warmup.next_step_size(
            h, ceiling, np.float32(ratio), warmup.TARGET_NOISE_RATIO, 2)]

    # Nothing measured yet: grow by the limit only.
    assert step(1e-3, np.inf, 0.0) == pytest.approx([1e-3 * warmup.GROWTH_PER_STEP, np.inf])
    # Above the target: jump down by the law, h·(r*/r̂)^{1/2}.
    assert step(1e-3, np.inf, 0.2)[0] == pytest.approx(1e-3 * math.sqrt(0.05 / 0.2))
    # Slightly below: the law would allow more, the growth limit binds.
    assert step(1e-3, np.inf, 0.04)[0] == pytest.approx(1e-3 * warmup.GROWTH_PER_STEP)
    # A blow-up (r̂ > 4·r*): cut to a quarter of h, which stays the ceiling.
    h, ceiling = step(1e-3, np.inf, 10.0)
    assert ceiling == pytest.approx(1e-3 * warmup.BLOW_UP_BACKOFF) and h <= ceiling
    assert step(ceiling, ceiling, 0.0) == pytest.approx([ceiling, ceiling])


def test_explicit_step_size_is_used_exactly():
    sampler = samplers.ATMC(step_size=2e-3, seed=0)
    sampler.configure(train_size=TRAIN_SIZE)
    trace, _ = run_chains(sampler, np.zeros((CHAINS, DIM), np.float32),
                          _noisy_gaussian_gradient(0), 300,
                          record=lambda theta, step: sampler.learning_rate)
    np.testing.assert_array_equal(trace, np.float32(2e-3))
    assert sampler.warmup is None and sampler.step_size_value == 2e-3
    assert sampler.noise_level == pytest.approx(-math.log(0.9) / 2e-3)


def test_a_cycle_runs_around_the_frozen_step():
    sampler = samplers.SGHMC(seed=0, warmup_steps=300)
    sampler.configure(train_size=TRAIN_SIZE)
    sampler.set_cycle(cycle_steps=50)
    trace, _ = run_chains(
        sampler, np.zeros((CHAINS, DIM), np.float32), _noisy_gaussian_gradient(0), 500,
        record=lambda theta, step: tf.stack([sampler.learning_rate,
                                             sampler.warmup.step_size.value]))
    step, base = trace[:, 0], trace[:, 1]  # h of the next step, and the tuned h
    np.testing.assert_array_equal(step[:299], base[:299])  # no cycle while tuning
    np.testing.assert_array_equal(base[299:], base[-1])  # frozen
    np.testing.assert_allclose(step[299:].max(), base[-1], rtol=1e-6)  # cycles from h ...
    assert step[299:].min() < 0.01 * base[-1]  # ... to ~0


@pytest.mark.parametrize("cls", [samplers.SGLD, samplers.SGHMC, samplers.SGNHT, samplers.ATMC])
def test_auto_is_the_default_and_its_config_records_the_chosen_step(cls):
    sampler = cls(seed=2)
    assert sampler.warmup is not None
    assert sampler.get_config()["step_size"] == "auto"
    sampler.configure(train_size=TRAIN_SIZE)
    run_chains(sampler, np.zeros((CHAINS, DIM), np.float32), _noisy_gaussian_gradient(0), 50)
    config = sampler.get_config()
    assert config["step_size_value"] == sampler.step_size_value > warmup.INITIAL_STEP_SIZE
    assert config["warmup_steps"] == warmup.auto_warmup_steps(0.99) == 1000
    restored = samplers.get(keras.optimizers.serialize(sampler))
    assert restored.warmup is not None and restored.warmup.warmup_steps == 1000
    assert restored.get_config()["step_size_value"] is None  # not run yet


@pytest.mark.parametrize("kwargs, argument", [
    ({"step_size": "fast"}, "step_size"),
    ({"warmup_steps": 0}, "warmup_steps"),
    ({"target_noise_ratio": 1.5}, "target_noise_ratio"),
    ({"step_size": 1e-3, "warmup_steps": 100}, "step_size"),
])
def test_bad_warmup_arguments_are_named(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        samplers.SGHMC(**kwargs)


def _mlp_fit(sampler, epochs):
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(2048, 784)).astype("float32")
    y = rng.integers(0, 10, 2048).astype("int32")
    keras.utils.set_random_seed(0)
    model = kb.models.mlp(input_shape=(784,), num_classes=10, hidden=(256, 256))
    model.compile(sampler=sampler, train_size=60_000,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model.fit(x, y, batch_size=128, epochs=epochs, verbose=0).history


def test_sgld_default_no_longer_diverges_on_a_big_n_mlp():
    with pytest.raises(kb.NonFiniteError):  # the old default: NaN at step ~12
        _mlp_fit(samplers.SGLD(step_size=1e-4, seed=0), epochs=2)
    sampler = samplers.SGLD(seed=0, warmup_steps=160)
    history = _mlp_fit(sampler, epochs=16)  # 16 steps an epoch: 10 of warm-up
    assert np.all(np.isfinite(history["loss"]))
    # The step_size log is the frozen h once the warm-up is over.
    np.testing.assert_allclose(history["step_size"][10:], sampler.step_size_value, rtol=1e-6)
    assert sampler.step_size_value < 1e-4
    assert history["gradient_noise_ratio"][-1] <= warmup.TARGET_NOISE_RATIO * 1.2


def _small_model(name, warmup_steps, strategy=None):
    """A 5-16-2 MLP compiled with ``name`` at ``step_size="auto"``, and its 256 rows."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 5)).astype("float32")
    y = (x[:, 0] + 0.5 * rng.normal(size=256) > 0).astype("int32")
    keras.utils.set_random_seed(0)
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = kb.models.mlp((5,), 2, hidden=(16,))
        model.compile(sampler=samplers.get(name, seed=0, warmup_steps=warmup_steps),
                      train_size=256,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, x, y


def _small_fit(name, strategy=None, epochs=4):
    """4 epochs of 8 steps of ``name`` (20 of warm-up) on :func:`_small_model`."""
    model, x, y = _small_model(name, 20, strategy)
    history = model.fit(x, y, batch_size=32, epochs=epochs, verbose=0, shuffle=False)
    return model, history.history


def test_auto_step_is_the_same_under_mirrored_strategy():
    single, _ = _small_fit("atmc")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    mirrored, history = _small_fit("atmc", strategy)
    chosen = mirrored.optimizer.step_size_value
    assert chosen == pytest.approx(single.optimizer.step_size_value, rel=1e-4)
    np.testing.assert_allclose(history["step_size"][3], chosen, rtol=1e-6)  # steps 24-31
    for variable in mirrored.optimizer.warmup.step_size, mirrored.optimizer.warmup.ceiling:
        copies = [np.asarray(t) for t in variable.value.values]
        np.testing.assert_array_equal(copies[0], copies[1])


def _excursion(name, strategy=None):
    """A warm-up blow-up, made on purpose, and what the sampler does about it.

    300 warm-up steps of ``name`` on :func:`_small_model`;
    after 260 every weight is thrown ×100 out (what an unstable step
    does), and within the next 3 steps the sampler must detect the blow-up
    and return every weight to the anchor (the snapshot of step 250,
    confirmed at 255), with the momenta and the noise estimate at 0, then
    sample on.

    Returns:
        dict of what the checks need (numpy values).
    """
    model, x, y = _small_model(name, 300, strategy)

    def steps(start, stop):
        for t in range(start, stop):
            batch = slice(32 * (t % 8), 32 * (t % 8 + 1))
            model.train_on_batch(x[batch], y[batch])

    def values(variables):
        return [np.asarray(keras.ops.convert_to_numpy(v)) for v in variables]

    steps(0, 261)
    sampler = model.optimizer
    anchor = values(sampler.slots("anchor"))
    before = values(model.trainable_variables)
    for variable in model.trainable_variables:
        variable.assign(variable * 100.0)
    detected = 261
    while detected < 264 and not keras.ops.convert_to_numpy(sampler.warmup.blow_ups):
        steps(detected, detected + 1)  # r̂ uses V̂ of the steps before: up to 2 steps late
        detected += 1
    out = {"anchor": anchor, "before": before, "after": values(model.trainable_variables),
           "blow_ups": float(keras.ops.convert_to_numpy(sampler.warmup.blow_ups)),
           "ceiling": float(keras.ops.convert_to_numpy(sampler.warmup.ceiling)),
           "momentum": values(sampler.slots("momentum")) if sampler.has_momentum else [],
           "noise": values(sampler.slots("gradient_noise"))}
    steps(detected, 400)
    out["end"] = values(model.trainable_variables)
    out["blow_ups_end"] = float(keras.ops.convert_to_numpy(sampler.warmup.blow_ups))
    out["step_size"] = sampler.step_size_value
    return out


def _check_excursion(out):
    assert out["blow_ups"] == 1.0 and math.isfinite(out["ceiling"])
    # Every weight is back at the anchor, which is not where the chain was.
    for after, anchor in zip(out["after"], out["anchor"]):
        np.testing.assert_array_equal(after, anchor)
    assert any(np.any(a != b) for a, b in zip(out["anchor"], out["before"]))
    assert all(np.all(m == 0.0) for m in out["momentum"] + out["noise"])
    # It samples on: finite, no second blow-up from the restart's own gradient jump.
    assert all(np.all(np.isfinite(v)) for v in out["end"]) and out["blow_ups_end"] == 1.0
    # V̂ restarted, so within the ~40 warm-up steps left h is back at the
    # ceiling (or at the noise law's step below it), not held down by the
    # blow-up's gradient jump (it was 100× below the ceiling when V̂ kept it).
    assert 0.5 * out["ceiling"] <= out["step_size"] <= out["ceiling"]


@pytest.mark.parametrize("name", ["sgld", "sghmc", "atmc"])
def test_a_warmup_blow_up_returns_the_chain_to_its_anchor(name):
    """Without the recovery the chain stays where the unstable step threw it
    (measured: a 13-128-128-128 Gaussian-head MLP on diabetes went from
    r̂ = 0.049 to 4.4 in one step and to NaN at the next, at the cut h)."""
    _check_excursion(_excursion(name))


def test_the_recovery_under_mirrored_strategy():
    _check_excursion(_excursion("atmc", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])))


JAX_FIT = """
import json
from test_warmup import _small_fit
out = {}
for name in ("sgld", "sghmc", "atmc"):
    model, history = _small_fit(name)
    out[name] = [model.optimizer.step_size_value, history["step_size"][3]]
print("RESULT " + json.dumps(out))
"""

JAX_EXCURSION = """
import pickle, sys
from test_warmup import _excursion
sys.stdout.buffer.write(b"RESULT " + pickle.dumps(_excursion("atmc")).hex().encode() + b"\\n")
"""


def test_the_recovery_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), *sys.path]))
    done = subprocess.run([sys.executable, "-c", JAX_EXCURSION], capture_output=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith(b"RESULT "))
    import pickle
    _check_excursion(pickle.loads(bytes.fromhex(line[len(b"RESULT "):].decode())))


def test_auto_step_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), *sys.path]))
    done = subprocess.run([sys.executable, "-c", JAX_FIT], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(l for l in done.stdout.splitlines() if l.startswith("RESULT "))
    for name, (chosen, logged) in json.loads(line[len("RESULT "):]).items():
        # 20 warm-up steps from 1e-8, at most ×2 per 10 steps; then frozen.
        assert warmup.INITIAL_STEP_SIZE < chosen <= 4.0001 * warmup.INITIAL_STEP_SIZE, name
        assert logged == pytest.approx(chosen, rel=1e-6), name
