"""Collecting samples as a user meets it: a cyclical step size given in steps.

``CollectSamples(every=None)`` takes a sample at the epoch end that ends a
cycle; a cycle that ends inside an epoch gave no sample, silently, until
2026-11-29 (cycles of 10 steps in epochs of 3: 2 samples in 6 cycles).
"""

import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bnn as kb

N, BATCH = 120, 40  # 3 steps an epoch


def _data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 3)).astype("float32")
    return x, (x[:, 0] > 0).astype("int32")


def _model(cycle_steps):
    keras.utils.set_random_seed(0)
    model = kb.models.mlp((3,), 2, hidden=(8,))
    step_size = kb.schedules.CyclicalCosine(1e-3, cycle_steps=cycle_steps)
    model.compile(sampler=kb.samplers.SGHMC(step_size=step_size), train_size=N,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model


def test_cycles_that_end_inside_epochs_are_refused_before_a_step(tmp_path):
    x, y = _data()
    model, store = _model(cycle_steps=10), kb.SampleStore(tmp_path / "inside")
    with pytest.raises(ValueError, match=r"cycle_steps=10.*epochs of 3 steps"):
        model.fit(x, y, batch_size=BATCH, epochs=20, verbose=0,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert int(model.optimizer.iterations.numpy()) == 0 and len(store) == 0
    # Cycles of whole epochs: one sample per cycle, at its last step.
    model, store = _model(cycle_steps=6), kb.SampleStore(tmp_path / "whole")
    model.fit(x, y, batch_size=BATCH, epochs=8, verbose=0,
              callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    assert [m["step"] for m in store.metadata()] == [6, 12, 18, 24]


def test_a_cycle_ending_inside_an_epoch_of_unknown_length_warns(tmp_path):
    x, y = _data()
    # filter: fit cannot tell the steps per epoch, so nothing is checked up front.
    data = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda *_: True).batch(BATCH)
    model, store = _model(cycle_steps=10), kb.SampleStore(tmp_path / "samples")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(data, epochs=4, verbose=0,
                  callbacks=[kb.callbacks.CollectSamples(store, start_epoch=0)])
    missed = [str(w.message) for w in caught if "inside epoch" in str(w.message)]
    # The cycle ending at step 9 is the first of epoch 3 (steps 9-11): once a fit.
    assert len(missed) == 1 and "step 9, inside epoch 3 (steps 9-11)" in missed[0]
    assert len(store) == 0


def test_next_cycle_end_is_the_first_cycle_end_at_or_after_a_step():
    schedule = kb.schedules.CyclicalCosine(1e-3, cycle_steps=7, burn_in_steps=5)
    for step in range(40):
        expected = next(t for t in range(step, step + 20) if schedule.is_cycle_end(t))
        assert schedule.next_cycle_end(step) == expected
    assert kb.schedules.CyclicalCosine(1e-3).next_cycle_end(3) is None


def test_the_last_step_of_a_cycle_is_the_smallest_past_float32s_exact_steps():
    # Until 2026-11-29 the phase was float32: past 2**24 steps a cycle's last
    # step (where its sample is taken) rounded to the next cycle's first, h0.
    schedule = kb.schedules.CyclicalCosine(1.0, cycle_steps=1000)
    end = 20_000_999
    assert schedule.is_cycle_end(end)
    value = float(schedule(keras.ops.convert_to_tensor(end, "int64")))
    # 1 + cos(...) in float32: within one ulp of 1 (6e-8), 2.4 % of sin²(π/2000).
    assert value == pytest.approx(math.sin(math.pi / 2000) ** 2, rel=0.03)


@keras.saving.register_keras_serializable(package="test_store_use")
class _Net(keras.Model):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.hidden, self.logits = keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)

    def call(self, x):
        return self.logits(self.hidden(x))


def test_a_store_of_a_class_this_process_does_not_know_says_which(tmp_path, monkeypatch):
    # As another process reads it, where the module defining the class is not imported.
    net = _Net()
    net(np.zeros((1, 4), "float32"))
    model = kb.bayesian(net)
    store = kb.SampleStore(tmp_path / "samples")
    store.append(model)
    monkeypatch.delitem(keras.saving.get_custom_objects(), "test_store_use>_Net")
    with pytest.raises(ValueError) as caught:
        kb.PosteriorEnsemble.from_store(store)
    # Until 2026-11-29: 5 kB, Keras' "could not be deserialized properly ... from_config"
    # and a dump of the stored config before the class was named.
    message = str(caught.value)
    assert "its class '_Net' is not registered in this process" in message
    assert len(message) < 400
