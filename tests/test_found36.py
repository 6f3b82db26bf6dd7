"""Saving a model that samples LoRA weights through ``keras.saving.save_model``; an
export on a worker that is not the chief; integers beyond 2**24 to a float32 input of
TF Serving's REST API."""

import json
import logging
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import tiny_ensemble
from keras_bnn.serving import ServingClient
from tf_serving_standin import serving


@pytest.fixture(scope="module")
def served_floats(tmp_path_factory):
    """(URL, server) of an ensemble of two Dense(3) members on one float32 input [2] whose
    kernels are ~1e-7, so inputs ~2**24 give logits ~1, as ``floats``."""
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    rng = np.random.default_rng(0)
    sets = [[rng.normal(size=(2, 3)).astype("float32") * 1e-7, np.zeros(3, "float32")]
            for _ in range(2)]
    ensemble = kb.PosteriorEnsemble(model, sets)
    version = ensemble.export(tmp_path_factory.mktemp("models") / "floats")
    with serving(version, "floats") as served:
        yield served


@pytest.mark.parametrize("format", ["columnar", "row"])
def test_integers_beyond_2_24_to_a_float32_input_are_sent_and_rounded(served_floats, format):
    """TF Serving reads any JSON number for a DT_FLOAT input as a double cast to float
    (json_tensor.cc since 2.5, commit 57dac6cd dropped IsLosslessDecimal). Until
    2026-11-30 the client refused integers above 2**24 - 1 ("outside the exact integers
    [-16777215, 16777215]") and the stand-in answered 400 "without loss of precision":
    now the server gets the integers as JSON integers and answers as for the batch
    rounded to float32 (2**24 + 1 and 2**40 + 1 are not float32 numbers)."""
    url, httpd = served_floats
    ints = np.array([[2**24 + 1, -(2**24) - 3], [2**40 + 1, 7]], "int64")
    client = ServingClient("floats", url=url, timeout=10)
    got = client.predict(ints, format=format)
    sent = httpd.requests[-1]
    leaves = sent["inputs"] if format == "columnar" else sent["instances"]
    assert leaves == ints.tolist() and all(type(v) is int for row in leaves for v in row)
    rounded = ints.astype("float32")
    assert not np.array_equal(rounded.astype("int64"), ints)  # the batch does round
    want = client.predict(rounded, format=format)
    assert set(got) == set(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    assert np.all(np.isfinite(want["probabilities"]))


def _tf_config(index):
    return json.dumps({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]},
                       "task": {"type": "worker", "index": index}})


def test_an_export_on_a_worker_that_is_not_the_chief_writes_nothing(
        tmp_path, monkeypatch, caplog):
    """Every worker of a MultiWorkerMirroredStrategy cluster runs the same script; until
    2026-11-30 each one's ``ensemble.export(model_dir)`` published a version (2 workers:
    versions 1 and 2). Worker 1 of TF_CONFIG's cluster (the ensemble made outside any
    strategy's scope) now logs why and returns None; worker 0, the chief, exports."""
    ensemble = tiny_ensemble(count=2)
    monkeypatch.setenv("TF_CONFIG", _tf_config(1))
    with caplog.at_level(logging.WARNING, logger="keras_bnn.export"):
        assert ensemble.export(tmp_path / "model") is None
    assert not (tmp_path / "model").exists()
    assert re.search(r"this process is worker 1 of a multi-worker cluster, not its chief: "
                     r"nothing exported to .*model \(only the chief", caplog.text)
    monkeypatch.setenv("TF_CONFIG", _tf_config(0))
    assert ensemble.export(tmp_path / "model") == str(tmp_path / "model" / "1")


_EXPORTING_WORKER = """
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/tests"]
import tensorflow as tf
from ensemble_helpers import tiny_ensemble
strategy = tf.distribute.MultiWorkerMirroredStrategy()
ensemble = tiny_ensemble(count=2)
with strategy.scope():
    print("EXPORTED", json.dumps(ensemble.export(sys.argv[2])))
"""


@pytest.mark.slow  # 2 worker processes importing TensorFlow: 56 s measured
def test_two_workers_export_one_version(tmp_path):
    """Two MultiWorkerMirroredStrategy workers on 127.0.0.1 run the same export (in the
    strategy's scope: its resolver says who is chief): one version, worker 0's; until
    2026-11-30 versions 1 and 2, one per worker."""
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    root = str(Path(__file__).parent.parent)
    procs = [subprocess.Popen(
        [sys.executable, "-c", _EXPORTING_WORKER, root, str(tmp_path / "model")],
        env={**os.environ, "TF_CONFIG": json.dumps(
            {"cluster": cluster, "task": {"type": "worker", "index": index}})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for index in range(2)]
    try:
        logs = [proc.communicate(timeout=300)[0] for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    exported = []
    for proc, log in zip(procs, logs):
        assert proc.returncode == 0, log[-3000:]
        exported.append(json.loads(re.search(r"^EXPORTED (.*)$", log, re.M).group(1)))
    assert exported == [str(tmp_path / "model" / "1"), None]
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["1", "models.config"]
    assert "this process is worker 1 of a multi-worker cluster, not its chief" in logs[1]
