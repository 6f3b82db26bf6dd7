"""CollectSamples + BackupAndRestore: a sample's identity is (chain, step); a
run killed at any point and resumed neither duplicates nor drops one,
whatever the order of the callbacks (issue item 3)."""

import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import priors

N, BATCH, EPOCHS = 64, 16, 5  # 4 steps per epoch


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def _model(seed=1, step_size=1e-3):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(2, kernel_regularizer=priors.Normal(0, 1.0))(inputs)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(sampler=kb.samplers.get("sghmc", step_size=step_size, seed=3), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


class _Kill(keras.callbacks.Callback):
    """Stops the run at the end of ``epoch`` as a kill would (no further callback runs)."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt("killed")


def _fit(model, callbacks, epochs=EPOCHS):
    x, y = _data()
    model.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0, shuffle=False,
              callbacks=callbacks)


@pytest.mark.parametrize("order", ["collect_first", "backup_first"])
@pytest.mark.parametrize("killed_at", [1, EPOCHS - 1])
def test_killed_and_resumed_run_stores_each_sample_exactly_once(tmp_path, order, killed_at):
    straight = kb.SampleStore(tmp_path / "straight")
    _fit(_model(), [kb.callbacks.CollectSamples(straight, start_epoch=1)])

    store = kb.SampleStore(tmp_path / "resumed")
    backup = str(tmp_path / "backup")

    def callbacks(kill):
        collect = kb.callbacks.CollectSamples(store, start_epoch=1)
        restore = keras.callbacks.BackupAndRestore(backup, delete_checkpoint=False)
        # The kill lands between the two callbacks of its epoch end: after
        # the sample and before the backup, or after the backup and before
        # the sample.
        chosen = [collect, restore] if order == "collect_first" else [restore, collect]
        return [chosen[0], *([_Kill(killed_at)] if kill else []), chosen[1]]

    with pytest.raises(KeyboardInterrupt):
        _fit(_model(), callbacks(kill=True))
    _fit(_model(seed=7), callbacks(kill=False))  # another init: restored anyway

    expected = [(m["chain"], m["step"]) for m in straight.metadata()]
    assert expected == [(0, 4 * e) for e in range(2, EPOCHS + 1)]
    got = [(m["chain"], m["step"]) for m in store.metadata()]
    assert sorted(got) == expected  # each identity once: no duplicate, no loss
    # The resumed chain is the same chain: identical weights per step
    # (tolerance: float32 round-off of a restored optimizer state, as in
    # test_training.test_resume_continues_the_same_chain).
    by_step = {s.metadata["step"]: s.weights for s in store}
    for sample in straight:
        for a, b in zip(sample.weights, by_step[sample.metadata["step"]]):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


@pytest.mark.slow  # 19 s
def test_a_resumed_run_collects_at_equilibrium_on_the_unbroken_schedule(tmp_path):
    """``start_epoch="auto"`` with ``every=2``: the resumed run takes its
    samples at the epochs (and steps) of the run never stopped. It used to
    restart the schedule at the first stored sample's epoch, one epoch
    later, so every later sample moved by an epoch (and one more was taken)."""
    epochs = 60

    def callbacks(store, kill_at=None, backup=None):
        collect = kb.callbacks.CollectSamples(store, start_epoch="auto", every=2, window=4)
        return [collect, *([keras.callbacks.BackupAndRestore(backup, delete_checkpoint=False)]
                           if backup else []), *([_Kill(kill_at)] if kill_at else [])]

    straight = kb.SampleStore(tmp_path / "straight")
    unbroken = callbacks(straight)
    _fit(_model(step_size=0.05), unbroken, epochs)
    start = unbroken[0].started_epoch
    assert start is not None and start + 8 < epochs  # room for a kill between samples
    expected = [(m["epoch"], m["step"]) for m in straight.metadata()]
    assert [e for e, _ in expected] == list(range(start + 1, epochs, 2))

    store, backup = kb.SampleStore(tmp_path / "resumed"), str(tmp_path / "backup")
    with pytest.raises(KeyboardInterrupt):
        _fit(_model(step_size=0.05), callbacks(store, start + 4, backup), epochs)
    resumed = callbacks(store, backup=backup)
    _fit(_model(step_size=0.05), resumed, epochs)
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == expected
    assert resumed[0].started_epoch == start


def test_samples_of_other_chains_are_distinct_identities(tmp_path):
    store = kb.SampleStore(tmp_path / "samples")
    for chain in (0, 1):
        _fit(_model(seed=chain), [kb.callbacks.CollectSamples(store, start_epoch=3,
                                                              chain=chain)])
    assert sorted((m["chain"], m["step"]) for m in store.metadata()) == [
        (0, 16), (0, 20), (1, 16), (1, 20)]
    assert store.find(1, 20) is not None and store.find(2, 20) is None
    with pytest.raises(ValueError, match="chain"):
        kb.callbacks.CollectSamples(store, chain=-1)


@pytest.mark.slow
def test_cli_run_killed_9_resumes_without_duplicates_or_gaps(tmp_path):
    """A real ``keras-bnn train`` killed with SIGKILL after its 4th sample,
    then ``train --resume``: samples at every epoch end from 1 to 11, once."""
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "keras_bnn.cli", "train", "--epochs", "12",
            "--burn-in-epochs", "1", "--num-train", "200", "--num-test", "100",
            "--batch-size", "50", "--verbose", "0", "--output-dir", str(run)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    samples = run / "samples"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and process.poll() is None:
        if samples.is_dir() and sum(n.startswith("sample-") for n in os.listdir(samples)) >= 4:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the run finished before the kill"
    resumed = subprocess.run(argv[:4] + ["--resume", "--verbose", "0", "--output-dir", str(run)],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    steps = [m["step"] for m in kb.SampleStore(samples).metadata()]
    assert sorted(steps) == [4 * (epoch + 1) for epoch in range(1, 12)]
    assert not (run / "backup").exists()
    again = subprocess.run(argv[:4] + ["--resume", "--output-dir", str(run)],
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "is complete" in again.stderr
