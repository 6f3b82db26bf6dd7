"""How long a run trains: ``epochs``, and past it up to ``max_epochs`` until
its chain has been sampled for ``MIN_SAMPLED_SHARE`` of ``epochs``.

Each chain finds its own equilibrium, so at a fixed length a chain that is
stationary late collects a handful of samples: measured on the README's
reference workflow (synthetic task, 16 hidden units, ``--chains 4`` at the
defaults), chains 0-3 collected 30, 40, 5 and 30 samples, and ``evaluate``
reported R-hat over the shortest chain's 5 draws. The run used here: an
explicit step (no warm-up), 4 steps an epoch, the equilibrium test's two
10-epoch windows: its transient ends at epoch 23 (at epoch 19, the first the
test can pass, the configurational temperature and −log p(θ) still trend:
z = 7.6 against 3.8; the test passed it before its ρ̂ was capped, 2026-11-30),
so collection starts at epoch 23 and, one sample an epoch and ``epochs=20``,
the run samples 5 epochs: it ends after epoch 28.
"""

import dataclasses
import json
import os

import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.runs import checkpoints
from keras_bnn.runs.config import (MAX_LENGTH, MIN_SAMPLED_SHARE, RunConfig, default_epochs,
                                   resume_config)

EPOCHS = 20
SAMPLED = 5  # MIN_SAMPLED_SHARE of EPOCHS
START, END = 23, 23 + SAMPLED  # epochs: collection's first, and the run's length


def _config(output_dir, **fields):
    values = dict(num_train=200, num_test=50, batch_size=50, sampler="sghmc", step_size=0.01,
                  epochs=EPOCHS, max_epochs=80, output_dir=str(output_dir))
    return RunConfig(**{**values, **fields}).validate()


def _steps_and_weights(store):
    return [m["step"] for m in store.metadata()], [s.weights for s in store]


@pytest.fixture(scope="module")
def lengthened(tmp_path_factory):
    return kb.runs.train(_config(tmp_path_factory.mktemp("run") / "run"), verbose=0)


def test_a_chain_stationary_late_trains_on_until_it_has_its_samples(lengthened):
    collection = lengthened.collection
    assert SAMPLED == MIN_SAMPLED_SHARE * EPOCHS
    assert collection["start_epoch"] == START
    assert len(lengthened.store) == SAMPLED  # one an epoch: ~100 over a run's epochs
    assert collection["epochs"] == END == len(lengthened.history.epoch)
    assert collection["lengthened"].startswith(f"{END} epochs, not {EPOCHS}: collection "
                                               f"started at epoch {START}")
    run = kb.runs.RunDir(os.path.dirname(lengthened.store.path))
    assert run.read_json(run.collection)["epochs"] == END
    assert run.read_json(run.config)["max_epochs"] == 80


def test_a_run_that_has_its_samples_ends_at_its_epochs(tmp_path):
    result = kb.runs.train(_config(tmp_path / "run", epochs=END + 5), verbose=0)
    assert result.collection["start_epoch"] == START
    assert len(result.history.epoch) == END + 5 and len(result.store) == SAMPLED + 5
    assert result.collection["lengthened"] is None


def test_max_epochs_bounds_the_run_and_says_so(tmp_path):
    result = kb.runs.train(_config(tmp_path / "run", max_epochs=START + 3), verbose=0)
    assert len(result.history.epoch) == START + 3 and len(result.store) == 3
    assert "max_epochs, the most allowed, ended it" in result.collection["lengthened"]


@pytest.mark.parametrize("killed_after", [END - 2, END])
def test_a_run_killed_past_its_epochs_resumes_into_the_same_samples(
        lengthened, tmp_path, monkeypatch, killed_after):
    """Killed after the backup of epoch END - 2 (lengthened, not done) or of the
    epoch it ends at, before that epoch's sample: ``--resume`` trains on to
    the same end, takes the cut-off sample, and trains no epoch more."""
    monkeypatch.setattr(checkpoints, "BACKUP_INTERVAL", 0)
    save = checkpoints.RunBackup.save

    def save_then_die(self, epochs_done):
        save(self, epochs_done)
        if epochs_done == killed_after:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(checkpoints.RunBackup, "save", save_then_die)
    run_dir = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        kb.runs.train(_config(run_dir), verbose=0)
    assert len(kb.SampleStore(run_dir / "samples")) == killed_after - 1 - START
    monkeypatch.setattr(checkpoints.RunBackup, "save", save)
    resumed = kb.runs.train(resume_config(str(run_dir), {}), verbose=0, resume=True)
    assert resumed.collection["epochs"] == END
    # history.json covers the whole run (it held the epochs after the backup only).
    history, unbroken = resumed.history.history, lengthened.history.history
    assert json.load(open(run_dir / "history.json")) == history
    assert sorted(history) == sorted(unbroken)
    for key, values in history.items():
        assert len(values) == END, key
        np.testing.assert_array_equal(values[:killed_after], unbroken[key][:killed_after])
    (steps, weights), (expected, expected_weights) = (
        _steps_and_weights(resumed.store), _steps_and_weights(lengthened.store))
    assert steps == expected
    for mine, theirs in zip(weights, expected_weights):  # float32 round-off of a restore
        for a, b in zip(mine, theirs):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)


def test_the_default_length_may_double_for_a_sampler_only():
    steps = 13  # digits: 1 297 rows in batches of 100
    sampler = RunConfig(dataset="digits").validate().resolve_length(steps)
    assert sampler.epochs == default_epochs(steps)
    assert sampler.max_epochs == MAX_LENGTH * sampler.epochs
    baseline = RunConfig(dataset="digits", sampler="sgd").validate().resolve_length(steps)
    assert baseline.max_epochs == baseline.epochs
    fixed = RunConfig(dataset="digits", burn_in_epochs=150).validate().resolve_length(steps)
    assert fixed.max_epochs == fixed.epochs
    assert RunConfig.from_dict(dataclasses.asdict(fixed)) == fixed  # as --resume reads it
    given = RunConfig(dataset="digits", epochs=50).validate().resolve_length(steps)
    assert given.max_epochs == 50


@pytest.mark.parametrize("fields, says", [
    ({"epochs": 50, "max_epochs": 40}, "an int >= 50"),
    ({"epochs": 50, "max_epochs": 60, "burn_in_epochs": 10}, "burn_in_epochs='auto'"),
    ({"epochs": 50, "max_epochs": 60, "sampler": "sgd"}, "a sampler collects"),
    ({"max_epochs": 1.5}, "an int"),
])
def test_a_bad_max_epochs_is_named(fields, says):
    with pytest.raises(ValueError, match="max_epochs") as error:
        RunConfig(dataset="digits", **fields).validate()
    assert says in str(error.value)


def test_a_max_epochs_below_the_default_length_is_refused():
    config = RunConfig(dataset="digits", max_epochs=100).validate()
    with pytest.raises(ValueError, match="max_epochs.*default `epochs` of this run"):
        config.resolve_length(13)
