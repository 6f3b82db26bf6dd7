"""kb.bayesian, evaluation logs, equilibrium collection and label checks under JAX.

Usage: python jax_bayesian_check.py OUT_DIR (the test sets KERAS_BACKEND=jax);
prints RESULT <json>.
"""

import json
import os
import sys
import warnings

import keras
import numpy as np

import keras_bnn as kb

OUT_DIR = sys.argv[1]
assert keras.backend.backend() == "jax", keras.backend.backend()
rng = np.random.default_rng(0)
x = rng.normal(size=(128, 4)).astype("float32")
y = ((x[:, 0] > 0).astype("int32") + (x[:, 1] > 1)).astype("int32")
loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
keras.utils.set_random_seed(0)
plain = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"),
                          keras.layers.Dense(3)])
result = {}
try:
    plain.compile(sampler="sgld", train_size=128, loss=loss)
except TypeError as error:
    result["guard"] = "kb.bayesian(model)" in str(error)
model = kb.bayesian(plain)
model.compile(sampler=kb.samplers.SGLD(step_size=5e-3, seed=0), train_size=len(x), loss=loss)
collect = kb.callbacks.CollectSamples(kb.SampleStore(os.path.join(OUT_DIR, "samples")),
                                      window=4)
with warnings.catch_warnings():
    warnings.simplefilter("error", kb.MissingPriorWarning)
    history = model.fit(x, y, batch_size=16, epochs=30, verbose=0, callbacks=[collect],
                        validation_data=(x, y))
direct = float(loss(y, model(x)))
evaluated = model.evaluate(x, y, verbose=0, return_dict=True)
result.update(
    val_nll=history.history["val_nll"][-1], val_loss=history.history["val_loss"][-1],
    direct=direct, evaluate=evaluated, started=collect.started_epoch,
    samples=len(collect.store), stationary=collect.verdict.stationary)
binary = kb.bayesian(keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)]))
binary.compile(sampler="sgld", train_size=128,
               loss=keras.losses.BinaryCrossentropy(from_logits=True))
try:
    binary.fit(x, y, epochs=1, verbose=0)
except ValueError as error:
    result["labels"] = "0 or 1" in str(error)
print("RESULT " + json.dumps(result))
