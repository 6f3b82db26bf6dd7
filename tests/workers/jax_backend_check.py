"""Runs samplers, priors and a sampling fit under KERAS_BACKEND=jax; prints JSON.

Usage: python jax_backend_check.py (the test sets KERAS_BACKEND=jax).
"""

import json
import os
import tempfile

import jax
import keras
import numpy as np

import keras_bnn as kb
from keras_bnn import samplers

assert keras.backend.backend() == "jax", keras.backend.backend()
result = {"samplers": {}}
CHAINS, STEPS, BURN_IN, TEMPERATURE = 200, 20_000, 2_000, 0.5
for name in ("sgld", "sghmc", "sgnht", "atmc"):
    kwargs = {"friction": 2.0} if name == "sghmc" else {}
    sampler = samplers.get(name, step_size=0.05, train_size=1, temperature=TEMPERATURE,
                           seed=1, **kwargs)
    theta = keras.Variable(np.zeros(CHAINS, "float32"))
    sampler.build([theta])

    def body(carry, _):
        params, state = carry
        params, state = sampler.stateless_apply(state, [params[0]], params)  # U = θ²/2
        return (params, state), params[0]

    run = jax.jit(lambda carry: jax.lax.scan(body, carry, None, length=STEPS))
    _, draws = run(([theta.value], [v.value for v in sampler.variables]))
    draws = np.asarray(draws, dtype=np.float64)[BURN_IN:]
    result["samplers"][name] = {"mean": float(draws.mean()), "std": float(draws.std())}

x = np.random.default_rng(0).normal(size=(400, 5)).astype("float32")
y = (x[:, 0] > 0).astype("int32")


def compiled():
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((5,), 2, hidden=(16,))
    model.compile(sampler=samplers.ATMC(5e-3, seed=0), train_size=400,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def fit(model=None, epochs=2):
    model = model or compiled()
    history = model.fit(x, y, batch_size=100, epochs=epochs, verbose=0, shuffle=False)
    return model, history.history["loss"]


first, losses = fit()
second, _ = fit()
result["fit_losses"] = losses
result["fit_deterministic"] = all(
    np.array_equal(a, b) for a, b in zip(first.get_weights(), second.get_weights()))
# A .weights.h5 loaded into a freshly compiled model goes on with the same chain.
path = os.path.join(tempfile.mkdtemp(), "chain.weights.h5")
second.save_weights(path)
reloaded = compiled()
reloaded.load_weights(path)
fit(second, epochs=1)
fit(reloaded, epochs=1)
result["weights_file_continues"] = all(
    np.array_equal(a, b) for a, b in zip(second.get_weights(), reloaded.get_weights()))
result["log_prior"] = float(kb.priors.log_prior(first))
result["weights"] = [w.tolist() for w in first.get_weights()]
print("RESULT " + json.dumps(result))
