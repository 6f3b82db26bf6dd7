"""model.fit with a sampler: logging, sample collection, resume, tf.distribute."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb
from keras_bnn import priors
from mirrored import new_mirrored

N_TRAIN = 256
BATCH = 32
SAMPLER_NAMES = ["sgld", "sghmc", "sgnht", "atmc"]


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N_TRAIN, 5)).astype("float32")
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
    return x, y


def _dataset():
    x, y = _data()
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)


def _model(seed=1, prior_std=1.0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((5,))
    hidden = keras.layers.Dense(
        16, activation="relu", kernel_regularizer=priors.Normal(0, prior_std),
        bias_regularizer=priors.Normal(0, prior_std),
    )(inputs)
    outputs = keras.layers.Dense(2, kernel_regularizer=priors.Normal(0, prior_std))(hidden)
    return kb.BayesianModel(inputs, outputs)


def _compile(model, sampler, **kwargs):
    kwargs.setdefault("train_size", N_TRAIN)
    model.compile(
        sampler=sampler,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **kwargs,
    )
    return model


def _sampler(name, seed=3):
    return kb.samplers.get(name, step_size=1e-3, seed=seed)


@pytest.mark.parametrize("name", SAMPLER_NAMES)
def test_fit_collects_distinct_samples_that_reload_bit_exactly(tmp_path, name):
    model = _compile(_model(), _sampler(name))
    store = kb.SampleStore(tmp_path / "samples")
    history = model.fit(
        _dataset(), epochs=6, verbose=0,
        callbacks=[kb.callbacks.CollectSamples(store, start_epoch=1)],
    )
    assert len(store) == 5
    samples = list(store)
    for a, b in zip(samples, samples[1:]):
        assert any(not np.array_equal(u, v) for u, v in zip(a.weights, b.weights))
    assert [s.metadata["epoch"] for s in samples] == [1, 2, 3, 4, 5]
    assert samples[-1].metadata["step"] == 6 * (N_TRAIN // BATCH)
    # The last sample is the model's final state, bit for bit.
    for stored, live in zip(samples[-1].weights, model.get_weights()):
        np.testing.assert_array_equal(stored, live)
    # Loading into a fresh model reproduces its outputs exactly.
    fresh = _model(seed=7)
    fresh.set_weights(samples[2].weights)
    x, _ = _data()
    model.set_weights(store[2].weights)
    np.testing.assert_array_equal(fresh.predict(x, verbose=0), model.predict(x, verbose=0))
    # History holds real values: loss = nll + prior/n, all finite and non-zero.
    logs = history.history
    np.testing.assert_allclose(
        logs["loss"], np.array(logs["nll"]) + np.array(logs["prior"]) / N_TRAIN, rtol=1e-5
    )
    assert all(v > 0 for v in logs["nll"])
    expected = {"loss", "nll", "prior", "step_size", "configurational_temperature"}
    if name != "sgld":
        expected.add("kinetic_temperature")
    assert expected <= set(logs)


@pytest.mark.parametrize("name", ["sgld", "sghmc", "atmc"])
def test_logged_temperatures_are_those_of_the_step(name):
    """One full-batch step: T_conf = n·Σθ·∇(loss)/d at the pre-step weights,
    T_kin = Σp²/(m·d) from the new momenta (unit mass, Gaussian momentum);
    SGHMC reads the half-step momentum (m_old + m_new)/2, with m_old = 0."""
    model = _compile(_model(), _sampler(name))
    x, y = _data()
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True), training=True)
    grads = [g.numpy() for g in tape.gradient(loss, model.trainable_variables)]
    theta = [v.numpy() for v in model.trainable_variables]
    history = model.fit(x, y, batch_size=N_TRAIN, epochs=1, verbose=0, shuffle=False)
    d = sum(t.size for t in theta)
    virial = N_TRAIN * sum(float(np.sum(t * g)) for t, g in zip(theta, grads))
    np.testing.assert_allclose(
        history.history["configurational_temperature"][0], virial / d, rtol=1e-4)
    np.testing.assert_allclose(float(model.sampler.configurational_temperature()), virial / d,
                               rtol=1e-4)
    if name == "sgld":
        assert "kinetic_temperature" not in history.history
        return
    kinetic = sum(float(np.sum(np.square(p.numpy()))) for p in model.sampler.slots("momentum")) / d
    if name == "sghmc":
        kinetic *= 0.25
    assert kinetic > 0
    np.testing.assert_allclose(history.history["kinetic_temperature"][0], kinetic, rtol=1e-5)
    np.testing.assert_allclose(float(model.sampler.kinetic_temperature()), kinetic, rtol=1e-5)


def test_logged_potential_matches_a_direct_computation():
    model = _compile(_model(), kb.samplers.SGLD(1e-12, seed=0))  # ~frozen weights
    x, y = _data()
    history = model.fit(x, y, batch_size=N_TRAIN, epochs=1, verbose=0, shuffle=False)
    logits = model(x)
    nll = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, logits)
    neg_log_prior = -float(priors.log_prior(model))
    np.testing.assert_allclose(history.history["nll"][0], float(nll), rtol=1e-4)
    np.testing.assert_allclose(history.history["prior"][0], neg_log_prior, rtol=1e-4)


def test_a_second_fit_goes_on_collecting(tmp_path):
    """A second ``fit`` (epochs counted from 0 again) with a new
    ``CollectSamples`` on the chain's store took no sample, silently: the
    store said collection starts at epoch 3. Since 2026-11-30 the callback
    counts epochs across fits: the second fit's are 5 and 6."""
    model = _compile(_model(), _sampler("sgld"))
    store = kb.SampleStore(tmp_path / "samples")
    model.fit(_dataset(), epochs=5, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=3)])
    assert [m["epoch"] for m in store.metadata()] == [3, 4]
    collect = kb.callbacks.CollectSamples(store)  # "auto", as the README's example
    model.fit(_dataset(), epochs=2, verbose=0, callbacks=[collect])
    assert [m["epoch"] for m in store.metadata()] == [3, 4, 5, 6]
    assert collect.started_epoch == 3
    steps = [m["step"] for m in store.metadata()]
    assert steps == sorted(set(steps))  # no step twice: the same chain, going on


def test_resume_continues_the_same_chain(tmp_path):
    """Run 2 epochs straight vs. 1 epoch, crash, restore, 1 more: same weights."""
    straight = _compile(_model(), _sampler("atmc"))
    straight.fit(_dataset(), epochs=2, verbose=0)

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("simulated crash")

    backup = str(tmp_path / "backup")
    first = _compile(_model(), _sampler("atmc"))
    with pytest.raises(RuntimeError, match="simulated crash"):
        first.fit(
            _dataset(), epochs=2, verbose=0,
            callbacks=[keras.callbacks.BackupAndRestore(backup), Crash()],
        )
    resumed = _compile(_model(seed=99), _sampler("atmc"))  # other init: restored anyway
    resumed.fit(
        _dataset(), epochs=2, verbose=0,
        callbacks=[keras.callbacks.BackupAndRestore(backup)],
    )
    assert int(resumed.optimizer.iterations) == 2 * (N_TRAIN // BATCH)
    for a, b in zip(straight.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    for a, b in zip(straight.optimizer.variables, resumed.optimizer.variables):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", ["sghmc", "atmc"])
@pytest.mark.slow
def test_mirrored_strategy_runs_the_same_chain(name):
    # A tight prior (σ=0.05) makes the prior gradient as large as the
    # likelihood's, so a prior counted once per replica (or dropped) moves the
    # chain by ~1e-2 in these 16 steps; so would per-replica noise.
    single = _compile(_model(prior_std=0.05), _sampler(name))
    history = single.fit(_dataset(), epochs=2, verbose=0)
    strategy = new_mirrored()
    with strategy.scope():
        mirrored = _compile(_model(prior_std=0.05), _sampler(name))
    mirrored_history = mirrored.fit(_dataset(), epochs=2, verbose=0)
    # Same global batch and noise; only the order of float sums differs.
    for a, b in zip(single.get_weights(), mirrored.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-4)
    for key in ("loss", "nll", "prior"):
        np.testing.assert_allclose(history.history[key], mirrored_history.history[key], rtol=1e-4)
    # The temperatures come from the global-batch gradient and the shared momenta.
    for key in ("kinetic_temperature", "configurational_temperature"):
        np.testing.assert_allclose(history.history[key], mirrored_history.history[key], rtol=1e-3)
    # So do the per-variable running sums behind CollectSamples.variable_temperatures.
    sums = np.array(single.optimizer.virial_sums())
    np.testing.assert_allclose(mirrored.optimizer.virial_sums(), sums, rtol=1e-3,
                               atol=1e-3 * np.abs(sums).max())
    for variable in mirrored.trainable_variables + mirrored.optimizer.variables:
        copies = [np.asarray(t) for t in variable.value.values]
        np.testing.assert_array_equal(copies[0], copies[1])


def test_mirrored_strategy_takes_what_one_device_takes(tmp_path):
    """What failed under MirroredStrategy (2 logical CPUs) and works on one device."""
    strategy = new_mirrored()
    x, y = _data()
    sampler = _sampler("sghmc")  # outside the scope: "Mixing different ... Strategy objects"
    with strategy.scope():
        model = _compile(_model(), sampler)
    # A first batch that does not split evenly: "AddN ... must have the same size".
    model.fit(x, y, batch_size=BATCH + 1, epochs=1, verbose=0)
    with strategy.scope():  # each raised "object __array__ method not producing an array"
        factors = model.optimizer.step_size_factors()
        model.save(str(tmp_path / "model.keras"))
        store = kb.SampleStore(str(tmp_path / "samples"))
        store.append(model)
        probabilities = kb.PosteriorEnsemble.from_store(store).predict(x, verbose=0)
    assert list(factors.values()) == [1.0] * len(model.trainable_variables)  # explicit step
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    with strategy.scope():
        compiled = _compile(_model(), _sampler("sgld"), jit_compile=True)
    with pytest.raises(ValueError, match="fit: `jit_compile` must be False or 'auto' under "
                                         "MirroredStrategy"):  # was a merge_call RuntimeError
        compiled.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)


@pytest.mark.slow  # XLA compiles: 31 s
def test_jit_compile_runs_the_same_update():
    """XLA (jit_compile=True) gives the same deterministic update as graph mode.

    XLA's stateless normal kernel draws a different (equally valid, equally
    pure) stream than TensorFlow's for the same key, so the comparison is made
    at a negligible temperature, where the chains differ only by round-off;
    at T=1 two XLA runs must agree bit for bit.
    """
    runs = {}
    for jit, temperature in [(False, 1e-12), (True, 1e-12), (True, 1.0), ("again", 1.0)]:
        model = _compile(_model(), _sampler("atmc"), jit_compile=bool(jit),
                         temperature=temperature)
        model.fit(_dataset(), epochs=1, verbose=0)
        runs[(jit, temperature)] = model.get_weights()
    for a, b in zip(runs[(False, 1e-12)], runs[(True, 1e-12)]):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    for a, b in zip(runs[(True, 1.0)], runs[("again", 1.0)]):
        np.testing.assert_array_equal(a, b)
    assert any(
        not np.allclose(a, b, atol=1e-4)
        for a, b in zip(runs[(True, 1.0)], runs[(True, 1e-12)])
    )


def test_nan_potential_stops_with_a_clear_error_and_keeps_samples(tmp_path):
    model = _compile(_model(), _sampler("atmc"))
    store = kb.SampleStore(tmp_path / "samples")
    model.fit(_dataset(), epochs=2, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    before = [s.weights for s in store]
    weights_before = model.get_weights()
    x, y = _data()
    x[5, 0] = np.nan
    with pytest.raises(FloatingPointError, match="NaN/Inf"):
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert len(store) == 2
    for old, new in zip(before, store):
        for a, b in zip(old, new.weights):
            np.testing.assert_array_equal(a, b)
    # The failing step applied nothing: the weights are finite (the first
    # batch holds the NaN, so they are exactly the pre-fit weights).
    for a, b in zip(weights_before, model.get_weights()):
        np.testing.assert_array_equal(a, b)


def _check_numerics_ops(concrete_function):
    """CheckNumerics ops in a traced function and in every function it calls."""
    graph_def = concrete_function.graph.as_graph_def()
    nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
    return [n for n in nodes if n.op == "CheckNumerics"]


def test_xla_path_scans_the_gradients_once():
    """apply_if_finite has checked the gradients: the sampler's own guard
    (sums plus CheckNumerics, a no-op under XLA) is not traced again."""
    from keras_bnn import backend

    sampler = _sampler("atmc")
    sampler.configure(train_size=N_TRAIN)
    theta = keras.Variable(np.zeros(3, np.float32))
    sampler.build([theta])
    spec = tf.TensorSpec((3,), tf.float32)
    guarded = tf.function(lambda g: sampler.apply([g], [theta])).get_concrete_function(spec)
    assert _check_numerics_ops(guarded)  # the plain path does check
    checked_once = tf.function(
        lambda g: backend.apply_if_finite(sampler, tf.constant(1.0), [g], [theta])
    ).get_concrete_function(spec)
    assert not _check_numerics_ops(checked_once)
    # ... and the flag does not leak: a later plain trace checks again.
    assert _check_numerics_ops(
        tf.function(lambda g: sampler.apply([g], [theta])).get_concrete_function(spec))


def test_nan_potential_under_xla_skips_steps_and_stops_at_epoch_end(tmp_path):
    """XLA compiles check_numerics away: non-finite steps are skipped, counted,
    and training stops with FloatingPointError at the end of the epoch."""
    model = _compile(_model(), _sampler("atmc"), jit_compile=True)
    store = kb.SampleStore(tmp_path / "samples")
    model.fit(_dataset(), epochs=1, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    weights_before = model.get_weights()
    steps_before = int(model.optimizer.iterations)
    x, y = _data()
    x[:, 0] = np.nan  # every batch is non-finite: every step is skipped
    with pytest.raises(FloatingPointError, match=f"{N_TRAIN // BATCH} step"):
        model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, shuffle=False,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    for a, b in zip(weights_before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert int(model.optimizer.iterations) == steps_before
    # Every step was skipped, so the epoch ends at the stored sample's step:
    # (chain, step) identifies a sample, and it is not stored twice.
    assert len(store) == 1 and all(np.all(np.isfinite(w)) for w in store[0].weights)


def test_bad_compile_arguments_are_named():
    model = _model()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with pytest.raises(ValueError, match="not both"):
        model.compile(sampler="atmc", optimizer="sgd", train_size=10, loss=loss)
    with pytest.raises(ValueError, match="train_size"):
        model.compile(sampler="atmc", loss=loss)
    with pytest.raises(ValueError, match="train_size"):
        model.compile(sampler="atmc", train_size=0, loss=loss)
    with pytest.raises(ValueError, match="temperature"):
        model.compile(sampler="atmc", train_size=10, temperature=0.0, loss=loss)
    with pytest.raises(ValueError, match="temperature"):
        model.compile(optimizer="sgd", train_size=10, temperature=0.5, loss=loss)
    with pytest.raises(ValueError, match="`sampler` must be one of 'sgld', 'sghmc', "
                                         "'sgnht', 'atmc', 'hmc'; got 'nuts'"):
        model.compile(sampler="nuts", train_size=10, loss=loss)


def test_store_refuses_another_architecture(tmp_path):
    store = kb.SampleStore(tmp_path / "samples")
    store.append(_model())
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5,))
    other = kb.BayesianModel(inputs, keras.layers.Dense(3)(inputs))
    with pytest.raises(ValueError, match="another architecture"):
        store.append(other)
    model = _compile(other, _sampler("sgld"))
    with pytest.raises(ValueError, match="another architecture"):
        model.fit(_dataset(), epochs=1, verbose=0,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])


def test_store_survives_a_crash_mid_write(tmp_path, monkeypatch):
    store = kb.SampleStore(tmp_path / "samples")
    model = _model()
    store.append(model, step=1)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        store.append(model, step=2)
    monkeypatch.undo()
    assert len(store) == 1
    assert not [n for n in os.listdir(store.path) if n.startswith(".tmp-")]
    # A temp file left by a killed process is ignored.
    (tmp_path / "samples" / ".tmp-orphan").write_bytes(b"partial")
    assert len(store) == 1 and store[0].metadata["step"] == 1
    assert store.append(model, step=3) == 1


def test_store_rebuilds_the_architecture(tmp_path):
    store = kb.SampleStore(tmp_path / "samples")
    model = _model()
    store.append(model)
    rebuilt = store.build_model()
    rebuilt.set_weights(store[0].weights)
    x, _ = _data()
    np.testing.assert_array_equal(rebuilt.predict(x, verbose=0), model.predict(x, verbose=0))


def test_cyclical_schedule_collects_at_cycle_ends(tmp_path):
    model = _compile(_model(), _sampler("atmc"))
    store = kb.SampleStore(tmp_path / "samples")
    steps = N_TRAIN // BATCH
    history = model.fit(
        _dataset(), epochs=7, verbose=0,
        callbacks=[
            kb.callbacks.CyclicalSchedule(cycle_epochs=2, burn_in_epochs=1),
            kb.callbacks.CollectSamples(store, start_epoch=0),
        ],
    )
    # Burn-in epoch 0, cycles over epochs (1, 2), (3, 4), (5, 6).
    assert [m["epoch"] for m in store.metadata()] == [2, 4, 6]
    assert [m["step"] for m in store.metadata()] == [3 * steps, 5 * steps, 7 * steps]
    sizes = history.history["step_size"]
    assert sizes[0] == pytest.approx(1e-3)
    assert sizes[1] > sizes[2]  # first half of a cycle has larger steps


def test_temperature_ramp_sets_the_sampler_temperature():
    model = _compile(_model(), _sampler("atmc"), temperature=1.0)
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(self.model.optimizer.temperature)

    model.fit(_dataset(), epochs=4, verbose=0,
              callbacks=[kb.callbacks.TemperatureRamp(1.0, 0.1, ramp_epochs=2), Record()])
    np.testing.assert_allclose(seen, [1.0, 0.55, 0.1, 0.1], rtol=1e-6)
    baseline = _model()
    baseline.compile(optimizer="sgd", train_size=N_TRAIN,
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="TemperatureRamp needs a keras_bnn sampler"):
        baseline.fit(_dataset(), epochs=1, verbose=0,
                     callbacks=[kb.callbacks.TemperatureRamp(1.0, 0.1, ramp_epochs=2)])
