"""compile and fit called more than once on a BayesianModel: one chain, one chain id."""

import os
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from fit_helpers import LOSS, sign_rows

N = 64


def _data():
    return sign_rows(N)


def _model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="out")(h)))


def _fit(model, store, epochs=3, chain=0):
    x, y = _data()
    collect = kb.callbacks.CollectSamples(store, start_epoch=0, every=1, chain=chain)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.WarmupSampleWarning)  # a short test run
        warnings.simplefilter("ignore", kb.ShortWarmupWarning)
        model.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0,
                  callbacks=[collect])


def _steps(store):
    return [(m["chain"], m["step"]) for m in store.metadata()]


@pytest.mark.slow
def test_a_second_fit_goes_on_with_the_chain_and_its_collection(tmp_path):
    """Two fits of 3 epochs are one fit of 6: same weights, samples at steps 4..24."""
    twice, once = _model(), _model()
    for model in (twice, once):
        model.compile(sampler=kb.samplers.SGHMC(warmup_steps=8), train_size=N, loss=LOSS)
    store = kb.SampleStore(os.fspath(tmp_path / "twice"))
    _fit(twice, store)
    _fit(twice, store)
    _fit(once, kb.SampleStore(os.fspath(tmp_path / "once")), epochs=6)
    assert _steps(store) == [(0, step) for step in range(4, 25, 4)]
    for a, b in zip(twice.get_weights(), once.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_a_new_sampler_under_a_stored_chain_id_is_refused(tmp_path):
    """Found 2026-11-28: compile with a new sampler restarts the step counter at 0,
    and CollectSamples skipped the new chain's samples at steps 4, 8, 12 as
    already stored (the old chain's), silently: the store kept 3 samples of 6."""
    model = _model()  # an explicit step: the weights move in 12 steps (the warm-up's h0 = 1e-8
    # would leave them within round-off of where the first chain started)
    model.compile(sampler=kb.samplers.SGHMC(step_size=0.01), train_size=N, loss=LOSS)
    store = kb.SampleStore(os.fspath(tmp_path / "samples"))
    _fit(model, store)
    model.compile(sampler=kb.samplers.SGHMC(step_size=0.01), train_size=N, loss=LOSS)
    with pytest.raises(ValueError, match=r"`chain` must name a chain not in SampleStore.*"
                                         r"compile with a new sampler"):
        _fit(model, store)
    assert int(model.optimizer.iterations.numpy()) == 0
    _fit(model, store, chain=1)  # a new id: the new chain is stored beside the old one
    assert _steps(store) == [(0, 4), (0, 8), (0, 12), (1, 4), (1, 8), (1, 12)]


def test_a_chain_started_over_from_the_same_weights_is_not_stored_twice(tmp_path):
    """A run started over (the same model and seed: no readable backup) regenerates
    the chain whose samples are stored: neither refused nor written twice."""
    store = kb.SampleStore(os.fspath(tmp_path / "samples"))
    for _ in range(2):
        model = _model()
        model.compile(sampler=kb.samplers.SGHMC(warmup_steps=8), train_size=N, loss=LOSS)
        _fit(model, store)
    assert _steps(store) == [(0, 4), (0, 8), (0, 12)]


@pytest.mark.parametrize("sampler", [pytest.param(lambda: kb.samplers.ATMC(warmup_steps=20),
                                                  marks=pytest.mark.slow),  # 11 s
                                     lambda: kb.samplers.SGHMC(warmup_steps=20),
                                     lambda: kb.samplers.HMC(num_leapfrog_steps=2,
                                                             num_adaptation_steps=20)],
                         ids=["atmc", "sghmc", "hmc"])
def test_a_model_saved_mid_warmup_goes_on_with_the_same_chain(sampler, tmp_path):
    """keras.saving.load_model of a .keras file taken 12 steps into a 20-step
    warm-up (adaptation for HMC), then fit: the chain of the unbroken run, with
    its priors and its chosen step; clone_model keeps class and priors."""
    x, y = _data()
    model = _model()
    model.compile(sampler=sampler(), train_size=N, loss=LOSS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short warm-up; HMC on minibatches
        model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
        model.save(tmp_path / "model.keras")
        loaded = keras.saving.load_model(tmp_path / "model.keras")
        for each in (model, loaded):
            each.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0)
    assert type(loaded) is kb.BayesianModel
    assert loaded.optimizer.step_size_value == model.optimizer.step_size_value
    for a, b in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(a, b)
    for copy in (loaded, keras.models.clone_model(model)):
        assert type(copy) is kb.BayesianModel
        assert ({v.path: type(v.regularizer).__name__ for v in copy.trainable_variables}
                == {v.path: type(v.regularizer).__name__ for v in model.trainable_variables})


@pytest.mark.slow  # 8 s: the default suite stays under its 20 minutes; CI runs both
def test_a_model_saved_before_its_first_step_reloads_without_a_skipped_state(tmp_path):
    """A model saved after compile, before any step, reloaded with Keras' "Skipping
    variable loading for optimizer 'atmc', because it has 22 variables whereas the
    saved optimizer has 1": the words of a lost chain, for a chain that had not
    begun. The reloaded sampler (built by compile) has that state already."""
    model = _model()
    model.compile(sampler=kb.samplers.ATMC(seed=0), train_size=N, loss=LOSS)
    model.save(tmp_path / "fresh.keras")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Skipping variable loading")
        loaded = keras.saving.load_model(tmp_path / "fresh.keras")
    assert int(loaded.optimizer.iterations.numpy()) == 0
    loaded.fit(*_data(), batch_size=16, epochs=1, verbose=0)
    assert int(loaded.optimizer.iterations.numpy()) == N // 16
