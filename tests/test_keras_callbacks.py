"""Keras' stock callbacks with a sampled model: they work, or they are refused by name."""

import os
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

SAMPLERS = {
    "atmc": lambda: kb.samplers.ATMC(warmup_steps=4),
    "sghmc": lambda: kb.samplers.SGHMC(warmup_steps=4),
    "sgld": lambda: kb.samplers.SGLD(warmup_steps=4),
    "sgnht": lambda: kb.samplers.SGNHT(warmup_steps=4),
    "hmc": lambda: kb.samplers.HMC(step_size=0.01, num_leapfrog_steps=2,
                                    num_adaptation_steps=3),
}


#: Every sampler, SGLD and HMC in the default suite, the others in the slow one (its 20 minutes).
EVERY_SAMPLER = [name if name in ("sgld", "hmc") else pytest.param(name, marks=pytest.mark.slow)
                 for name in SAMPLERS]


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def _model(sampler):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="out")(inputs)))
    model.compile(sampler=SAMPLERS[sampler](), train_size=32,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(model, epochs, callbacks=()):
    x, y = _data()
    full = isinstance(model.optimizer, kb.samplers.HMC)  # HMC is exact on full batches
    return model.fit(x, y, batch_size=32 if full else 16, epochs=epochs, validation_data=(x, y),
                     callbacks=list(callbacks), verbose=0)


@pytest.mark.parametrize("callback", [
    keras.callbacks.ReduceLROnPlateau(monitor="val_nll", mode="min"),
    keras.callbacks.LearningRateScheduler(lambda epoch, rate: rate * 0.5),
], ids=["ReduceLROnPlateau", "LearningRateScheduler"])
@pytest.mark.parametrize("sampler", ["atmc", "hmc"])
def test_a_callback_that_sets_the_learning_rate_is_refused_before_the_first_step(
        sampler, callback):
    model = _model(sampler)
    with pytest.raises(ValueError, match=type(callback).__name__ + ".*`callbacks`|"
                       "`callbacks`.*" + type(callback).__name__):
        _fit(model, 2, [callback])
    assert not model.optimizer.built  # no step was taken


def test_a_sampler_refuses_a_new_step_size_by_name():
    model = _model("sgld")
    _fit(model, 1)
    h = model.optimizer.step_size_value
    with pytest.raises(TypeError, match="`learning_rate`.*ReduceLROnPlateau"):
        model.optimizer.learning_rate = 0.5 * h
    assert model.optimizer.step_size_value == h


def test_early_stopping_that_restores_weights_warns_that_the_chain_jumps_back():
    model = _model("atmc")
    stop = keras.callbacks.EarlyStopping(monitor="val_nll", mode="min",
                                         restore_best_weights=True)
    with pytest.warns(kb.RestoredWeightsWarning, match="restore_best_weights"):
        _fit(model, 1, [stop])
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.RestoredWeightsWarning)
        _fit(_model("atmc"), 1, [keras.callbacks.EarlyStopping(monitor="val_nll", mode="min")])


@pytest.mark.parametrize("sampler", EVERY_SAMPLER)
def test_a_weights_checkpoint_reloaded_goes_on_with_the_same_chain(sampler, tmp_path):
    path = str(tmp_path / "chain.weights.h5")
    model = _model(sampler)
    _fit(model, 3, [keras.callbacks.ModelCheckpoint(path, save_weights_only=True)])
    reloaded = _model(sampler)
    reloaded.load_weights(path)
    assert int(reloaded.optimizer.iterations) == int(model.optimizer.iterations)
    assert reloaded.optimizer.step_size_value == model.optimizer.step_size_value
    _fit(model, 1)
    _fit(reloaded, 1)
    for a, b in zip(model.get_weights(), reloaded.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_the_learning_rate_keras_logs_is_the_step_hmc_adapted():
    model = _model("hmc")  # dual averaging over the first 3 transitions
    _fit(model, 4)
    h = model.optimizer.step_size_value
    assert h != pytest.approx(0.01)  # adapted away from the initial step
    assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == pytest.approx(h)


def test_weights_saved_before_the_first_step_load_without_a_warning(tmp_path):
    path = str(tmp_path / "initial.weights.h5")
    _model("atmc").save_weights(path)
    reloaded = _model("atmc")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reloaded.load_weights(path)
    assert not reloaded.optimizer.built


def test_a_backup_within_epochs_warns_that_the_resumed_chain_differs(tmp_path):
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"), save_freq=1)
    with pytest.warns(kb.MidEpochBackupWarning, match="save_freq='epoch'"):
        _fit(_model("sgld"), 1, [backup])
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.MidEpochBackupWarning)
        _fit(_model("sgld"), 1, [keras.callbacks.BackupAndRestore(str(tmp_path / "epochs"))])


@pytest.mark.parametrize("monitor", ["val_nll", "nll"])
def test_the_nll_monitored_with_mode_auto_is_lower_better(tmp_path, monitor):
    """Found 2026-11-28: ``EarlyStopping(monitor="val_nll")``, the README's key
    for early stopping, and ``ModelCheckpoint(save_best_only=True)`` stopped
    at the first epoch end with Keras' ValueError asking for ``mode`` (Keras
    infers a direction only for ``loss`` and its compiled metrics)."""
    model = _model("sgld")
    stop = keras.callbacks.EarlyStopping(monitor=monitor, patience=100)
    best = keras.callbacks.ModelCheckpoint(str(tmp_path / "best.weights.h5"), monitor=monitor,
                                           save_best_only=True, save_weights_only=True)
    given = keras.callbacks.EarlyStopping(monitor=monitor, mode="max", patience=100)
    history = _fit(model, 3, [stop, best, given])
    assert (stop.mode, best.mode, given.mode) == ("min", "min", "max")
    assert stop.best == min(history.history[monitor]) and given.best == max(
        history.history[monitor])
    assert (tmp_path / "best.weights.h5").exists()



def _tensorboard_scalars(log_dir):
    """{tag: [value per epoch]} of the ``epoch_*`` scalars in a TensorBoard run directory."""
    import tensorflow as tf

    scalars = {}
    for name in sorted(os.listdir(log_dir)):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(log_dir, name)):
            for value in event.summary.value:
                if value.tag.startswith("epoch_"):
                    scalars.setdefault(value.tag[len("epoch_"):], []).append(
                        float(tf.make_ndarray(value.tensor)))
    return scalars


@pytest.mark.parametrize("sampler", EVERY_SAMPLER)
def test_the_logging_callbacks_record_the_chains_logs_beside_collect_samples(
        sampler, tmp_path, capsys):
    """TensorBoard, CSVLogger, LambdaCallback and the progress bar, together with
    CollectSamples: each records what ``fit``'s history holds, epoch by epoch, and
    TensorBoard's ``learning_rate`` is the step of the next update."""
    model = _model(sampler)
    store = kb.SampleStore(str(tmp_path / "samples"))
    seen = []
    callbacks = [
        keras.callbacks.TensorBoard(str(tmp_path / "tb")),
        keras.callbacks.CSVLogger(str(tmp_path / "log.csv")),
        keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: seen.append(dict(logs))),
        kb.callbacks.CollectSamples(store, start_epoch=1),
    ]
    x, y = _data()
    full = isinstance(model.optimizer, kb.samplers.HMC)
    history = model.fit(x, y, batch_size=32 if full else 16, epochs=3, validation_data=(x, y),
                        callbacks=callbacks, verbose=1).history
    assert "nll" in capsys.readouterr().out  # the progress bar shows the chain's logs
    assert len(store) == 2 and [s.metadata["epoch"] for s in store] == [1, 2]
    for key in ("loss", "nll", "prior", "step_size", "val_nll"):
        np.testing.assert_allclose([logs[key] for logs in seen], history[key], rtol=1e-6)
    rows = np.genfromtxt(tmp_path / "log.csv", delimiter=",", names=True)
    for key in ("loss", "nll", "prior", "val_nll"):
        np.testing.assert_allclose(rows[key], history[key], rtol=1e-6)
    train = _tensorboard_scalars(tmp_path / "tb" / "train")
    for key in ("loss", "nll", "prior", "step_size"):
        np.testing.assert_allclose(train[key], history[key], rtol=1e-6)
    np.testing.assert_allclose(_tensorboard_scalars(tmp_path / "tb" / "validation")["nll"],
                               history["val_nll"], rtol=1e-6)
    assert train["learning_rate"][-1] == pytest.approx(model.optimizer.step_size_value, rel=1e-6)


@pytest.mark.parametrize("sampler", ["sgld", "hmc"])
def test_terminate_on_nan_beside_a_sampler_leaves_the_stop_to_non_finite_error(sampler):
    """A NaN potential raises kb.NonFiniteError (the weights keep their last finite
    values) before TerminateOnNaN could end the fit quietly."""
    model = _model(sampler)
    before = model.get_weights()
    x, y = _data()
    x[0, 0] = np.nan
    with pytest.raises(kb.NonFiniteError, match="NaN/Inf"):
        model.fit(x, y, batch_size=32, epochs=2, callbacks=[keras.callbacks.TerminateOnNaN()],
                  verbose=0)
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)


def test_callbacks_given_as_a_keras_callback_list_are_run():
    """``fit(callbacks=keras.callbacks.CallbackList([...]))``, which Keras takes
    as it is, failed in the sampler's checks ("'CallbackList' object is not
    iterable"); its callbacks now run beside the sampler's."""
    model = _model("sgld")
    x, y = _data()
    history = keras.callbacks.History()
    model.fit(x, y, batch_size=16, epochs=2, verbose=0,
              callbacks=keras.callbacks.CallbackList([history], model=model))
    assert history.epoch == [0, 1] and len(history.history["nll"]) == 2
