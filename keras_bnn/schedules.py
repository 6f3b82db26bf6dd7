"""Step-size schedules for the samplers."""

import math

import keras
from keras import ops

from keras_bnn.validation import check_int, check_positive


@keras.saving.register_keras_serializable(package="keras_bnn")
class CyclicalCosine(keras.optimizers.schedules.LearningRateSchedule):
    """Cyclical cosine step size (Zhang et al. 2019; the ATMC paper, sec. 5).

    ``h_t = h0`` during the first ``burn_in_steps`` steps, then with
    ``s = t - burn_in_steps`` and cycle length ``L``:
    ``h_t = h0 · ½ · (1 + cos(π · (s mod L) / L))``.
    ``cycle_steps=None`` gives the constant ``h0``. The last step of a cycle
    (where the step size is smallest, and where samples are collected) is
    ``s mod L = L - 1``; see :meth:`is_cycle_end`.

    Args:
        initial_step_size: h0 > 0.
        cycle_steps: cycle length L in steps, or ``None`` for a constant.
        burn_in_steps: steps at constant ``h0`` before the first cycle.

    Raises:
        ValueError: if ``initial_step_size`` is not positive or the lengths are
            not non-negative ints.
    """

    def __init__(self, initial_step_size, cycle_steps=None, burn_in_steps=0):
        self.initial_step_size = check_positive(initial_step_size, "initial_step_size",
                                                owner="CyclicalCosine")
        self.configure(cycle_steps, burn_in_steps)

    def configure(self, cycle_steps=None, burn_in_steps=0):
        """Sets the cycle length and burn-in (used by the CyclicalSchedule callback).

        A traced training function keeps the old values: retrace it
        (``model.make_train_function(force=True)``) after calling this.

        Args:
            cycle_steps: cycle length in steps, or ``None`` for a constant.
            burn_in_steps: steps at ``h0`` before the first cycle.

        Raises:
            ValueError: for non-positive ``cycle_steps`` or negative burn-in.
        """
        cycle_steps = (None if cycle_steps is None
                       else check_int(cycle_steps, "cycle_steps", 1, owner="CyclicalCosine"))
        # Both are checked before either is set: a failed call changes nothing.
        self.burn_in_steps = check_int(burn_in_steps, "burn_in_steps", 0, owner="CyclicalCosine")
        self.cycle_steps = cycle_steps

    def __call__(self, step):
        h0 = ops.convert_to_tensor(self.initial_step_size, "float32")
        if self.cycle_steps is None:
            return h0
        # The phase in integers: float32 counts steps exactly to 2**24 only (until
        # 2026-11-29 the last step of a cycle of 1000 at step 20 000 999 took h0).
        step = ops.convert_to_tensor(step)
        if "int" not in keras.backend.standardize_dtype(step.dtype):
            step = ops.cast(step, "int64")
        s = step - ops.cast(self.burn_in_steps, step.dtype)
        phase = ops.cast(ops.mod(ops.maximum(s, 0), self.cycle_steps), "float32")
        cosine = 0.5 * h0 * (1.0 + ops.cos(math.pi * phase / self.cycle_steps))
        return ops.where(s < 0, h0, cosine)

    def is_cycle_end(self, step):
        """Whether step ``step`` (0-based) is the last step of a cycle.

        Args:
            step: Python int.

        Returns:
            bool; always False for a constant schedule or during burn-in.
        """
        s = int(step) - self.burn_in_steps
        return self.cycle_steps is not None and s >= 0 and (
            s % self.cycle_steps == self.cycle_steps - 1
        )

    def next_cycle_end(self, step):
        """The first step at or after ``step`` (0-based) that ends a cycle.

        Args:
            step: Python int.

        Returns:
            int, or None for a constant schedule.
        """
        if self.cycle_steps is None:
            return None
        cycles = max(int(step) - self.burn_in_steps, 0) // self.cycle_steps
        return self.burn_in_steps + (cycles + 1) * self.cycle_steps - 1

    def cycle_config(self):
        """The cycle alone, for a config that records the step size otherwise.

        A sampler with ``step_size="auto"`` records ``"auto"`` instead of this
        schedule (its h0 is the cycle's factor 1, the warm-up's h multiplies
        it), so it keeps these entries beside it and :meth:`configure` takes
        them back (until 2026-11-30 a saved model reloaded a constant step).

        Returns:
            ``{"cycle_steps": L, "burn_in_steps": B}``; ``{}`` for a constant.
        """
        if self.cycle_steps is None:
            return {}
        return {"cycle_steps": self.cycle_steps, "burn_in_steps": self.burn_in_steps}

    def get_config(self):
        return {"initial_step_size": self.initial_step_size, "cycle_steps": self.cycle_steps,
                "burn_in_steps": self.burn_in_steps}
