"""MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).parent / "workers" / "multi_worker_fit.py"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_workers_finish_with_identical_weights(tmp_path):
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    outputs = [tmp_path / f"worker{i}.npz" for i in range(2)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                str(outputs[i]),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    logs = []
    try:
        for proc in procs:
            logs.append(proc.communicate(timeout=300)[0])
    finally:
        for proc in procs:
            proc.kill()
    for proc, log in zip(procs, logs):
        assert proc.returncode == 0, log[-3000:]
    results = [np.load(path) for path in outputs]
    names = sorted(k for k in results[0].files if k.startswith("arr_"))
    assert names and names == sorted(k for k in results[1].files if k.startswith("arr_"))
    for name in names:
        np.testing.assert_array_equal(results[0][name], results[1][name])
    # Both workers saw the same global potential, and it is finite and positive.
    np.testing.assert_allclose(results[0]["loss"], results[1]["loss"], rtol=1e-6)
    assert np.all(np.isfinite(results[0]["loss"])) and np.all(results[0]["loss"] > 0)
    # The chain moved away from the (seeded, shared) initialisation.
    assert any(np.abs(results[0][n]).sum() > 0 for n in names)
