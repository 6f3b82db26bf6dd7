"""The start of collection at equilibrium across ``fit`` calls and resumes
(``CollectSamples(start_epoch="auto")``): a later ``fit`` or a run restored by
``BackupAndRestore`` inside the equilibrium wait starts collecting at the
epoch of the run never stopped."""

import keras
import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import priors

# 4 steps per epoch. This chain is stationary from epoch 46 by the equilibrium test
# (43 before its rho-hat was capped, 2026-11-30): 50 epochs leave room after it.
N, BATCH, EPOCHS, WINDOW = 64, 16, 50, 4


def _model():
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(N, 3)).astype("float32")
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(2, kernel_regularizer=priors.Normal(0, 1.0),
                                 bias_regularizer=priors.Normal(0, 1.0))(inputs)
    model = kb.BayesianModel(inputs, outputs)
    model.compile(sampler=kb.samplers.get("sghmc", step_size=0.05, seed=3), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model, x, (x[:, 0] > 0).astype("int32")


def _kill(at):
    """A callback that stops the run at the end of epoch ``at`` as a kill would."""
    def end(epoch, logs):
        if epoch == at:
            raise KeyboardInterrupt("killed")
    return keras.callbacks.LambdaCallback(on_epoch_end=end)


def _fit(store, epochs, callbacks=(), collect=None, model=None):
    model, x, y = model or _model()
    collect = collect or kb.callbacks.CollectSamples(store, window=WINDOW)
    model.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0, shuffle=False,
              callbacks=[collect, *callbacks])
    return collect, (model, x, y)


@pytest.mark.slow  # 25 s of CPU, up to 75 s on a loaded machine
def test_a_fit_stopped_while_waiting_for_equilibrium_starts_collection_on_schedule(tmp_path):
    """Until 2026-11-30 every ``fit`` began the stationarity test afresh: a
    chain that collected from epoch 43 in one fit of 46 epochs collected
    nothing when the same 46 epochs ran as 42 + 4 (now: from epoch 46 of 50), in one notebook or
    killed after epoch 41 and restored (the test needs 2w = 8 epochs)."""
    straight, _ = _fit(kb.SampleStore(tmp_path / "straight"), EPOCHS)
    start = straight.started_epoch
    assert start is not None and 2 * WINDOW < start < EPOCHS - 1
    expected = [(m["epoch"], m["step"]) for m in straight.store.metadata()]

    # Two fits, one callback; then a new callback on the same store.
    split = start - 1
    for fresh in (False, True):
        store = kb.SampleStore(tmp_path / f"split{fresh}")
        collect, model = _fit(store, split)
        assert collect.started_epoch is None
        collect, _ = _fit(store, EPOCHS - split, model=model,
                          collect=kb.callbacks.CollectSamples(store, window=WINDOW)
                          if fresh else collect)
        assert collect.started_epoch == start
        assert [(m["epoch"], m["step"]) for m in store.metadata()] == expected

    # Killed inside the wait, restored from the backup of the epoch before.
    store, backup = kb.SampleStore(tmp_path / "resumed"), str(tmp_path / "backup")
    with pytest.raises(KeyboardInterrupt):
        _fit(store, EPOCHS, [keras.callbacks.BackupAndRestore(backup, delete_checkpoint=False),
                             _kill(start - 1)])
    resumed, _ = _fit(store, EPOCHS, [keras.callbacks.BackupAndRestore(backup)])
    assert resumed.started_epoch == start
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == expected


def _auto_fit(store, epochs, callbacks=()):
    """SGLD at ``step_size="auto"`` (240 warm-up steps, target 0.3) on a
    4-8-3 tanh network, 8 steps an epoch."""
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(128, 4)).astype("float32")
    y = (np.digitize(x[:, 0] + 0.3 * x[:, 1], [-0.5, 0.5]) % 3).astype("int32")
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, activation="tanh", name="hidden")(inputs)
    bnn = kb.bayesian(keras.Model(inputs, keras.layers.Dense(3, name="logits")(hidden)))
    bnn.compile(sampler=kb.samplers.SGLD(seed=0, warmup_steps=240, target_noise_ratio=0.3),
                train_size=len(x),
                loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    collect = kb.callbacks.CollectSamples(store, window=WINDOW)
    bnn.fit(x, y, batch_size=16, epochs=epochs, verbose=0, shuffle=False,
            callbacks=[collect, *callbacks])
    return collect


@pytest.mark.slow  # 30 s of CPU
def test_a_run_killed_inside_the_second_noise_measurement_measures_the_same_epochs(tmp_path):
    """Killed halfway through the step factors' second noise measurement
    (epochs 39-68 of the run never stopped), the restored run began it again
    at epoch 61 (61-90) until 2026-11-30; now it averages the same epochs."""
    epochs = 120
    straight = _auto_fit(kb.SampleStore(tmp_path / "straight"), epochs)
    measured = straight.remeasurement
    assert straight.started_epoch is not None and measured is not None
    store, backup = kb.SampleStore(tmp_path / "resumed"), str(tmp_path / "backup")
    with pytest.raises(KeyboardInterrupt):
        _auto_fit(store, epochs, [keras.callbacks.BackupAndRestore(backup),
                                  _kill((measured["first_epoch"] + measured["epoch"]) // 2)])
    resumed = _auto_fit(store, epochs, [keras.callbacks.BackupAndRestore(backup)])
    assert resumed.remeasurement == measured
    assert resumed.started_epoch == straight.started_epoch
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == [
        (m["epoch"], m["step"]) for m in straight.store.metadata()]
