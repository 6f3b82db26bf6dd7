"""The callbacks ``BayesianModel.fit`` adds, and its checks of the user's callbacks.

:class:`WarnOnGradientNoise` (the steady-state :class:`GradientNoiseWarning`),
:class:`LeaveWarmup` (the step retraced without the warm-up's code, the
:class:`~keras_bnn.samplers.warmup.ShortWarmupWarning` and the
:class:`~keras_bnn.samplers.warmup.StiffnessWarning`),
:class:`WarnOnMissingPriors`, and :func:`check_keras_callbacks` (Keras' own
callbacks that would change the step size, or restore weights or backups
away from the chain), and :func:`set_lower_better_modes` (``val_nll`` is
lower-better for Keras' monitoring callbacks).
"""

import warnings

import keras

from keras_bnn import backend
from keras_bnn import equilibrium
from keras_bnn import prior_guard
from keras_bnn.callbacks import (CollectSamples, MidEpochBackupWarning, RestoredWeightsWarning,
                                 current_step, warmup_steps)
from keras_bnn.samplers.step_rise import StepRise
from keras_bnn.samplers.warmup import ShortWarmupWarning, StiffnessWarning
from keras_bnn.validation import argument_error


class GradientNoiseWarning(UserWarning):
    """Minibatch gradient noise is large enough to bias the sampled posterior."""


def above_limit(ratio, limit):
    """``ratio`` (> ``limit``) printed with as few digits (at least 4
    significant) as show it above ``limit``: 0.10004 against 0.1 reads
    0.10004, not 0.1.

    Args:
      ratio, limit: floats, ``ratio > limit``.

    Returns:
      str.
    """
    for digits in range(4, 18):
        text = f"{ratio:.{digits}g}"
        if float(text) > limit:
            return text
    return repr(ratio)


class WarnOnGradientNoise(keras.callbacks.Callback):
    """Warns once per ``fit`` when the steady-state ``gradient_noise_ratio`` exceeds the limit.

    The ratio's online estimate ``V̂`` sees how far θ moves between steps, so
    while the chain leaves its initialisation it reads far above its steady
    state (0.15–1.7 against 0.03–0.08 measured). An epoch is judged only
    when it began after the sampler's warm-up
    (:func:`keras_bnn.callbacks.warmup_steps`), is not the first epoch of
    the chain (step 0 is the initialisation) and, when ``fit`` has a
    :class:`keras_bnn.callbacks.CollectSamples` that starts at equilibrium,
    is one it collects in: before that the chain is in burn-in, and its step
    factors may still be lowered by the second noise measurement (the
    samples are what the bias is about). The steady state begins at the
    first judged epoch whose ratio is not falling (``r_e ≥ FALLING·r_{e−1}``:
    a transient decays, a steady level stays), epoch ``e₀``; from then on the
    judged quantity is the mean ratio over the steady state so far,

        r̄_e = (1/(e − e₀ + 1)) Σ_{e'=e₀..e} r_{e'},

    because the bias of the sampled posterior follows the ratio averaged
    over the samples (the ``√(1−r)`` / ``(1+r)`` laws), not one epoch's or
    one window's: a one-epoch excursion (measured: r = 0.196 in one 4-step
    epoch of a chain at 0.03–0.07) does not bias the chain, a level above
    the limit does. (The maximum of a sliding window would be a false
    alarm on any long run: the output layer of a default wine chain, at
    0.032 when the run ended, had one 10-epoch window at 0.101 in its
    1 480 steady epochs.) ``r̄`` is judged
    once ``WINDOW`` epochs and
    :meth:`~keras_bnn.samplers.Sampler.noise_averaging_steps` steps are in
    (a mean over fewer steps is one or two readings of ``V̂``'s exponential
    average: the output layer of a wine chain read 0.10 over the first 66
    steps of a stretch whose 500-step means were 0.03–0.05), then at every
    epoch; at the end of ``fit``
    the epochs so far are judged (or, if the ratio was still falling, the
    last epoch: the run ended with that noise). A run whose collector never
    started is not judged at its end: it has no samples to bias, its step
    factors may still be lowered, and its
    :class:`~keras_bnn.callbacks.NotConvergedWarning` says why (measured: a
    diabetes chain stopped 636 steps into its second noise measurement
    warned on its last epoch's one reading, 0.12, of a variable the
    measurement would have lowered).

    The laws hold per direction, and the overall ratio is a mean over all
    parameters that the largest layer carries (measured with one step for
    all variables: output layers at r = 0.25–4.2 under an overall 0.02–0.07),
    so the same mean is also judged for every variable's ratio
    (:meth:`keras_bnn.samplers.Sampler.gradient_noise_ratios`, read at each
    epoch's end), and the warning names the variables above the limit.
    """

    #: ``r_e < FALLING·r_{e−1}``: the ratio is still decaying (a transient).
    FALLING = 0.9
    #: Epochs at steady state before the mean is judged (the equilibrium test's window).
    WINDOW = equilibrium.WINDOW

    def __init__(self, limit, collectors=()):
        super().__init__()
        self.limit = limit
        self.collectors = [c for c in collectors if isinstance(c, CollectSamples) and c.auto]
        self.warned = False
        self._previous = None
        self._last = None
        self._epoch_start_step = 0
        # The steady state so far: its first and last epoch, the first's start step, Σ r, Σ r_v.
        self._first = self._latest = self._first_step = None
        self._total, self._variable_totals = 0.0, {}

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start_step = current_step(self.model.optimizer)

    def on_epoch_end(self, epoch, logs=None):
        ratio = float((logs or {}).get("gradient_noise_ratio", 0.0))
        judged = (self._epoch_start_step > 0
                  and self._epoch_start_step >= warmup_steps(self.model.optimizer))
        previous, self._previous = self._previous, ratio
        if not judged or self.warned:  # warned once: no more reads of the variables
            return
        variables = self._variable_ratios()
        self._last = (epoch, ratio, variables)
        if not all(c.start_epoch is not None and epoch >= c.start_epoch
                   for c in self.collectors):
            return
        if self._first is None:
            if previous is not None and ratio < self.FALLING * previous:
                return
            self._first, self._first_step = epoch, self._epoch_start_step
        self._latest = epoch
        self._total += ratio
        for name, r in variables.items():
            self._variable_totals[name] = self._variable_totals.get(name, 0.0) + r
        spanned = current_step(self.model.optimizer) - self._first_step
        if (self._latest - self._first + 1 >= self.WINDOW
                and spanned >= self.model.optimizer.noise_averaging_steps()):
            self._warn_on_steady_state()

    def on_train_end(self, logs=None):
        if self._first is not None:
            self._warn_on_steady_state()
        elif self._last is not None and all(c.start_epoch is not None for c in self.collectors):
            epoch, ratio, variables = self._last
            self._warn(ratio, variables, f"in epoch {epoch}")

    def _variable_ratios(self):
        """Each variable's ratio at this epoch's end (``{}`` without them)."""
        ratios = getattr(self.model.optimizer, "gradient_noise_ratios", None)
        if ratios is None:
            return {}
        return {name: float(backend.to_numpy(r)) for name, r, _ in ratios()}

    def _warn_on_steady_state(self):
        count = self._latest - self._first + 1  # every epoch from the first steady one is judged
        where = (f"in epoch {self._first}" if count == 1
                 else f"averaged over epochs {self._first}–{self._latest}")
        self._warn(self._total / count,
                   {name: r / count for name, r in self._variable_totals.items()}, where)

    def _warn(self, ratio, variables, where):
        above = {name: r for name, r in variables.items() if r > self.limit}
        if self.warned or (ratio <= self.limit and not above):
            return
        self.warned = True
        if ratio > self.limit:
            what = (f"gradient_noise_ratio = {above_limit(ratio, self.limit)} {where} "
                    f"is above {self.limit}")
        else:
            named = (f"{name} = {above_limit(r, self.limit)}" for name, r in above.items())
            what = (f"gradient_noise_ratio of {', '.join(named)} {where} "
                    f"is above {self.limit} (all variables together: {ratio:.4g})")
        warnings.warn(
            f"keras_bnn: {what}: minibatch gradient noise is a large share of the sampler's "
            "noise, so the posterior is biased (ATMC/SGNHT too narrow in weakly "
            "determined directions, SGLD/SGHMC too wide in strongly determined "
            "ones). Lower the step size (the ratio scales as h² for SGHMC/ATMC at "
            "their default friction, h for SGLD) or raise the batch size; with "
            "step_size='auto' every variable leaves the warm-up at or below the target "
            "(sampler.step_size_factors()). The ratio is estimated from successive "
            "gradients, so it also counts how much the gradient changes in one step: with "
            "the whole training set in every batch (no minibatch noise) it measures only "
            "that, a step too long for the stiffest directions, and only a smaller step "
            "helps. See 'Sampling cold posteriors' in the README.",
            GradientNoiseWarning,
            stacklevel=2,
        )


def leave_warmup(model):
    """Retraces ``model``'s training step without the warm-up's code once it is over.

    Asks the sampler (:meth:`keras_bnn.samplers.Sampler.leave_warmup`: a host
    read of the step counter while the step still carries the warm-up); the
    step traced afterwards computes the same numbers with fewer operations.
    Then it warns with :class:`~keras_bnn.samplers.warmup.ShortWarmupWarning`
    if the warm-up ended before h reached its noise target
    (:meth:`~keras_bnn.samplers.auto_step.AutoStepSize.short_warmup_message`),
    and with :class:`~keras_bnn.samplers.warmup.StiffnessWarning` if a
    blow-up capped h far below it
    (:meth:`~keras_bnn.samplers.auto_step.AutoStepSize.stiffness_message`)
    or if the noisiest variables set an h far below the step the others'
    noise allows
    (:meth:`~keras_bnn.samplers.auto_step.AutoStepSize.noise_spread_message`).

    Args:
        model: a :class:`keras_bnn.BayesianModel` compiled with a sampler.
    """
    sampler = model.optimizer
    if sampler.leave_warmup():
        model.make_train_function(force=True)
        for message, category in ((sampler.short_warmup_message(), ShortWarmupWarning),
                                  (sampler.stiffness_message(), StiffnessWarning),
                                  (sampler.noise_spread_message(), StiffnessWarning)):
            if message:
                warnings.warn(message, category, stacklevel=3)


class LeaveWarmup(keras.callbacks.Callback):
    """Runs :func:`leave_warmup` at the start of ``fit`` and after each epoch,
    and then raises a badly scaled chain's frozen step during burn-in
    (:class:`keras_bnn.samplers.step_rise.StepRise`).

    Args:
        callbacks: the callbacks given to ``fit``: h is never raised once a
            :class:`~keras_bnn.callbacks.CollectSamples` among them collects,
            nor where one has an int ``start_epoch``.
    """

    def __init__(self, callbacks=()):
        super().__init__()
        self.collectors = [c for c in callbacks if isinstance(c, CollectSamples)]
        self._rise = None

    def on_train_begin(self, logs=None):
        leave_warmup(self.model)
        sampler = self.model.optimizer
        if getattr(sampler, "warmup", None) is not None:
            self._rise = StepRise(sampler)  # counts the steps from here

    def on_epoch_end(self, epoch, logs=None):
        leave_warmup(self.model)
        if self._rise is not None:
            self._rise.read_logs(logs)
            self._rise.after_epoch(self.collectors)


class WarnOnMissingPriors(keras.callbacks.Callback):
    """Runs :func:`keras_bnn.prior_guard.warn_missing_priors` once the model is built."""

    def on_train_begin(self, logs=None):
        prior_guard.warn_missing_priors(self.model)


def check_keras_callbacks(callbacks):
    """Checks the Keras callbacks given to ``fit`` with a sampler.

    ``ReduceLROnPlateau`` and ``LearningRateScheduler`` would set the step
    size (the sampler refuses, :attr:`keras_bnn.samplers.Sampler.learning_rate`):
    refused here, before the first step, not at the first plateau.
    ``EarlyStopping(restore_best_weights=True)`` warns
    (:class:`~keras_bnn.callbacks.RestoredWeightsWarning`), and so does a
    ``BackupAndRestore`` that backs up within epochs
    (:class:`~keras_bnn.callbacks.MidEpochBackupWarning`).

    Args:
        callbacks: the list given to ``fit``.

    Raises:
        ValueError: naming the step-size callback.
    """
    for callback in callbacks:
        if isinstance(callback, (keras.callbacks.ReduceLROnPlateau,
                                 keras.callbacks.LearningRateScheduler)):
            raise argument_error(
                "callbacks", "hold no callback that sets the learning rate when a sampler "
                "samples: the step size is the warm-up's frozen h (step_size='auto') or the "
                "one given; for a decaying step pass a keras.optimizers.schedules."
                "LearningRateSchedule as the sampler's `step_size=`, for a cyclical one use "
                "keras_bnn.callbacks.CyclicalSchedule", type(callback).__name__,
                "BayesianModel.fit")
        if getattr(callback, "restore_best_weights", False) and isinstance(
                callback, keras.callbacks.EarlyStopping):
            warnings.warn(
                "EarlyStopping(restore_best_weights=True) sets the weights, when fit ends, to "
                f"those of the epoch with the best {callback.monitor!r}: one point chosen by "
                "validation, not the chain's last state (its momenta and step counter stay "
                "at the last step), so a later fit would go on from a chain that jumped back. "
                "Samples already collected are not changed; the posterior is the collected "
                "samples (PosteriorEnsemble). Leave restore_best_weights=False.",
                RestoredWeightsWarning, stacklevel=4)
        if isinstance(callback, keras.callbacks.BackupAndRestore) and callback.save_freq != "epoch":
            warnings.warn(
                f"BackupAndRestore(save_freq={callback.save_freq!r}) backs up within epochs, and "
                "Keras resumes such a backup at the start of its epoch: the resumed chain takes "
                "that epoch's first batches again (more steps than the uninterrupted chain, "
                "samples at other steps). Use save_freq='epoch' to resume the same chain.",
                MidEpochBackupWarning, stacklevel=4)


#: The lower-better logs whose direction Keras cannot infer: it knows ``loss``
#: and the metrics it compiled, and the model's ``nll`` tracker is neither.
LOWER_BETTER = ("nll",)


def set_lower_better_modes(callbacks):
    """Gives ``mode="min"`` to Keras' monitoring callbacks that watch ``nll`` or
    ``val_nll`` with ``mode="auto"``.

    ``EarlyStopping(monitor="val_nll")``, the key the README advises for early
    stopping, stopped at the first epoch end with Keras' ``ValueError`` asking
    for ``mode`` (as ``ModelCheckpoint`` and ``ReduceLROnPlateau`` did). An
    explicit ``mode`` is left as given.

    Args:
        callbacks: the list given to ``fit``.
    """
    monitoring = (keras.callbacks.EarlyStopping, keras.callbacks.ModelCheckpoint,
                  keras.callbacks.ReduceLROnPlateau)
    for callback in callbacks:
        if (isinstance(callback, monitoring) and callback.mode == "auto"
                and callback.monitor.removeprefix("val_") in LOWER_BETTER):
            callback.mode = "min"
