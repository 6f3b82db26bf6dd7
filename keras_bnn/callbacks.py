"""Keras callbacks for sampling runs: cyclical step size, sample collection, tempering.

``CyclicalSchedule`` and ``TemperatureRamp`` are in :mod:`keras_bnn.schedule_callbacks`
and importable from here (``kb.callbacks.*``).
"""

import warnings

import numpy as np

from keras_bnn import backend
from keras_bnn import distribute
from keras_bnn import equilibrium
from keras_bnn.epoch_count import EpochCount, current_step
from keras_bnn.member_model import check_ensemble_model
from keras_bnn.samplers.base import NOISE_RATIO_LIMIT
from keras_bnn.schedule_callbacks import (  # noqa: F401 - kb.callbacks.*
    CyclicalSchedule, TemperatureRamp)
from keras_bnn.schedule_callbacks import check_cycles_end_epochs, cycle_end_inside
from keras_bnn.schedule_callbacks import cyclical_schedule
from keras_bnn.validation import argument_error, check_fraction, check_int


class NotConvergedWarning(UserWarning):
    """A run ended before its chain was at equilibrium, or before an int ``start_epoch``
    of :class:`CollectSamples`: nothing (or too little) was collected."""


class WarmupSampleWarning(UserWarning):
    """A sample was taken while the kernel still tuned itself (:func:`warmup_steps`)."""


class RestoredWeightsWarning(UserWarning):
    """``keras.callbacks.EarlyStopping(restore_best_weights=True)`` on a sampled
    model: at the end of ``fit`` the weights jump back to one epoch's point,
    away from the chain's state (its momenta and step counter stay at the last
    step)."""


class MidEpochBackupWarning(UserWarning):
    """``keras.callbacks.BackupAndRestore(save_freq=<int>)`` on a sampled model:
    Keras resumes a mid-epoch backup at the start of its epoch, so the resumed
    chain takes that epoch's first batches again (more steps, other batches)
    and is not the uninterrupted one."""


class NoEnsembleWarning(UserWarning):
    """The model being sampled is one :class:`keras_bnn.PosteriorEnsemble` refuses
    (:func:`keras_bnn.member_model.check_ensemble_model`): its samples are stored, but
    only the store can be read (``store[i].weights``)."""


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


class CollectSamples(EpochCount):
    """Appends the current weights to a :class:`keras_bnn.SampleStore`.

    Collection starts at ``start_epoch``: by default (``"auto"``) at the
    first epoch end where the chain is stationary by
    :func:`keras_bnn.equilibrium.stationarity_test` on the epoch logs
    (configurational and kinetic temperature, ``prior`` = −log p(θ), ``nll``)
    of the epochs that began after the sampler's warm-up
    (:func:`warmup_steps`); an int starts at exactly that epoch. With
    ``step_size="auto"`` the first time the test passes starts the second
    noise measurement: each variable's gradient-noise ratio, averaged from
    the first of the 2w epochs the test compared over at least
    :meth:`~keras_bnn.samplers.Sampler.noise_averaging_steps` steps, lowers
    its step factor where it is more than 25 % above the warm-up's target
    (:meth:`~keras_bnn.samplers.Sampler.lower_step_factors`: the noise
    changes as the chain leaves its initialisation); if a factor was
    lowered, the chain is a new kernel and the test restarts on the epochs
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
    From then
    on (0-based, counted at epoch ends; the count goes on across ``fit``
    calls: a later ``fit`` without ``initial_epoch`` continues it, see
    :class:`keras_bnn.epoch_count.EpochCount`), a sample
    is taken at the end of every ``every``-th epoch, or, when ``every`` is
    ``None`` and the step size is cyclical, at the last step of each cycle
    (every epoch with a constant step size): the cycles must end at epoch
    ends (:func:`keras_bnn.schedule_callbacks.check_cycles_end_epochs`; where
    ``fit`` cannot tell the steps per epoch, a cycle that ends inside an
    epoch warns, its sample not taken). Only the chief worker writes.

    Exactly once: a sample's identity is (``chain``, ``step``), the
    optimizer step it was taken at. A sample already in the store is not
    written again, and a run resumed by ``keras.callbacks.BackupAndRestore``
    first takes the sample due at the restored step if the store lacks it, so
    a run killed at any point and resumed neither duplicates nor drops a
    sample, whatever the order of the two callbacks. So one id is one chain:
    a ``fit`` that starts at step 0 (a new model, or ``compile`` with a new
    sampler) from other weights than the chain whose samples the store
    holds under that id is refused (its samples at the steps already stored
    would be skipped, the later ones mixed into the other chain).

    When ``fit`` starts, a model that :class:`keras_bnn.PosteriorEnsemble`
    will refuse (several inputs or outputs, a variable-length input: the
    rules of :func:`keras_bnn.member_model.check_ensemble_model`) gets a
    :class:`NoEnsembleWarning` with the ensemble's reason, before any epoch
    is trained. It is not an error: the samples are stored all the same,
    and ``store[i].weights`` with ``store.build_model()`` serve a model the
    ensemble cannot take.

    With ``"auto"``, :attr:`started_epoch` and :attr:`verdict` say when and
    why collection started (:class:`keras_bnn.equilibrium.Verdict`: the
    z-scores and temperatures), and a run that ends before equilibrium
    issues a :class:`NotConvergedWarning` that gives the configurational
    temperature of the largest variables over the last epoch (which layers
    are still moving out of their initialisation). For a sampler,
    :attr:`variable_temperatures` holds every variable's, read from
    :meth:`keras_bnn.samplers.Sampler.virial_sums` at the epoch's start and
    end (two host reads an epoch). A resumed run whose store already
    holds samples of this chain goes on collecting, on the uninterrupted
    run's schedule (equilibrium was reached before the kill); otherwise the
    test restarts on the epochs it sees.

    An int ``start_epoch`` is an epoch of that count, so a second ``fit``
    reaches it; a ``fit`` that ends before it warns with
    :class:`NotConvergedWarning`. It is taken as given, even inside the sampler's
    warm-up (:func:`warmup_steps`; short test runs collect there), but the
    first sample taken at a warm-up step issues a
    :class:`WarmupSampleWarning` (the step size was still being tuned: the
    sample belongs to no fixed chain), and :attr:`warmup_samples` counts
    them.

    Args:
        store: the :class:`keras_bnn.SampleStore`.
        start_epoch: ``"auto"`` (equilibrium, see above) or the first epoch
            (int ≥ 0) whose end may yield a sample.
        every: collect every ``every`` epochs, or ``None`` (see above).
        chain: id of the chain being sampled (int >= 0), stored with each
            sample.
        window: with ``"auto"``, the test's window w in epochs (≥ 4; it
            needs 2w epochs after warm-up).
        false_alarm: with ``"auto"``, the test's α in (0, 1).

    Raises:
        ValueError: for a ``store`` that is not a sample store, a
            ``start_epoch`` other than ``"auto"`` or an int ≥ 0,
            a negative ``chain``, a non-positive ``every``, a bad ``window``
            or ``false_alarm``, (at train begin) when the store holds
            another architecture, and (at the first epoch's begin) when a
            chain that starts at step 0 would reuse the id of a stored chain
            that started from other weights (:meth:`_check_chain_start`), or
            naming ``cycle_steps`` when ``every`` is None and the cycles of a
            cyclical step size do not end at epoch ends (``every`` for a
            ``fit`` that starts inside an epoch).
    """

    def __init__(self, store, start_epoch="auto", every=None, chain=0,
                 window=equilibrium.WINDOW, false_alarm=equilibrium.FALSE_ALARM):
        super().__init__()
        owner = "CollectSamples"
        if not all(hasattr(store, name) for name in ("append", "metadata", "check_model")):
            raise argument_error("store", "be a keras_bnn.SampleStore (kb.SampleStore(path))",
                                 store, owner, got=type(store).__name__)
        self.store = store
        self.auto = isinstance(start_epoch, str)
        if self.auto:
            if start_epoch != "auto":
                raise argument_error("start_epoch", "be 'auto' (at equilibrium) or an int >= 0",
                                     start_epoch, owner)
        self.start_epoch = None if self.auto else check_int(start_epoch, "start_epoch", 0,
                                                            owner=owner)
        self.every = None if every is None else check_int(every, "every", 1, owner=owner)
        self.chain = check_int(chain, "chain", 0, owner=owner)
        self.window = check_int(window, "window", 4, owner=owner)
        self.false_alarm = check_fraction(false_alarm, "false_alarm", owner)
        #: The :class:`keras_bnn.equilibrium.Verdict` of the last test (``"auto"``).
        self.verdict = None
        #: ``(variable_path, T_v, d_v)`` of the last epoch (empty without a sampler).
        self.variable_temperatures = []
        self._virial_begin = None
        #: The second noise measurement (:meth:`keras_bnn.samplers.Sampler.lower_step_factors`)
        #: from the first equilibrium: ``{"epoch", "first_epoch", "ratios", "lowered"}``
        #: (the averaged epochs are ``first_epoch``…``epoch``), or None. Kept in the
        #: store (:meth:`keras_bnn.SampleStore.write_record`), so a resumed run has it.
        self.remeasurement = None
        #: The factors lowered at stationary epochs where a variable's mean ratio over
        #: the last ``window`` epochs was above the limit, oldest first:
        #: ``[{"epoch", "ratios", "lowered"}]`` (every variable's mean ratio and
        #: ``[old, new]`` factor, by path). Kept in the store, as ``remeasurement``.
        self.noise_lowerings = []
        self._series, self._noise_readings = {}, []
        self._ratios, self._measured_from = [], None
        self._resumed_checked = False
        self._epoch_start_step = 0
        self._warned_warmup = False
        self._warned_cycle = False

    @property
    def warmup_samples(self):
        """How many of this chain's stored samples were taken at a step of
        the kernel's warm-up (an int ``start_epoch`` can fall there;
        ``"auto"`` never does); read from the store, so a resumed run counts
        those of the run before the kill too."""
        tuned = warmup_steps(self.model.optimizer)
        return sum(1 for m in self.store.metadata()
                   if m.get("chain") == self.chain and m.get("step", tuned + 1) <= tuned)

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
            lowered = self.remeasurement and self.remeasurement["lowered"]
            return (f"the step factors were lowered at epoch {self.remeasurement['epoch']} "
                    f"(second noise measurement) and the test restarted: "
                    f"{self.verdict.reason}" if lowered else self.verdict.reason)
        first_step = self._ratios[self._measured_from][0]
        return (f"the chain was stationary, and the step factors' second noise measurement "
                f"needs {self.model.optimizer.noise_averaging_steps()} steps from step "
                f"{first_step}; the run ended after "
                f"{current_step(self.model.optimizer) - first_step}")

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._resumed_checked = False
        self._warned_warmup = self._warned_cycle = False
        try:
            check_ensemble_model(self.model)
        except ValueError as refusal:
            warnings.warn(f"CollectSamples: kb.PosteriorEnsemble will refuse this run's "
                          f"samples: {refusal} They are stored all the same (read them with "
                          "the SampleStore: store[i].weights, store.build_model()).",
                          NoEnsembleWarning, stacklevel=2)
        if distribute.is_chief(self.model):
            self.store.check_model(self.model)
        if self.auto:
            self._series, self._ratios, self._measured_from = {}, [], None
            self._noise_readings = []
            epochs = [m.get("epoch") for m in self.store.metadata()
                      if m.get("chain") == self.chain and m.get("epoch") is not None]
            # The first sample is due at the end of start_epoch + every - 1 (_due).
            self.start_epoch = min(epochs) - (self.every or 1) + 1 if epochs else None
            self.remeasurement = self.store.read_record(self._record("remeasurement"))
            self.noise_lowerings = self.store.read_record(self._record("noise-lowerings")) or []

    def _record(self, kind):
        """The store record's name of this chain's ``kind`` (a resumed run reads it)."""
        return f"{kind}-chain-{self.chain}"

    def _watch(self, epoch, logs):
        """Adds an epoch's logs to the series and starts collecting at equilibrium."""
        if self.start_epoch is not None or self._epoch_start_step < warmup_steps(
                self.model.optimizer):
            return
        optimizer = self.model.optimizer
        for name in equilibrium.QUANTITIES:
            if name in logs:
                self._series.setdefault(name, []).append(float(logs[name]))
        self.verdict = equilibrium.stationarity_test(
            self._series, getattr(optimizer, "temperature", 1.0),
            window=self.window, false_alarm=self.false_alarm)
        if getattr(optimizer, "warmup", None) is not None:  # step_size="auto"
            self._noise_readings = self._noise_readings[1 - self.window:] + [{
                name: float(backend.to_numpy(r))
                for name, r, _ in optimizer.gradient_noise_ratios()}]
        if self._remeasures():
            # records in the store are another chain's
            self.remeasurement, self.noise_lowerings = None, []
            self._measure(epoch)
        elif self.verdict.stationary:
            self._start(epoch)

    def _start(self, epoch):
        """Starts collecting at the stationary epoch ``epoch``, or, where a
        variable's mean noise ratio over the last ``window`` readings is
        above the limit, lowers every factor and restarts the test."""
        readings = self._noise_readings
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
        self._series, self._noise_readings = {}, []  # a new kernel

    def _measure(self, epoch):
        """The second noise measurement: from the first stationary window on,
        over at least ``noise_averaging_steps()`` steps; then the factors
        are lowered where needed, and a lowered one restarts the test."""
        optimizer = self.model.optimizer
        self._ratios.append((self._epoch_start_step, self._noise_readings[-1]))
        if self._measured_from is None:
            if not self.verdict.stationary:
                del self._ratios[:-2 * self.window]
                return
            # From the first of the two windows the test compared.
            self._measured_from = max(0, len(self._ratios) - 2 * self.window)
        reads = self._ratios[self._measured_from:]
        if current_step(optimizer) - reads[0][0] < optimizer.noise_averaging_steps():
            return
        ratios = {name: sum(row[name] for _, row in reads) / len(reads) for name in reads[0][1]}
        lowered = optimizer.lower_step_factors(ratios)
        self.remeasurement = {"epoch": epoch, "first_epoch": epoch - len(reads) + 1,
                              "ratios": ratios,
                              "lowered": {name: list(pair) for name, pair in lowered.items()}}
        if distribute.is_chief(self.model):  # a resumed run reports it too
            self.store.write_record(self._record("remeasurement"), self.remeasurement)
        self._ratios, self._measured_from = [], None
        if lowered:  # a new kernel: its equilibrium is tested afresh
            self._series, self._noise_readings = {}, []
        elif self.verdict.stationary:
            self._start(epoch)

    def _remeasures(self):
        """Whether the sampler's step factors are still to be re-measured at equilibrium."""
        pending = getattr(self.model.optimizer, "remeasure_pending", None)
        return pending is not None and pending()

    def _due(self, epoch):
        if self.start_epoch is None or epoch < self.start_epoch:
            return False
        if self.every is not None:
            return (epoch - self.start_epoch) % self.every == self.every - 1
        optimizer = self.model.optimizer
        if cyclical_schedule(optimizer) is not None:
            return optimizer.is_cycle_end(current_step(optimizer) - 1)
        return True

    def _collect(self, epoch):
        """Stores the sample of the current step unless the store has it."""
        if not self._due(epoch) or not distribute.is_chief(self.model):
            return
        optimizer = self.model.optimizer
        step = current_step(optimizer)
        if self.store.find(self.chain, step) is not None:
            return
        self.store.append(
            self.model,
            chain=self.chain,
            epoch=epoch,
            step=step,
            temperature=getattr(optimizer, "temperature", None),
        )
        self._check_past_warmup(epoch, step)

    def _check_past_warmup(self, epoch, step):
        """Warns, once a ``fit``, at a sample taken at step ``step`` ≤
        :func:`warmup_steps`: the step size was still being tuned, so the
        sample belongs to no fixed chain."""
        tuned = warmup_steps(self.model.optimizer)
        if step <= tuned and not self._warned_warmup:
            self._warned_warmup = True
            warnings.warn(
                f"CollectSamples: the sample of epoch {epoch} (step {step}) was taken during "
                f"the sampler's warm-up, its first {tuned} steps, while the step size was "
                f"still being tuned: it is not a sample of the chain that runs after the "
                f"warm-up. start_epoch={self.start_epoch} falls inside it; start after step "
                f"{tuned}, or pass start_epoch='auto' to start at equilibrium.",
                WarmupSampleWarning, stacklevel=2)

    def _go_on_collecting(self, epoch):
        """A later ``fit`` on a chain that already collects (its stored samples
        were all taken at or before the optimizer's step) numbers its epochs
        from ``epoch`` again: collection goes on from there, instead of
        waiting for the first stored epoch. A resumed run is restored past
        its first sample, or holds samples from after its restored step."""
        if not self.auto or self.start_epoch is None or epoch >= self.start_epoch:
            return
        steps = [m["step"] for m in self.store.metadata()
                 if m.get("chain") == self.chain and m.get("step") is not None]
        if steps and max(steps) <= current_step(self.model.optimizer):
            self.start_epoch = epoch

    def _check_chain_start(self):
        """Records where chain ``chain`` starts, or refuses another chain under its id.

        At step 0 the weights' sums of squares (one per weight, float64) are
        kept as the store's record ``start-chain-<chain>``. A later ``fit``
        at step 0 with samples of the chain stored must start where it did:
        a run started over (``keras-bnn train --resume`` without a readable
        backup) regenerates the same chain, which ``_collect`` rightly does
        not store twice; other weights are another chain under the same id.

        Raises:
            ValueError: naming ``chain``, for another chain's start.
        """
        if current_step(self.model.optimizer) != 0:
            return
        start = [float(np.sum(np.square(np.asarray(backend.to_numpy(w), np.float64))))
                 for w in self.model.weights]
        name = f"start-chain-{self.chain}"
        recorded = self.store.read_record(name)
        stored = any(m.get("chain", 0) == self.chain for m in self.store.metadata())
        if stored and recorded is not None and not np.allclose(start, recorded, rtol=1e-6):
            raise argument_error(
                "chain", f"name a chain not in SampleStore {self.store.path!r}, or the chain "
                "that started there: its samples of this id came from a chain that started "
                "from other weights, and this fit starts a new chain at step 0 (a new model, "
                "or compile with a new sampler), whose samples at the steps already stored "
                "would be skipped and the later ones mixed into that chain. Pass "
                "CollectSamples(..., chain=<an unused id>) or use a new store",
                self.chain, "CollectSamples")
        if not stored and distribute.is_chief(self.model):
            self.store.write_record(name, start)

    def collect_restored(self, epoch):
        """Takes the sample due at the end of epoch ``epoch - 1`` if a kill cut
        it off, once a ``fit``: the sample of a run restored at ``epoch``
        (called at its first epoch's start, or at the end of a ``fit`` that
        runs no epoch). A store that holds that epoch's sample at another step
        has it: a backup taken inside an epoch restores a step past its end.

        Args:
            epoch: the epoch the restored run starts at, in its ``fit``'s numbering.
        """
        self._resumed_checked = True
        epoch = self._count(epoch)
        if epoch > 0 and current_step(self.model.optimizer) > 0 and not any(
                m.get("chain", 0) == self.chain and m.get("epoch") == epoch - 1
                for m in self.store.metadata()):
            self._collect(epoch - 1)

    def on_epoch_begin(self, epoch, logs=None):
        # Every on_train_begin (BackupAndRestore's restore included) has run
        # by now: a resumed run starts at epoch > 0 with the weights of the
        # end of epoch - 1, whose sample a kill may have cut off.
        if not self._resumed_checked:
            if self.every is None:  # after every on_train_begin: CyclicalSchedule's too
                check_cycles_end_epochs(self.model.optimizer, (self.params or {}).get("steps"),
                                        current_step(self.model.optimizer))
            self._check_chain_start()
            self._go_on_collecting(self._count(epoch))
            self.collect_restored(epoch)
        self._epoch_start_step = current_step(self.model.optimizer)
        self._virial_begin = self._virial_sums()

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

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        epoch = self._count(epoch)
        self._read_variable_temperatures()
        if self.auto:
            self._watch(epoch, logs or {})
        self._check_cycle_end(epoch)
        self._collect(epoch)

    def _check_cycle_end(self, epoch):
        """Warns, once a ``fit``, where a cycle ended inside epoch ``epoch``,
        not at its end, so that its sample is not taken (``fit`` could not
        tell the steps per epoch for :func:`check_cycles_end_epochs`)."""
        if self.every is not None or self._warned_cycle or self.start_epoch is None \
                or epoch < self.start_epoch:
            return
        optimizer = self.model.optimizer
        inside = cycle_end_inside(optimizer, self._epoch_start_step, current_step(optimizer))
        if inside is not None:
            self._warned_cycle = True
            warnings.warn(
                f"CollectSamples: a cycle of the step size ended at step {inside}, inside "
                f"epoch {epoch} (steps {self._epoch_start_step}-{current_step(optimizer) - 1}); "
                "a sample is taken at an epoch end only, so that cycle's was not taken. "
                "Make `cycle_steps` and `burn_in_steps` multiples of the steps per epoch "
                "(kb.callbacks.CyclicalSchedule(cycle_epochs, steps_per_epoch=<the epoch's "
                "steps>)), or pass CollectSamples(every=<epochs>).", stacklevel=2)

    def on_train_end(self, logs=None):
        # A run restored after its last epoch runs no epoch at all.
        if not self._resumed_checked:
            self.collect_restored(self.params.get("epochs") or 0)
        if self.auto and self.start_epoch is None:
            reason = self.reason
            warnings.warn(
                f"CollectSamples: the chain did not reach equilibrium, so no sample was "
                f"collected ({reason}).{self._largest_variables()} Train for more epochs, or "
                "pass start_epoch=<int> (keras-bnn train: --burn-in-epochs) to collect "
                "from a given epoch anyway.",
                NotConvergedWarning, stacklevel=2)
        elif not self.auto and self._last_end and self._last_end[0] < self.start_epoch:
            last = self._last_end[0]
            warnings.warn(
                f"CollectSamples: no sample was collected: start_epoch={self.start_epoch} was "
                f"not reached, the last epoch was {last} (counted across fits: a later fit "
                f"without initial_epoch goes on from epoch {last + 1}). Train for more "
                "epochs, or pass a smaller start_epoch.", NotConvergedWarning, stacklevel=2)

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
