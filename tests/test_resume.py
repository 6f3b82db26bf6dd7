"""Crash and full-disk recovery of ``keras-bnn train``, and one writer per run directory.

Real processes (``tests/workers/cli_run.py``): a run is killed with SIGKILL
at a chosen point of its backup, or runs under ``RLIMIT_FSIZE`` (a full
disk: every write past the limit fails with EFBIG; this needs no tmpfs
mount, so it works without privileges), then ``keras-bnn train --resume``
continues it. Every process uses deterministic TensorFlow ops, so a resumed
run must store bit for bit the samples of the run that was never stopped.
"""

import json
import os
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import cli
from keras_bnn.datasets import pipeline
from keras_bnn.durable import DirectoryLock
from keras_bnn.runs import RunBackup

WORKER = os.path.join(os.path.dirname(__file__), "workers", "cli_run.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = ["--num-train", "200", "--num-test", "50", "--batch-size", "50", "--epochs", "6",
       "--burn-in-epochs", "1", "--verbose", "0"]
#: Between a sample file (~10 kB) and a backup (weights, momenta, thermostats
#: and noise estimates: ~50 kB) of the default MLP on this task.
FSIZE_BELOW_BACKUP = 30_000
TIMEOUT = 240


def _cli(argv, timeout=TIMEOUT, **env):
    environ = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env)
    return subprocess.run([sys.executable, WORKER, *argv], env=environ, capture_output=True,
                          text=True, timeout=timeout, check=False)


def _samples(run_dir):
    store = kb.SampleStore(os.path.join(run_dir, "samples"))
    return [(m["step"], m["epoch"]) for m in store.metadata()], [s.weights for s in store]


def _assert_same_chain(run_dir, reference):
    (keys, weights), (ref_keys, ref_weights) = _samples(run_dir), _samples(reference)
    assert keys == ref_keys  # each sample once, at the same steps
    for mine, theirs in zip(weights, ref_weights):
        for a, b in zip(mine, theirs):
            np.testing.assert_array_equal(a, b)


def _history(run_dir):
    with open(os.path.join(run_dir, "history.json")) as handle:
        return json.load(handle)


@pytest.fixture(scope="module")
def unbroken(tmp_path_factory):
    run_dir = str(tmp_path_factory.mktemp("unbroken") / "run")
    done = _cli(["train", *RUN, "--output-dir", run_dir])
    assert done.returncode == 0, done.stderr
    assert len(_samples(run_dir)[0]) == 5
    return run_dir


@pytest.mark.slow
@pytest.mark.parametrize("kill_at, damage, says", [
    # Killed between writing the state after 3 epochs and publishing it
    # (Keras' callback: weights written, epoch not): resumes after epoch 2.
    ("before_publish:3", None, None),
    # Killed after the backup of epoch 4, before that epoch's sample; the
    # newest backup is then emptied (a damaged file): the one before is used.
    ("after_publish:4", "newest", "skipped unreadable backup"),
    # Every backup damaged: the run starts over, and stores nothing twice.
    ("after_publish:2", "all", "starting the run over"),
])
def test_a_killed_run_resumes_into_the_unbroken_chain(unbroken, tmp_path, kill_at, damage,
                                                       says):
    run_dir = str(tmp_path / "run")
    killed = _cli(["train", *RUN, "--output-dir", run_dir], KB_KILL_AT=kill_at)
    assert killed.returncode == -9, killed.stderr
    backups = RunBackup(os.path.join(run_dir, "backup")).backups()
    for _, path in backups[:1] if damage == "newest" else backups if damage else []:
        open(path, "wb").close()
    resumed = _cli(["train", "--resume", "--output-dir", run_dir])
    assert resumed.returncode == 0, resumed.stderr
    if says:
        assert says in resumed.stderr
    _assert_same_chain(run_dir, unbroken)
    assert not os.path.exists(os.path.join(run_dir, "backup"))
    # The logs of every epoch, those before the backup too, as the unbroken run's.
    assert _history(run_dir) == _history(unbroken)


@pytest.mark.slow
def test_a_full_disk_during_training_is_one_error_line_and_the_run_resumes(unbroken, tmp_path):
    """A full disk during the first backup: exit 2, one line naming the file,
    no partial backup left; ``--resume`` then starts over and completes."""
    run_dir = str(tmp_path / "run")
    full = _cli(["train", *RUN, "--output-dir", run_dir], KB_FSIZE=str(FSIZE_BELOW_BACKUP))
    assert full.returncode == 2, full.stderr
    lines = [line for line in full.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("keras-bnn: error: ")
    assert os.path.join(run_dir, "backup", "epoch-000001.npz") in lines[-1]
    assert "Traceback" not in full.stderr
    assert os.listdir(os.path.join(run_dir, "backup")) == []  # no partial file
    resumed = _cli(["train", "--resume", "--output-dir", run_dir])
    assert resumed.returncode == 0, resumed.stderr
    assert "no complete backup" in resumed.stderr
    _assert_same_chain(run_dir, unbroken)


@pytest.mark.slow
def test_a_disk_full_later_in_training_keeps_the_samples_and_earlier_backups(unbroken,
                                                                             tmp_path):
    """The disk fills up at the backup after 3 epochs, when the backups
    after 1 and 2 epochs and the first sample (of the second epoch) are on
    disk: exit 2 with one error line naming the file, all of those kept, no
    partial file; the run then resumes from the second backup into the
    unbroken chain."""
    run_dir = str(tmp_path / "run")
    full = _cli(["train", *RUN, "--output-dir", run_dir], KB_FULL_AT="3")
    assert full.returncode == 2, full.stderr
    assert "Traceback" not in full.stderr
    errors = [line for line in full.stderr.splitlines() if "keras-bnn: error" in line]
    assert len(errors) == 1 and full.stderr.strip().splitlines()[-1] == errors[0], full.stderr
    assert os.path.join(run_dir, "backup", "epoch-000003.npz") in errors[0]
    backup_dir = os.path.join(run_dir, "backup")
    assert sorted(os.listdir(backup_dir)) == ["epoch-000001.npz", "epoch-000002.npz"]
    keys, _ = _samples(run_dir)
    assert len(keys) == 1 and keys == _samples(unbroken)[0][:1]
    resumed = _cli(["train", "--resume", "--output-dir", run_dir])
    assert resumed.returncode == 0, resumed.stderr
    _assert_same_chain(run_dir, unbroken)


@pytest.mark.slow
def test_a_full_disk_during_export_is_one_error_line_and_keeps_earlier_versions(
        unbroken, tmp_path):
    model_dir = str(tmp_path / "models" / "net")
    first = _cli(["export", "--run-dir", unbroken, "--export-dir", model_dir])
    assert first.returncode == 0, first.stderr
    full = _cli(["export", "--run-dir", unbroken, "--export-dir", model_dir],
                KB_FSIZE="20000")
    assert full.returncode == 2, full.stderr
    assert "Traceback" not in full.stderr
    line = full.stderr.strip().splitlines()[-1]
    assert line.startswith("keras-bnn: error: ") and model_dir in line
    assert sorted(n for n in os.listdir(model_dir) if not n.startswith(".")) == [
        "1", "models.config"]
    assert os.path.exists(os.path.join(model_dir, "1", "saved_model.pb"))


def test_a_second_writer_of_a_run_directory_is_refused(tmp_path, capsys):
    """Another process holds the run directory: ``keras-bnn train`` into it
    exits 2 naming that process, and writes nothing."""
    run_dir = str(tmp_path / "run")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom keras_bnn.durable import DirectoryLock\n"
         "with DirectoryLock(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(120)",
         run_dir], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for argv in (["train", *RUN, "--output-dir", run_dir],
                     ["train", *RUN, "--chains", "2", "--output-dir", run_dir]):
            assert cli.main(argv) == 2
            err = capsys.readouterr().err.strip()
            assert err == err.splitlines()[0] and f"in use by pid {holder.pid}" in err
        assert sorted(os.listdir(run_dir)) == [".lock"]
    finally:
        holder.kill()
        holder.wait()
    with DirectoryLock(run_dir):  # released by the kernel when the holder died
        pass


@pytest.mark.slow
def test_two_trainings_into_one_directory(tmp_path):
    run_dir = str(tmp_path / "run")
    first = subprocess.Popen(
        [sys.executable, WORKER, "train", *RUN[:-6], "--epochs", "400", "--burn-in-epochs", "1",
         "--verbose", "0", "--output-dir", run_dir],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(os.path.join(run_dir, "config.json")):
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        second = _cli(["train", *RUN, "--output-dir", run_dir])
        assert second.returncode == 2
        assert f"in use by pid {first.pid}" in second.stderr.strip().splitlines()[-1]
        assert first.poll() is None  # the first writer is untouched
    finally:
        first.kill()
        first.wait()


def test_the_data_order_is_a_function_of_seed_and_epoch():
    """Epoch e's order does not depend on how many passes the process made
    before: a fresh pipeline set to epoch 2 repeats epoch 2 of another."""
    x, y = np.arange(40.0)[:, None], np.arange(40)

    def order(ds):
        return np.concatenate([labels for _, labels in ds.as_numpy_iterator()])

    ran = pipeline.make_dataset(x, y, 8, shuffle=True, seed=5)
    epochs = [order(ran) for _ in range(3)]
    assert len({tuple(e) for e in epochs}) == 3  # a new order every epoch
    assert all(sorted(e) == list(range(40)) for e in epochs)
    fresh = pipeline.make_dataset(x, y, 8, shuffle=True, seed=5)
    pipeline.data_epoch(fresh).assign(2)
    np.testing.assert_array_equal(order(fresh), epochs[2])
    np.testing.assert_array_equal(order(fresh), order(ran))  # both at epoch 3 now
    other = pipeline.make_dataset(x, y, 8, shuffle=True, seed=6)
    assert not np.array_equal(order(other), epochs[0])
    assert pipeline.data_epoch(pipeline.make_dataset(x, y, 8)) is None


@pytest.mark.parametrize("passes", [1, 3])
def test_the_endless_stream_holds_each_epochs_passes_from_the_epoch_set_before_it_starts(
        passes):
    """``pipeline.endless``: epoch e is the passes e…e+P−1 that a pipeline
    set to epoch e and passed over P times presents, batch for batch (a
    smaller last batch in every pass); e starts at the epoch variable's value
    when the stream makes its first batch, which it reads once and never
    changes."""
    x, y = np.arange(20.0)[:, None], np.arange(20)
    ds = pipeline.make_dataset(x, y, 8, shuffle=True, seed=5)
    reference = pipeline.make_dataset(x, y, 8, shuffle=True, seed=5)

    def epoch(e):  # what a loop setting the epoch to e, then passing P times, sees
        pipeline.data_epoch(reference).assign(e)
        return [labels for _ in range(passes) for _, labels in reference.as_numpy_iterator()]

    expected = epoch(4) + epoch(5)
    assert [len(b) for b in expected[:3]] == [8, 8, 4]
    assert len({tuple(b) for b in expected[:3 * passes]}) == 3 * passes  # distinct passes
    stream = pipeline.endless(ds, passes)
    assert pipeline.data_epoch(stream) is pipeline.data_epoch(ds)
    pipeline.data_epoch(ds).assign(4)
    iterator = iter(stream)
    got = [next(iterator)[1].numpy()]
    pipeline.data_epoch(ds).assign(0)  # after the first batch: no effect
    got += [next(iterator)[1].numpy() for _ in expected[1:]]
    for want, have in zip(expected, got):
        np.testing.assert_array_equal(have, want)
    assert int(pipeline.data_epoch(ds).numpy()) == 0  # only read


def test_only_a_shuffled_unrepeated_pipeline_has_an_endless_stream():
    x, y = np.arange(20.0)[:, None], np.arange(20)
    assert pipeline.endless(pipeline.make_dataset(x, y, 8), 1) is None
    assert pipeline.endless(pipeline.make_dataset(x, y, 8, shuffle=True, seed=0,
                                                  repeat=True), 1) is None
    with pytest.raises(ValueError, match="passes_per_epoch"):
        pipeline.endless(pipeline.make_dataset(x, y, 8, shuffle=True, seed=0), 0)


class _Clock:
    """A fake ``time`` for :mod:`keras_bnn.runs.checkpoints` that a callback advances."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self):
        return self.now


class _Tick(keras.callbacks.Callback):
    def __init__(self, clock, seconds):
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def on_epoch_begin(self, epoch, logs=None):
        self.clock.now += self.seconds


@pytest.mark.parametrize("interval, epochs_backed_up", [
    (None, [6, 3]),  # the default 10 s: epochs end at 4, 8, 12, ... s; backups at 12 and 24
    (0, [7, 6]),  # every epoch (the last two kept)
    (30, []),  # none within 28 s
])
def test_backups_are_written_at_most_every_interval_seconds(tmp_path, monkeypatch, interval,
                                                             epochs_backed_up):
    """A backup costs about as much as a 2-step epoch of the bundled tables,
    so ``RunBackup`` writes one at the end of the first epoch at least
    ``interval`` seconds after the last (default ``BACKUP_INTERVAL`` = 10 s).
    With a clock that advances 4 s an epoch, 7 epochs: the backups are the
    epochs listed (the newest two kept), and the state in the newest is the
    model's at that epoch."""
    from keras_bnn.runs import checkpoints

    # what case None expects; another test that left it changed made it fail with [] == [6, 3]
    assert checkpoints.BACKUP_INTERVAL == 10.0
    clock = _Clock()
    monkeypatch.setattr(checkpoints, "time", clock)
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(keras.optimizers.SGD(0.1), loss="mse")
    x, y = np.ones((8, 3), "float32"), np.zeros((8, 2), "float32")
    saved = {}

    class Snapshot(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            saved[epoch + 1] = model.get_weights()

    backup = RunBackup(str(tmp_path / "backup"), interval=interval)
    model.fit(x, y, epochs=7, batch_size=4, verbose=0,
              callbacks=[backup, Snapshot(), _Tick(clock, 4.0)])
    assert [epoch for epoch, _ in backup.backups()] == epochs_backed_up
    if epochs_backed_up:
        fresh = RunBackup(str(tmp_path / "backup"))
        fresh.set_model(model)
        model.set_weights([np.zeros_like(w) for w in model.get_weights()])
        fresh.on_train_begin()
        for restored, expected in zip(model.get_weights(), saved[epochs_backed_up[0]]):
            np.testing.assert_array_equal(restored, expected)


@pytest.mark.parametrize("interval", [-1, float("nan"), float("inf"), "soon"])
def test_a_bad_backup_interval_is_refused_by_name(interval):
    with pytest.raises(ValueError, match="`interval`"):
        RunBackup("unused", interval=interval)
