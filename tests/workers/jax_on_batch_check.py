"""train_on_batch under KERAS_BACKEND=jax; prints ``RESULT <json>``.

Run by ``tests/test_on_batch.py`` (slow): the checks of that file that
differ by backend. Under JAX a NaN/Inf step is skipped, not raised, so
``train_on_batch`` must raise after it; the warm-up must be left (with its
``ShortWarmupWarning``); the chain must be ``fit``'s.
"""

import json
import warnings

import keras
import numpy as np

import keras_bnn as kb
from subclassed_model import Subclassed

assert keras.backend.backend() == "jax", keras.backend.backend()
N = 64
LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
rng = np.random.default_rng(0)
x = rng.normal(size=(N, 4)).astype("float32")
y = (x[:, 0] > 0).astype("int32")


def wrapped():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    h = keras.layers.Dense(8, activation="relu", name="hidden")(inputs)
    return kb.bayesian(keras.Model(inputs, keras.layers.Dense(2, name="out")(h)))


def steps(model, count):
    for t in range(count):
        start = 16 * (t % 4)
        model.train_on_batch(x[start:start + 16], y[start:start + 16])


result = {}
# A subclassed BayesianModel (its weights made at the first call) samples. First: a
# functional BayesianModel made before turns Keras' injection of Functional into its
# bases on (keras.Model.__init__), and a subclass with no inputs can no longer be made.
for how in ("fit", "train_on_batch"):
    model = Subclassed()
    model.compile(sampler="atmc", train_size=N, loss=LOSS)
    if how == "fit":
        model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    else:
        steps(model, 4)
    result[f"subclassed_{how}_steps"] = int(np.asarray(model.optimizer.iterations))
# The same chain as fit's over the same batches (16 steps, warm-up left after 10).
by_fit, by_batch = wrapped(), wrapped()
for model in (by_fit, by_batch):
    model.compile(sampler=kb.samplers.SGHMC(warmup_steps=10), train_size=N, loss=LOSS)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    by_fit.fit(x, y, batch_size=16, epochs=4, shuffle=False, verbose=0)
    steps(by_batch, 16)
result["max_difference_to_fit"] = max(float(np.max(np.abs(a - b))) for a, b in
                                      zip(by_fit.get_weights(), by_batch.get_weights()))
result["warmup_left"] = bool(by_batch.optimizer.warmup_left)
result["short_warmup_warnings"] = sum(w.category is kb.ShortWarmupWarning for w in caught)
# NaN: skipped by the compiled step, raised by train_on_batch.
for name in ("atmc", "hmc"):
    model = wrapped()
    model.compile(sampler=name, train_size=N, loss=LOSS)
    poisoned = x.copy()
    poisoned[0, 0] = np.nan
    before = model.get_weights()
    try:
        model.train_on_batch(poisoned, y)
        raised = None
    except kb.NonFiniteError as error:
        raised = type(error).__name__
    result[f"{name}_nonfinite"] = {
        "raised": raised, "iterations": int(np.asarray(model.optimizer.iterations)),
        "unchanged": all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))}
# HMC refuses gradients.
model = wrapped()
model.compile(sampler="hmc", train_size=N, loss=LOSS)
try:
    model.optimizer.apply_gradients(zip([keras.ops.zeros(v.shape) for v in
                                         model.trainable_variables], model.trainable_variables))
    result["hmc_apply"] = None
except TypeError as error:
    result["hmc_apply"] = str(error)[:40]
print("RESULT " + json.dumps(result))
