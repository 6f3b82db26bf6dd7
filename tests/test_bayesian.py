"""Any Keras model sampled right (#20 findings 3, 4, 6, 7; #21 items 7, 9)."""

import json
import types
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

N = 128
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _data(classes=3):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 4)).astype("float32")
    y = (np.digitize(x[:, 0] + 0.3 * x[:, 1], [-0.5, 0.5]) % classes).astype("int32")
    return x, y


def _sequential(seed=1):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.LayerNormalization(), keras.layers.Dense(3)])


def _functional(seed=1):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="tanh", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden))


@keras.saving.register_keras_serializable(package="test_bayesian")
class _Subclassed(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(8, activation="tanh")
        self.out = keras.layers.Dense(3)

    def call(self, x):
        return self.out(self.hidden(x))


def _compile(model, sampler=None, **kwargs):
    model.compile(sampler=sampler or kb.samplers.SGLD(step_size=1e-4, seed=0),
                  train_size=N, loss=LOSS, **kwargs)
    return model


# ------------------------------------------------ finding 6: any Keras model
def test_plain_keras_models_are_pointed_to_kb_bayesian():
    model = _sequential()
    with pytest.raises(TypeError, match=r"kb\.bayesian\(model\)"):
        model.compile(sampler="atmc", train_size=N, loss=LOSS)
    with pytest.raises(TypeError, match=r"kb\.bayesian\(model\)"):
        model.compile(optimizer=kb.samplers.ATMC(step_size=1e-3, train_size=N), loss=LOSS)
    model.compile(optimizer="sgd", loss=LOSS)  # plain Keras is untouched


def test_a_plain_keras_model_reloads_compiled(tmp_path):
    """The guard wrapped ``keras.Model.compile``, so Keras took every model's
    compile for a custom one and reloaded saved plain models uncompiled, with
    a warning (found by a user of "Your own model")."""
    model = _sequential()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=LOSS)
    x, y = _data()
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "plain.keras")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reloaded = keras.saving.load_model(tmp_path / "plain.keras")
    assert isinstance(reloaded.optimizer, keras.optimizers.Adam)
    assert int(reloaded.optimizer.iterations) == int(model.optimizer.iterations)


@pytest.mark.parametrize("kwargs, says", [
    ({"priors": [kb.priors.Normal()]}, "`priors` must be a dict"),
    ({"priors": "logits"}, "`priors` must be a dict"),
    ({"allow_flat": "no"}, "`allow_flat` must be True or False; got 'no'"),
    ({"kernel_prior": None}, "`kernel_prior` is None, so weight 'hidden/kernel' would get no "
                             "prior"),
    ({"bias_prior": kb.priors.HeNormal(1.0)}, "`bias_prior`: HeNormal needs a weight of rank "
                                              ">= 2; got a weight of shape (8,) (weight "
                                              "'hidden/bias')."),
])
def test_bad_arguments_of_bayesian_are_named(kwargs, says):
    """Found by a user of "Your own model": a list or a string as ``priors`` gave
    Python's dict() errors, ``allow_flat="no"`` meant True, a kernel-only prior
    given as ``bias_prior`` was called "prior of 'hidden/bias'"."""
    with pytest.raises(ValueError) as caught:
        kb.bayesian(_functional(), **kwargs)
    assert says in str(caught.value)


@pytest.mark.parametrize("model", [lambda x: x, np.zeros(3)])
def test_bayesian_names_a_model_that_is_not_keras(model):
    with pytest.raises(ValueError, match="`model` must be a keras.Model"):
        kb.bayesian(model)


def test_a_flat_kernel_prior_is_an_explicit_choice():
    """``kernel_prior=None, allow_flat=True`` raised "pass allow_flat=True to mean it"."""
    bnn = kb.bayesian(_functional(), kernel_prior=None, allow_flat=True)
    assert bnn.flat_prior_weights == ["hidden/kernel", "logits/kernel"]
    with pytest.raises(ValueError, match="`allow_flat_prior` must be True or False"):
        bnn.compile(sampler="atmc", train_size=N, loss=LOSS, allow_flat_prior="no")


@pytest.mark.parametrize("build", [_sequential, _functional])
def test_the_bayesian_model_takes_its_input_as_the_model_did(build):
    """It was built on ``model.inputs`` (a list of one), so every call warned
    "The structure of `inputs` doesn't match the expected structure"."""
    x, _ = _data()
    bnn = kb.bayesian(build())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert bnn(x).shape == (N, 3)
        assert bnn.predict(x, verbose=0).shape == (N, 3)


@pytest.mark.parametrize("build", [_sequential, _functional, "subclassed"])
def test_bayesian_puts_a_prior_on_every_weight_and_samples(tmp_path, build):
    if build == "subclassed":
        keras.utils.set_random_seed(1)
        model = _Subclassed()
        model(np.zeros((1, 4), "float32"))
    else:
        model = build()
    bnn = kb.bayesian(model)
    assert isinstance(bnn, kb.BayesianModel)
    assert all(isinstance(v.regularizer, kb.priors.Prior) for v in bnn.trainable_variables)
    kinds = {v.path: type(v.regularizer).__name__ for v in bnn.trainable_variables}
    assert {k.rsplit("/", 1)[1]: t for k, t in kinds.items()} == {
        **{"kernel": "HeNormal", "bias": "Normal"},
        **({"gamma": "Normal", "beta": "Normal"} if build is _sequential else {})}
    _compile(bnn)
    store = kb.SampleStore(tmp_path / "samples")
    x, y = _data()
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        history = bnn.fit(x, y, batch_size=32, epochs=2, verbose=0,
                          callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert len(store) == 2 and min(history.history["prior"]) > 0
    # The priors are in the layer configs: the store rebuilds them.
    if build != "subclassed":
        rebuilt = store.build_model()
        assert [type(v.regularizer).__name__ for v in rebuilt.trainable_variables] == \
            list(kinds.values())


def test_priors_override_by_path_layer_and_weight_name_and_survive_saving(tmp_path):
    model = _functional()
    bnn = kb.bayesian(model, kernel_prior=kb.priors.Laplace(0.5),
                      priors={"logits/bias": kb.priors.Normal(0, 3.0),
                              "hidden": kb.priors.StudentT(3.0)})
    regs = {v.path: v.regularizer for v in bnn.trainable_variables}
    assert isinstance(regs["logits/kernel"], kb.priors.Laplace)
    assert regs["logits/bias"].stddev == 3.0
    assert isinstance(regs["hidden/kernel"], kb.priors.StudentT)
    assert isinstance(regs["hidden/bias"], kb.priors.StudentT)
    _compile(bnn)
    path = str(tmp_path / "model.keras")
    bnn.save(path)
    loaded = keras.saving.load_model(path)
    assert {v.path: type(v.regularizer).__name__ for v in loaded.trainable_variables} == \
        {k: type(v).__name__ for k, v in regs.items()}
    np.testing.assert_allclose(float(kb.priors.log_prior(loaded)),
                               float(kb.priors.log_prior(bnn)), rtol=1e-6)
    with pytest.raises(ValueError, match="names no weight"):
        kb.bayesian(_functional(), priors={"hiddden": "normal"})
    with pytest.raises(ValueError, match="allow_flat"):
        kb.bayesian(_functional(), priors={"bias": None})


def test_a_bayesian_model_without_priors_warns_unless_flat_is_chosen():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = _compile(kb.BayesianModel(inputs, keras.layers.Dense(3)(inputs)))
    x, y = _data()
    with pytest.warns(kb.MissingPriorWarning, match="dense.*kernel.*bias"):
        model.fit(x, y, epochs=1, verbose=0)
    _compile(model, allow_flat_prior=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        model.fit(x, y, epochs=1, verbose=0)
    flat = kb.bayesian(_functional(), priors={"bias": None}, allow_flat=True)
    _compile(flat)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        flat.fit(x, y, epochs=1, verbose=0)


@pytest.mark.parametrize("how", ["sampler", "optimizer"])
def test_labels_given_to_a_model_without_a_loss_are_refused(how):
    """Without a loss the potential is the prior alone: labels would be ignored."""
    keras.utils.set_random_seed(0)
    model = kb.bayesian(_functional())
    setup = ({"sampler": kb.samplers.SGLD(step_size=1e-4, seed=0)} if how == "sampler"
             else {"optimizer": "sgd"})
    model.compile(train_size=N, **setup)
    x, y = _data()
    with pytest.raises(ValueError, match=r"compile: `loss` must be given .* got None"):
        model.fit(x, y, epochs=1, verbose=0)
    dataset = kb.data.make_dataset(x, y, 32)
    with pytest.raises(ValueError, match=r"`loss` must be given"):
        model.fit(dataset, epochs=1, verbose=0)
    for data in ((x, y), (dataset,)):  # evaluate used to log nll 0 for them
        with pytest.raises(ValueError, match=r"`loss` must be given .* when evaluate has labels"):
            model.evaluate(*data, verbose=0)
    before = [np.array(v) for v in model.trainable_variables]
    history = model.fit(x, epochs=1, batch_size=32, verbose=0)  # the prior, on purpose
    assert history.history["nll"] == [0.0]
    assert any(not np.array_equal(b, np.array(v))
               for b, v in zip(before, model.trainable_variables))


# ------------------------------------------------ finding 7: metrics users read
def test_evaluate_and_validation_report_the_true_mean_nll():
    bnn = _compile(kb.bayesian(_functional()))
    x, y = _data()
    history = bnn.fit(x, y, batch_size=32, epochs=2, verbose=0, validation_data=(x, y))
    expected = float(LOSS(y, bnn(x)))
    result = bnn.evaluate(x, y, verbose=0, return_dict=True)
    assert set(result) == {"loss", "nll"}
    assert result["nll"] == pytest.approx(expected, rel=1e-4)
    assert result["loss"] == result["nll"]
    logs = history.history
    assert logs["val_nll"][-1] == pytest.approx(expected, rel=1e-4)
    assert logs["val_loss"] == logs["val_nll"]
    assert not {"val_prior", "val_step_size", "val_configurational_temperature"} & set(logs)
    # Training logs keep the potential: loss = nll + prior/n.
    np.testing.assert_allclose(logs["loss"], np.add(logs["nll"], np.divide(logs["prior"], N)),
                               rtol=1e-5)


# ------------------------------------- finding 3: collection starts at equilibrium
def _collect(tmp_path, epochs, sampler=None, scale=5.0, **kwargs):
    """SGLD on a small 3-class tanh network (8 steps an epoch), started far out (×scale)."""
    bnn = _compile(kb.bayesian(_functional()),
                   sampler or kb.samplers.SGLD(step_size=5e-3, seed=0))
    bnn.set_weights([scale * w for w in bnn.get_weights()])
    store = kb.SampleStore(tmp_path / "samples")
    collect = kb.callbacks.CollectSamples(store, window=4, **kwargs)
    x, y = _data()
    history = bnn.fit(x, y, batch_size=16, epochs=epochs, verbose=0, callbacks=[collect])
    return collect, store, history.history


def test_collection_starts_when_the_chain_is_stationary(tmp_path):
    collect, store, logs = _collect(tmp_path, epochs=60)
    start = collect.started_epoch
    assert start is not None and start >= 7  # 2w epochs at least
    assert collect.verdict.stationary and "no trend" in collect.verdict.reason
    assert [m["epoch"] for m in store.metadata()] == list(range(start, 60))
    # Before the start the prior term was still moving: −log p(θ) fell from ×5.
    assert logs["prior"][0] > 2 * logs["prior"][start]


def test_a_run_that_ends_before_equilibrium_warns(tmp_path):
    with pytest.warns(kb.callbacks.NotConvergedWarning, match="did not reach equilibrium"):
        collect, store, _ = _collect(tmp_path, epochs=5)
    assert collect.started_epoch is None and len(store) == 0


class _VirialRecorder(keras.callbacks.Callback):
    """Every step's per-variable θ·G (the sampler's ``virial`` slots), read after it."""

    def on_train_batch_end(self, batch, logs=None):
        self.steps = getattr(self, "steps", [])
        self.steps.append([float(v) for v in self.model.optimizer.slots("virial")])


@pytest.mark.parametrize("sampler", ["sgld", "hmc"])
def test_the_warning_names_the_layers_still_leaving_their_initialisation(tmp_path, sampler):
    """Finding 3's "says why": a chain started at ×0.1 of its initialisation
    (weights far inside the posterior's scale) ends before equilibrium; the
    warning gives the largest variables' configurational temperatures over
    the last epoch, each the mean over that epoch's 8 steps of θ·∇U per
    parameter (read back from the per-step values), largest first."""
    recorder = _VirialRecorder()
    chosen = (kb.samplers.SGLD(step_size=5e-3, seed=0) if sampler == "sgld"
              else kb.samplers.HMC(step_size=1e-3, num_leapfrog_steps=2, seed=0))
    bnn = _compile(kb.bayesian(_functional()), chosen)
    bnn.set_weights([0.1 * w for w in bnn.get_weights()])
    collect = kb.callbacks.CollectSamples(kb.SampleStore(tmp_path / "samples"), window=4)
    x, y = _data()
    with pytest.warns(kb.callbacks.NotConvergedWarning) as caught:
        history = bnn.fit(x, y, batch_size=16, epochs=3, verbose=0,
                          callbacks=[collect, recorder])
    sizes = [int(np.prod(v.shape)) for v in bnn.trainable_variables]
    expected = np.mean(recorder.steps[-8:], axis=0) / sizes  # the last epoch's 8 steps
    names = [v.path for v in bnn.trainable_variables]
    got = collect.variable_temperatures
    assert [row[0] for row in got] == names and [row[2] for row in got] == sizes
    np.testing.assert_allclose([row[1] for row in got], expected, rtol=1e-5)
    # Their d-weighted mean is the epoch's logged (overall) configurational temperature.
    overall = sum(t * d for _, t, d in got) / sum(sizes)
    assert overall == pytest.approx(history.history["configurational_temperature"][-1],
                                    rel=1e-4, abs=1e-6)
    message = str(next(w.message for w in caught
                       if issubclass(w.category, kb.callbacks.NotConvergedWarning)))
    largest = sorted(got, key=lambda row: -row[2])
    listed = ", ".join(f"{n} {t:.3g}·T ({d} weights)" for n, t, d in largest[:5])
    assert f"largest variables first: {listed};" in message
    assert expected[np.argmax(sizes)] < 0.5  # the big kernel is far below T = 1


def test_collection_never_starts_during_warm_up(tmp_path):
    # step_size="auto" (keras_bnn/samplers/warmup.py) with 240 warm-up steps
    # = 30 epochs of 8 steps (enough for h to grow from 1e-8 to ~1e-2; the
    # larger target keeps the run short): only epochs that begin after it
    # are tested, so the earliest start is epoch 30 + 2w - 1.
    # The second noise measurement then averages 240 steps (30 epochs) from
    # the first stationary windows on, before anything is collected.
    sampler = kb.samplers.SGLD(seed=0, warmup_steps=240, target_noise_ratio=0.3)
    collect, store, _ = _collect(tmp_path, epochs=110, sampler=sampler, scale=1.0)
    assert kb.callbacks.warmup_steps(sampler) == 240
    remeasured = collect.remeasurement
    assert remeasured["first_epoch"] >= 30 and remeasured["epoch"] - remeasured[
        "first_epoch"] + 1 >= 30
    assert collect.started_epoch >= remeasured["epoch"] >= 30 + 29  # 240 steps from epoch 30
    assert min(m["step"] for m in store.metadata()) >= 240 + 8 * 8


def test_explicit_start_epoch_is_exact(tmp_path):
    collect, store, _ = _collect(tmp_path, epochs=4, start_epoch=2)
    assert [m["epoch"] for m in store.metadata()] == [2, 3]
    with pytest.raises(ValueError, match="start_epoch"):
        kb.callbacks.CollectSamples(store, start_epoch="soon")


@pytest.mark.parametrize("start_epoch, inside", [(0, 2), (1, 1), (2, 0)])
def test_an_explicit_start_inside_the_warm_up_collects_and_says_so(tmp_path, start_epoch,
                                                                   inside):
    """A warm-up of 20 steps, 8 steps an epoch: epochs 0 and 1 end at steps 8
    and 16, inside it (h still being tuned), epoch 2 at step 24, past it. An
    int start is exact, so those samples are taken, and the first one warns."""
    sampler = kb.samplers.SGLD(seed=0, warmup_steps=20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        collect, store, _ = _collect(tmp_path, epochs=4, sampler=sampler, scale=1.0,
                                     start_epoch=start_epoch)
    assert [m["epoch"] for m in store.metadata()] == list(range(start_epoch, 4))
    assert collect.warmup_samples == inside
    warned = [str(w.message) for w in caught if issubclass(w.category, kb.WarmupSampleWarning)]
    assert len(warned) == (1 if inside else 0)
    if inside:
        assert f"epoch {start_epoch} (step {8 * (start_epoch + 1)})" in warned[0]
        assert "first 20 steps" in warned[0] and "start_epoch='auto'" in warned[0]


def test_the_warm_up_samples_are_counted_from_the_store(tmp_path):
    """A run continued after a stop (here: a second ``fit`` with a fresh
    callback on the same store) still reports the 2 warm-up samples the
    first ``fit`` took, and its own sample past the warm-up does not warn."""
    bnn = _compile(kb.bayesian(_functional()),
                   kb.samplers.SGLD(seed=0, warmup_steps=20))
    store = kb.SampleStore(tmp_path / "samples")
    x, y = _data()
    with pytest.warns(kb.WarmupSampleWarning):
        bnn.fit(x, y, batch_size=16, epochs=2, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    again = kb.callbacks.CollectSamples(store, start_epoch=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.WarmupSampleWarning)
        bnn.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[again])
    assert [m["step"] for m in store.metadata()] == [8, 16, 24]
    assert again.warmup_samples == 2


def test_a_run_with_a_burn_in_inside_the_warm_up_reports_it(tmp_path):
    """``keras-bnn train --burn-in-epochs 1`` on 4 steps an epoch: its 2
    samples (steps 8 and 12) lie in the 1000-step warm-up; collection.json says so."""
    config = kb.runs.RunConfig(num_train=200, num_test=40, batch_size=50, epochs=3,
                               burn_in_epochs=1, output_dir=str(tmp_path / "run"))
    with pytest.warns(kb.WarmupSampleWarning, match="first 1000 steps"):
        result = kb.runs.train(config, verbose=0)
    expected = "fixed burn-in of 1 epoch; 2 samples taken during the warm-up (steps up to 1000)"
    assert result.collection["reason"] == expected
    with open(tmp_path / "run" / "collection.json") as handle:
        assert json.load(handle)["reason"] == expected


def test_an_explicit_step_size_has_no_warm_up_to_warn_about(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.WarmupSampleWarning)
        collect, store, _ = _collect(tmp_path, epochs=2, start_epoch=0)
    assert len(store) == 2 and collect.warmup_samples == 0


# ------------------------------------------ finding 4: noise judged at steady state
def _judge(ratios, steps_per_epoch=20, warmup_steps=0, variables=None, averaging_steps=200,
           collection_start=None):
    """Runs the fit's noise check on an epoch series of gradient_noise_ratio
    (and, given ``variables``, a series of per-variable ratios ``{name: r}``),
    for a sampler whose ``noise_averaging_steps()`` is ``averaging_steps``
    (200: 10 epochs of 20 steps), with a ``CollectSamples(start_epoch="auto")``
    that starts at ``collection_start`` if that is given."""
    from keras_bnn.models.fit_callbacks import WarnOnGradientNoise

    optimizer = types.SimpleNamespace(iterations=0,
                                      noise_averaging_steps=lambda: averaging_steps)
    if warmup_steps:
        optimizer.warmup = types.SimpleNamespace(warmup_steps=warmup_steps)
    store = types.SimpleNamespace(append=None, metadata=None, check_model=None)  # never used
    collector = kb.callbacks.CollectSamples(store=store)
    check = WarnOnGradientNoise(kb.samplers.NOISE_RATIO_LIMIT,
                                 [] if collection_start is None else [collector])
    check.set_model(types.SimpleNamespace(optimizer=optimizer))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for epoch, ratio in enumerate(ratios):
            check.on_epoch_begin(epoch)
            if collection_start is not None and epoch >= collection_start:
                collector.start_epoch = collection_start
            optimizer.iterations += steps_per_epoch
            if variables is not None:
                optimizer.gradient_noise_ratios = lambda e=epoch: [
                    (name, r, 1) for name, r in variables[e].items()]
            check.on_epoch_end(epoch, {"gradient_noise_ratio": ratio})
        check.on_train_end()
    return [w for w in caught if issubclass(w.category, kb.GradientNoiseWarning)]


def test_finding_4_the_transient_does_not_warn_but_a_steady_high_ratio_does():
    # Measured: r = 0.15–1.7 in epoch 0 while the chain leaves its
    # initialisation, 0.03–0.08 at steady state.
    assert not _judge([1.7, 0.08, 0.05, 0.04, 0.03, 0.03])
    assert not _judge([1.7, 0.6, 0.2, 0.08, 0.05, 0.04])  # a slower decay
    assert len(_judge([0.3, 0.25, 0.24, 0.26, 0.25])) == 1  # steady above the limit
    assert len(_judge([1.7, 0.9, 0.5, 0.3])) == 1  # the run ended above the limit
    # Nothing is judged during warm-up (step_size="auto").
    assert not _judge([1.7, 0.5, 0.3, 0.05, 0.05], warmup_steps=60)
    assert len(_judge([1.7, 0.5, 0.3, 0.2, 0.2], warmup_steps=60)) == 1


def test_a_one_epoch_excursion_does_not_warn_but_a_sustained_level_does():
    """At steady state the mean over the steady epochs so far is judged (from
    10 of them on): the bias follows the ratio averaged over the samples.
    Measured on breast_cancer (4 steps an epoch): one epoch at 0.196 in a
    chain at 0.03–0.07; on wine, one 10-epoch window of the output layer at
    0.101 in 1 480 steady epochs of a chain that ended at 0.032."""
    steady = [0.05, 0.04, 0.06, 0.05, 0.04, 0.07, 0.05, 0.04]
    assert not _judge(steady + [0.196] + steady + steady)
    assert not _judge(steady * 12 + [0.105] * 10 + steady * 6)
    caught = _judge(steady + [0.15] * 12)
    assert len(caught) == 1
    # Warned once, as soon as the steady-state mean crossed 0.1: it then
    # still holds the 7 steady epochs, so the reported mean is below 0.15.
    message = str(caught[0].message)
    assert "averaged over epochs" in message and "is above 0.1" in message
    mean = float(message.split("gradient_noise_ratio = ")[1].split()[0])
    assert 0.1 < mean < 0.15


def test_the_mean_is_judged_over_the_noise_averaging_steps_and_from_collection_on():
    """r̂ is an exponential average over ~100 steps and the noise wanders
    (wine, after the warm-up: 50-step means of the output kernel 0.007–0.54,
    500-step means 0.055–0.10), so a mean over fewer than
    ``noise_averaging_steps()`` steps is not judged before the run ends:
    measured, a CI run warned on 0.1001 over the first 66 steps of
    collection. With a collector that starts at equilibrium only the
    collected epochs are judged (before, the step factors may still be
    lowered)."""
    steady = [0.05, 0.04, 0.06, 0.05]
    # 12 epochs of 2 steps at 0.11, then steady: 1000 steps judged, mean 0.05.
    ratios = [0.11] * 12 + steady * 130
    assert not _judge(ratios, steps_per_epoch=2, averaging_steps=1000)
    assert len(_judge(ratios, steps_per_epoch=2, averaging_steps=24)) == 1  # the old rule
    # A sustained level is judged once the steps are in, and the message says from where.
    caught = _judge(steady + [0.2] * 600, steps_per_epoch=2, averaging_steps=1000)
    assert len(caught) == 1 and "averaged over epochs 2–501" in str(caught[0].message)
    # Burn-in above the limit, collection from epoch 30 at 0.05: no warning ...
    assert not _judge([0.3] * 30 + steady * 10, collection_start=30)
    # ... and collected epochs above it warn, judged from the collection's start.
    caught = _judge([0.05] * 30 + [0.3] * 12, collection_start=30)
    assert len(caught) == 1 and "averaged over epochs 30–39" in str(caught[0].message)
    # A run whose collection never started has no samples to bias (its
    # NotConvergedWarning says why); without a collector its last epoch is judged.
    assert not _judge([0.3] * 20, collection_start=100)
    caught = _judge([0.3] * 20)
    assert len(caught) == 1 and "averaged over epochs 1–10" in str(caught[0].message)


def test_a_noisy_variable_warns_when_the_overall_ratio_does_not():
    """Measured with one step for every variable (wine, 2×100 MLP): the first
    layer at r = 0.47 under an overall 0.07. The 10-epoch window mean of each
    variable is judged like the overall one, and the warning names it."""
    steady = {"dense_0/kernel": 0.47, "dense_1/kernel": 0.012}
    caught = _judge([0.07] * 12, variables=[steady] * 12)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "gradient_noise_ratio of dense_0/kernel = 0.47 averaged over epochs 1–10" in message
    assert "dense_1/kernel" not in message and "all variables together: 0.07" in message
    # One epoch of one variable above the limit is an excursion (window mean 0.095).
    excursion = [{"a": 0.05}] * 9 + [{"a": 0.5}] + [{"a": 0.05}] * 10
    assert not _judge([0.05] * 20, variables=excursion)


def test_a_real_fit_names_the_noisy_variable():
    """Linear regression with 100 tiny features: the kernel's minibatch noise
    is ~1e-4 of the bias's, so at h = 1e-5 the bias runs at r = 1.6 and the
    overall ratio, carried by the 100 kernel weights, at 0.015. At h = 1e-7
    the bias is at r ≈ 0.016: no warning."""
    rng = np.random.default_rng(0)
    x = (0.01 * rng.normal(size=(1000, 100))).astype("float32")
    y = (rng.normal(size=(1000, 1)) + 3.0).astype("float32")

    def fit(step_size):
        keras.utils.set_random_seed(0)
        inputs = keras.Input((100,))
        model = kb.BayesianModel(inputs, kb.layers.Dense(
            1, kernel_prior=kb.priors.Normal(1.0), bias_prior=kb.priors.Normal(10.0),
            name="linear")(inputs))
        model.compile(sampler=kb.samplers.SGLD(step_size=step_size, seed=0), train_size=1000,
                      loss=keras.losses.MeanSquaredError())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = model.fit(x, y, batch_size=10, epochs=12, verbose=0).history
        return history, [str(w.message) for w in caught
                         if issubclass(w.category, kb.GradientNoiseWarning)]

    history, caught = fit(1e-5)
    assert history["gradient_noise_ratio"][-1] < kb.samplers.NOISE_RATIO_LIMIT
    assert len(caught) == 1 and "gradient_noise_ratio of linear/bias = " in caught[0]
    assert "linear/kernel" not in caught[0]
    _, caught = fit(1e-7)
    assert not caught


# ------------------------------------------- #21 items 7 and 9: checked arguments
def test_labels_are_checked_for_every_likelihood_before_the_first_step():
    x, y3 = _data(classes=3)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    binary = kb.BayesianModel(inputs, kb.layers.Dense(1)(inputs))
    binary.compile(sampler=kb.samplers.SGLD(1e-4), train_size=N,
                   loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="`y` must be 0 or 1 for a Bernoulli likelihood"):
        binary.fit(x, y3, epochs=1, verbose=0)
    dataset = __import__("tensorflow").data.Dataset.from_tensor_slices((x, y3)).batch(32)
    with pytest.raises(ValueError, match="0 or 1"):
        binary.fit(dataset, epochs=1, verbose=0)
    assert binary.optimizer.iterations == 0
    gaussian = kb.BayesianModel(inputs, kb.layers.Dense(2)(inputs))
    gaussian.compile(sampler=kb.samplers.SGLD(1e-4), train_size=N,
                     loss=kb.likelihoods.GaussianNLL())
    with pytest.raises(ValueError, match="finite"):
        gaussian.fit(x, np.where(y3 == 2, np.nan, y3).astype("float32"), epochs=1, verbose=0)
    categorical = _compile(kb.bayesian(_functional()))
    with pytest.raises(ValueError, match=r"class indices in \[0, 2\]"):
        categorical.fit(x, y3 + 1, epochs=1, verbose=0)


@pytest.mark.parametrize("train_size", [1.5, 0, -3, "10", True])
def test_train_size_must_be_an_integer(train_size):
    inputs = keras.Input((4,))
    model = kb.BayesianModel(inputs, kb.layers.Dense(3)(inputs))
    with pytest.raises(ValueError, match="`train_size` must be an integer >= 1"):
        model.compile(sampler="sgld", train_size=train_size, loss=LOSS)


# --------------------------------------------------------------- JAX backend
@pytest.mark.slow  # a JAX process: 19 s
def test_the_same_under_jax(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("jax")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    worker = Path(__file__).parent / "workers" / "jax_bayesian_check.py"
    done = subprocess.run([sys.executable, str(worker), str(tmp_path)], capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    assert result["guard"] and result["labels"]
    assert result["val_nll"] == pytest.approx(result["direct"], rel=1e-4)
    assert result["val_loss"] == result["val_nll"]
    assert result["evaluate"] == {"loss": pytest.approx(result["direct"], rel=1e-4),
                                  "nll": pytest.approx(result["direct"], rel=1e-4)}
    assert result["stationary"] and result["started"] >= 7
    assert result["samples"] == 30 - result["started"]


def test_a_bias_of_rank_two_gets_the_bias_prior():
    """A GRU's bias (2, 3·units) and an attention head's (heads, dim) have
    rank 2: they used to get kernel_prior, and bias_prior= never reached them."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 4))
    h = keras.layers.GRU(3, return_sequences=True, name="gru")(inputs)
    h = keras.layers.MultiHeadAttention(2, 2, name="mha")(h, h)
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.Flatten()(h)))
    bias_prior = kb.priors.Laplace(0.7)
    kb.bayesian(model, bias_prior=bias_prior)
    biases = [v for v in model.trainable_variables if v.name == "bias"]
    assert {v.path for v in biases if len(v.shape) == 2} >= {"gru/gru_cell/bias",
                                                             "mha/query/bias"}
    assert all(v.regularizer is bias_prior for v in biases)
    assert isinstance(next(v for v in model.trainable_variables
                           if v.path == "gru/gru_cell/kernel").regularizer, kb.priors.HeNormal)


def test_an_activity_regularizer_is_removed_with_a_warning():
    """An output penalty depends on the data: it was summed into -log p(θ)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(3, activity_regularizer="l2", name="d")])
    with pytest.warns(UserWarning, match=r"removed the activity regularizers of layers \['d'\]"):
        bnn = kb.bayesian(model)
    assert model.get_layer("d").activity_regularizer is None
    bnn(np.ones((2, 4), "float32"))
    assert len(bnn.losses) == 2  # the kernel's and the bias's priors, nothing else


def test_the_ensemble_names_what_it_cannot_take():
    keras.utils.set_random_seed(0)
    a = keras.Input((4,))
    two = kb.bayesian(keras.Model(a, [keras.layers.Dense(3)(a), keras.layers.Dense(3)(a)]))
    # Several outputs are taken since 2026-11-29, each under its own likelihood
    # (tests/test_ensemble_multi_output.py).
    assert list(kb.PosteriorEnsemble(two, [two.get_weights()]).likelihood.values()) == [
        "categorical", "categorical"]
    # Variable-length inputs and per-timestep outputs are taken since 2026-11-29
    # (tests/test_ensemble_sequences.py); an output without a class axis is not.
    features = keras.Input((4,))
    scalar = kb.bayesian(keras.Model(features, keras.layers.Lambda(
        lambda t: keras.ops.sum(t, axis=-1))(keras.layers.Dense(3)(features))))
    with pytest.raises(ValueError, match=r"must output a \[batch, \.\.\., units\] tensor"):
        kb.PosteriorEnsemble(scalar, [scalar.get_weights()])


def test_a_model_the_ensemble_refuses_is_named_when_fit_starts(tmp_path):
    """Found by a user of the Python API: a two-input model trained a whole
    run into its store, and only ``PosteriorEnsemble.from_store`` said it
    takes one input (it takes several inputs, and several outputs, since
    2026-11-29; an output without a class axis here). ``CollectSamples`` now
    says so, with the ensemble's words, before the first epoch; a warning, not
    an error: the samples are stored and read back all the same."""
    keras.utils.set_random_seed(0)
    a = keras.Input((4,))
    scalar = kb.bayesian(keras.Model(a, keras.layers.Reshape(())(keras.layers.Dense(1)(a))))
    scalar.compile(sampler=kb.samplers.SGLD(step_size=1e-4, seed=0), train_size=N, loss="mse")
    inputs, y = _data()
    store = kb.SampleStore(tmp_path / "samples")
    epochs = []
    seen = keras.callbacks.LambdaCallback(on_epoch_begin=lambda epoch, logs: epochs.append(epoch))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NoEnsembleWarning)  # raised where it is issued
        with pytest.raises(kb.NoEnsembleWarning) as warned:
            scalar.fit(inputs, y, batch_size=32, epochs=2, verbose=0,
                    callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0), seen])
    assert epochs == [] and len(store) == 0  # at fit's start: nothing trained, nothing stored
    with pytest.raises(ValueError) as refused:
        kb.PosteriorEnsemble(scalar, [scalar.get_weights()])
    assert str(refused.value) in str(warned.value)
    assert "must output a [batch, ..., units] tensor" in str(refused.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        scalar.fit(inputs, y, batch_size=32, epochs=2, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert sum(issubclass(w.category, kb.NoEnsembleWarning) for w in caught) == 1
    assert len(store) == 2
    rebuilt = store.build_model()
    rebuilt.set_weights(store[1].weights)
    np.testing.assert_allclose(rebuilt.predict(inputs, verbose=0),
                               scalar.predict(inputs, verbose=0),
                               atol=1e-6)


def test_a_sequential_s_weight_is_named_by_its_layer_and_its_own_name():
    """Inside a Sequential a weight's path is "seqnet/d2/bias": the README's
    "layer/weight" key ("hidden/bias") matched nothing there and raised."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, name="d1"),
                              keras.layers.Dense(3, name="d2")], name="seqnet")
    laplace = kb.priors.Laplace(1.0)
    bnn = kb.bayesian(model, priors={"d2/bias": laplace})
    paths = {v.path: v.regularizer for v in bnn.trainable_variables}
    assert paths["seqnet/d2/bias"] is laplace
    assert paths["seqnet/d1/bias"] is not laplace


def _seqnet(how):
    """The Sequential "seqnet" (Dense d1, Dense d2 on 4 features), given an
    ``Input``, built by ``build`` or built by a call on a batch of 2."""
    keras.utils.set_random_seed(0)
    layers = [keras.layers.Dense(8, activation="tanh", name="d1"), keras.layers.Dense(3, name="d2")]
    model = keras.Sequential(([keras.Input((4,))] if how == "input" else []) + layers,
                             name="seqnet")
    if how == "build":
        model.build((None, 4))
    elif how == "call":
        model(np.zeros((2, 4), "float32"))
    return model


def _regularizers(model):
    """``{layer name/weight name: (prior class, config)}`` of a model's trainable weights."""
    return {v.path.split("/", 1)[1] if v.path.startswith("seqnet/") else v.path:
            (type(v.regularizer).__name__, v.regularizer.get_config())
            for v in model.trainable_variables}


@pytest.mark.parametrize("how", ["input", "build", "call"])
def test_a_sequential_becomes_a_graph_of_its_own_layers(tmp_path, how):
    """It was wrapped as one layer: ``layers`` were ['input_layer_1', 'seqnet'],
    ``get_layer("d1")`` raised and ``summary()`` showed one layer. The batch
    size of a Sequential built by a call (2) is kept, as Keras records it in
    ``model.inputs`` (and ``keras.models.clone_model`` keeps it); Keras does
    not hold a functional model to it, so ``fit`` takes batches of 32."""
    model = _seqnet(how)
    laplace = kb.priors.Laplace(0.5)
    bnn = kb.bayesian(model, priors={"seqnet/d1/kernel": laplace, "d2/bias": "normal"})
    assert [layer.name for layer in bnn.layers[1:]] == ["d1", "d2"]
    assert bnn.get_layer("d1") is model.get_layer("d1")
    assert len(bnn.trainable_variables) == 4
    assert all(a is b for a, b in zip(bnn.trainable_variables, model.trainable_variables))
    assert tuple(bnn.inputs[0].shape) == (2 if how == "call" else None, 4)
    assert bnn.inputs[0].dtype == "float32"
    assert bnn.get_layer("d1").kernel.regularizer is laplace
    x, y = _data()
    np.testing.assert_allclose(bnn(x), model(x), rtol=1e-6)
    bnn.compile(sampler=kb.samplers.ATMC(step_size=1e-3, train_size=N, seed=0), loss=LOSS,
                train_size=N)
    store = kb.SampleStore(tmp_path / "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MissingPriorWarning)
        bnn.fit(x, y, batch_size=32, epochs=2, verbose=0,
                callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert len(store) == 2
    priors = _regularizers(bnn)
    assert priors["d1/kernel"] == ("Laplace", laplace.get_config())
    rebuilt = store.build_model()
    assert [layer.name for layer in rebuilt.layers[1:]] == ["d1", "d2"]
    assert _regularizers(rebuilt) == priors
    bnn.save(tmp_path / "seqnet.keras")
    loaded = keras.saving.load_model(tmp_path / "seqnet.keras")
    assert [layer.name for layer in loaded.layers[1:]] == ["d1", "d2"]
    assert _regularizers(loaded) == priors
    np.testing.assert_allclose(float(kb.priors.log_prior(loaded)),
                               float(kb.priors.log_prior(bnn)), rtol=1e-6)
    np.testing.assert_allclose(loaded(x), bnn(x), rtol=1e-6)


def test_a_sequential_keeps_the_batch_size_of_its_input(tmp_path):
    """``keras.Input(..., batch_size=8)`` (a stateful LSTM's) was dropped: the
    BayesianModel's input was (None, 5, 3)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5, 3), batch_size=8),
                              keras.layers.LSTM(4, stateful=True, name="lstm"),
                              keras.layers.Dense(2, name="d")], name="stateful")
    bnn = kb.bayesian(model)
    assert tuple(bnn.inputs[0].shape) == (8, 5, 3)
    assert bnn.get_layer("lstm") is model.get_layer("lstm")
    x = np.random.default_rng(0).normal(size=(8, 5, 3)).astype("float32")
    first = keras.ops.convert_to_numpy(bnn(x))
    assert not np.allclose(keras.ops.convert_to_numpy(bnn(x)), first)  # the state carries on
    bnn.save(tmp_path / "stateful.keras")
    assert tuple(keras.saving.load_model(tmp_path / "stateful.keras").inputs[0].shape) == \
        (8, 5, 3)


class _NeedsBatchSize(keras.layers.Layer):
    """Builds only with a known batch size: ``Sequential.build`` on an ``Input``
    of batch None gives up on it (NotImplementedError) and leaves no graph."""

    def build(self, input_shape):
        if input_shape[0] is None:
            raise NotImplementedError("needs a batch size")
        self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")

    def call(self, inputs):
        return inputs * self.w

    def compute_output_shape(self, input_shape):
        return input_shape


class _NoOutputShape(keras.layers.Layer):
    def call(self, inputs):
        return inputs * 2.0

    def compute_output_shape(self, input_shape):
        raise NotImplementedError("no output shape")


def test_a_sequential_keras_cannot_trace_is_one_layer_with_a_warning():
    """Such a Sequential was wrapped as one layer silently (``get_layer("d1")``
    raised), or Keras's NotImplementedError / "Cannot convert" came out."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, name="d1"),
                              _NeedsBatchSize(name="nb"), keras.layers.Dense(3, name="d2")],
                             name="seqnet")
    x, _ = _data()
    expected = keras.ops.convert_to_numpy(model(x))  # builds "nb" on the data
    laplace = kb.priors.Laplace(1.0)
    with pytest.warns(kb.SequentialAsOneLayerWarning, match=r"Sequential 'seqnet' .* one layer "
                      r".*bnn\.get_layer\('seqnet'\)\.get_layer\(name\)"):
        bnn = kb.bayesian(model, priors={"d1/kernel": laplace})
    assert [layer.name for layer in bnn.layers[1:]] == ["seqnet"]
    assert bnn.get_layer("seqnet").get_layer("d1").kernel.regularizer is laplace
    np.testing.assert_allclose(keras.ops.convert_to_numpy(bnn(x)), expected, rtol=1e-6)
    untraceable = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, name="d1"),
                                    _NoOutputShape(name="odd")], name="odd_net")
    with pytest.raises(ValueError, match=r"bayesian: Keras could not trace the Sequential "
                       r"'odd_net' .* write it as a functional model.*no output shape"):
        kb.bayesian(untraceable)
    two_inputs = keras.Sequential([keras.layers.Concatenate(), keras.layers.Dense(3)],
                                  name="two")
    two_inputs([np.zeros((2, 4), "float32"), np.zeros((2, 3), "float32")])
    with pytest.raises(ValueError, match=r"'two', which has no graph, .* not one shape .*"
                       r"\[\(2, 4\), \(2, 3\)\]\); pass `input_shape=`"):
        kb.bayesian(two_inputs)


def test_a_sequential_inside_a_sequential_is_one_of_its_layers(tmp_path):
    keras.utils.set_random_seed(0)
    inner = keras.Sequential([keras.layers.Dense(8, activation="tanh", name="d1"),
                              keras.layers.LayerNormalization(name="norm")], name="inner")
    model = keras.Sequential([keras.Input((4,)), inner, keras.layers.Dense(3, name="d2")],
                             name="outer")
    bnn = kb.bayesian(model, priors={"d1/kernel": kb.priors.Laplace(0.5)})
    assert [layer.name for layer in bnn.layers[1:]] == ["inner", "d2"]
    assert bnn.get_layer("inner") is inner
    assert all(a is b for a, b in zip(bnn.trainable_variables, model.trainable_variables))
    kinds = {v.path: type(v.regularizer).__name__ for v in bnn.trainable_variables}
    assert kinds == {"outer/inner/d1/kernel": "Laplace", "outer/inner/d1/bias": "Normal",
                     "outer/inner/norm/gamma": "Normal", "outer/inner/norm/beta": "Normal",
                     "outer/d2/kernel": "HeNormal", "outer/d2/bias": "Normal"}
    x, y = _data()
    _compile(bnn, kb.samplers.ATMC(step_size=1e-3, train_size=N, seed=0))
    bnn.fit(x, y, batch_size=32, epochs=1, verbose=0)
    bnn.save(tmp_path / "outer.keras")
    loaded = keras.saving.load_model(tmp_path / "outer.keras")
    assert [type(v.regularizer).__name__ for v in loaded.trainable_variables] == \
        list(kinds.values())
    np.testing.assert_allclose(float(kb.priors.log_prior(loaded)),
                               float(kb.priors.log_prior(bnn)), rtol=1e-6)


def _attention():
    """Tokens (5, 16) → MultiHeadAttention(4 heads of 8) → Flatten → Dense(3)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 16))
    h = keras.layers.MultiHeadAttention(4, 8, name="mha")(inputs, inputs)
    outputs = keras.layers.Dense(3, name="logits")(keras.layers.Flatten()(h))
    return keras.Model(inputs, outputs)


def _prior_of(model, path):
    return next(v.regularizer for v in model.trainable_variables if v.path == path)


def _normal_log_prob(prior, shape, sigma):
    """``(prior.log_prob(w), log N(w; 0, σ²))`` on a random ``w`` of ``shape``."""
    w = np.random.default_rng(0).normal(size=shape).astype("float32")
    got = float(keras.ops.convert_to_numpy(prior.log_prob(keras.ops.convert_to_tensor(w))))
    return got, float(np.sum(-0.5 * (w / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)))


@pytest.mark.parametrize("make, rule", [
    (lambda: kb.priors.HeNormal(1.5), lambda fan_in, fan_out: 1.5 * np.sqrt(2 / fan_in)),
    (lambda: kb.priors.GlorotNormal(0.7),
     lambda fan_in, fan_out: 0.7 * np.sqrt(2 / (fan_in + fan_out))),
], ids=["HeNormal", "GlorotNormal"])
def test_attention_projections_get_the_fan_in_of_their_equation(make, rule):
    """A query/key/value kernel (16, 4, 8) of "abc,cde->abde" sums over its
    16 inputs (d_model), not 16·4: He's σ was sqrt(4) too tight. The output
    kernel (4, 8, 16) sums over 4·8 (right for He, but Glorot read a fan-out
    of 4·16 for 16). The prior passed in is not changed: copies are attached."""
    model, prior = _attention(), make()
    config = prior.get_config()
    kb.bayesian(model, kernel_prior=prior)
    assert prior.get_config() == config and "fan_in" not in config
    glorot = isinstance(prior, kb.priors.GlorotNormal)
    for name in ("query", "key", "value"):
        attached = _prior_of(model, f"mha/{name}/kernel")
        assert attached is not prior and attached.get_config() == {
            **config, "fan_in": 16, **({"fan_out": 32} if glorot else {})}
        got, expected = _normal_log_prob(attached, (16, 4, 8), rule(16, 32))
        assert got == pytest.approx(expected, rel=1e-5)
    output = _prior_of(model, "mha/attention_output/kernel")
    got, expected = _normal_log_prob(output, (4, 8, 16), rule(32, 16))
    assert got == pytest.approx(expected, rel=1e-5)
    assert (output is prior) is not glorot
    assert _prior_of(model, "logits/kernel") is prior  # a Dense kernel: its shape's rule


def test_a_fan_in_given_to_an_attention_prior_is_kept():
    model = _attention()
    heavy, given = kb.priors.HeStudentT(3.0, 0.5), kb.priors.HeNormal(1.0, fan_in=7)
    kb.bayesian(model, kernel_prior=heavy, priors={"mha/key/kernel": given})
    assert _prior_of(model, "mha/key/kernel") is given
    query = _prior_of(model, "mha/query/kernel")
    assert type(query) is kb.priors.HeStudentT and query.get_config() == {
        "df": 3.0, "scale": 0.5, "fan_in": 16}
    assert _prior_of(model, "mha/attention_output/kernel") is heavy


def test_a_saved_attention_model_keeps_its_fan_in(tmp_path):
    """An EinsumDense's config records its prior with the fan_in; a
    MultiHeadAttention's projections, which its config does not record, are
    given theirs by the model's config (they used to be lost), and
    ``kb.bayesian`` on the reloaded model gives them the same again."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 16))
    h = keras.layers.MultiHeadAttention(4, 8, name="mha")(inputs, inputs)
    h = keras.layers.EinsumDense("abc,cde->abde", output_shape=(5, 2, 3), name="heads")(h)
    model = keras.Model(inputs, keras.layers.Dense(3, name="logits")(keras.layers.Flatten()(h)))
    bnn = kb.bayesian(model)
    assert _prior_of(bnn, "heads/kernel").get_config() == {"scale": 1.0, "fan_in": 16}
    bnn.save(tmp_path / "attention.keras")
    loaded = keras.saving.load_model(tmp_path / "attention.keras")
    assert _prior_of(loaded, "heads/kernel").get_config() == {"scale": 1.0, "fan_in": 16}
    assert _regularizers(loaded) == _regularizers(bnn)
    again = kb.bayesian(loaded)
    assert {v.path: v.regularizer.get_config() for v in again.trainable_variables} == \
        {v.path: v.regularizer.get_config() for v in bnn.trainable_variables}
    np.testing.assert_allclose(float(kb.priors.log_prior(again)),
                               float(kb.priors.log_prior(bnn)), rtol=1e-6)


def _kb_layers_model():
    """kb.layers (a Dense, a weight-normalised Dense, an LSTM) and a plain Dense."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4, 6))
    h = kb.layers.LSTM(5, name="lstm", return_sequences=True)(inputs)
    h = kb.layers.Dense(8, activation="relu", name="d")(keras.layers.Flatten()(h))
    h = kb.layers.WeightNormDense(8, name="wn")(h)
    return keras.Model(inputs, keras.layers.Dense(3, name="plain")(h))


def test_a_prior_given_to_a_kb_layer_s_weight_survives_saving(tmp_path):
    """A ``kb.layers`` layer records its priors as its ``*_prior`` arguments:
    ``kb.bayesian`` sets those too, so a reload keeps the priors it gave
    (it used to give the layer's own defaults back, without a warning)."""
    bnn = kb.bayesian(_kb_layers_model(), priors={
        "d": kb.priors.Laplace(1.0), "wn/scale": kb.priors.Normal(0.0, 2.0),
        "lstm/lstm_cell/recurrent_kernel": kb.priors.Laplace(2.0),  # the LSTM's cell's
        "plain": kb.priors.Normal(0.0, 0.5)})
    given = _regularizers(bnn)
    assert given["d/kernel"][0] == given["d/bias"][0] == "Laplace"
    assert given["wn/scale"] == ("Normal", {"mean": 0.0, "stddev": 2.0})
    assert given["lstm/lstm_cell/recurrent_kernel"] == ("Laplace", {"scale": 2.0, "loc": 0.0})
    bnn.save(tmp_path / "model.keras")
    loaded = keras.saving.load_model(tmp_path / "model.keras")
    assert _regularizers(loaded) == given
    np.testing.assert_allclose(float(kb.priors.log_prior(loaded)),
                               float(kb.priors.log_prior(bnn)), rtol=1e-6)


def _block_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8, 8, 4))
    h = kb.layers.ResNetPPBlock(4, name="blk")(inputs)
    h = keras.layers.GlobalAveragePooling2D()(h)
    return keras.Model(inputs, keras.layers.Dense(3, name="head")(h))


def test_a_block_records_a_prior_given_to_all_its_weights_and_one_given_to_some(tmp_path):
    """A ``ResNetPPBlock`` passes one prior of each kind to its convolutions:
    a prior given to all of them (by the block's name) is recorded as the
    block's; one given to a single convolution used to hold in memory only
    (a reload gave it the block's, with a warning): the model's config
    records it now, and the reload keeps it."""
    normal = kb.priors.Normal(0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        whole = kb.bayesian(_block_model(), priors={"blk": normal})
        one = kb.bayesian(_block_model(), priors={"blk/conv1/direction": normal})
    whole.save(tmp_path / "whole.keras")
    assert _regularizers(keras.saving.load_model(tmp_path / "whole.keras")) == \
        _regularizers(whole)
    assert _regularizers(one)["blk/conv1/direction"] == ("Normal", {"mean": 0.0, "stddev": 1.0})
    one.save(tmp_path / "one.keras")
    assert _regularizers(keras.saving.load_model(tmp_path / "one.keras")) == _regularizers(one)


def test_an_enclosing_layer_s_name_is_a_priors_key():
    """``"lstm/recurrent_kernel"`` names the weight of the LSTM's cell and
    ``"blk"`` every weight of a block (they used to match no weight)."""
    bnn = kb.bayesian(_block_model(), priors={"blk": kb.priors.Laplace(3.0)})
    assert {path for path, (name, _) in _regularizers(bnn).items() if name == "Laplace"} == \
        {v.path for v in bnn.get_layer("blk").trainable_variables}
    bnn = kb.bayesian(_kb_layers_model(), priors={"lstm/recurrent_kernel": "laplace"})
    assert {path for path, (name, _) in _regularizers(bnn).items() if name == "Laplace"} == \
        {"lstm/lstm_cell/recurrent_kernel"}


def test_a_prior_shared_by_two_arguments_is_checked_as_each():
    """One instance given as kernel and bias prior: the error names the
    argument whose weight it does not fit (it used to name kernel_prior)."""
    prior = kb.priors.HeNormal()
    with pytest.raises(ValueError, match="`bias_prior`: HeNormal needs a weight of rank"):
        kb.layers.Dense(3, kernel_prior=prior, bias_prior=prior).build((None, 4))


def _penalties(model):
    return ([v.regularizer for v in model.trainable_variables],
            [(layer.name, getattr(layer, "kernel_regularizer", None),
              getattr(layer, "activity_regularizer", None)) for layer in model.layers])


@pytest.mark.parametrize("failure", ["unknown_key", "bad_shape", "no_input_shape"])
def test_a_failed_call_leaves_the_model_as_it_was(failure):
    """A ``bayesian`` that raised used to leave the priors it had set by then on the
    caller's model (and its L2 and activity regularizers removed): a retry read them
    as the weights' own priors, and plain Keras training of that model was penalised."""
    keras.utils.set_random_seed(0)
    if failure == "no_input_shape":  # Keras built no graph, and has two input shapes
        model = keras.Sequential([keras.layers.Concatenate(), keras.layers.Dense(
            3, kernel_regularizer="l2", name="d")], name="two")
        model([np.zeros((2, 4), "float32"), np.zeros((2, 3), "float32")])
        arguments = {}
    else:
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(
            8, kernel_regularizer="l2", activity_regularizer="l1", name="d1"),
            keras.layers.Dense(3, name="d2")])
        arguments = {"priors": {"no_such_layer": kb.priors.Normal(1.0)}
                     if failure == "unknown_key" else {"d2/bias": kb.priors.GroupLaplace(axis=1)}}
    before = _penalties(model)
    with pytest.raises(ValueError, match="bayesian: "):
        kb.bayesian(model, **arguments)
    after = _penalties(model)
    assert [id(r) for r in after[0]] == [id(r) for r in before[0]]
    assert [(name, id(k), id(a)) for name, k, a in after[1]] == [
        (name, id(k), id(a)) for name, k, a in before[1]]


def test_metrics_read_the_head_the_model_outputs():
    """A Bernoulli model's metrics=["accuracy"] became Keras' BinaryAccuracy at
    threshold 0.5, applied to the logit: on breast_cancer it logged 0.970 where
    the accuracy was 0.982 (f > 0.5 is p > 0.62), and AUC() (of probabilities)
    0.987 for 0.995, with no error. The accuracy now thresholds the logit at 0;
    a metric configured for probabilities is refused, naming `metrics`, as are
    Keras' own metrics on a Gaussian head ("mae" compared y with [μ, log σ²])."""
    x, y = _data()
    y = (y == 1).astype("float32")
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    shifted = keras.initializers.Constant(0.3)  # logits near 0.5 as well as near 0
    bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(1, bias_initializer=shifted)(inputs)))
    binary = keras.losses.BinaryCrossentropy(from_logits=True)
    for metrics in ([keras.metrics.AUC()], {"dense": [keras.metrics.BinaryAccuracy()]},
                    ["accuracy", keras.metrics.BinaryCrossentropy()]):
        with pytest.raises(ValueError, match=r"BayesianModel.compile: `metrics` must read "
                                             r"logits, .*of probabilities"):
            bnn.compile(sampler="sgld", train_size=N, loss=binary, metrics=metrics)
    bnn.compile(sampler="sgld", train_size=N, loss=binary,
                metrics=["accuracy", keras.metrics.AUC(from_logits=True)],
                weighted_metrics=["binary_accuracy"])
    logits = keras.ops.convert_to_numpy(bnn(x))[:, 0]
    assert np.mean((logits > 0) != (logits > 0.5)) > 0.05  # the two thresholds disagree here
    scores = bnn.evaluate(x, y, verbose=0, return_dict=True)
    assert scores["accuracy"] == pytest.approx(np.mean((logits > 0) == y))
    assert scores["binary_accuracy"] == pytest.approx(np.mean((logits > 0) == y))
    inputs = keras.Input((4,))
    regression = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
    for metric in ("mae", keras.metrics.RootMeanSquaredError()):
        with pytest.raises(ValueError, match=r"`metrics` must score the Gaussian head's "
                                             r"\[mean, log variance\] output"):
            regression.compile(sampler="sgld", train_size=N, loss=kb.likelihoods.GaussianNLL(),
                               metrics=[metric])

    def mean_error(y_true, y_pred):  # one of the user's own, which knows the head
        return keras.ops.abs(y_true[:, 0] - y_pred[:, 0])

    regression.compile(sampler="sgld", train_size=N, loss=kb.likelihoods.GaussianNLL(),
                       metrics=[mean_error])
    categorical = _compile(kb.bayesian(_functional()), metrics=["accuracy"])
    logits = keras.ops.convert_to_numpy(categorical(x))
    assert categorical.evaluate(x, _data()[1], verbose=0, return_dict=True)[
        "accuracy"] == pytest.approx(np.mean(logits.argmax(1) == _data()[1]))


def test_a_multi_output_model_is_checked_output_by_output():
    """A two-head model could not be compiled: the logit check read the list or dict
    of losses as one (``loss` must take logits ... got 'None'``) even with
    from_logits=True on both. Each output's loss, output layer and metrics are now
    checked as a one-output model's: nll is the sum of the heads' NLLs."""
    x, y = _data()
    binary = (y == 1).astype("float32")
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="tanh")(inputs)
    bnn = kb.bayesian(keras.Model(inputs, [keras.layers.Dense(3, name="cls")(hidden),
                                           keras.layers.Dense(1, name="bin")(hidden)]))
    losses = [LOSS, keras.losses.BinaryCrossentropy(from_logits=True)]
    with pytest.raises(ValueError, match=r"`loss` must take logits.*BinaryCrossentropy"):
        bnn.compile(sampler="sgld", train_size=N,
                    loss=[LOSS, keras.losses.BinaryCrossentropy()])
    for loss, metrics, labels in (
            (losses, [["accuracy"], ["accuracy"]], (y, binary)),
            (dict(zip(("cls", "bin"), losses)), {"cls": ["accuracy"], "bin": ["accuracy"]},
             {"cls": y, "bin": binary})):
        bnn.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N, loss=loss,
                    metrics=metrics)
        history = bnn.fit(x, labels, batch_size=N, epochs=1, verbose=0).history
        assert history["nll"][0] == pytest.approx(
            history["cls_loss"][0] + history["bin_loss"][0], rel=1e-5)
        scores = bnn.evaluate(x, labels, verbose=0, return_dict=True)
        logits = keras.ops.convert_to_numpy(bnn(x)[1])[:, 0]
        assert scores["bin_accuracy"] == pytest.approx(np.mean((logits > 0) == binary))
    squashed = keras.Model(inputs, [keras.layers.Dense(3, name="c2")(hidden), keras.layers.Dense(
        1, activation="sigmoid", name="b2")(hidden)])
    with pytest.raises(ValueError, match=r"`model` must output logits.*'b2' with activation "
                                         r"'sigmoid'"):
        kb.bayesian(squashed).compile(sampler="sgld", train_size=N, loss=losses)
