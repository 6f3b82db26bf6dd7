"""Batches ``keras.distribution.DataParallel`` cannot split over its devices (JAX).

JAX shards each batch's first axis in equal parts: ``fit(x, y, batch_size=5)``
on 2 devices failed at the first step with JAX's ``IndivisibleError`` ("Sharding
NamedSharding(...) implies that array axis 0 is partitioned 2 times, but the
dimension size is 5"), naming neither ``batch_size`` nor what to pass. Arrays'
batches (the last one too) and a dataset's first batch are now checked before the
first step; a dataset's ragged last batch is explained when JAX refuses it.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bnn import distribute

#: Runs under KERAS_BACKEND=jax on 2 host devices; prints each case's error as JSON.
WORKER = r"""
import json
import jax, keras, numpy as np, tensorflow as tf
from fit_helpers import softmax_regression, three_class_rows
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))
x, y = three_class_rows(20)
cases = {
    "fit_arrays": lambda m: m.fit(x, y, batch_size=5, epochs=1, verbose=0),
    "ragged_dataset": lambda m: m.fit(tf.data.Dataset.from_tensor_slices((x[:19], y[:19]))
                                      .batch(4), epochs=1, verbose=0),
    "evaluate": lambda m: m.evaluate(x, y, batch_size=5, verbose=0),
    "validation": lambda m: m.fit(x, y, batch_size=4, epochs=1, verbose=0,
                                  validation_data=(x[:9], y[:9])),
    "even": lambda m: m.fit(x, y, batch_size=4, epochs=1, verbose=0),
}
result = {}
for name, call in cases.items():
    try:
        call(softmax_regression("sgld", 20))
        result[name] = None
    except Exception as error:
        result[name] = [type(error).__name__, str(error)]
print("RESULT " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def jax_cases():
    pytest.importorskip("jax")
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3",
               XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=os.pathsep.join([tests, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", WORKER], capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(next(line for line in done.stdout.splitlines()
                           if line.startswith("RESULT "))[len("RESULT "):])


@pytest.mark.slow  # a JAX process: ~30 s
def test_batches_that_do_not_split_over_the_devices_are_refused_by_name(jax_cases):
    """Each uneven batch is a ValueError naming the argument, the 2 devices and what
    to pass (before: JAX's IndivisibleError); even batches train."""
    wanted = {
        "fit_arrays": "fit: `batch_size` must give batches that split evenly over the 2 "
                      "devices of keras.distribution",
        "ragged_dataset": "got a batch of 3 examples (a dataset's ragged last batch?",
        "evaluate": "evaluate: `batch_size` must give batches that split evenly",
        "validation": "fit(validation_data): `batch_size` must give batches",
    }
    for case, text in wanted.items():
        kind, message = jax_cases[case]
        assert kind == "ValueError" and text in message, (case, kind, message)
        assert "a multiple of 2 (2, 4, ...)" in message, message
    assert "drop 1 of the 9" in jax_cases["validation"][1]
    assert jax_cases["even"] is None


@pytest.mark.parametrize("arguments, message", [
    (dict(batch_size=6), None),  # 6, 6, 6, 2
    (dict(batch_size=5), "fit: `batch_size` must give batches that split evenly over the "
                         "2 devices of keras.distribution (JAX shards each batch's first axis "
                         "in equal parts); got batch_size=5 over 20 examples: pass "
                         "batch_size = a multiple of 2 (2, 4, ...)."),
    (dict(batch_size=8, validation_split=0.25),  # 15 kept: the last batch holds 7
     "got batch_size=8 over 15 examples"),
    (dict(), None),  # Keras' 32: one batch of 20
    (dict(steps_per_epoch=4), "got batch_size=5 over 20 examples"),  # Keras: ceil(20 / 4)
    (dict(batch_size=4, validation_data=(np.zeros((6, 4)), np.zeros(6)),
          validation_batch_size=3), "fit(validation_data): `validation_batch_size` must"),
])
def test_arrays_batches_are_checked_as_keras_makes_them(monkeypatch, arguments, message):
    """The sizes Keras' array adapter gives (its default 32, ceil(N / steps), the
    kept rows of a validation_split), checked against 2 devices (monkeypatched:
    TensorFlow has no keras.distribution split)."""
    monkeypatch.setattr(distribute, "batch_devices", lambda: 2)
    arguments = dict(arguments, x=np.zeros((20, 4)), y=np.zeros(20))
    if message is None:
        distribute.check_data_batches(arguments, None)
        return
    with pytest.raises(ValueError) as raised:
        distribute.check_data_batches(arguments, None)
    assert message in str(raised.value)
    if arguments.get("validation_split") == 0.25:
        assert "drop 1 of the 15" in str(raised.value)
