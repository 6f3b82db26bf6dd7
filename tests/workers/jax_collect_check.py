"""Train → collect → ensemble under KERAS_BACKEND=jax; prints RESULT <json>.

Usage: python jax_collect_check.py OUT_DIR (the test sets KERAS_BACKEND=jax).

A prior-aware MLP on 96 synthetic rows is sampled by ATMC through
``BayesianModel.fit`` with :class:`keras_bnn.callbacks.CollectSamples`
(3 epochs of burn-in, then one sample per epoch for 4 epochs) into
OUT_DIR/samples; the ensemble rebuilt from that store predicts OUT_DIR's
``x.npy``, saved as ``jax_probabilities.npy`` for the parent (TensorFlow)
process to compare with its own rebuild and export. It also prints the
last epoch's per-variable configurational temperatures' names and their
d-weighted mean next to the epoch's logged overall value.
"""

import json
import os
import sys
import warnings

import keras
import numpy as np

import keras_bnn as kb

OUT_DIR = sys.argv[1]
# A Keras variable read through NumPy's __array__ (no copy keyword) warns under NumPy 2.
warnings.filterwarnings("error", message=".*__array__.*copy")
assert keras.backend.backend() == "jax", keras.backend.backend()
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 5)).astype("float32")
y = (x[:, 0] + x[:, 1] > 0).astype("int32") + (x[:, 2] > 1).astype("int32")
keras.utils.set_random_seed(0)
model = kb.models.mlp((5,), 3, hidden=(8,))
model.compile(sampler=kb.samplers.ATMC(step_size=1e-3, seed=0), train_size=len(x),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
store = kb.SampleStore(os.path.join(OUT_DIR, "samples"))
collect = kb.callbacks.CollectSamples(store, start_epoch=3)
history = model.fit(x, y, batch_size=32, epochs=7, verbose=0, shuffle=False, callbacks=[collect])
ensemble = kb.PosteriorEnsemble.from_store(store)
np.save(os.path.join(OUT_DIR, "x.npy"), x)
np.save(os.path.join(OUT_DIR, "jax_probabilities.npy"), ensemble.predict(x, verbose=0))
# Per-variable configurational temperatures of the last epoch, and their
# d-weighted mean against the epoch's logged overall value.
temperatures = collect.variable_temperatures
overall = sum(t * d for _, t, d in temperatures) / sum(d for _, _, d in temperatures)
print("RESULT " + json.dumps({"samples": len(store),
                              "steps": [m["step"] for m in store.metadata()],
                              "epochs": [m["epoch"] for m in store.metadata()],
                              "variables": [name for name, _, _ in temperatures],
                              "overall": [overall,
                                          history.history["configurational_temperature"][-1]]}))
