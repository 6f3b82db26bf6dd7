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


def test_a_fit_stopped_after_the_warmup_or_run_to_its_end_does_not_warn():
    x, y = _data()
    model = _model(sampler=kb.samplers.SGLD(warmup_steps=8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NotConvergedWarning)
        model.fit(x, y, batch_size=16, epochs=2, verbose=0)  # ends inside: no callback stopped it
        stop = keras.callbacks.EarlyStopping(monitor="val_nll", patience=1)
        model.fit(x, y, batch_size=16, epochs=20, validation_data=(x, y), callbacks=[stop],
                  verbose=0)
    assert stop.stopped_epoch > 0  # it stopped, past the warm-up's 8 steps


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
