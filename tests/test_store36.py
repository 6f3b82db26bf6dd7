"""What a run leaves on disk when its step size blows the weights up: a step
whose potential and gradient are finite but whose update overflows (h = 3e38)
passes the step's guard, so its NaN/Inf weights must be refused by what
stores them, the sample store and the run's backup, with NonFiniteError."""

import glob
import os

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn.runs.checkpoints import RunBackup

STEPS_PER_EPOCH = 4  # 64 examples, batches of 16


class _Jump(keras.optimizers.schedules.LearningRateSchedule):
    """A sane step size, then a huge one from step ``at`` (0-based) on."""

    def __init__(self, at, big):
        self.at, self.big = at, big

    def __call__(self, step):
        return keras.ops.where(step < self.at, 1e-4, self.big)

    def get_config(self):
        return {"at": self.at, "big": self.big}


def _fit(tmp_path, jump_at):
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int32")
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(hidden)))
    model.compile(sampler=kb.samplers.SGLD(step_size=_Jump(jump_at, 3e38), seed=0),
                  train_size=64,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(tmp_path / "samples")
    backup = RunBackup(tmp_path / "backup", interval=0)  # first, as keras-bnn train has it
    collect = kb.callbacks.CollectSamples(store, start_epoch=0, every=1)
    with pytest.raises(kb.NonFiniteError) as stop:
        model.fit(x, y, batch_size=16, epochs=10, callbacks=[backup, collect], verbose=0)
    return model, store, str(stop.value)


def test_an_update_that_overflows_at_an_epochs_end_is_neither_backed_up_nor_stored(tmp_path):
    """The overflow is the last step of epoch 6 (step 24): until 2026-11-30
    the backup of epoch 6 was written with Inf weights (``--resume`` restored
    them) and ``append`` then failed with a ValueError about a sample."""
    model, store, message = _fit(tmp_path, jump_at=6 * STEPS_PER_EPOCH - 1)
    assert not all(np.isfinite(w).all() for w in model.get_weights())  # the overflow happened
    assert "weights became NaN/Inf" in message and "after epoch 6" in message, message
    backups = sorted(glob.glob(os.path.join(tmp_path, "backup", "epoch-*.npz")))
    assert [os.path.basename(p) for p in backups] == ["epoch-000004.npz", "epoch-000005.npz"]
    for path in backups:
        with np.load(path) as data:
            assert all(np.isfinite(data[f"v{i}"]).all() for i in range(len(model.weights)))
    assert [m["step"] for m in store.metadata()] == [4 * k for k in range(1, 6)]
    assert all(len(sample.weights) == 4 for sample in store)  # each loads, checked finite


def test_a_store_written_before_the_overflow_is_left_whole(tmp_path):
    """CollectSamples alone (no backup): the overflow at epoch 3's last step
    stops training with NonFiniteError naming the weight, and the two samples
    written before stay the store's only ones."""
    keras.utils.set_random_seed(0)
    x = np.random.default_rng(1).normal(size=(64, 4)).astype("float32")
    y = (x[:, 1] > 0).astype("int32")
    inputs = keras.Input((4,))
    model = kb.bayesian(keras.Model(inputs, keras.layers.Dense(2)(inputs)))
    model.compile(sampler=kb.samplers.SGLD(step_size=_Jump(3 * STEPS_PER_EPOCH - 1, 3e38),
                                           seed=0),
                  train_size=64,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    store = kb.SampleStore(tmp_path / "samples")
    collect = kb.callbacks.CollectSamples(store, start_epoch=0, every=1)
    with pytest.raises(kb.NonFiniteError, match=r"dense.*end of epoch 2, step 12"):
        model.fit(x, y, batch_size=16, epochs=10, callbacks=[collect], verbose=0)
    assert [m["step"] for m in store.metadata()] == [4, 8]
    assert not [n for n in os.listdir(store.path) if n.startswith(".tmp")]


def _dense_model(units=3):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    return keras.Model(inputs, keras.layers.Dense(units)(inputs))


def test_an_index_out_of_range_names_the_store_and_its_range(tmp_path):
    """``store[12]`` of 12 samples said only "range object index out of range"."""
    store = kb.SampleStore(tmp_path / "s")
    with pytest.raises(IndexError, match=r"`index` 0 is out of range for its 0 samples \(empty"):
        store[0]
    for step in range(12):
        store.append(_dense_model(), step=step)
    assert store[-12].metadata["step"] == 0 and store[11].metadata["step"] == 11
    for index in (12, -13):
        with pytest.raises(IndexError, match=rf"`index` {index} is out of range for its 12 "
                                             r"samples \(0 to 11, or -1 to -12 from the end\)"):
            store[index]


def test_a_model_of_other_layers_is_told_which_layers_differ(tmp_path):
    """Reopening a functional model's store with the Sequential of the same
    Dense said "2 layers in the store, 1 in the model": which ones?"""
    store = kb.SampleStore(tmp_path / "s")
    store.append(_dense_model(), step=0)
    sequential = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    with pytest.raises(ValueError, match=r"2 layers in the store \(InputLayer, Dense\), 1 in "
                                         r"the model \(Dense\)"):
        store.append(sequential, step=1)
