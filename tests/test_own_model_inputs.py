"""The input forms Keras takes for a model the user brings, in its posterior ensemble."""

import keras
import numpy as np

import keras_bnn as kb


def test_a_one_input_ensemble_takes_its_array_as_a_list_of_one(tmp_path):
    """``keras.Model([inputs], outputs).predict([x])`` works in Keras; the ensemble's
    raised InvalidArgumentError ('In[0] is not a matrix') until 2026-11-29."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6,))
    model = keras.Model([inputs], keras.layers.Dense(3, name="logits")(inputs))
    bnn = kb.bayesian(model)
    bnn.compile(sampler="sgld", train_size=16,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(str(tmp_path / "samples"))
    store.append(bnn)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    x = np.random.default_rng(0).normal(size=(5, 6)).astype("float32")
    expected = ensemble.predict(x, verbose=0)
    np.testing.assert_allclose(model.predict([x], verbose=0), bnn.predict(x, verbose=0))
    np.testing.assert_allclose(ensemble.predict([x], verbose=0), expected, rtol=1e-6)
    np.testing.assert_allclose(ensemble.predict_members((x,))[0], expected, rtol=1e-6)
    assert ensemble.predict_uncertainty([x])["probabilities"].shape == (5, 3)
