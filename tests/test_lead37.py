"""The lead's fixes of session 37."""

import dataclasses
import json
import warnings

import numpy as np
import pytest

import keras_bnn as kb
from keras_bnn import runs, samplers
from keras_bnn.runs.config import CollectionRefused
from keras_bnn.samplers.state_layout import ADDED_SINCE_NAMES
from fit_helpers import softmax_regression, three_class_rows


def _factors(sampler, steps):
    return np.array([float(sampler.schedule(t)) for t in steps])


@pytest.mark.parametrize("cls", [samplers.SGLD, samplers.SGHMC, samplers.SGNHT, samplers.ATMC])
def test_cycles_of_an_auto_step_begin_whole_after_the_warmup(cls):
    """With ``step_size="auto"`` the 1000-step warm-up runs at c = 1, and the
    cycles counted from step 0: cycles of 60 steps left a cut cycle of 20
    steps (1000-1019) after it, whose end was a cycle end (a sample). Failed
    before: ``is_cycle_end(1019)`` was True and ``burn_in_steps`` 0."""
    sampler = cls(seed=0)
    sampler.set_cycle(cycle_steps=60)
    assert sampler.schedule.burn_in_steps == 1020  # 0 + 60·⌈1000/60⌉
    ends = [t for t in range(900, 1200) if sampler.is_cycle_end(t)]
    assert ends == [1079, 1139, 1199]  # whole cycles from 1020 on
    np.testing.assert_array_equal(_factors(sampler, range(1000, 1021)), 1.0)
    cycle = _factors(sampler, range(1020, 1080))
    expected = 0.5 * (1.0 + np.cos(np.pi * np.arange(60) / 60))
    np.testing.assert_allclose(cycle, expected, rtol=0, atol=1e-6)


def test_a_burn_in_past_the_warmup_and_an_explicit_step_are_kept():
    """The shift applies only where the cycles began inside the warm-up."""
    auto = samplers.SGHMC(seed=0)
    auto.set_cycle(cycle_steps=60, burn_in_steps=1200)
    assert auto.schedule.burn_in_steps == 1200
    explicit = samplers.SGHMC(step_size=1e-3, seed=0)
    explicit.set_cycle(cycle_steps=60)
    assert explicit.schedule.burn_in_steps == 0
    auto.set_cycle(cycle_steps=None)
    assert auto.schedule.cycle_steps is None


def test_cyclical_schedule_in_epochs_keeps_cycle_ends_at_epoch_ends():
    """``CyclicalSchedule(cycle_epochs=3)`` with 4 steps an epoch and the
    1000-step warm-up: the cycles begin at step 1008 (epoch 252), an epoch
    end, so every cycle's last step ends an epoch. Failed before: burn-in 0,
    the first cycle after the warm-up 8 steps long."""
    x, y = three_class_rows(40)
    model = softmax_regression(samplers.ATMC(seed=0), 40)
    model.fit(x, y, batch_size=10, epochs=1, verbose=0,
              callbacks=[kb.callbacks.CyclicalSchedule(cycle_epochs=3)])
    schedule = model.optimizer.schedule
    assert (schedule.cycle_steps, schedule.burn_in_steps) == (12, 1008)
    assert schedule.next_cycle_end(1000) == 1019 and (1019 + 1) % 4 == 0


def test_a_stored_sgd_run_with_a_collection_field_is_still_read(tmp_path):
    """The API took ``burn_in_epochs``/``collect_every`` with sgd until this
    session (they did nothing) and now refuses them (runs37); a run stored so
    could no longer be read (``read_config`` raised CollectionRefused). It
    reads as unset; a caller's own override is still refused."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = runs.RunConfig(sampler="sgd", epochs=4, output_dir=str(run_dir)).validate()
    stored = dict(dataclasses.asdict(config), burn_in_epochs=2, collect_every=3)
    (run_dir / "config.json").write_text(json.dumps(stored))
    config = runs.read_config(str(run_dir))
    assert (config.burn_in_epochs, config.collect_every) == ("auto", None)
    with pytest.raises(CollectionRefused, match="`burn_in_epochs`"):
        runs.read_config(str(run_dir), burn_in_epochs=5)


@pytest.mark.parametrize("cls", [samplers.SGLD, samplers.ATMC])
def test_a_state_saved_before_the_previous_ratio_variable_still_loads(cls):
    """stiff37 added the warm-up variable ``auto_step_size_previous_ratio``;
    Keras loads an optimizer's state only when the counts match, so a model
    or run backup saved by cab6f2c lost its whole chain state on loading
    (measured with a .keras file of cab6f2c: "Skipping variable loading for
    optimizer 'sghmc', because it has 35 variables whereas the saved optimizer
    has 34", step counter 9 → 0, h back at 1e-8). Such a state, the new
    variable left out, loads with it at 0."""
    x, y = three_class_rows(30)
    model = softmax_regression(cls(seed=0), 30)
    model.fit(x, y, batch_size=10, epochs=3, verbose=0)
    sampler = model.optimizer
    since = {id(v) for slot in ADDED_SINCE_NAMES for v in sampler.slots(slot)}  # nor these
    old = [np.array(v) for v in sampler.variables
           if v is not sampler.warmup.previous_ratio and id(v) not in since]
    fresh = softmax_regression(cls(seed=0), 30)
    fresh.fit(x, y, batch_size=10, epochs=1, verbose=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Keras' "Skipping variable loading" is a warning
        fresh.optimizer.load_own_variables({str(i): v for i, v in enumerate(old)})
    assert int(np.asarray(fresh.optimizer.iterations)) == 9
    assert fresh.optimizer.step_size_value == sampler.step_size_value
    assert float(np.asarray(fresh.optimizer.warmup.previous_ratio)) == 0.0
