"""Sample collection, the sample store and the cyclical step size, each checked against an
independent reference (session 39's sweep).

The step size against Zhang et al. 2020 (cSG-MCMC) written out here, across a resume
from a backup in the middle of a cycle; the store against a writer killed (SIGKILL) in
the middle of a sample file, a write that fails (``OSError``), a potential that turns
non-finite in a second ``fit``; ``CollectSamples`` under ``MirroredStrategy``; a store
written under TensorFlow and read under JAX.
"""

import errno
import json
import math
import os
import signal
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb
from fit_helpers import softmax_regression, three_class_rows
from keras_bnn import durable
from mirrored import new_mirrored
from test_exactly_once import _Kill  # stops a run at an epoch's end, as a kill would

H0 = 1e-3
#: float32 carries cos and the product to about one ulp of h0 each (tests/test_sched36.py).
H_TOLERANCE = 4 * np.finfo(np.float32).eps * H0


def _paper(k, total, cycles, h0=H0):
    """Zhang et al. 2020, eq. (2): the step size of (1-based) iteration ``k`` of ``total``
    in ``cycles`` cycles."""
    length = math.ceil(total / cycles)
    return h0 / 2 * (math.cos(math.pi * ((k - 1) % length) / length) + 1)


def _listing(path):
    return sorted(os.listdir(path))


# ------------------------------------------------------------------ cyclical step size
def test_cycles_follow_the_paper_through_a_resume_mid_cycle_and_a_last_partial_cycle(tmp_path):
    """K = 14 steps in M = 4 cycles (ceil(K/M) = 4, so the last cycle is cut to 2 steps),
    2 steps an epoch, cycles of 2 epochs. A run killed at the end of epoch 2 (step 6, the
    middle of the second cycle) and resumed by ``BackupAndRestore`` in a new model takes,
    at every step, the paper's step size at the optimizer's step count (read from the
    batch logs: the running mean of h over the epoch), and stores one sample at the last
    step of each whole cycle (steps 4, 8, 12), the uninterrupted run's, and none in the
    cut last cycle."""
    total, cycles, per_epoch = 14, 4, 2
    x, y = three_class_rows(2 * per_epoch)
    h = np.array([_paper(k, total, cycles) for k in range(1, total + 1)])
    running = (np.cumsum(h.reshape(-1, per_epoch), axis=1) / np.arange(1, per_epoch + 1))

    def run(store, kill=None, seen=None):
        model = softmax_regression(kb.samplers.SGLD(step_size=H0, seed=5), len(x))
        callbacks = [keras.callbacks.BackupAndRestore(str(tmp_path / "backup")),
                     kb.callbacks.CyclicalSchedule(cycle_epochs=2),
                     kb.callbacks.CollectSamples(store, start_epoch=0)]
        if seen is not None:
            callbacks.append(keras.callbacks.LambdaCallback(
                on_train_batch_end=lambda batch, logs: seen.append(float(logs["step_size"]))))
        if kill is not None:
            callbacks.append(_Kill(kill))
        model.fit(x, y, batch_size=2, epochs=total // per_epoch, verbose=0, shuffle=False,
                  callbacks=callbacks)
        return model

    straight = kb.SampleStore(tmp_path / "straight")
    run(straight)
    resumed = kb.SampleStore(tmp_path / "resumed")
    first, second = [], []
    with pytest.raises(KeyboardInterrupt):
        run(resumed, kill=2, seen=first)
    model = run(resumed, seen=second)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == total
    np.testing.assert_allclose(first + second, running.ravel(), rtol=0, atol=H_TOLERANCE)
    assert [m["step"] for m in straight.metadata()] == [4, 8, 12]
    assert [(m["epoch"], m["step"]) for m in resumed.metadata()] == [(1, 4), (3, 8), (5, 12)]
    for a, b in zip(straight, resumed):
        for u, v in zip(a.weights, b.weights):
            np.testing.assert_allclose(u, v, rtol=0, atol=1e-6)


# ------------------------------------------------------------------------ the store
_KILLED_WRITER = '''
import sys, time
import keras, numpy as np
import keras_bnn as kb

path, block_at = sys.argv[1], int(sys.argv[2])
keras.utils.set_random_seed(0)
inputs = keras.Input((4,))
hidden = keras.layers.BatchNormalization()(keras.layers.Dense(5)(inputs))
model = keras.Model(inputs, keras.layers.Dense(3)(hidden))  # non-trainable: shared.npz
savez, calls = np.savez, [0]

def slow_savez(handle, **arrays):  # writes half the file, then waits for the kill
    calls[0] += 1
    if calls[0] != block_at:
        return savez(handle, **arrays)
    handle.write(b"PK" + b"\\0" * 4096)
    handle.flush()
    print("writing", flush=True)
    time.sleep(600)

np.savez = slow_savez
store = kb.SampleStore(path)
for step in range(5):
    store.append(model, step=step)
    print("appended", step, flush=True)
'''


@pytest.mark.parametrize("block_at, whole", [(1, 0), (4, 2)],
                         ids=["first-append's-shared-file", "third-sample"])
def test_a_writer_killed_inside_a_sample_file_leaves_whole_samples_only(
        tmp_path, block_at, whole):
    """SIGKILL while ``np.savez`` is half way through a file (the shared file of the first
    append, or the third sample): the partial file is a temp file only, the next
    ``SampleStore`` on the directory removes it, every acknowledged sample loads whole
    and appends go on at the next index."""
    script = tmp_path / "writer.py"
    script.write_text(_KILLED_WRITER)
    path = tmp_path / "samples"
    writer = subprocess.Popen([sys.executable, str(script), str(path), str(block_at)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    try:
        lines = []
        while not lines or lines[-1] != "writing":
            line = writer.stdout.readline()
            assert line, writer.stderr.read()[-3000:]
            lines.append(line.strip())
        temps = [n for n in _listing(path) if n.startswith(durable.TEMP_PREFIX)]
        assert len(temps) == 1 and os.path.getsize(path / temps[0]) > 4096  # mid-write
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL
    assert lines[:-1] == [f"appended {step}" for step in range(whole)]
    store = kb.SampleStore(path)
    assert not [n for n in _listing(path) if n.startswith(durable.TEMP_PREFIX)]
    assert [m["step"] for m in store.metadata()] == list(range(whole))
    for sample in store:
        shapes = [(4, 5), (5,), (5,), (5,), (5,), (5,), (5, 3), (3,)]
        assert [w.shape for w in sample.weights] == shapes
    model = store.build_model()
    assert store.append(model, step=whole) == whole
    assert len(kb.SampleStore(path)) == whole + 1


def test_a_write_that_fails_leaves_no_temp_file_no_part_and_names_the_sample(tmp_path,
                                                                             monkeypatch):
    """A full disk half way through the file (ENOSPC from the write) and a read-only store
    (EROFS creating the temp file; the tests run as root, so ``chmod`` would not refuse):
    the append raises an OSError naming the sample it was writing, the directory is as it
    was and the next append takes the next index. Until 2026-11-30 the read-only store's
    error named the hidden temp file instead ("[Errno 30] Read-only file system:
    '.../samples/.tmp-vm-1234-9da5374d6d1f'") and not the sample."""
    model = softmax_regression(kb.samplers.SGLD(step_size=H0), 30)
    store = kb.SampleStore(tmp_path / "samples")
    store.append(model, step=0)
    before = _listing(store.path)
    savez, create = np.savez, os.open

    def full_disk(handle, **arrays):
        handle.write(b"PK\3\4" + b"\0" * 100)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def read_only(path, flags, *args, **kwargs):
        if os.path.basename(path).startswith(durable.TEMP_PREFIX):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), path)
        return create(path, flags, *args, **kwargs)

    target = os.path.join(store.path, "sample-000001.npz")
    for name, failing, words in (("savez", full_disk, "No space left on device"),
                                 ("open", read_only, "Read-only file system")):
        with monkeypatch.context() as patch:
            patch.setattr(np if name == "savez" else os, name, failing)
            with pytest.raises(OSError, match=f"{words}: cannot write {target} "):
                store.append(model, step=1)
        assert _listing(store.path) == before and len(store) == 1
    assert savez is np.savez and store.append(model, step=1) == 1
    assert [m["step"] for m in kb.SampleStore(store.path).metadata()] == [0, 1]


def test_a_potential_that_turns_infinite_stops_fit_and_keeps_the_samples(tmp_path):
    """The second ``fit`` of a chain meets an infinite input at step 11 (the last batch of
    its first epoch): it stops with ``NonFiniteError``; the three samples already stored
    (steps 3, 6, 9) load, finite and unchanged, the weights hold their last finite
    values, and a third ``fit`` appends to the same store from there."""
    x, y = three_class_rows(24)
    poisoned = x.copy()
    poisoned[20] = np.inf
    model = softmax_regression(kb.samplers.SGHMC(step_size=H0, seed=2), len(x))
    store = kb.SampleStore(tmp_path / "samples")

    def fit(inputs, epochs):
        model.fit(inputs, y, batch_size=8, epochs=epochs, verbose=0, shuffle=False,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.callbacks.WarmupSampleWarning)
        fit(x, 3)
        stored = [s.weights for s in store]
        with pytest.raises(kb.NonFiniteError, match="collected samples are intact"):
            fit(poisoned, 2)
        assert all(np.all(np.isfinite(w)) for w in model.get_weights())
        assert [m["step"] for m in store.metadata()] == [3, 6, 9]
        for sample, weights in zip(kb.SampleStore(store.path), stored):
            for a, b in zip(sample.weights, weights):
                np.testing.assert_array_equal(a, b)
        fit(x, 1)
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == [(0, 3), (1, 6), (2, 9),
                                                                   (3, 14)]


def test_collect_samples_under_mirrored_strategy_writes_each_sample_once(tmp_path,
                                                                         monkeypatch):
    """Two replicas (the 2 logical CPUs of tests/conftest.py), cycles of 2 epochs of 3
    steps: one ``append`` per cycle, at its last step (steps 6 and 12), and nothing else
    in the store but its manifest and the chain's start record."""
    x, y = three_class_rows(24)
    strategy = new_mirrored()
    model = softmax_regression(kb.samplers.SGLD(step_size=H0), len(x), strategy=strategy)
    store = kb.SampleStore(tmp_path / "samples")
    appends = []
    append = kb.SampleStore.append

    def counted(self, *args, **metadata):
        appends.append(metadata["step"])
        return append(self, *args, **metadata)

    monkeypatch.setattr(kb.SampleStore, "append", counted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.callbacks.WarmupSampleWarning)
        model.fit(x, y, batch_size=8, epochs=4, verbose=0, shuffle=False, callbacks=[
            kb.callbacks.CyclicalSchedule(cycle_epochs=2),
            kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert appends == [6, 12]
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == [(1, 6), (3, 12)]
    assert _listing(store.path) == ["record-start-chain-0.json", "sample-000000.npz",
                                    "sample-000001.npz", "store.json"]


_JAX_READER = ("import json, sys, numpy as np, keras_bnn as kb; "
               "x = np.load(sys.argv[2]); "
               "ensemble = kb.PosteriorEnsemble.from_store(sys.argv[1]); "
               "print('RESULT ' + json.dumps(ensemble.predict(x, verbose=0).tolist()))")


@pytest.mark.slow  # 9-20 s: a JAX process
def test_a_store_written_under_tensorflow_is_read_under_jax(tmp_path):
    """The reverse of tests/test_jax_collect.py: samples collected under TensorFlow, the
    ensemble built from the store in a JAX process, its probabilities TensorFlow's
    within 1e-5 (float32 network and log-mean-exp, as there)."""
    pytest.importorskip("jax")
    x, y = three_class_rows(30)
    model = softmax_regression(kb.samplers.SGLD(step_size=H0), len(x))
    store = kb.SampleStore(tmp_path / "samples")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.callbacks.WarmupSampleWarning)
        model.fit(x, y, batch_size=10, epochs=3, verbose=0, shuffle=False,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    np.save(tmp_path / "x.npy", x)
    expected = kb.PosteriorEnsemble.from_store(store).predict(x, verbose=0)
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("JAX_ENABLE_X64", None)
    done = subprocess.run([sys.executable, "-c", _JAX_READER, str(store.path),
                           str(tmp_path / "x.npy")], capture_output=True, text=True,
                          timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(next(line for line in done.stdout.splitlines()
                          if line.startswith("RESULT "))[len("RESULT "):])
    assert len(store) == 3
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)


# ------------------------------------------------------------------ the fingerprint
def _with_backbone():
    """A 4-5-3-2 net whose first two layers are a functional model of their own (the
    way a pretrained backbone is used): Keras names its layers per session."""
    keras.utils.set_random_seed(0)
    backbone_input = keras.Input((4,))
    hidden = keras.layers.Dense(5, activation="relu")(backbone_input)
    backbone = keras.Model(backbone_input, keras.layers.Dense(3)(hidden))
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(2)(backbone(inputs)))


def test_a_model_holding_a_functional_model_built_twice_is_one_architecture(tmp_path):
    """The same net built twice in one process (a second chain, a notebook cell run
    again) appends to the first one's store, and two chains of it pool into one
    ensemble. Until 2026-12-01 the fingerprint hashed the nested model's graph by
    Keras' per-session layer names: the second build was refused ("holds samples of
    another architecture (layer 1 (Functional): input_layers=['input_layer', 0, 0]
    in the store, ['input_layer_2', 0, 0] in the model)"), and so were the chains."""
    first, second = _with_backbone(), _with_backbone()
    chains = [kb.SampleStore(tmp_path / f"chain-{k}") for k in (0, 1)]
    chains[0].append(first, step=1)
    chains[0].append(second, step=2)
    chains[1].append(second, step=1)
    ensemble = kb.PosteriorEnsemble.from_store(chains)
    assert ensemble.num_members == 3
    x = np.ones((2, 4), "float32")
    probabilities = keras.ops.convert_to_numpy(keras.ops.softmax(second(x)))
    np.testing.assert_allclose(ensemble.predict(x, verbose=0), probabilities, atol=1e-6)


def test_a_store_of_a_nested_model_written_before_positions_still_loads_and_extends(
        tmp_path, monkeypatch):
    """A store whose fingerprint hashed the nested model's layer names (written as before
    2026-12-01) keeps its fingerprint: the model that wrote it appends, its samples load
    and ``build_model`` rebuilds it."""
    from keras_bnn import store_fingerprint

    model = _with_backbone()
    store = kb.SampleStore(tmp_path / "samples")
    with monkeypatch.context() as patch:
        patch.setattr(store_fingerprint, "_positional", lambda config: config)
        store.append(model, step=1)
    named = store.architecture["fingerprint"]
    assert named != store_fingerprint.architecture_of(model)["fingerprint"]
    store.append(model, step=2)
    assert store.architecture["fingerprint"] == named and len(store) == 2
    assert [s.metadata["step"] for s in store] == [1, 2]
    rebuilt = store.build_model()
    rebuilt.set_weights(store[1].weights)
    x = np.ones((2, 4), "float32")
    np.testing.assert_allclose(rebuilt(x), model(x), atol=1e-6)


# ---------------------------------------------------------------------- thinning
def test_max_samples_takes_evenly_spaced_pooled_samples_first_and_last_included(tmp_path):
    """Chains of 3 and 4 samples pool to 7 in order; ``max_samples=3`` takes pooled
    positions 0, 3 and 6 (``round(linspace(0, 6, 3))``): the first chain's first and the
    second chain's first and last; ``max_samples`` above the count takes all, once each."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    chains = [kb.SampleStore(tmp_path / f"chain-{k}") for k in (0, 1)]
    pooled = []
    for chain, count in zip(chains, (3, 4)):
        for _ in range(count):
            model.set_weights([np.full(w.shape, len(pooled), "float32") for w in model.weights])
            chain.append(model, step=len(pooled))
            pooled.append(len(pooled))
    for max_samples, positions in ((3, [0, 3, 6]), (1, [0]), (2, [0, 6]), (50, pooled)):
        ensemble = kb.PosteriorEnsemble.from_store(chains, max_samples=max_samples)
        biases = ensemble.member_weights()[1]  # [S, 3]
        assert biases[:, 0].tolist() == positions, max_samples
