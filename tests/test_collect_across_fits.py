"""CollectSamples over several ``fit`` calls, as a notebook user runs them.

A later ``fit`` without ``initial_epoch`` numbers its epochs from 0 again;
until 2026-11-30 the ``every`` schedule and an int ``start_epoch`` restarted
with it (every=2 over two fits of 5 epochs: samples at steps 6, 12, 21, 27;
start_epoch=6: nothing collected, no warning).
"""

import warnings

import keras
import numpy as np
import pytest

import keras_bnn as kb

N, BATCH, EPOCHS = 120, 40, 5  # 3 steps an epoch


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def _model(step_size=1e-3):
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((3,), 2, hidden=(8,))
    model.compile(sampler=kb.samplers.SGHMC(step_size=step_size), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def _fit(model, callbacks, **kwargs):
    x, y = _data()
    model.fit(x, y, batch_size=BATCH, epochs=kwargs.pop("epochs", EPOCHS), verbose=0,
              callbacks=callbacks, **kwargs)


@pytest.mark.parametrize("new_callback", [False, True])
def test_every_keeps_its_spacing_across_fits(tmp_path, new_callback):
    model, store = _model(), kb.SampleStore(tmp_path / "samples")
    collect = kb.callbacks.CollectSamples(store, start_epoch=0, every=2)
    _fit(model, [collect])
    if new_callback:  # counted from the step: 15 // 3 = epoch 5
        collect = kb.callbacks.CollectSamples(store, start_epoch=0, every=2)
    _fit(model, [collect])
    # A fit given its initial_epoch keeps it (not shifted again).
    _fit(model, [collect], initial_epoch=2 * EPOCHS, epochs=2 * EPOCHS + 2)
    # Every 2 epochs of 3 steps: 6 steps apart across the boundaries (steps 15, 30) too.
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == [
        (1, 6), (3, 12), (5, 18), (7, 24), (9, 30), (11, 36)]


def test_an_int_start_epoch_counts_across_fits_and_warns_until_reached(tmp_path):
    model, store = _model(), kb.SampleStore(tmp_path / "samples")
    collect = kb.callbacks.CollectSamples(store, start_epoch=6, every=1)
    with pytest.warns(kb.NotConvergedWarning, match=r"start_epoch=6 was not reached, the last "
                      r"epoch was 4 .* goes on from epoch 5"):
        _fit(model, [collect])
    assert len(store) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", kb.NotConvergedWarning)
        _fit(model, [collect])
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == [
        (6, 21), (7, 24), (8, 27), (9, 30)]


class _Kill(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == 8:  # 2 steps into epoch 2
            raise RuntimeError("killed")


def test_a_resume_from_a_backup_inside_an_epoch_of_cycles(tmp_path):
    """Keras restarts epoch 2 at the backup's step 8, so the resumed epochs
    end at steps 11, 14, 17 (the store's count) instead of 9, 12, 15. Until
    2026-11-30 the resumed run stored a second sample of epoch 1 at step 8
    (the store held it at step 6), and with cycles of 2 epochs and
    ``every=None`` the refusal asked for multiples of the steps per epoch,
    which ``cycle_steps=6`` is; ``every=2``, which it now names, resumes."""
    store = kb.SampleStore(tmp_path / "samples")
    step_size = kb.schedules.CyclicalCosine(1e-3, cycle_steps=6)

    def backup():
        return keras.callbacks.BackupAndRestore(str(tmp_path / "backup"), save_freq=1)

    def collect():
        return kb.callbacks.CollectSamples(store, start_epoch=0, every=2)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kb.MidEpochBackupWarning)
        with pytest.raises(RuntimeError, match="killed"):
            _fit(_model(step_size), [backup(), collect(), _Kill()])
        with pytest.raises(ValueError, match=r"starts at step 8, 2 steps into an epoch "
                           r"of 3 steps .* Pass CollectSamples\(every=2\)"):
            _fit(_model(step_size), [backup(), kb.callbacks.CollectSamples(store, 0)])
        resumed = _model(step_size)
        _fit(resumed, [backup(), collect()])
    assert int(resumed.optimizer.iterations.numpy()) == 8 + 3 * 3
    assert [(m["epoch"], m["step"]) for m in store.metadata()] == [(1, 6), (3, 14)]


def test_a_temperature_ramp_goes_on_across_fits():
    """Until 2026-11-30 the second fit started the ramp over: T = 1 at its first epoch."""
    model, seen = _model(), []
    ramp = kb.callbacks.TemperatureRamp(1.0, 0.1, ramp_epochs=4)
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: seen.append(model.optimizer.temperature))
    _fit(model, [ramp, record], epochs=3)
    _fit(model, [ramp, record], epochs=3)
    np.testing.assert_allclose(seen, [1.0, 0.775, 0.55, 0.325, 0.1, 0.1], rtol=1e-6)
