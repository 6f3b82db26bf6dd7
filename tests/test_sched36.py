"""The cyclical step size as a reproduction of Zhang et al. 2020 (cSGLD/cSGHMC) uses it.

The paper's step, for K steps in M cycles (k = 1..K):
``α_k = α0/2 · [cos(π · mod(k−1, ⌈K/M⌉) / ⌈K/M⌉) + 1]``, which is
``CyclicalCosine(α0, cycle_steps=⌈K/M⌉)`` at step ``k − 1``: checked at every
step, across ``fit`` calls, through serialisation (an ``"auto"`` step
included), and with bad arguments.
"""

import json
import math

import keras
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import keras_bnn as kb
from fit_helpers import softmax_regression, three_class_rows
from keras_bnn import samplers, schedules

H0 = 0.3


def _paper(k, total, cycles, h0=H0):
    """Zhang et al. 2020, eq. (2): the step of (1-based) iteration k."""
    length = math.ceil(total / cycles)
    return h0 / 2 * (math.cos(math.pi * ((k - 1) % length) / length) + 1)


def _values(schedule, steps):
    return np.array([float(keras.ops.convert_to_numpy(schedule(s))) for s in steps])


@pytest.mark.parametrize("total, cycles", [(10, 3), (100, 7), (13, 4), (9, 1), (5, 5)],
                         ids=["K%M!=0", "K=100,M=7", "short-last", "one-cycle", "1-step"])
def test_every_step_follows_the_paper(total, cycles):
    length = math.ceil(total / cycles)
    schedule = schedules.CyclicalCosine(H0, cycle_steps=length)
    expected = [_paper(k, total, cycles) for k in range(1, total + 1)]
    # float32: cos and the product carry ~1 ulp of H0 each.
    np.testing.assert_allclose(_values(schedule, range(total)), expected,
                               rtol=0, atol=4 * np.finfo(np.float32).eps * H0)
    ends = [t for t in range(total) if schedule.is_cycle_end(t)]
    assert ends == [c * length - 1 for c in range(1, total // length + 1)]
    assert [schedule.next_cycle_end(t) for t in range(total)] == [
        (t // length + 1) * length - 1 for t in range(total)]


def test_a_fit_resumed_by_initial_epoch_or_a_second_fit_keeps_the_phase():
    """3 steps an epoch, burn-in 1 epoch, cycles of 2: the h of every step is
    the formula's at the optimizer's step, however the epochs are split (a
    ``fit`` resumed with ``initial_epoch``, then one without). The batch logs
    give the epoch's running mean of h (on JAX the variables cannot be read
    inside an epoch)."""
    x, y = three_class_rows(30)
    h0 = 1e-3
    steps = np.arange(15)
    h = np.where(steps < 3, h0, h0 / 2 * (1 + np.cos(np.pi * ((steps - 3) % 6) / 6)))
    expected = (np.cumsum(h.reshape(5, 3), axis=1) / np.arange(1, 4)).ravel()
    model = softmax_regression(samplers.SGLD(step_size=h0), 30)
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: seen.append(float(logs["step_size"])))
    for fit in ({"epochs": 2}, {"epochs": 4, "initial_epoch": 2}, {"epochs": 1}):
        model.fit(x, y, batch_size=10, verbose=0, shuffle=False, **fit, callbacks=[
            kb.callbacks.CyclicalSchedule(cycle_epochs=2, burn_in_epochs=1), record])
    np.testing.assert_allclose(seen, expected, rtol=0, atol=4 * np.finfo(np.float32).eps * h0)


@pytest.mark.parametrize("cls", [samplers.SGLD, samplers.SGHMC, samplers.SGNHT, samplers.ATMC])
def test_an_auto_step_keeps_its_cycle_through_serialisation(cls):
    sampler = cls(seed=1)  # step_size="auto": h_t = h·c(t), c the cycle
    sampler.set_cycle(cycle_steps=40, burn_in_steps=20)
    config = json.loads(json.dumps(keras.optimizers.serialize(sampler)))
    restored = keras.optimizers.deserialize(config)
    assert restored.warmup is not None
    assert restored.schedule.get_config() == sampler.schedule.get_config()
    assert [restored.is_cycle_end(t) for t in range(100)] == [
        sampler.is_cycle_end(t) for t in range(100)]
    # Without a cycle, the config is what it was before cycles were kept.
    assert "cycle_steps" not in cls(seed=1).get_config()


def test_a_saved_model_with_an_auto_cyclical_step_reloads_its_cycle(tmp_path):
    x, y = three_class_rows(30)
    model = softmax_regression(samplers.SGHMC(seed=0), 30)
    model.optimizer.set_cycle(cycle_steps=6, burn_in_steps=3)
    model.fit(x, y, batch_size=10, epochs=1, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.saving.load_model(tmp_path / "m.keras")
    # The cycles begin at the first boundary after the 1000-step warm-up:
    # 3 + 6·⌈997/6⌉ = 1005 (SGHMC.set_cycle).
    assert loaded.optimizer.schedule.get_config() == {
        "initial_step_size": 1.0, "cycle_steps": 6, "burn_in_steps": 1005}
    assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == 3


#: Everything a user might pass as a length: ints around the bounds, floats
#: (also integral ones), bools, None, strings, NumPy ints.
lengths = st.one_of(
    st.integers(min_value=-3, max_value=10**9),
    st.integers(min_value=-3, max_value=50).map(np.int64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, 1.0, 2.5, True, False, None, "3", [4]]),
)


def _valid(value, minimum):
    return (isinstance(value, (int, np.integer)) and not isinstance(value, bool)
            and value >= minimum)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(cycle=lengths, burn_in=lengths)
def test_bad_lengths_are_refused_naming_the_argument_and_the_allowed_values(cycle, burn_in):
    for make in (lambda: schedules.CyclicalCosine(H0, cycle_steps=cycle, burn_in_steps=burn_in),
                 lambda: schedules.CyclicalCosine(H0).configure(cycle, burn_in)):
        cycle_ok = cycle is None or _valid(cycle, 1)
        if cycle_ok and _valid(burn_in, 0):
            schedule = make() or schedules.CyclicalCosine(H0, cycle, burn_in)
            again = schedules.CyclicalCosine.from_config(schedule.get_config())
            assert again.get_config() == schedule.get_config()
            continue
        name, allowed = (("cycle_steps", "an int >= 1") if not cycle_ok
                         else ("burn_in_steps", "an int >= 0"))
        with pytest.raises(ValueError, match=f"`{name}` must be {allowed}; got"):
            make()
