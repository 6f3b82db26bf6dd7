"""When :class:`keras_bnn.callbacks.CollectSamples` starts collecting: at equilibrium.

:class:`CollectionStart` holds the decision of ``start_epoch="auto"``: the
stationarity test on the epoch logs after the sampler's warm-up
(:func:`warmup_steps`), with ``step_size="auto"`` the second noise
measurement and the noise gate, what a resumed run reads back from the
store, and the per-variable temperatures a run that ends before
equilibrium reports. ``CollectSamples`` is its subclass and drives it from
its epoch hooks.
"""

import json
import os

from keras_bnn import backend
from keras_bnn import distribute
from keras_bnn import durable
from keras_bnn import equilibrium
from keras_bnn.epoch_count import EpochCount, current_step
from keras_bnn.samplers.base import NOISE_RATIO_LIMIT
from keras_bnn.samplers.step_rise import rise_pending

#: Why the test has no epochs while a badly scaled chain's step rises.
RISING_REASON = ("the step size is still rising after the warm-up (samplers.step_rise): "
                 "the test starts on the epochs after the rise")


def warmup_steps(optimizer):
    """The steps a kernel spends tuning itself: never part of the sampled chain.

    ``step_size="auto"``'s warm-up (``optimizer.warmup.warmup_steps``, see
    :mod:`keras_bnn.samplers.warmup`) and HMC's step-size adaptation
    (``num_adaptation_steps``).

    Args:
        optimizer: the model's optimizer.

    Returns:
        int ≥ 0.
    """
    tuned = getattr(getattr(optimizer, "warmup", None), "warmup_steps", 0) or 0
    return int(tuned) + int(getattr(optimizer, "num_adaptation_steps", 0) or 0)


class CollectionStart(EpochCount):
    """The start of collection at equilibrium (``CollectSamples(start_epoch="auto")``).

    Collection starts at the first epoch end where the chain is stationary
    by :func:`keras_bnn.equilibrium.stationarity_test` on the epoch logs
    (configurational and kinetic temperature, ``prior`` = −log p(θ), ``nll``)
    of the epochs that began after the sampler's warm-up
    (:func:`warmup_steps`) and after a badly scaled chain's step rise
    (:func:`keras_bnn.samplers.step_rise.rise_pending`: the epochs of the
    rise ran at other step sizes, another kernel). With
    ``step_size="auto"`` the first time the test passes starts the second
    noise measurement: each variable's gradient-noise ratio, averaged from
    the first of the 2w epochs the test compared over at least
    :meth:`~keras_bnn.samplers.Sampler.noise_averaging_steps` steps, lowers
    its step factor where it is more than 25 % above the warm-up's target
    (:meth:`~keras_bnn.samplers.Sampler.lower_step_factors`: the noise
    changes as the chain leaves its initialisation), or, where the averaged
    noise allows at least twice the base step h, raises h instead
    (:meth:`~keras_bnn.samplers.Sampler.raise_step_size`); if a factor was
    lowered or h raised, the chain is a new kernel and the test restarts on the epochs
    after it (:attr:`remeasurement` says what changed). With
    ``step_size="auto"``, collection also needs every variable's
    gradient-noise ratio, averaged over the last w epoch-end readings, at or
    below :data:`~keras_bnn.samplers.NOISE_RATIO_LIMIT`, the level
    :class:`~keras_bnn.GradientNoiseWarning` judges the collected epochs by:
    ``r̄_v = (1/w) Σ_{e'=e−w+1..e} r_v(e') ≤ limit`` (unless the warm-up's
    target is at or above the limit). A stationary epoch
    where some ``r̄_v`` is above it lowers every factor by one ratio,
    ``s_v ← s_v·(r*/max_u r̄_u)^{1/k}``
    (:meth:`~keras_bnn.samplers.Sampler.lower_noisy_step_factors`: noise
    that comes in bursts, longer than the second measurement and through
    several variables at once), and the test restarts on the epochs after
    it (:attr:`noise_lowerings`).

    The test's past (the watched epochs since the last change of kernel) goes
    on across ``fit`` calls, and is logged in the store one line an epoch,
    keyed by step, so a ``fit`` that goes on from a step (a later ``fit``,
    a new callback on the store, or a run restored by ``BackupAndRestore``)
    tests the same series as the unbroken run and starts collection at the
    same epoch (:meth:`_restore_watch`).

    The subclass sets ``store``, ``chain``, ``every``, ``auto``,
    ``start_epoch`` (None until collection starts), ``window`` and
    ``false_alarm``, and calls :meth:`_resume_start` when ``fit`` begins,
    :meth:`_read_variable_temperatures` and :meth:`_watch` at each epoch's
    end, and :meth:`_restore_watch` at the first epoch's start.
    """

    def __init__(self):
        super().__init__()
        #: The :class:`keras_bnn.equilibrium.Verdict` of the last test (``"auto"``).
        self.verdict = None
        #: ``(variable_path, T_v, d_v)`` of the last epoch (empty without a sampler).
        self.variable_temperatures = []
        self._virial_begin = None
        #: The second noise measurement (:meth:`keras_bnn.samplers.Sampler.lower_step_factors`
        #: and :meth:`~keras_bnn.samplers.Sampler.raise_step_size`) from the first
        #: equilibrium: ``{"epoch", "first_epoch", "ratios", "lowered", "raised"}``
        #: (the averaged epochs are ``first_epoch``…``epoch``; ``raised`` is
        #: ``[old h, new h]`` or None), or None. Kept in the
        #: store (:meth:`keras_bnn.SampleStore.write_record`), so a resumed run has it.
        self.remeasurement = None
        #: The factors lowered at stationary epochs where a variable's mean ratio over
        #: the last ``window`` epochs was above the limit, oldest first:
        #: ``[{"epoch", "ratios", "lowered"}]`` (every variable's mean ratio and
        #: ``[old, new]`` factor, by path). Kept in the store, as ``remeasurement``.
        self.noise_lowerings = []
        #: The watched epochs since the kernel last changed, oldest first:
        #: ``{"start", "end", "logs", "ratios"}`` (steps, the logged
        #: :data:`~keras_bnn.equilibrium.QUANTITIES`, the variables' noise ratios
        #: in the sampler's order, named by ``_ratio_names``).
        self._rows, self._ratio_names = [], []
        #: The first step of the second noise measurement's epochs, or None.
        self._measured_from = None
        self._measuring_step = None  # the step at whose epoch end the measurement began
        self._epoch_start_step = 0

    @property
    def started_epoch(self):
        """The epoch whose end took (or may take) the first sample, or None before."""
        return self.start_epoch

    @property
    def reason(self):
        """Why collection started, or why it has not (``"auto"``): a sentence."""
        if self.verdict is None:
            return "the run ended in warm-up"
        if self.start_epoch is not None:
            return self.verdict.reason
        if self.noise_lowerings:
            last = self.noise_lowerings[-1]
            named = ", ".join(f"{name} {r:.3g}" for name, r in last["ratios"].items()
                              if r > NOISE_RATIO_LIMIT)
            return (f"the step factors were lowered at epoch {last['epoch']} (gradient-noise "
                    f"ratio over the last {self.window} epochs above {NOISE_RATIO_LIMIT}: "
                    f"{named}) and the test restarted: {self.verdict.reason}")
        if self._measured_from is None:
            changed = self.remeasurement and (
                "step size was raised" if self.remeasurement.get("raised")
                else self.remeasurement["lowered"] and "step factors were lowered")
            return (f"the {changed} at epoch {self.remeasurement['epoch']} (second noise "
                    f"measurement) and the test restarted: {self.verdict.reason}"
                    if changed else self.verdict.reason)
        first_step = self._measured_from
        return (f"the chain was stationary, and the step factors' second noise measurement "
                f"needs {self.model.optimizer.noise_averaging_steps()} steps from step "
                f"{first_step}; the run ended after "
                f"{current_step(self.model.optimizer) - first_step}")

    def _resume_start(self):
        """At ``fit``'s start: a chain with samples in the store collects on the
        uninterrupted run's schedule, its records read (the test's past is
        read at the first epoch's start: :meth:`_restore_watch`)."""
        epochs = [m.get("epoch") for m in self.store.metadata()
                  if m.get("chain") == self.chain and m.get("epoch") is not None]
        # The first sample is due at the end of start_epoch + every - 1 (_due).
        self.start_epoch = min(epochs) - (self.every or 1) + 1 if epochs else None
        self.remeasurement = self.store.read_record(self._record("remeasurement"))
        self.noise_lowerings = self.store.read_record(self._record("noise-lowerings")) or []

    def _restore_watch(self):
        """At the first epoch's start of a ``fit``: the test's past as of the
        current step, this callback's own (a later ``fit``) or else replayed
        from the store's log (a new callback, a restored run), whose lines
        past that step (epochs a restored run will run again) are dropped.
        Nothing at step 0: a new chain, whose log starts empty."""
        step = current_step(self.model.optimizer)
        self._rows = [row for row in self._rows if row["end"] <= step]
        if self._measuring_step is not None and self._measuring_step > step:
            self._measured_from = self._measuring_step = None
        if not self.auto or self._rows:
            return
        lines = self._read_log() if step else []
        kept = [line for line in lines if line["row"]["end"] <= step]
        for line in kept:
            self._rows = [] if line["reset"] else self._rows + [line["row"]]
            self._measured_from, self._measuring_step = line["measured"]
        if distribute.is_chief(self.model):  # no line past the step, none cut short
            durable.atomic_write(self._log_path(), lambda handle: handle.write(
                "".join(json.dumps(line) + "\n" for line in kept).encode()))
        if self._rows:
            self.verdict = self._test()

    def _log_path(self):
        """The store's log of this chain's watched epochs (JSON lines)."""
        return os.path.join(self.store.path, f"record-{self._record('equilibrium')}.jsonl")

    def _read_log(self):
        """The log's lines; a line cut short by a kill ends it."""
        lines = []
        try:
            with open(self._log_path(), encoding="utf-8") as handle:
                for text in handle:
                    try:
                        lines.append(json.loads(text))
                    except ValueError:
                        break
        except FileNotFoundError:
            pass
        return lines

    def _log(self, row, reset):
        """Appends the epoch ``row`` and the test's state after it to the log
        (chief only): one line an epoch, so a resumed run replays the test."""
        if distribute.is_chief(self.model):
            line = {"row": row, "reset": reset,
                    "measured": [self._measured_from, self._measuring_step]}
            with open(self._log_path(), "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")

    def _test(self):
        """The stationarity test of the rows' series."""
        series = {}
        for row in self._rows:
            for name, value in row["logs"].items():
                series.setdefault(name, []).append(value)
        return equilibrium.stationarity_test(
            series, getattr(self.model.optimizer, "temperature", 1.0),
            window=self.window, false_alarm=self.false_alarm)

    def _record(self, kind):
        """The store record's name of this chain's ``kind`` (a resumed run reads it)."""
        return f"{kind}-chain-{self.chain}"

    def _watch(self, epoch, logs):
        """Adds an epoch's logs to the series and starts collecting at equilibrium."""
        if self.start_epoch is not None or self._epoch_start_step < warmup_steps(
                self.model.optimizer):
            return
        optimizer = self.model.optimizer
        row = {"start": self._epoch_start_step, "end": current_step(optimizer),
               "logs": {name: float(logs[name]) for name in equilibrium.QUANTITIES
                        if name in logs}}
        if getattr(optimizer, "warmup", None) is not None:  # step_size="auto"
            # In the sampler's order: a restored model may name its layers otherwise.
            readings = optimizer.gradient_noise_ratios()
            self._ratio_names = [name for name, _, _ in readings]
            row["ratios"] = [float(backend.to_numpy(r)) for _, r, _ in readings]
        if rise_pending(optimizer):  # h may change at this epoch's end: not one kernel yet
            self._rows, self._measured_from, self._measuring_step = [], None, None
            self.verdict = equilibrium.Verdict(False, RISING_REASON, {}, {}, {})
            self._log(row, reset=True)
            return
        self._rows.append(row)
        self.verdict = self._test()
        if self._remeasures():
            # records in the store are another chain's
            self.remeasurement, self.noise_lowerings = None, []
            self._measure(epoch)
        elif self.verdict.stationary:
            self._start(epoch)
        self._log(row, reset=not self._rows)

    def _readings(self, rows):
        """The rows' noise ratios by variable path (``step_size="auto"``)."""
        return [dict(zip(self._ratio_names, row["ratios"])) for row in rows if "ratios" in row]

    def _start(self, epoch):
        """Starts collecting at the stationary epoch ``epoch``, or, where a
        variable's mean noise ratio over the last ``window`` readings is
        above the limit, lowers every factor and restarts the test."""
        readings = self._readings(self._rows[-self.window:])
        means = {name: sum(row[name] for row in readings) / len(readings)
                 for name in (readings[0] if readings else ())}
        lowered = means and self.model.optimizer.lower_noisy_step_factors(
            means, NOISE_RATIO_LIMIT)
        if not lowered:
            self.start_epoch = epoch
            return
        self.noise_lowerings.append({
            "epoch": epoch, "ratios": means,
            "lowered": {name: list(pair) for name, pair in lowered.items()}})
        if distribute.is_chief(self.model):  # a resumed run reports them too
            self.store.write_record(self._record("noise-lowerings"), self.noise_lowerings)
        self._rows = []  # a new kernel

    def _measure(self, epoch):
        """The second noise measurement: from the first stationary window on,
        over at least ``noise_averaging_steps()`` steps; then the factors
        are lowered where needed, and a lowered one restarts the test."""
        optimizer = self.model.optimizer
        if self._measured_from is None:
            if not self.verdict.stationary:
                return
            # From the first of the two windows the test compared.
            self._measured_from = self._rows[-2 * self.window:][0]["start"]
            self._measuring_step = self._rows[-1]["end"]
        reads = self._readings(row for row in self._rows if row["start"] >= self._measured_from)
        if current_step(optimizer) - self._measured_from < optimizer.noise_averaging_steps():
            return
        ratios = {name: sum(row[name] for row in reads) / len(reads) for name in reads[0]}
        raised = optimizer.raise_step_size(ratios)
        lowered = {} if raised else optimizer.lower_step_factors(ratios)
        self.remeasurement = {"epoch": epoch, "first_epoch": epoch - len(reads) + 1,
                              "ratios": ratios,
                              "lowered": {name: list(pair) for name, pair in lowered.items()},
                              "raised": list(raised) if raised else None}
        if distribute.is_chief(self.model):  # a resumed run reports it too
            self.store.write_record(self._record("remeasurement"), self.remeasurement)
        self._measured_from = self._measuring_step = None
        if lowered or raised:  # a new kernel: its equilibrium is tested afresh
            self._rows = []
        elif self.verdict.stationary:
            self._start(epoch)

    def _remeasures(self):
        """Whether the sampler's step factors are still to be re-measured at equilibrium."""
        pending = getattr(self.model.optimizer, "remeasure_pending", None)
        return pending is not None and pending()

    def _virial_sums(self):
        """The sampler's running sums, or None (no sampler, or no step yet: sums of 0)."""
        optimizer = self.model.optimizer
        return optimizer.virial_sums() if getattr(optimizer, "virial_sums", None) and \
            optimizer.built else None

    def _read_variable_temperatures(self):
        steps = current_step(self.model.optimizer) - self._epoch_start_step
        end = self._virial_sums()
        if end is None or steps < 1:
            return
        self.variable_temperatures = self.model.optimizer.configurational_temperatures_between(
            self._virial_begin or [0.0] * len(end), end, steps)

    def _largest_variables(self, count=5):
        """The configurational temperatures of the ``count`` largest variables, as a sentence."""
        if not self.variable_temperatures:
            return ""
        temperature = getattr(self.model.optimizer, "temperature", 1.0)
        largest = sorted(self.variable_temperatures, key=lambda row: -row[2])[:count]
        listed = ", ".join(f"{name} {t / temperature:.3g}·T ({d} weights)"
                           for name, t, d in largest)
        return (f" Configurational temperature over the last epoch, largest variables "
                f"first: {listed}; a variable far below T is still moving out of its "
                "initialisation.")
