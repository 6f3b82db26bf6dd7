"""The step rise also opens for a chain far from equilibrium at the warm-up's end.

The rise of the frozen step (samplers.step_rise.StepRise) opened only for a
chain whose noise spread exceeded NOISE_SPREAD. On diabetes (features bmi
and s5, a ``Dense(2)`` Gaussian head, T = 1) seed 3 froze h inside the
transient for all four samplers (SGLD h = 3.6e-8), its epoch-mean
configurational temperature read 500·T at the first epoch end after the
warm-up and still 90·T after 16 000 steps: no equilibrium, so neither the
rise nor the second noise measurement's raise. Now an epoch-mean
configurational temperature outside ``[1/2, 2]·T`` there opens the rise too.
Before: ``test_a_chain_far_from_equilibrium_rises`` found the rise DONE
at the warm-up's end (AssertionError: assert -1.0 >= 1.0).
"""

import warnings

import keras
import numpy as np
import tensorflow as tf

import keras_bnn as kb
from keras_bnn.samplers import step_rise
from test_remeasure41 import _diabetes

PER_EPOCH = 40


def _fit(seed, warmup, epochs):
    """SGLD on diabetes (as /tmp/remeasure41/measure.py), ``warmup`` steps;
    returns the model and ``(T log / T, h, rising)`` at each epoch's end."""
    x, y = _diabetes()
    keras.utils.set_random_seed(seed)
    model = kb.bayesian(keras.Sequential([keras.Input((2,)), keras.layers.Dense(2)]))
    model.compile(sampler=kb.samplers.SGLD(seed=seed, warmup_steps=warmup), temperature=1.0,
                  train_size=len(x), loss=kb.likelihoods.GaussianNLL())
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=seed).batch(32)
    ends = []

    def record(epoch, logs):
        sampler = model.optimizer
        ends.append((logs["configurational_temperature"], sampler.step_size_value,
                     sampler.warmup.rising))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stiffness, not at equilibrium
        model.fit(data.repeat(), steps_per_epoch=PER_EPOCH, epochs=epochs, verbose=0,
                  callbacks=[keras.callbacks.LambdaCallback(on_epoch_end=record)])
    return model, ends


def test_the_gate_reads_the_epoch_temperatures():
    """Above 2·T by more than TRANSIENT_Z standard errors is far; below T
    (a chain growing out of its initialisation) and fewer than 5 finite
    readings are not."""
    far = step_rise.far_from_equilibrium
    assert far([2.1] * 5, 1.0) and far([4.6] * 5, 2.0)
    assert not far([1.9] * 5, 1.0) and not far([0.01] * 5, 1.0)
    assert not far([1.0, 7.0] * 2 + [4.0], 1.0)  # mean 4 ± 1.2: not 4 SE above 2
    assert far([500.0, 480.0, 470.0, 455.0, 440.0], 1.0)
    assert not far([-2.0, 3.6, -0.3, 2.5, 1.1], 1.0)  # diabetes at equilibrium
    assert not far([float("nan")] + [9.0] * 4, 1.0) and not far([500.0] * 4, 1.0)


def test_a_chain_far_from_equilibrium_rises():
    """Seed 3 reads about 500·T at the first epoch end after the warm-up,
    with its noise spread within NOISE_SPREAD: the rise opens there and h
    rises above the warm-up's."""
    model, ends = _fit(3, 400, 400 // PER_EPOCH + 12)  # 880 steps
    judged = 400 // PER_EPOCH  # the first epoch end past the warm-up
    temperature, frozen, _ = ends[judged]
    state = ends[judged + 1][2]  # recorded before fit's callback judges
    assert model.optimizer.frozen_noise_spread()[0] == 0.0
    assert temperature > 100.0
    assert state >= step_rise.RISING
    assert all(state >= step_rise.RISING for *_, state in ends[judged + 1:])
    assert ends[-1][1] > 1.2 * frozen  # constant before


def test_a_chain_near_t_runs_as_before(monkeypatch):
    """Seed 4 reads near T over the default warm-up's second half (its epoch
    means scatter from -0.4 to 3.6·T: 6 weights): the rise is done at the
    warm-up's end, with the same h and bit-identical weights as without the gate."""
    runs = []
    for off in (False, True):
        if off:
            monkeypatch.setattr(step_rise, "far_from_equilibrium", lambda logs, t: False)
        model, ends = _fit(4, 1000, 1000 // PER_EPOCH + 4)
        runs.append((ends, [np.array(w) for w in model.get_weights()]))
    (on, w_on), (off, w_off) = runs
    temperatures = [t for t, *_ in on[13:26]]  # the warm-up's second half and one more
    assert not step_rise.far_from_equilibrium(temperatures, 1.0)
    assert on[-1][2] == step_rise.DONE  # recorded before fit's callback judges
    assert on == off
    assert all(np.array_equal(a, b) for a, b in zip(w_on, w_off))
