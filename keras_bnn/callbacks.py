"""Keras callbacks for sampling runs: cyclical step size, sample collection, tempering.

``CyclicalSchedule`` and ``TemperatureRamp`` are in :mod:`keras_bnn.schedule_callbacks`
and importable from here (``kb.callbacks.*``). :mod:`keras_bnn.collection_start`
decides when ``CollectSamples`` starts (``start_epoch="auto"``: at equilibrium);
its ``warmup_steps`` is importable from here too.
"""

import warnings

import numpy as np

from keras_bnn import backend
from keras_bnn import collection_drift
from keras_bnn import distribute
from keras_bnn import equilibrium
from keras_bnn import nonfinite
from keras_bnn.collection_start import CollectionStart, warmup_steps
from keras_bnn.epoch_count import current_step
from keras_bnn.member_model import check_ensemble_model
from keras_bnn.schedule_callbacks import (  # noqa: F401 - kb.callbacks.*
    CyclicalSchedule, TemperatureRamp)
from keras_bnn.schedule_callbacks import check_cycles_end_epochs, cycle_end_inside
from keras_bnn.schedule_callbacks import cyclical_schedule
from keras_bnn.validation import argument_error, check_fraction, check_int


class NotConvergedWarning(UserWarning):
    """A run ended before its chain was at equilibrium, or before an int ``start_epoch``
    of :class:`CollectSamples`: nothing (or too little) was collected; or the
    epochs collected by ``start_epoch="auto"`` drifted
    (:mod:`keras_bnn.collection_drift`)."""


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


class CollectSamples(CollectionStart):
    """Appends the current weights to a :class:`keras_bnn.SampleStore`.

    Collection starts at ``start_epoch``: by default (``"auto"``) at the
    first epoch end where the chain is stationary after the sampler's
    warm-up (:func:`warmup_steps`) and a badly scaled chain's step rise
    (:mod:`keras_bnn.samplers.step_rise`) and, with ``step_size="auto"``, its
    gradient noise is low enough (the test, the second noise measurement
    and the noise gate: :class:`keras_bnn.collection_start.CollectionStart`);
    an int starts at exactly that epoch. From then on (0-based, counted at
    epoch ends; the count goes on across ``fit`` calls: a later ``fit``
    without ``initial_epoch`` continues it, see
    :class:`keras_bnn.epoch_count.EpochCount`), a sample is taken at the
    end of every ``every``-th epoch, or, when ``every`` is ``None`` and the
    step size is cyclical, at the last step of each cycle (every epoch with
    a constant step size): the cycles must end at epoch ends
    (:func:`keras_bnn.schedule_callbacks.check_cycles_end_epochs`; where
    ``fit`` cannot tell the steps per epoch, a cycle that ends inside an
    epoch warns, its sample not taken). Only the chief worker writes; under
    ``MultiWorkerMirroredStrategy`` every worker's ``fit`` returns once the
    chief's samples are on disk (:func:`keras_bnn.distribute.wait_for_workers`).

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
    are still moving out of their initialisation). When ``fit`` ends, the
    epochs collected so far (those this callback saw, across ``fit`` calls)
    are tested for a drift by
    :func:`keras_bnn.collection_drift.drift_test` (the slope of each logged
    quantity over the collection, against autocorrelated noise, at a false-alarm
    rate of 0.01 over the quantities); a drift issues a
    :class:`NotConvergedWarning` naming the quantity and its size, and
    :attr:`drift` holds the verdict. For a sampler,
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
            needs 2w epochs after warm-up and the step rise).
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
        self._resumed_checked = False
        self._warned_warmup = False
        self._warned_cycle = False
        #: The :class:`keras_bnn.collection_drift.DriftVerdict` of the collected epochs
        #: at the last ``fit``'s end (``"auto"`` after collection started), or None.
        self.drift = None
        self._collected_rows = []  # {"end": step, "logs": {quantity: epoch mean}}

    @property
    def warmup_samples(self):
        """How many of this chain's stored samples were taken at a step of
        the kernel's warm-up (an int ``start_epoch`` can fall there;
        ``"auto"`` never does); read from the store, so a resumed run counts
        those of the run before the kill too."""
        tuned = warmup_steps(self.model.optimizer)
        return sum(1 for m in self.store.metadata()
                   if m.get("chain") == self.chain and m.get("step", tuned + 1) <= tuned)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._resumed_checked = False
        self._warned_warmup = self._warned_cycle = False
        self.drift = None
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
            self._resume_start()

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
        nonfinite.check_weights(self.model, f"end of epoch {epoch}, step {step}")
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
            self._restore_watch()
            step = current_step(self.model.optimizer)  # a restored run runs these again
            self._collected_rows = [row for row in self._collected_rows if row["end"] <= step]
            self._go_on_collecting(self._count(epoch))
            self.collect_restored(epoch)
        self._epoch_start_step = current_step(self.model.optimizer)
        self._virial_begin = self._virial_sums()

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        epoch = self._count(epoch)
        self._read_variable_temperatures()
        if self.auto:
            self._watch(epoch, logs or {})
        self._check_cycle_end(epoch)
        self._collect(epoch)
        if self.auto and self.start_epoch is not None and epoch >= self.start_epoch:
            self._collected_rows.append({
                "end": current_step(self.model.optimizer),
                "logs": {name: float(logs[name]) for name in equilibrium.QUANTITIES
                         if name in (logs or {})}})

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
        # Every worker's fit returns with the chief's samples on disk (a worker that
        # read the store after fit missed the last one: an ensemble of other samples).
        distribute.wait_for_workers(self.model)
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
        elif self.auto:
            self._check_drift()

    def _check_drift(self):
        """Tests the collected epochs for a drift (:attr:`drift`) and warns at one."""
        series = {}
        for row in self._collected_rows:
            for name, value in row["logs"].items():
                series.setdefault(name, []).append(value)
        self.drift = collection_drift.drift_test(series, self.window)
        if self.drift.drifting:
            warnings.warn(
                f"CollectSamples: the collected epochs drifted, so the samples come from a "
                f"chain that was still moving: {self.drift.reason}. Train for more epochs "
                "(the drift may settle), or start later (start_epoch=<int>; keras-bnn "
                "train: --burn-in-epochs); with HMC give the step-size adaptation longer "
                "(num_adaptation_steps).", NotConvergedWarning,
                stacklevel=collection_drift.fit_caller_stacklevel())
