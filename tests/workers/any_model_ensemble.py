"""The posterior ensemble of a subclassed and of a several-input BayesianModel, end to end;
prints ``RESULT <json>``.

Run by ``tests/test_ensemble_any_model.py`` in a process of its own: a
subclass of ``kb.BayesianModel`` must be made before any functional one in
its process (see ``subclassed_fit.py``). Each model is sampled a few epochs
with ``CollectSamples``; its ensemble (``from_store``) predicts, is saved and
loaded, and exported; the numbers are compared with the members'
probabilities computed here in numpy from the stored samples' weights
(dense layers written out: nothing of Keras' call).

Usage: python any_model_ensemble.py DIR CASE (subclassed, list or dict;
KERAS_BACKEND=tensorflow).
"""

import json
import os
import sys
import warnings

import keras
import numpy as np
import tensorflow as tf

import keras_bnn as kb

N, CLASSES = 48, 3
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
rng = np.random.default_rng(0)
X = rng.standard_normal((N, 4)).astype("float32")
Z = rng.standard_normal((N, 2)).astype("float32")
Y = (X[:, 0] + Z[:, 1] > 0).astype("int32") + (X[:, 1] > 1).astype("int32")


@keras.saving.register_keras_serializable(package="any_model_ensemble")
class Net(kb.BayesianModel):
    """Two dense layers: 4 -> units (relu) -> 3 logits."""

    def __init__(self, units=6, **kwargs):
        super().__init__(**kwargs)
        self.hidden = keras.layers.Dense(units, activation="relu", name="hidden")
        self.out = keras.layers.Dense(CLASSES, name="out")

    def call(self, inputs):
        return self.out(self.hidden(inputs))


def softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)


def sample(model, x, directory):
    """Samples ``model`` 4 epochs, a sample per epoch; returns (store, warning texts)."""
    model.compile(sampler=kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=N, loss=LOSS)
    store = kb.SampleStore(os.path.join(directory, "samples"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(x, Y, batch_size=16, epochs=4, verbose=0,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    return store, [str(w.message) for w in caught if issubclass(w.category,
                                                                kb.NoEnsembleWarning)]


def dense(x, kernel, bias):
    return x @ kernel + bias


def end_to_end(name, model, x, feed, numpy_member):
    """The ensemble of ``model``'s samples against ``numpy_member`` (weights -> logits),
    after save/load and through the export; a dict of measured numbers."""
    directory = os.path.join(sys.argv[1], name)
    store, refusals = sample(model, x, directory)
    ensemble = kb.PosteriorEnsemble.from_store(store)
    expected = np.mean([softmax(numpy_member(s.weights)) for s in store], axis=0)
    predicted = ensemble.predict(x, batch_size=20, verbose=0)
    uncertainty = ensemble.predict_uncertainty(x, batch_size=20)
    ensemble.compile(loss=kb.likelihoods.PredictiveNLL())
    evaluated = ensemble.evaluate(x, Y, verbose=0, return_dict=True)["loss"]
    path = os.path.join(directory, "ensemble.keras")
    ensemble.save(path)
    loaded = keras.saving.load_model(path).predict(x, verbose=0)
    version = ensemble.export(os.path.join(directory, "served"))
    signature = tf.saved_model.load(version).signatures["serving_default"]
    served = signature(**{key: tf.constant(value) for key, value in feed.items()})
    np.save(os.path.join(directory, "expected.npy"), expected)
    for key, value in feed.items():
        np.save(os.path.join(directory, f"{key}.npy"), value)
    return {
        "samples": len(store),
        "refusals": refusals,
        "predict_error": float(np.max(np.abs(predicted - expected))),
        "uncertainty_error": float(np.max(np.abs(uncertainty["probabilities"] - expected))),
        "evaluate_error": abs(evaluated - float(np.mean(-np.log(expected[np.arange(N), Y])))),
        "loaded_error": float(np.max(np.abs(loaded - predicted))),
        "served_error": float(np.max(np.abs(served["probabilities"].numpy() - predicted))),
        "signature_inputs": sorted(signature.structured_input_signature[1]),
        "version": version,
        "members_spread": float(np.max(np.std([softmax(numpy_member(s.weights))
                                               for s in store], axis=0))),
    }


def subclassed():
    """The subclass's run, and the refusal of one not built."""
    keras.utils.set_random_seed(0)
    result = end_to_end(
        "subclassed", Net(units=6), X, {"inputs": X},
        lambda w: dense(np.maximum(dense(X, w[0], w[1]), 0.0), w[2], w[3]))
    try:
        kb.member_model.check_ensemble_model(Net(units=6))
    except ValueError as error:
        result["unbuilt"] = str(error)
    return result


def several_inputs(how):
    """A functional model of inputs ``a`` [4] and ``b`` [2] as a list or a dict; ``a``
    goes through a frozen layer (the ensemble's trunk)."""
    keras.utils.set_random_seed(0)
    a = keras.Input((4,), name="a")
    b = keras.Input((2,), name="b")
    frozen = keras.layers.Dense(5, activation="tanh", name="frozen", trainable=False)
    joined = keras.layers.Concatenate()([frozen(a), b])
    logits = keras.layers.Dense(CLASSES, name="logits")(joined)
    bnn = kb.bayesian(keras.Model([a, b] if how == "list" else {"a": a, "b": b}, logits))
    x = [X, Z] if how == "list" else {"a": X, "b": Z}

    def member(w):
        weights = dict(zip([v.path for v in bnn.weights], w))
        hidden = np.tanh(dense(X, weights["frozen/kernel"], weights["frozen/bias"]))
        return dense(np.concatenate([hidden, Z], axis=-1), weights["logits/kernel"],
                     weights["logits/bias"])

    result = end_to_end(how, bnn, x, {"a": X, "b": Z}, member)
    ensemble = kb.PosteriorEnsemble.from_store(os.path.join(sys.argv[1], how, "samples"))
    result["trunk"] = ensemble._trunk.value is not None
    try:
        ensemble.predict([X, Z[:, :1]] if how == "list" else {"a": X}, verbose=0)
    except ValueError as error:
        result["wrong_inputs"] = str(error)
    two_outputs = keras.Model(a, [keras.layers.Dense(2)(a), keras.layers.Dense(3)(a)])
    result["two_outputs"] = list(kb.member_model.check_ensemble_model(two_outputs)[2].values())
    return result


case = sys.argv[2]
print("RESULT " + json.dumps(subclassed() if case == "subclassed" else several_inputs(case)))
