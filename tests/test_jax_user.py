"""The README's workflows under KERAS_BACKEND=jax, against the same run under TensorFlow.

The JAX half of a run is :func:`hmc_chain` in a subprocess (the Keras
backend is fixed at import), in the configuration a user has by default: no
64-bit arrays. The JAX backend's noise is called in this process directly.
"""

import json
import os
import subprocess
import sys

import jax
import keras
import numpy as np
import pytest
import tensorflow as tf
from scipy.stats import norm

import keras_bnn as kb
from keras_bnn import backend
from keras_bnn.backend import jax as jax_backend

#: Full-batch HMC on a small MLP: at h = 0.08 the sixth transition is accepted
#: with probability 0.94, so a wrong accept uniform shows up within 6 transitions.
N, STEP_SIZE, TRANSITIONS, SEED = 200, 0.08, 6, 1
#: Puts tests/ on the path of the JAX process: it runs :func:`hmc_chain` of this file.
JAX_RUN = ("import json, sys; sys.path.insert(0, sys.argv[1]); import numpy as np; "
           "from test_jax_user import hmc_chain; initial = [np.asarray(w, 'float32') "
           "for w in json.loads(sys.argv[2])]; "
           "print('RESULT ' + json.dumps(hmc_chain(initial)))")
#: The same for :func:`ragged_predictions` over 2 host devices.
JAX_PREDICT = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
               "from test_jax_user import ragged_predictions; "
               "print('RESULT ' + json.dumps(ragged_predictions(sys.argv[2])))")


def hmc_chain(initial):
    """``TRANSITIONS`` full-batch HMC transitions from ``initial`` on this backend.

    Returns:
        dict: ``acceptance`` (one per transition) and ``states`` (the weights
        after each, flattened).
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 5)).astype("float32")
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
    net = kb.models.mlp((5,), 2, hidden=(8,))
    net.set_weights(initial)
    net.compile(sampler=kb.samplers.HMC(STEP_SIZE, num_leapfrog_steps=5, seed=SEED),
                train_size=N, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    states = []
    record = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: states.append(
        np.concatenate([w.ravel() for w in net.get_weights()]).tolist()))
    history = net.fit(x, y, batch_size=N, epochs=TRANSITIONS, verbose=0, shuffle=False,
                      callbacks=[record])
    return {"acceptance": [float(a) for a in history.history["acceptance_rate"]],
            "states": states}


def ragged_predictions(folder):
    """A model's and its ensemble's predictions under ``keras.distribution.DataParallel``
    over 2 devices: of 100 examples in batches of 50, then of 101 (the last
    batch of 1 cannot be split) as arrays and as a dataset (and the model's
    ``evaluate`` of that dataset), then of the 100 again.

    Returns:
        dict: for ``"model"`` and ``"ensemble"``, ``errors`` (type and message
        of the calls on 101) and ``max_difference`` between the predictions on
        the 100 before and after them.
    """
    import jax

    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
    x = np.random.default_rng(0).normal(size=(101, 5)).astype("float32")
    net = kb.models.mlp((5,), 2, hidden=(8,))
    net.compile(sampler=kb.samplers.SGLD(1e-3), train_size=100,
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(folder)
    store.append(net)
    result = {}
    for name, model in (("model", net), ("ensemble", kb.PosteriorEnsemble.from_store(store))):
        before = model.predict(x[:100], batch_size=50, verbose=0)
        errors = []
        labelled = tf.data.Dataset.from_tensor_slices((x, (x[:, 0] > 0).astype("int32")))
        calls = [lambda: model.predict(x, batch_size=50, verbose=0),
                 lambda: model.predict(tf.data.Dataset.from_tensor_slices(x).batch(50),
                                       verbose=0)]
        if name == "model":
            calls.append(lambda: model.evaluate(labelled.batch(50), verbose=0))
        for call in calls:
            try:
                call()
                errors.append(None)
            except Exception as raised:  # the test checks its type and message
                errors.append(f"{type(raised).__name__}: {raised}")
        after = model.predict(x[:100], batch_size=50, verbose=0)
        result[name] = {"errors": errors,
                        "max_difference": float(np.max(np.abs(after - before)))}
    return result


def _jax_process(code, *arguments, **environment):
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               **environment)
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__), *arguments],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(line for line in done.stdout.splitlines()
                           if line.startswith("RESULT "))[len("RESULT "):])


@pytest.fixture(scope="module")
def initial_weights():
    keras.utils.set_random_seed(0)
    return [w.tolist() for w in kb.models.mlp((5,), 2, hidden=(8,)).get_weights()]


@pytest.fixture(scope="module")
def jax_hmc(initial_weights):
    return _jax_process(JAX_RUN, json.dumps(initial_weights))


@pytest.mark.parametrize("shape, seed, index, step", [
    ((), SEED, 4, 5),  # the chain's sixth accept draw
    ((7, 3), 2**31 - 1, 5, 12_345),  # odd size, the largest seed
    ((1000,), 3, 2, 77),
])
def test_a_float64_draw_without_x64_is_the_tensorflow_draw(shape, seed, index, step):
    """HMC's accept draw is float64: JAX without 64-bit arrays computes
    TensorFlow's float64 draw in float32, so the accept uniform Φ(z) agrees to
    float32 rounding (its spacing near 1 is 6·10⁻⁸; 10⁻⁶ allows a few ulps of
    the erf/erfinv round trip). Before, JAX drew its float32 normal, other
    numbers (Φ(z) 0.79 for TensorFlow's 0.21 at the chain's first step)."""
    assert not jax.config.read("jax_enable_x64")
    ours = jax_backend.stateless_normal(shape, seed, index, np.int32(step), "float64")
    expected = backend.stateless_normal(shape, seed, index, tf.constant(step, tf.int64),
                                        "float64").numpy()
    assert ours.shape == shape and ours.dtype == np.float32
    np.testing.assert_allclose(norm.cdf(ours), norm.cdf(expected), rtol=0, atol=1e-6)


@pytest.mark.slow  # a JAX process and an HMC fit on each backend: about 30 s
def test_hmc_chain_is_the_same_chain_under_jax_and_tensorflow(jax_hmc, initial_weights):
    """README: a chain with a given seed, from the same initial weights, is the
    same chain under TensorFlow and JAX, up to float rounding. Before, HMC under
    JAX drew another accept uniform and its sixth transition took the other
    decision: the weights then differed by 0.94."""
    reference = hmc_chain([np.asarray(w, "float32") for w in initial_weights])
    chain = jax_hmc
    # Float rounding of 6 transitions of 5 leapfrog steps: measured 3.6e-7 (TensorFlow's
    # oneDNN and XLA sum in other orders); 1e-5 is far below a differing decision's 0.1+.
    np.testing.assert_allclose(chain["states"], reference["states"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(chain["acceptance"], reference["acceptance"], rtol=0,
                               atol=1e-4)
    assert min(reference["acceptance"]) < 0.99  # the uniform decided some transitions


def test_predict_refuses_unsplittable_batches_and_keeps_the_weights(tmp_path):
    """Under DataParallel over 2 devices, ``predict`` on 101 examples in batches
    of 50 is refused before Keras' loop, as ``fit`` and ``evaluate`` are; a
    dataset's ragged last batch fails inside it (JAX's ``IndivisibleError``;
    ``evaluate``'s explained as a ``ValueError``); after these the model and
    its ensemble predict as before. Before, the
    arrays failed inside Keras' loop too, which had taken the weights out of
    the variables: every later call failed with
    "TypeError: 'NoneType' object is not callable"."""
    result = _jax_process(JAX_PREDICT, str(tmp_path / "samples"),
                          XLA_FLAGS="--xla_force_host_platform_device_count=2")
    for name in ("model", "ensemble"):
        arrays, dataset, *evaluated = result[name]["errors"]
        assert arrays.startswith("ValueError: predict: `batch_size`"), (name, arrays)
        assert "2 devices" in arrays and "drop 1 of the 101" in arrays, (name, arrays)
        assert dataset is not None and "IndivisibleError" in dataset, (name, dataset)
        assert result[name]["max_difference"] == 0.0, name  # the same weights, the same program
    assert result["model"]["errors"][2].startswith("ValueError: evaluate: `batch_size`")
