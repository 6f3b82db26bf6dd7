"""MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1."""

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

WORKER = Path(__file__).parent / "workers" / "multi_worker_fit.py"
POTENTIAL_WORKER = Path(__file__).parent / "workers" / "multi_worker_potential.py"
ARRAYS_WORKER = Path(__file__).parent / "workers" / "multi_worker_arrays.py"


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run_workers(script, tmp_path, *args):
    """Runs ``script TF_CONFIG *args OUTPUT`` as 2 workers on 127.0.0.1; their outputs' arrays."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(2)]}
    outputs = [tmp_path / f"worker{i}.npz" for i in range(2)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(script),
                json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
                *args,
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
    return [np.load(path) for path in outputs]


@pytest.mark.slow
def test_two_workers_finish_with_identical_weights(tmp_path):
    results = _run_workers(WORKER, tmp_path)
    names = sorted(k for k in results[0].files if k.startswith("arr_"))
    assert names and names == sorted(k for k in results[1].files if k.startswith("arr_"))
    for name in names:
        np.testing.assert_array_equal(results[0][name], results[1][name])
    # Both workers saw the same global potential, and it is finite and positive.
    np.testing.assert_allclose(results[0]["loss"], results[1]["loss"], rtol=1e-6)
    assert np.all(np.isfinite(results[0]["loss"])) and np.all(results[0]["loss"] > 0)
    # The chain moved away from the (seeded, shared) initialisation.
    assert any(np.abs(results[0][n]).sum() > 0 for n in names)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["dataset", "distributed"])
def test_each_worker_samples_the_single_process_chain(mode, tmp_path):
    """Each worker reads its share of every global batch of 32 (16 each);
    the potential is scaled by train_size over the global batch, so one SGLD
    epoch gives the single-process chain: weights, the potential of every
    step and the epoch's logs. fit counted a distributed dataset by the
    worker's share, "8 batches of 16 examples (about 128)", and warned that
    train_size=256 was wrong; a dataset Keras distributes was counted right."""
    single = tmp_path / "single.npz"
    subprocess.run([sys.executable, str(POTENTIAL_WORKER), "", "single", str(single)],
                   check=True, capture_output=True, timeout=300)
    single = np.load(single)
    names = sorted(k for k in single.files if k.startswith("arr_"))
    for worker in _run_workers(POTENTIAL_WORKER, tmp_path, mode):
        assert list(worker["warnings"]) == []
        # float32 sums over 2 workers in another order (6e-8 measured) on weights ~1
        for name in names:
            np.testing.assert_allclose(worker[name], single[name], rtol=0, atol=1e-6)
        assert len(worker["steps"]) == len(single["steps"]) == 8
        np.testing.assert_allclose(worker["steps"], single["steps"], rtol=1e-6)
        np.testing.assert_allclose(worker["epoch"], single["epoch"], rtol=1e-6)


@pytest.mark.slow  # 2 worker processes: 35-40 s each
@pytest.mark.parametrize("variant", ["shuffle", "mid_pass_cut_epochs"])
def test_two_workers_train_and_resume_the_single_device_chain_on_shuffled_arrays(
        variant, tmp_path):
    """``fit(x, y, shuffle=True)``: every worker draws the same keyed order
    (``kb.array_order``) and Keras' DATA auto-sharding gives each its half
    of every global batch of 16, so 2 workers train the single-device chain
    (to float round-off: the workers' gradients are summed, 1.2e-7
    measured), and a ``BackupAndRestore`` resume (a backup directory per
    worker) reproduces the unbroken chain bit for bit on each worker: after
    a whole pass (``shuffle``), and mid-pass with epochs cut short at each
    pass's end (``mid_pass_cut_epochs``). On the code before the keyed order
    Keras shuffled from the global random state and the resumed chain left
    the unbroken one; before mid-pass resumes, the second variant's did."""
    import test_resume_shuffle as t

    single = t._fit(t._model(), **t.VARIANTS[variant])
    for worker in _run_workers(ARRAYS_WORKER, tmp_path, variant):
        chains = [worker[f"arr_{i}"] for i in range(len(worker.files))]
        unbroken, resumed = chains[:len(single)], chains[len(single):]
        t._assert_equal(resumed, unbroken)
        for a, b in zip(unbroken, single, strict=True):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
