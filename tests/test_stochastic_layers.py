"""Dropout, noise and batch normalisation in a sampled model (keras_bnn.stochastic_layers)."""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.stochastic_layers import stochastic_layers

N = 32
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _model(*middle):
    keras.utils.set_random_seed(0)
    return kb.bayesian(keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, name="d"),
                                         *middle, keras.layers.Dense(3, name="out")]))


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(N, 4)).astype("float32"), rng.integers(0, 3, N)


def test_every_kind_is_found_with_its_rate():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((5, 4))
    h = keras.layers.LSTM(4, dropout=0.2, return_sequences=True, name="lstm")(inputs)
    h = keras.layers.MultiHeadAttention(2, 2, dropout=0.1, name="mha")(h, h)
    h = keras.layers.GaussianNoise(0.3, name="noise")(h)
    h = keras.layers.SpatialDropout1D(0.5, name="spatial")(h)
    h = keras.layers.BatchNormalization(name="bn")(keras.layers.Flatten()(h))
    h = keras.layers.Dropout(0.0, name="off")(h)  # rate 0: no noise
    model = keras.Model(inputs, keras.layers.Dense(2)(h))
    assert stochastic_layers(model) == {
        "noise": [("lstm", "dropout 0.2"), ("mha", "dropout 0.1"), ("noise", "stddev 0.3"),
                  ("spatial", "rate 0.5")],
        "batch_norm": ["bn"]}
    assert stochastic_layers(_model()) == {"noise": [], "batch_norm": []}


def test_an_sg_sampler_warns_naming_the_layers():
    """Dropout and BatchNorm used to be sampled silently (the chain samples a
    noisy, batch-dependent potential; the samples carry lagging statistics)."""
    model = _model(keras.layers.Dropout(0.3, name="drop"), keras.layers.BatchNormalization(
        name="bn"))
    model.compile(sampler="sghmc", train_size=N, loss=LOSS)
    with pytest.warns(kb.StochasticLayerWarning, match=r"layers 'drop' \(rate 0.3\) add noise "
                      r"in training.*layers 'bn' \(BatchNormalization\)"):
        model.fit(*_data(), batch_size=16, epochs=1, verbose=0)


def test_hmc_refuses_them_and_sgd_or_a_clean_model_says_nothing():
    """HMC's leapfrog ran without state updates: its BatchNorm statistics
    stayed at 0 and 1 while the training NLL read 0.28 and evaluate 1.77."""
    model = _model(keras.layers.BatchNormalization(name="bn"))
    model.compile(sampler=kb.samplers.HMC(step_size=0.01, num_leapfrog_steps=2), train_size=N,
                  loss=LOSS)
    with pytest.raises(ValueError, match=r"fit: HMC's Metropolis test is exact only .* "
                                         r"layers 'bn' \(BatchNormalization\)"):
        model.fit(*_data(), batch_size=N, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.StochasticLayerWarning)
        baseline = _model(keras.layers.Dropout(0.3))
        baseline.compile(optimizer="sgd", train_size=N, loss=LOSS)  # SGD/MAP: Keras' business
        baseline.fit(*_data(), batch_size=16, epochs=1, verbose=0)
        clean = _model()
        clean.compile(sampler="sgld", train_size=N, loss=LOSS)
        clean.fit(*_data(), batch_size=16, epochs=1, verbose=0)


def test_a_frozen_batch_norm_is_deterministic_and_not_named():
    """A pretrained backbone with BatchNormalization, frozen under a sampled head
    (the "Bayesian last layer"), got a StochasticLayerWarning saying it computed
    each example's output from its batch, and HMC refused it: Keras runs a
    frozen BatchNormalization on its fixed moving statistics, training or not.
    A frozen Dropout still drops, and is still named."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    features = keras.layers.BatchNormalization(name="bn")(keras.layers.Dense(8, name="d")(inputs))
    backbone = keras.Model(inputs, features, name="backbone")
    backbone.trainable = False
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3, name="out")(backbone(inputs))))
    x, y = _data()
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(model(x, training=True)),
                                  keras.ops.convert_to_numpy(model(x, training=False)))
    assert stochastic_layers(model) == {"noise": [], "batch_norm": []}
    model.compile(sampler=kb.samplers.HMC(step_size=0.01, num_leapfrog_steps=2), train_size=N,
                  loss=LOSS)
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.StochasticLayerWarning)
        model.fit(x, y, batch_size=N, epochs=1, verbose=0)
    assert int(model.optimizer.iterations) == 1
    frozen_dropout = keras.layers.Dropout(0.3, name="drop")
    frozen_dropout.trainable = False
    assert stochastic_layers(_model(frozen_dropout))["noise"] == [("drop", "rate 0.3")]


def test_random_augmentation_layers_are_noise_layers():
    """Keras' augmentation layers (RandomFlip, RandomRotation, MixUp, ...) draw in training
    mode, so the potential is random as with Dropout: HMC accepted them silently and ran its
    Metropolis test on a potential that changed between the leapfrog's end points."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 6, 1))
    h = keras.layers.RandomFlip("horizontal", name="flip")(inputs)
    h = keras.layers.RandomRotation(0.1, name="rotate")(h)
    h = keras.layers.Rescaling(0.5, name="scale")(h)  # deterministic: not named
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3, name="out")(
        keras.layers.Flatten()(h))))
    assert stochastic_layers(model)["noise"] == [("flip", "random augmentation, RandomFlip"),
                                                 ("rotate", "random augmentation, RandomRotation")]
    model.compile(sampler=kb.samplers.HMC(step_size=0.01, num_leapfrog_steps=2), train_size=N,
                  loss=LOSS)
    x = np.random.default_rng(0).normal(size=(N, 6, 6, 1)).astype("float32")
    with pytest.raises(ValueError, match=r"layers 'flip' \(random augmentation, RandomFlip\)"):
        model.fit(x, _data()[1], batch_size=N, epochs=1, verbose=0)
