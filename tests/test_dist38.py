"""XLA refused by name where ``tf.distribute`` cannot run it (MirroredStrategy over the 2
logical CPUs, tests/conftest.py), and what two MultiWorkerMirroredStrategy workers on
127.0.0.1 do when one of them is killed (SIGKILL) mid-run."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import keras_bnn as kb
from ensemble_helpers import inputs, tiny_member, weight_sets
from fit_helpers import softmax_regression, three_class_rows


def _refused(owner, replicas=2):
    return (rf"{owner}: `jit_compile` must be False or 'auto' under MirroredStrategy: Keras "
            rf"compiles its {replicas} replicas' steps into one XLA function.*"
            r"got jit_compile=True")


def _compiled(model, strategy, jit_compile):
    with strategy.scope():
        model.compile(sampler=kb.samplers.SGLD(step_size=1e-2, seed=1), train_size=10,
                      loss=model.loss, jit_compile=jit_compile)
    return model


def test_evaluate_and_test_on_batch_refuse_jit_compile_on_several_replicas(new_strategy):
    """Keras compiles the 2 replicas' test steps into one XLA function: ``evaluate`` and
    ``test_on_batch`` failed with TensorFlow's InvalidArgumentError "Trying to access
    resource dense/kernel/replica_1 ... located in device CPU:1 from device CPU:0".
    ``predict`` compiles each replica's step apart: it runs under XLA and gives the
    predictions without it."""
    x, y = three_class_rows(10)
    strategy = new_strategy()
    model = _compiled(softmax_regression("sgld", 10, strategy), strategy, True)
    with pytest.raises(ValueError, match=_refused("evaluate")):
        model.evaluate(x, y, verbose=0)
    with pytest.raises(ValueError, match=_refused("test_on_batch")):
        model.test_on_batch(x, y)
    compiled = model.predict(x, verbose=0)
    _compiled(model, strategy, False)
    np.testing.assert_allclose(compiled, model.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    assert np.isfinite(model.evaluate(x, y, verbose=0)[0])  # the model is not left broken


def test_one_replica_evaluates_under_xla(new_strategy):
    """On one replica XLA has one device: ``evaluate`` under ``jit_compile=True`` runs and
    gives the value it gives without XLA (refused only where it fails)."""
    x, y = three_class_rows(10)
    strategy = new_strategy(["/cpu:0"])
    model = _compiled(softmax_regression("sgld", 10, strategy), strategy, True)
    got = model.evaluate(x, y, verbose=0)
    _compiled(model, strategy, False)
    np.testing.assert_allclose(got, model.evaluate(x, y, verbose=0), rtol=1e-6)


def test_an_ensembles_evaluate_refuses_jit_compile_on_several_replicas(new_strategy):
    """A PosteriorEnsemble made and compiled in the strategy's scope with
    ``jit_compile=True``: its ``evaluate`` and ``test_on_batch`` failed with TensorFlow's
    "Trying to access resource posterior_ensemble/members_0_kernel/replica_1 ...";
    its ``predict`` (its own XLA-compiled graph, run per replica) works."""
    x = inputs(12)
    y = np.arange(12) % 3
    member = tiny_member()
    sets = weight_sets(member, 2)
    strategy = new_strategy()
    with strategy.scope():
        ensemble = kb.PosteriorEnsemble(member, sets)
        ensemble.compile(loss=kb.likelihoods.PredictiveNLL(), jit_compile=True)
    owner = "PosteriorEnsemble.evaluate/test_on_batch"
    with pytest.raises(ValueError, match=_refused(owner)):
        ensemble.evaluate(x, y, verbose=0)
    with pytest.raises(ValueError, match=_refused(owner)):
        ensemble.test_on_batch(x, y)
    want = kb.PosteriorEnsemble(member, sets).predict(x, verbose=0)
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), want, rtol=1e-6, atol=1e-7)


_SAMPLING_WORKER = '''"""One of two MultiWorkerMirroredStrategy workers sampling into one
store, stopped where the test kills it (SIGKILL): the chief half-way through writing its
third sample (``VICTIM=chief``), the other worker at the end of ``fit``, with the chief
waiting for it in ``CollectSamples``' barrier (``VICTIM=worker``).

Usage: python worker.py TF_CONFIG STORE VICTIM STOPPED_FILE
"""
import io
import os
import sys
import time

os.environ["TF_CONFIG"] = sys.argv[1]
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
sys.path.insert(0, TESTS)
import keras
import tensorflow as tf

import keras_bnn as kb
from fit_helpers import softmax_regression, three_class_rows
from keras_bnn import durable

strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = strategy.cluster_resolver.task_id
victim = {"chief": 0, "worker": 1}[sys.argv[3]] == task
x, y = three_class_rows(64)
model = softmax_regression(kb.samplers.SGLD(1e-3, seed=3), 64, strategy)


def stop():
    """Says where this process stands (the test kills it), and waits."""
    with open(sys.argv[4], "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(600)


whole_temp = durable._write_temp


def half_temp(directory, write, target):
    """The third sample's temporary file gets half its bytes, then the chief stops."""
    if not target.endswith("sample-000002.npz"):
        return whole_temp(directory, write, target)

    def half(handle):
        content = io.BytesIO()
        write(content)
        content = content.getvalue()
        handle.write(content[:len(content) // 2])
        handle.flush()
        stop()
    return whole_temp(directory, half, target)


class StopAtEnd(keras.callbacks.Callback):
    def on_train_end(self, logs=None):  # before CollectSamples' barrier
        stop()


callbacks = [kb.callbacks.CollectSamples(kb.SampleStore(sys.argv[2]), start_epoch=0)]
if victim and task == 0:
    durable._write_temp = half_temp
elif victim:
    callbacks.insert(0, StopAtEnd())
model.fit(x, y, batch_size=16, epochs=3, shuffle=False, verbose=0, callbacks=callbacks)
print("FIT RETURNED")
'''


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def _kill_and_time_survivor(tmp_path, victim, start_limit=300, exit_limit=120):
    """Runs the 2 workers, SIGKILLs task ``0`` (chief) or ``1`` (worker) where it stops,
    and returns ``(seconds until the other exited, its exit code, its output)``;
    every process is killed by the limits, so this cannot hang."""
    script, stopped = tmp_path / "worker.py", tmp_path / "stopped"
    script.write_text(_SAMPLING_WORKER.replace("TESTS", repr(str(Path(__file__).parent))))
    cluster = {"worker": [f"127.0.0.1:{port}" for port in _free_ports(2)]}
    procs = [subprocess.Popen(
        [sys.executable, str(script),
         json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}}),
         str(tmp_path / "store"), victim, str(stopped)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    dead, survivor = (procs[0], procs[1]) if victim == "chief" else (procs[1], procs[0])
    try:
        deadline = time.monotonic() + start_limit
        while not (stopped.exists() and stopped.read_text()):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), (
                "the workers did not reach the kill point:\n"
                + "\n".join(p.communicate(timeout=30)[0][-2000:] for p in procs
                            if p.poll() is not None))
            time.sleep(0.2)
        assert int(stopped.read_text()) == dead.pid
        killed = time.monotonic()
        os.kill(dead.pid, signal.SIGKILL)
        try:
            output = survivor.communicate(timeout=exit_limit)[0]
        except subprocess.TimeoutExpired:
            pytest.fail(f"the surviving worker hung: still running {exit_limit} s after the "
                        f"{victim} was killed")
        return time.monotonic() - killed, survivor.returncode, output
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate()


@pytest.mark.slow  # 2 worker processes: 40-70 s each
@pytest.mark.parametrize("victim", ["chief", "worker"])
def test_a_killed_task_stops_the_other_with_an_error_naming_it(victim, tmp_path):
    """kill -9 of the chief half-way through writing its third sample, or of the other
    worker at the end of ``fit`` while the chief waits for it in ``CollectSamples``'
    barrier (``kb.distribute.wait_for_workers``): the survivor's next collective is
    aborted, and it exits with TensorFlow's UnavailableError naming the dead task
    (measured 3.5 s after the chief's death, "Connection refused" from
    /job:worker/replica:0/task:0; 14 s after the worker's, the coordination service's
    "tasks are unhealthy (stopped sending heartbeats): /job:worker/replica:0/task:1";
    23 s for a worker killed mid-epoch). Nothing hangs: no timeout of keras_bnn's.
    On disk the store keeps whole samples only: the chief's half-written one is a
    temporary file the next SampleStore opened on the directory removes."""
    seconds, code, output = _kill_and_time_survivor(tmp_path, victim)
    dead = {"chief": 0, "worker": 1}[victim]
    assert code != 0 and "FIT RETURNED" not in output, output[-3000:]
    assert "UnavailableError" in output and f"/job:worker/replica:0/task:{dead}" in output, (
        output[-3000:])
    assert seconds < 120
    if victim == "worker":  # the chief waited in the barrier
        assert "in wait_for_workers" in output, output[-3000:]
    root = tmp_path / "store"
    temporary = [p.name for p in root.iterdir() if p.name.startswith(".tmp-")]
    assert len(temporary) == (1 if victim == "chief" else 0), temporary  # the half sample
    store = kb.SampleStore(str(root))
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]
    steps = [4, 8] if victim == "chief" else [4, 8, 12]  # one sample an epoch of 4 steps
    assert [m["step"] for m in store.metadata()] == steps
    assert all(np.all(np.isfinite(w)) for sample in store for w in sample.weights)
    json.loads((root / "store.json").read_text())


def test_predict_on_batch_gives_each_example_once_on_several_replicas(new_strategy):
    """Keras hands every replica the whole batch of ``predict_on_batch`` and concatenates
    their predictions: on 2 replicas 10 examples gave 20 rows (the batch twice), 12 an
    ensemble's 24, with XLA or without. Now the rows of ``predict``."""
    x, _ = three_class_rows(10)
    strategy = new_strategy()
    model = softmax_regression("sgld", 10, strategy)
    np.testing.assert_allclose(model.predict_on_batch(x), model.predict(x, verbose=0),
                               rtol=1e-6, atol=1e-7)
    member = tiny_member()
    with strategy.scope():
        ensemble = kb.PosteriorEnsemble(member, weight_sets(member, 2))
    np.testing.assert_allclose(ensemble.predict_on_batch(inputs(12)),
                               ensemble.predict(inputs(12), verbose=0), rtol=1e-6, atol=1e-7)
