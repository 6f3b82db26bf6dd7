"""One epoch of a two-head model sampled by SGLD and by HMC; prints RESULT <json> of the logs.

Usage: python multi_output_fit.py (under the KERAS_BACKEND the caller sets).

The heads: three class logits (``cls``) and one Bernoulli logit (``bin``),
compiled with a dict of losses and per-output metrics. The parent test
compares the logged ``nll`` with the sum of the heads' losses.
"""

import json

import keras
import numpy as np

import keras_bnn as kb


def logs(sampler):
    """The epoch's logs of the two-head fit by ``"sgld"`` (batches of 10) or ``"hmc"``
    (the full batch of 40), the last value of each key."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype("float32")
    labels = {"cls": np.arange(40) % 3, "bin": (x[:, 0] > 0).astype("float32")}
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="tanh")(inputs)
    model = kb.bayesian(keras.Model(inputs, [keras.layers.Dense(3, name="cls")(hidden),
                                             keras.layers.Dense(1, name="bin")(hidden)]))
    hmc = sampler == "hmc"
    model.compile(sampler=kb.samplers.HMC(step_size=1e-3, seed=0) if hmc else
                  kb.samplers.SGLD(step_size=1e-3, seed=0), train_size=40,
                  loss={"cls": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        "bin": keras.losses.BinaryCrossentropy(from_logits=True)},
                  metrics={"cls": ["accuracy"], "bin": ["accuracy"]})
    history = model.fit(x, labels, batch_size=40 if hmc else 10, epochs=1, shuffle=False,
                        verbose=0).history
    return {key: float(values[-1]) for key, values in history.items()}


if __name__ == "__main__":
    print("RESULT " + json.dumps({"backend": keras.backend.backend(),
                                  "logs": {name: logs(name) for name in ("sgld", "hmc")}}))
