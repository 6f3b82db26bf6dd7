"""Distributed sampling as a user drives it: ``train_on_batch`` under MirroredStrategy
(2 logical CPUs, tests/conftest.py), and two MultiWorkerMirroredStrategy workers on
127.0.0.1 that collect into one store (``_COLLECT_WORKER``, written to ``tmp_path``)."""


import numpy as np
import pytest

import keras_bnn as kb
from fit_helpers import softmax_regression, three_class_rows
from mirrored import new_mirrored
from test_multi_worker import _run_workers


def test_train_on_batch_refuses_jit_compile_under_a_strategy_as_fit_does():
    """``fit`` refuses ``jit_compile=True`` under a strategy by name; ``train_on_batch``,
    which runs the same step, failed at its first call with TensorFlow's "`merge_call`
    called while defining a new graph" RuntimeError."""
    x, y = three_class_rows(10)
    strategy = new_mirrored()
    model = softmax_regression("sgld", 10, strategy)
    with strategy.scope():
        model.compile(sampler=kb.samplers.SGLD(step_size=1e-2, seed=1), train_size=10,
                      loss=model.loss, jit_compile=True)
    with pytest.raises(ValueError, match=r"train_on_batch: `jit_compile` must be False or "
                                         r"'auto' under MirroredStrategy.*got jit_compile=True"):
        model.train_on_batch(x, y)
    assert int(model.optimizer.iterations.numpy()) == 0


_COLLECT_WORKER = '''"""One of two MultiWorkerMirroredStrategy workers collecting into one store.

Usage: python worker.py TF_CONFIG STORE OUTPUT.npz
"""
import os
import sys
import time

os.environ["TF_CONFIG"] = sys.argv[1]
import keras
import numpy as np
import tensorflow as tf

import keras_bnn as kb

strategy = tf.distribute.MultiWorkerMirroredStrategy()
chief = strategy.cluster_resolver.task_id == 0
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 5)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
with strategy.scope():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((5,))
    outputs = keras.layers.Dense(2, kernel_regularizer=kb.priors.Normal(),
                                 bias_regularizer=kb.priors.Normal())(inputs)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(sampler=kb.samplers.SGLD(1e-3, seed=3), train_size=64,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


class SlowDisk(keras.callbacks.Callback):
    """The chief's last sample is written 3 s after the last step (a slow disk)."""

    def on_epoch_end(self, epoch, logs=None):
        if chief and epoch == 2:
            time.sleep(3)


store = kb.SampleStore(sys.argv[2])
model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0,
          callbacks=[SlowDisk(), kb.callbacks.CollectSamples(store, start_epoch=0)])
steps = [m["step"] for m in store.metadata()]
members = kb.PosteriorEnsemble.from_store(store).predict(x, verbose=0)
np.savez(sys.argv[3], steps=np.array(steps), predictions=members)
'''


@pytest.mark.slow  # 2 worker processes: 40-75 s
def test_every_worker_reads_the_chiefs_samples_when_fit_returns(tmp_path):
    """Only the chief writes samples; the other worker's ``fit`` returned while the
    chief still wrote its last one, so an ensemble read from the store right after
    ``fit`` (the same script on every worker) had 2 of the 3 samples there: steps
    [4, 8] for [4, 8, 12], and other predictions than the chief's."""
    script = tmp_path / "worker.py"
    script.write_text(_COLLECT_WORKER)
    chief, other = _run_workers(script, tmp_path, str(tmp_path / "store"))
    assert list(chief["steps"]) == [4, 8, 12]  # one sample an epoch, 4 global batches each
    assert list(other["steps"]) == [4, 8, 12]
    np.testing.assert_array_equal(other["predictions"], chief["predictions"])
    assert sorted(p.name for p in (tmp_path / "store").iterdir()
                  if p.name.startswith("sample-")) == [f"sample-{i:06d}.npz" for i in range(3)]
