"""``keras-bnn`` under ``KERAS_BACKEND=jax``: train → evaluate → export, end to end.

Each command is its own process (the backend is fixed when Keras is
imported). ``export`` writes a TensorFlow SavedModel: under JAX the command
runs itself again under TensorFlow, from the stored samples.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keras_bnn as kb
from test_run_length import END, START

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _jax_cli(*argv):
    environment = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, "-m", "keras_bnn.cli", *argv], capture_output=True,
                          text=True, timeout=300, env=environment, check=False)


@pytest.mark.slow
def test_train_evaluate_export_under_jax(tmp_path):
    run_dir, model_dir = str(tmp_path / "run"), str(tmp_path / "models" / "net")
    done = _jax_cli("train", "--num-train", "200", "--num-test", "50", "--batch-size", "50",
                    "--epochs", "3", "--burn-in-epochs", "1", "--verbose", "0",
                    "--output-dir", run_dir)
    assert done.returncode == 0, done.stderr
    store = kb.SampleStore(os.path.join(run_dir, "samples"))
    assert [m["epoch"] for m in store.metadata()] == [1, 2]
    done = _jax_cli("evaluate", "--run-dir", run_dir)
    assert done.returncode == 0, done.stderr
    metrics = json.load(open(os.path.join(run_dir, "metrics.json")))
    assert metrics["num_samples"] == 2 and 0.0 <= metrics["ensemble"]["accuracy"] <= 1.0
    done = _jax_cli("export", "--run-dir", run_dir, "--export-dir", model_dir)
    assert done.returncode == 0, done.stderr
    assert f"exported: {os.path.join(model_dir, '1')}" in done.stdout
    import tensorflow as tf

    served = tf.saved_model.load(os.path.join(model_dir, "1")).signatures["serving_default"]
    x = np.zeros((3, 5), np.float32)
    outputs = served(inputs=tf.constant(x))
    assert outputs and all(value.shape[0] == 3 and np.all(np.isfinite(value.numpy()))
                           for value in outputs.values())


@pytest.mark.slow
def test_a_late_chain_is_lengthened_under_jax(tmp_path):
    """``--max-epochs`` under JAX: the run of ``tests/test_run_length.py``
    (collection from epoch START = 23, one sample an epoch) trains on past its
    20 epochs until it has sampled a quarter of them, as under TensorFlow."""
    run_dir = str(tmp_path / "run")
    done = _jax_cli("train", "--num-train", "200", "--num-test", "50", "--batch-size", "50",
                    "--sampler", "sghmc", "--step-size", "0.01", "--epochs", "20",
                    "--max-epochs", "80", "--verbose", "0", "--output-dir", run_dir)
    assert done.returncode == 0, done.stderr
    assert f"run length: {END} epochs, not 20" in done.stdout
    collection = json.load(open(os.path.join(run_dir, "collection.json")))
    assert (collection["start_epoch"], collection["epochs"]) == (START, END)
    assert len(kb.SampleStore(os.path.join(run_dir, "samples"))) == 5
