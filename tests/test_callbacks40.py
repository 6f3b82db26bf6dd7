"""Keras' own callbacks and fit options on a model compiled with a sampler at its
defaults (``step_size="auto"``): the defects the sweep of session 40 found."""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    return x, (x[:, 0] + x[:, 1] > 0).astype("int32")


def _model(**compile_kwargs):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(hidden)))
    model.compile(train_size=64, **compile_kwargs,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


@pytest.mark.parametrize("sampler", ["sgld", "atmc"])
def test_early_stopping_inside_the_warmup_warns_that_the_chain_has_not_started(sampler):
    """EarlyStopping counts its patience on the flat val_nll of the warm-up (h rising
    from 1e-8): before the fix it stopped this fit after 8 of the warm-up's 1000 steps
    with no warning (digits, patience 3: SGLD at step 414, ATMC at step 299)."""
    x, y = _data()
    model = _model(sampler=sampler)
    stop = keras.callbacks.EarlyStopping(monitor="val_nll", patience=1)
    with pytest.warns(kb.NotConvergedWarning, match=r"EarlyStopping stopped fit at optimizer "
                      r"step 8, inside the sampler's warm-up \(its first 1000 steps, about "
                      r"248 more epochs of 4\).*start_from_epoch") as caught:
        model.fit(x, y, batch_size=16, epochs=20, validation_data=(x, y), callbacks=[stop],
                  verbose=0)
    assert stop.stopped_epoch == 1
    assert [w.filename for w in caught if w.category is kb.NotConvergedWarning] == [__file__]


def test_a_fit_stopped_after_the_warmup_or_at_a_planned_end_does_not_warn():
    x, y = _data()
    model = _model(sampler=kb.samplers.SGLD(warmup_steps=8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NotConvergedWarning)
        model.fit(x, y, batch_size=16, epochs=2, verbose=0)  # ends inside: no callback stopped it
        planned = keras.callbacks.LambdaCallback(  # a run's own end (keras-bnn train's)
            on_epoch_end=lambda epoch, logs: setattr(model, "stop_training", True))
        model.fit(x, y, batch_size=16, epochs=5, verbose=0, callbacks=[planned])
        stop = keras.callbacks.EarlyStopping(monitor="val_nll", patience=1)
        model.fit(x, y, batch_size=16, epochs=20, validation_data=(x, y), callbacks=[stop],
                  verbose=0)
    assert stop.stopped_epoch > 0 and int(model.optimizer.iterations) > 8


@pytest.mark.parametrize("name", ["atmc", "SGLD"])
def test_a_samplers_name_given_as_optimizer_samples_as_the_sampler_does(name):
    """A sampler given as `optimizer=` is taken as `sampler=`; its name was refused by
    Keras before the fix ("Could not interpret optimizer identifier: atmc")."""
    model = _model(optimizer=name)
    assert type(model.sampler).__name__ == name.upper()
    assert model.optimizer is model.sampler
    x, y = _data()
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):  # the sampler's refusals hold
        model.fit(x, y, epochs=1, verbose=0,
                  callbacks=[keras.callbacks.ReduceLROnPlateau(monitor="loss")])
    with pytest.raises(ValueError, match="not both"):
        _model(optimizer=name, sampler="sgld")


@pytest.mark.parametrize("name", ["best.h5", "best.weights.h5"])
def test_a_checkpoint_in_the_legacy_hdf5_format_is_refused_before_the_first_step(
        tmp_path, name):
    """Before the fix Keras wrote the checkpoint and load_model failed on it:
    "Unknown layer: 'BayesianModel'" (with custom_objects: compile without train_size).
    Keras' own ModelCheckpoint refuses '.hdf5'."""
    x, y = _data()
    model = _model(sampler="atmc")
    checkpoint = keras.callbacks.ModelCheckpoint(str(tmp_path / name))
    with pytest.raises(ValueError, match=r"`filepath` must end in '.keras'.*got '.*" + name):
        model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[checkpoint])
    assert not model.optimizer.built and not (tmp_path / name).exists()


def test_checkpoints_in_the_formats_that_reload_go_on_with_the_chain(tmp_path):
    x, y = _data()
    model = _model(sampler="sgld")
    callbacks = [keras.callbacks.ModelCheckpoint(str(tmp_path / "c.keras")),
                 keras.callbacks.ModelCheckpoint(str(tmp_path / "c.weights.h5"),
                                                 save_weights_only=True)]
    model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=callbacks)
    reloaded = keras.saving.load_model(tmp_path / "c.keras")
    assert int(reloaded.optimizer.iterations) == 8
    model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    reloaded.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    for ours, theirs in zip(model.get_weights(), reloaded.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
