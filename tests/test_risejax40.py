"""The step rise under JAX and TensorFlow (samplers.step_rise).

Measured on breast_cancer ×1000 (30-32-2 MLP, SGLD, epochs of 100, 9 000
steps), the rise under TensorFlow took h 2.9e-9 → 2.35e-7 and under JAX only
1.3e-9 → 2.2e-8, stopped at step 5 600. The two were not one chain:
``keras.utils.set_random_seed(0)`` draws other initial weights per backend
(largest difference 0.77), and the two trainers start a reshuffling
``shuffle(seed=0)`` dataset at other iterations (the JAX one takes an
iterator for its symbolic build and resets it): from the same weights the
first batch's loss is 291 under TensorFlow and 159 under JAX. Given the same
weights and batches, the chains agree to 1.7e-6 (weights, relative) up to
step 4 600, h and the rise's windows alike
(``test_the_rise_is_the_same_under_jax``); from step 5 000 they differ by
1e-3 and then O(1), as TensorFlow does from itself with one weight moved by
1 ulp (2.9e-3 at step 5 100): round-off amplified by the chain, not a
backend difference in the rise.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.samplers import step_rise

PACKAGE_ROOT = os.path.dirname(os.path.dirname(kb.__file__))  # the keras_bnn tested


_RUN = r"""
import sys
import numpy as np
import keras
import tensorflow as tf
import warnings
import keras_bnn as kb
from keras_bnn import samplers
from test_stiff37 import _standardised

x, y = _standardised("breast_cancer", 1000.0)
keras.utils.set_random_seed(0)
model = kb.models.mlp(x.shape[1:], 2, hidden=(32,))
with np.load(sys.argv[1]) as saved:
    model.set_weights([saved[f"arr_{i}"] for i in range(len(saved.files))])
model.compile(sampler=samplers.get("sgld", seed=0, warmup_steps=200), train_size=len(x),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
order = np.concatenate([np.random.default_rng(0).permutation(len(x)) for _ in range(70)])
xs, ys = tf.constant(x), tf.constant(y)
data = tf.data.Dataset.from_tensor_slices(order.astype("int32")).batch(64).map(
    lambda i: (tf.gather(xs, i), tf.gather(ys, i)))
ends = []
record = keras.callbacks.LambdaCallback(on_epoch_end=lambda *_: ends.append(
    (model.optimizer.step_size_value, model.optimizer.warmup.rising)))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    model.fit(data, steps_per_epoch=25, epochs=24, verbose=0, callbacks=[record])
np.savez(sys.argv[2], ends=np.array(ends),
         weights=np.concatenate([np.ravel(w) for w in model.get_weights()]))
"""


def _run(backend, tmp_path, init):
    env = dict(os.environ, KERAS_BACKEND=backend, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               PYTHONPATH=os.pathsep.join([PACKAGE_ROOT, os.path.dirname(__file__)]))
    env.pop("JAX_ENABLE_X64", None)
    out = tmp_path / f"{backend}.npz"
    done = subprocess.run([sys.executable, "-c", _RUN, str(init), str(out)], env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    with np.load(out) as saved:
        return saved["ends"], saved["weights"]


@pytest.mark.slow  # two processes, about 15 s each
def test_the_rise_is_the_same_under_jax(tmp_path):
    """The same initial weights and batches (a fixed order, no reshuffling
    iterator): 600 steps on ×1000 through the warm-up, its judgement and
    three windows of the rise give the same h at every epoch end and the
    same weights under both backends, to float32 round-off."""
    pytest.importorskip("jax")
    rng = np.random.default_rng(1)
    init = tmp_path / "init.npz"
    shapes = [(30, 32), (32,), (32, 2), (2,)]
    np.savez(init, *[(rng.uniform(-0.3, 0.3, s) if len(s) == 2 else np.zeros(s))
                     .astype("float32") for s in shapes])
    (ends_tf, w_tf), (ends_jax, w_jax) = (_run(b, tmp_path, init) for b in ("tensorflow", "jax"))
    rising = ends_tf[:, 1]
    assert rising.max() >= step_rise.RISING + 1  # the rise ran, and changed h
    assert len(set(ends_tf[8:, 0])) > 3
    np.testing.assert_array_equal(ends_tf[:, 1], ends_jax[:, 1])
    np.testing.assert_allclose(ends_jax[:, 0], ends_tf[:, 0], rtol=1e-4)
    np.testing.assert_allclose(w_jax, w_tf, rtol=0, atol=1e-4 * np.abs(w_tf).max())
