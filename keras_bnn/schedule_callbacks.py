"""The callbacks that set a sampler's settings by epoch: step-size cycle, temperature ramp.

:class:`CyclicalSchedule` gives the sampler's step size a cyclical cosine
schedule in epochs (:class:`keras_bnn.schedules.CyclicalCosine`);
:class:`TemperatureRamp` moves its temperature linearly. Both are
``kb.callbacks.*`` (:mod:`keras_bnn.callbacks`).
"""

import keras

from keras_bnn.epoch_count import EpochCount
from keras_bnn.samplers.base import Sampler
from keras_bnn.validation import check_int, check_positive


def _sampler_of(model, owner):
    if not isinstance(model.optimizer, Sampler):
        raise ValueError(
            f"{owner} needs a keras_bnn sampler (compile(sampler=...)); the model's optimizer is "
            f"{type(model.optimizer).__name__}."
        )
    return model.optimizer


def cyclical_schedule(optimizer):
    """The optimizer's cyclical step-size schedule (one with ``cycle_steps``), or None."""
    schedule = getattr(optimizer, "schedule", None)
    return schedule if getattr(schedule, "cycle_steps", None) else None


def check_cycles_end_epochs(optimizer, steps_per_epoch, step):
    """Refuses a cyclical step size whose cycles do not all end at epoch ends.

    :class:`keras_bnn.callbacks.CollectSamples` (``every=None``) takes a
    cycle's sample at the end of the epoch whose last step ends it: a cycle
    that ends inside an epoch gives no sample (cycles of 10 steps in epochs
    of 3: 2 samples in 6 cycles, until 2026-11-29 silently).

    Args:
        optimizer: the model's optimizer (a sampler or not).
        steps_per_epoch: steps in an epoch, or None when ``fit`` cannot tell
            (nothing is checked).
        step: the optimizer step the first epoch of the ``fit`` starts at.

    Raises:
        ValueError: naming ``cycle_steps`` and ``burn_in_steps``, unless both
            are multiples of ``steps_per_epoch`` counted from ``step``; where
            they are multiples but ``step`` is not (a resume from a backup
            taken inside an epoch), naming ``every`` and the value to pass.
    """
    schedule = cyclical_schedule(optimizer)
    if schedule is None or not steps_per_epoch:
        return
    end = schedule.next_cycle_end(step)
    if schedule.cycle_steps % steps_per_epoch == 0 and (end + 1 - step) % steps_per_epoch == 0:
        return
    if not schedule.cycle_steps % steps_per_epoch and not schedule.burn_in_steps % steps_per_epoch:
        late = step % steps_per_epoch  # the cycles end at epoch ends of the step count
        raise ValueError(
            f"CollectSamples(every=None) takes a sample at the end of each epoch that ends a "
            f"cycle of the step size, but this fit starts at step {step}, {late} steps into "
            f"an epoch of {steps_per_epoch} steps (a run resumed from a backup taken inside "
            "an epoch, BackupAndRestore(save_freq=<int>), runs that epoch again from its "
            f"first batch): each of its epochs ends {late} steps after a cycle "
            f"(cycle_steps={schedule.cycle_steps}, burn_in_steps={schedule.burn_in_steps}) "
            "does, and no cycle's sample would be taken. Pass CollectSamples(every="
            f"{schedule.cycle_steps // steps_per_epoch}) for one sample a cycle, taken at an "
            "epoch end instead of the cycle's last step, or resume from a backup taken at an "
            "epoch end (BackupAndRestore(save_freq='epoch')).")
    raise ValueError(
        f"CollectSamples(every=None) takes a sample at the end of each epoch that ends a "
        f"cycle of the step size, but the cycles (cycle_steps={schedule.cycle_steps}, "
        f"burn_in_steps={schedule.burn_in_steps}) end inside epochs of {steps_per_epoch} "
        f"steps (this fit starts at step {step}; the first cycle ends at step {end}), whose "
        "samples would not be taken. `cycle_steps` and `burn_in_steps` must be multiples of "
        "the steps per epoch: use kb.callbacks.CyclicalSchedule(cycle_epochs, "
        "burn_in_epochs), which counts in epochs, or pass CollectSamples(every=<epochs>).")


def cycle_end_inside(optimizer, first, stop):
    """The step that ended a cycle inside an epoch, before its last step, or None.

    Args:
        optimizer: the model's optimizer.
        first, stop: the epoch's first step and one past its last.

    Returns:
        int or None.
    """
    schedule = cyclical_schedule(optimizer)
    end = schedule.next_cycle_end(first) if schedule is not None else None
    return end if end is not None and end < stop - 1 else None


class CyclicalSchedule(keras.callbacks.Callback):
    """Turns the sampler's step size into a cyclical cosine schedule.

    ``h_t = h0`` for ``burn_in_epochs`` epochs, then cycles of ``cycle_epochs``
    epochs with ``h_t = h0·½(1 + cos(π·(s mod L)/L))`` (see
    :class:`keras_bnn.schedules.CyclicalCosine`); ``h0`` is the sampler's
    step size. Each cycle ends at an epoch end, where
    :class:`keras_bnn.callbacks.CollectSamples` takes its sample.

    Args:
        cycle_epochs: cycle length L in epochs.
        burn_in_epochs: epochs at constant ``h0`` first.
        steps_per_epoch: needed only when ``fit`` cannot tell (a dataset of
            unknown length).

    Raises:
        ValueError: for non-positive lengths, or (at train begin) when the
            model has no sampler or the steps per epoch are unknown.
    """

    def __init__(self, cycle_epochs, burn_in_epochs=0, steps_per_epoch=None):
        super().__init__()
        self.cycle_epochs = check_int(cycle_epochs, "cycle_epochs", 1, owner="CyclicalSchedule")
        self.burn_in_epochs = check_int(burn_in_epochs, "burn_in_epochs", 0,
                                        owner="CyclicalSchedule")
        self.steps_per_epoch = (
            None if steps_per_epoch is None
            else check_int(steps_per_epoch, "steps_per_epoch", 1, owner="CyclicalSchedule")
        )

    def on_train_begin(self, logs=None):
        steps = self.steps_per_epoch or self.params.get("steps")
        if not steps:
            raise ValueError(
                "CyclicalSchedule: the number of steps per epoch is unknown; pass "
                "`steps_per_epoch=` to the callback (or to fit)."
            )
        _sampler_of(self.model, "CyclicalSchedule").set_cycle(
            cycle_steps=self.cycle_epochs * steps,
            burn_in_steps=self.burn_in_epochs * steps,
        )
        # The schedule's lengths are traced into the step function.
        self.model.make_train_function(force=True)


class TemperatureRamp(EpochCount):
    """Moves the sampler's temperature linearly from ``start`` to ``end``.

    ``T_e = start + (end - start)·min(e / ramp_epochs, 1)`` at the start of
    epoch ``e``, counted across ``fit`` calls (a later ``fit`` without
    ``initial_epoch`` goes on with the ramp:
    :class:`keras_bnn.epoch_count.EpochCount`); the temperature is a sampler
    variable, so no retracing.

    Args:
        start: T at epoch 0, > 0.
        end: T from epoch ``ramp_epochs`` on, > 0.
        ramp_epochs: length of the ramp in epochs (>= 1).

    Raises:
        ValueError: for non-positive temperatures or ramp length, and (at
            train begin) when the model's optimizer is not a sampler.
    """

    def __init__(self, start, end, ramp_epochs):
        super().__init__()
        self.start = check_positive(start, "start", "TemperatureRamp")
        self.end = check_positive(end, "end", "TemperatureRamp")
        self.ramp_epochs = check_int(ramp_epochs, "ramp_epochs", 1, owner="TemperatureRamp")

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        _sampler_of(self.model, "TemperatureRamp")

    def on_epoch_begin(self, epoch, logs=None):
        fraction = min(self._count(epoch) / self.ramp_epochs, 1.0)
        self.model.optimizer.set_temperature(self.start + (self.end - self.start) * fraction)
