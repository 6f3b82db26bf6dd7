"""CyclicalCosine: values, cycle ends, serialisation and argument checks."""

import json
import math

import keras
import numpy as np
import pytest

from keras_bnn import schedules

H0 = 0.1


def _value(schedule, step):
    return float(keras.ops.convert_to_numpy(schedule(step)))


def test_cycle_start_middle_and_end():
    length = 100
    schedule = schedules.CyclicalCosine(H0, cycle_steps=length)
    for cycle in range(3):
        start = cycle * length
        assert _value(schedule, start) == pytest.approx(H0, rel=1e-6)
        assert _value(schedule, start + length // 2) == pytest.approx(H0 / 2, rel=1e-5)
        # Last step: h0·½(1 + cos(π(L-1)/L)) = h0·sin²(π/2L) ≈ 2.5e-5 at L = 100.
        last = _value(schedule, start + length - 1)
        assert last == pytest.approx(H0 * math.sin(math.pi / (2 * length)) ** 2, rel=1e-3)
        assert 0 < last < 1e-3 * H0


def test_values_follow_the_formula_and_decrease_within_a_cycle():
    length, burn_in = 37, 11
    schedule = schedules.CyclicalCosine(H0, cycle_steps=length, burn_in_steps=burn_in)
    steps = np.arange(0, burn_in + 3 * length)
    values = np.array([_value(schedule, s) for s in steps])
    phase = np.maximum(steps - burn_in, 0) % length
    expected = np.where(
        steps < burn_in, H0, H0 * 0.5 * (1 + np.cos(np.pi * phase / length))
    )
    np.testing.assert_allclose(values, expected, rtol=1e-5, atol=1e-9)
    cycle = values[burn_in:burn_in + length]
    assert np.all(np.diff(cycle) < 0)
    # Restarts at h0 after every cycle.
    np.testing.assert_allclose(values[burn_in::length], H0, rtol=1e-6)


def test_constant_during_burn_in():
    schedule = schedules.CyclicalCosine(H0, cycle_steps=50, burn_in_steps=200)
    for step in [0, 1, 57, 199]:
        assert _value(schedule, step) == pytest.approx(H0, rel=1e-7)
    assert _value(schedule, 200) == pytest.approx(H0, rel=1e-7)  # first cycle starts at h0
    assert _value(schedule, 225) == pytest.approx(H0 / 2, rel=1e-5)


def test_constant_without_cycle():
    schedule = schedules.CyclicalCosine(H0)
    assert schedule.cycle_steps is None
    for step in [0, 1, 1000, 10**7]:
        assert _value(schedule, step) == pytest.approx(H0, rel=1e-7)
        assert not schedule.is_cycle_end(step)


def test_schedule_works_with_a_tensor_step():
    schedule = schedules.CyclicalCosine(H0, cycle_steps=10)
    step = keras.ops.convert_to_tensor(5, "int64")
    assert _value(schedule, step) == pytest.approx(H0 / 2, rel=1e-5)


def test_is_cycle_end():
    schedule = schedules.CyclicalCosine(H0, cycle_steps=10, burn_in_steps=5)
    ends = [s for s in range(60) if schedule.is_cycle_end(s)]
    assert ends == [14, 24, 34, 44, 54]
    # The cycle end is where the step size is smallest.
    values = [_value(schedule, s) for s in range(5, 35)]
    assert int(np.argmin(values)) + 5 in ends
    no_burn_in = schedules.CyclicalCosine(H0, cycle_steps=4)
    assert [s for s in range(12) if no_burn_in.is_cycle_end(s)] == [3, 7, 11]
    single = schedules.CyclicalCosine(H0, cycle_steps=1)
    assert all(single.is_cycle_end(s) for s in range(5))


def test_configure_changes_cycle_and_burn_in():
    schedule = schedules.CyclicalCosine(H0)
    schedule.configure(cycle_steps=20, burn_in_steps=3)
    assert (schedule.cycle_steps, schedule.burn_in_steps) == (20, 3)
    assert _value(schedule, 13) == pytest.approx(H0 / 2, rel=1e-5)
    assert schedule.is_cycle_end(22)


@pytest.mark.parametrize(
    "schedule",
    [
        schedules.CyclicalCosine(H0),
        schedules.CyclicalCosine(3e-4, cycle_steps=390 * 50, burn_in_steps=1000),
    ],
)
def test_serialization_round_trip(schedule):
    config = keras.saving.serialize_keras_object(schedule)
    restored = keras.saving.deserialize_keras_object(json.loads(json.dumps(config)))
    assert isinstance(restored, schedules.CyclicalCosine)
    assert restored.get_config() == schedule.get_config()
    also = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert also.get_config() == schedule.get_config()
    for step in [0, 999, 1000, 1001, 10_000, 123_456]:
        assert _value(restored, step) == _value(schedule, step)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"initial_step_size": 0.0}, "initial_step_size"),
        ({"initial_step_size": -0.1}, "initial_step_size"),
        ({"initial_step_size": float("nan")}, "initial_step_size"),
        ({"initial_step_size": float("inf")}, "initial_step_size"),
        ({"initial_step_size": H0, "cycle_steps": 0}, "cycle_steps"),
        ({"initial_step_size": H0, "cycle_steps": -5}, "cycle_steps"),
        ({"initial_step_size": H0, "cycle_steps": 2.5}, "cycle_steps"),
        ({"initial_step_size": H0, "cycle_steps": True}, "cycle_steps"),
        ({"initial_step_size": H0, "burn_in_steps": -1}, "burn_in_steps"),
        ({"initial_step_size": H0, "burn_in_steps": 1.5}, "burn_in_steps"),
    ],
)
def test_bad_arguments_are_named(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        schedules.CyclicalCosine(**kwargs)


def test_bad_configure_arguments_are_named():
    schedule = schedules.CyclicalCosine(H0, cycle_steps=10)
    with pytest.raises(ValueError, match="cycle_steps"):
        schedule.configure(cycle_steps=0)
    with pytest.raises(ValueError, match="burn_in_steps"):
        schedule.configure(cycle_steps=20, burn_in_steps=-2)
    # A failed call changes nothing.
    assert (schedule.cycle_steps, schedule.burn_in_steps) == (10, 0)
