"""The hot path's contract: no per-step host reads in ``fit``, one graph per ensemble.

``fit`` of a sampled model reads the host only between epochs (the callbacks
it adds have no batch hooks), and ``PosteriorEnsemble.predict`` compiles its
step for a bounded number of batch shapes under JAX, however many sizes of
arrays it is given.
"""

import json
import os
import subprocess
import sys
import tempfile

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import backend
from keras_bnn.models import sampling_step

LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _fit_reads(monkeypatch, rows):
    """(host reads through ``backend.to_numpy``, traces of the step) in a 3-epoch fit
    of batches of 8 past the warm-up, with ``CollectSamples`` and validation."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((5,), 2, hidden=(8,))
    model.compile(sampler=kb.samplers.SGHMC(warmup_steps=8), train_size=rows, loss=LOSS)
    model.fit(x, y, batch_size=8, epochs=64 // rows + 1, verbose=0)  # past the warm-up
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # the step traced without it
    reads, traces = [], []
    read, step = backend.to_numpy, sampling_step.sampling_step
    monkeypatch.setattr(backend, "to_numpy", lambda value: reads.append(1) or read(value))
    monkeypatch.setattr(sampling_step, "sampling_step",
                        lambda *args: traces.append(1) or step(*args))
    store = kb.SampleStore(tempfile.mkdtemp())
    model.fit(x, y, batch_size=8, epochs=3, verbose=0, validation_data=(x[:16], y[:16]),
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    monkeypatch.undo()
    return len(reads), len(traces)


def test_fit_reads_the_host_per_epoch_not_per_step(monkeypatch):
    """Epochs of 4 and of 16 steps: the same host reads (the callbacks' epoch-end
    readouts), and no new trace of the step."""
    few, few_traces = _fit_reads(monkeypatch, 32)
    many, many_traces = _fit_reads(monkeypatch, 128)
    assert few == many > 0
    assert few_traces == many_traces == 0


def test_fit_adds_no_batch_hooks():
    """Keras runs a callback with batch hooks after every step (on TensorFlow
    reading the step's logs to the host): the callbacks ``fit`` adds have none."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 5)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = kb.models.mlp((5,), 2, hidden=(4,))
    model.compile(sampler=kb.samplers.SGHMC(), train_size=16, loss=LOSS)
    from keras_bnn.models import entry_points  # pylint: disable=import-outside-toplevel
    added = entry_points.fit_arguments(model, (x, y), {"batch_size": 8}, "here")["callbacks"]
    assert added
    hooks = ("on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end")
    for callback in added:
        for hook in hooks:
            assert getattr(type(callback), hook) is getattr(keras.callbacks.Callback, hook), (
                type(callback).__name__, hook)


JAX_PREDICTS = """
import json
import numpy as np
import keras
import keras_bnn as kb
from keras_bnn import ensemble

rng = np.random.default_rng(0)
keras.utils.set_random_seed(0)
model = kb.models.mlp((5,), 3, hidden=(8,))
sets = [[rng.normal(size=w.shape).astype("float32") for w in model.weights] for _ in range(3)]
ens = kb.PosteriorEnsemble(model, sets, likelihood="categorical")
shapes = []
members = ensemble.PosteriorEnsemble._members_and_finite_rows
def traced(self, inputs):
    shapes.append(int(keras.tree.flatten(inputs)[0].shape[0]))
    return members(self, inputs)
ensemble.PosteriorEnsemble._members_and_finite_rows = traced
error, sizes = 0.0, []
for n in range(1, 13):  # every last batch of 1 to 12 examples
    x = rng.normal(size=(n, 5)).astype("float32")
    p = ens.predict(x, batch_size=16, verbose=0)
    s = ens.predict_members(x, batch_size=16)
    u = ens.predict_uncertainty(x, batch_size=16)
    sizes.append([p.shape[0], s.shape[1], u["probabilities"].shape[0]])
    exact = np.asarray(members(ens, x)[0][0])  # [S, n, K] logits, unpadded
    probabilities = np.exp(exact - exact.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    error = max(error, float(np.abs(s - probabilities).max()),
                float(np.abs(p - probabilities.mean(0)).max()))
print("RESULT " + json.dumps({"shapes": sorted(set(shapes)), "traces": len(shapes),
                              "sizes": sizes, "error": error}))
"""


@pytest.mark.slow
def test_jax_predict_compiles_a_bounded_number_of_batch_shapes(tmp_path):
    """Under JAX, 12 predicts of 1 to 12 rows at ``batch_size=16`` compiled each
    prediction's step 12 times (one per last-batch size); padded to powers of two,
    5 (1, 2, 4, 8, 16 rows), the outputs cut to the rows given and unchanged."""
    pytest.importorskip("jax")
    script = tmp_path / "jax_predicts.py"
    script.write_text(JAX_PREDICTS)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, KERAS_BACKEND="jax",
                                                JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(out for out in done.stdout.splitlines() if out.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    # predict, predict_members, predict_uncertainty: one view each, 5 shapes each
    assert result["shapes"] == [1, 2, 4, 8, 16]
    assert result["traces"] == 3 * 5
    assert result["sizes"] == [[n, n, n] for n in range(1, 13)]
    # the same float32 graph on the same rows: rounding only
    assert result["error"] < 1e-5


def test_tensorflow_predict_is_not_padded():
    """TensorFlow's graph takes any batch size: nothing is padded there, and
    outputs have the rows given."""
    from keras_bnn.ensemble_prediction import bucketed  # pylint: disable=import-outside-toplevel
    x = np.ones((5, 3), "float32")
    padded, rows = bucketed(x, 16)
    assert padded is x and rows is None
