"""One run's ``model.fit``, its prior named: the run's directory claimed, its
callbacks, its length and the reports it writes.

:func:`claim` locks and checks the run directory and :func:`fit_run` trains
into it. :func:`keras_bnn.runs.train` (:mod:`~keras_bnn.runs.training`)
calls both, resolving ``prior="auto"`` between them
(:mod:`~keras_bnn.runs.selection`, which calls both for each candidate
prior), so imports go one way: training → selection → fitting.
"""

import contextlib
import dataclasses
import math
import os
import shutil

import keras
import numpy as np

from keras_bnn import callbacks as callbacks_lib
from keras_bnn import directional_noise
from keras_bnn import samplers
from keras_bnn.datasets.pipeline import data_epoch
from keras_bnn.durable import DirectoryLock
from keras_bnn.runs.checkpoints import RunBackup
from keras_bnn.runs.build import (build_model, check_data_files, compile_model, epoch_data,
                                  load_data, steps_per_epoch)
from keras_bnn.runs.config import MIN_SAMPLED_SHARE, chain_seed, default_collect_every
from keras_bnn.runs.rundir import RunDir
from keras_bnn.store import SampleStore
from keras_bnn.temperature_report import kinetic_temperature_report
from keras_bnn.validation import counted


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What :func:`keras_bnn.runs.train` returns (and writes into the run directory).

    Unpacks as ``store, history = train(...)``.

    Attributes:
        store: the run's :class:`keras_bnn.SampleStore`.
        history: the ``keras.callbacks.History`` of ``fit``.
        kinetic_temperatures: :func:`kinetic_temperature_rows` (also in
            ``kinetic_temperatures.json``).
        gradient_noise: :func:`gradient_noise_rows` (also in
            ``gradient_noise.json``).
        directional_noise: :func:`directional_noise_report` (also in
            ``directional_noise.json``).
        collection: :func:`collection_report` (also in ``collection.json``).
    """

    store: SampleStore
    history: keras.callbacks.History
    kinetic_temperatures: list
    gradient_noise: list
    directional_noise: dict
    collection: dict

    def __iter__(self):
        return iter((self.store, self.history))


@contextlib.contextmanager
def claim(config, resume=False, data=None):
    """The run directory of ``config``, locked, and checked for a new or resumed run.

    Validates ``config``, then holds :class:`keras_bnn.durable.DirectoryLock`
    on ``config.output_dir`` while the ``with`` block runs.

    Args:
        config: a :class:`keras_bnn.runs.RunConfig`.
        resume: the run in ``config.output_dir`` is to be continued.
        data: the ``data`` given to :func:`keras_bnn.runs.train`, if any.

    Yields:
        The run's :class:`keras_bnn.runs.RunDir`.

    Raises:
        ValueError: for an invalid ``config``; with ``resume``, for a run
            that is complete, or a sweep's run on a validation split and
            ``data`` None.
        FileExistsError: if ``output_dir`` holds chains or a sweep, or
            already holds a run and ``resume`` is False.
        keras_bnn.durable.InUseError: if another process trains into
            ``output_dir``.
    """
    config.validate()
    run = RunDir(config.output_dir)
    with refused_leaves_nothing(run.path, lambda: run.started or
                                os.path.isdir(run.prior_candidates)):
        refuse_occupied(run, config, resume, data)
        yield run


def _first_missing(path):
    """The outermost directory of ``path`` (made absolute) that does not exist, or None."""
    path, missing = os.path.abspath(path), None
    while not os.path.exists(path):
        path, missing = os.path.dirname(path), path
    return missing


@contextlib.contextmanager
def refused_leaves_nothing(directory, begun):
    """:class:`keras_bnn.durable.DirectoryLock` on ``directory``, and a refusal
    (an exception) before the run began leaves nothing behind.

    On an ``Exception`` in the ``with`` block while ``begun()`` is False,
    what this lock and the block created is removed: the directories made
    for ``directory`` if it did not exist, else the entries that were not
    in it (the lock file included). A ``KeyboardInterrupt`` removes nothing.

    Args:
        directory: the run directory.
        begun: a function, True once the run holds what a later command
            continues (its ``config.json``, a chosen prior's candidates).

    Yields:
        None.

    Raises:
        keras_bnn.durable.InUseError: if another process holds ``directory``.
    """
    missing = _first_missing(directory)
    before = None if missing else set(os.listdir(directory))
    with DirectoryLock(directory):
        try:
            yield
        except Exception:
            if not begun():
                made = [missing] if missing else [os.path.join(directory, name) for name in
                                                  set(os.listdir(directory)) - before]
                for path in made:
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path, ignore_errors=True)
                    else:
                        with contextlib.suppress(OSError):
                            os.remove(path)
            raise


def refuse_occupied(run, config, resume=False, data=None):
    """:func:`claim`'s checks of the run directory (creating nothing).

    Args:
        run: the :class:`keras_bnn.runs.RunDir` of ``config.output_dir``.
        config: the run's :class:`keras_bnn.runs.RunConfig`.
        resume: the run is to be continued.
        data: the ``data`` given to :func:`keras_bnn.runs.train`, if any.

    Raises:
        ValueError, FileExistsError: as :func:`claim`.
    """
    if SampleStore.is_store(run.path):  # not empty: DirectoryLock's file is there
        raise FileExistsError(
            f"`output_dir` {config.output_dir!r} is a sample store (another run's samples/, "
            "or a CollectSamples directory), not a run directory: train into a new directory.")
    if os.path.exists(run.sweep_table) or run.sweep_runs():
        raise FileExistsError(
            f"`output_dir` {config.output_dir!r} holds a sweep (its <param>=<value>/seed=<seed> "
            "runs, sweep.csv): train into a new directory.")
    chains = run.chains()
    if chains:
        raise FileExistsError(
            f"`output_dir` {config.output_dir!r} holds a run of {counted(len(chains), 'chain')} "
            f"({', '.join(os.path.basename(c.path) for c in chains)}): train into a new "
            "directory, or continue the killed run with --resume and its --chains K.")
    samples = len(run.store()) if os.path.isdir(run.samples) else 0
    if resume and data is None and os.path.exists(run.validation_split):
        raise ValueError(f"--resume: the run in {config.output_dir!r} is a sweep's run on a "
                         "validation split of the training set (its "
                         f"{os.path.basename(run.validation_split)}): resumed here it would "
                         "train on the whole training set; run the sweep again into a new "
                         "directory.")
    if resume and run.complete:
        raise ValueError(f"--resume: the run in {config.output_dir!r} is complete "
                         f"({counted(samples, 'sample')}); nothing to resume.")
    if not resume and (samples or os.path.exists(run.backup) or run.complete
                       or run.holds_other_config(dataclasses.asdict(config))):
        raise FileExistsError(
            f"`output_dir` {config.output_dir!r} already holds a run "
            f"({counted(samples, 'sample')}); choose a new directory, or continue a killed "
            "run with --resume."
        )


def fit_run(run, config, verbose=1, resume=False, data=None):
    """Trains the run of ``config``, its prior named, into the claimed ``run``.

    Args:
        run: the :class:`keras_bnn.runs.RunDir` that :func:`claim` yields.
        config: a validated :class:`keras_bnn.runs.RunConfig` whose ``prior``
            is not ``"auto"``.
        verbose: Keras progress-bar verbosity.
        resume: continue the run from its backup.
        data: ``(train_ds, test_ds, info)`` to use instead of loading
            ``config.dataset``.

    Returns:
        A :class:`TrainResult`.

    Raises:
        OSError: if a file cannot be written.
    """
    store = run.store()
    keras.utils.set_random_seed(chain_seed(config))  # the initialisation
    if data is None:
        check_data_files(run, config, record=True)  # "npy": the files' digests, or a check
    train_ds, _, info = data or load_data(config)
    epochs_ds, steps = epoch_data(train_ds, config, info["num_train"])
    config.resolve_length(steps_per_epoch(config, info["num_train"]))  # stored with the run
    model = build_model(config, info)
    compile_model(model, config, info)
    collects = samplers.REGISTRY[config.sampler].collects
    backup = RunBackup(run.backup)
    callbacks = [backup]  # first: it sets the epoch the others start at
    epoch = data_epoch(epochs_ds)
    if epoch is not None:
        callbacks.append(DataEpoch(epoch))
    collector = None
    if collects:
        fixed_burn_in = 0 if config.burn_in_epochs == "auto" else config.burn_in_epochs
        if config.cycle_epochs:
            callbacks.append(callbacks_lib.CyclicalSchedule(config.cycle_epochs, fixed_burn_in))
        every = config.collect_every
        if every is None and not config.cycle_epochs:
            every = default_collect_every(config.epochs)
        collector = callbacks_lib.CollectSamples(store, start_epoch=config.burn_in_epochs,
                                                 every=every, chain=config.chain)
        callbacks.append(collector)
    sampled_epochs = math.ceil(MIN_SAMPLED_SHARE * config.epochs)
    ending = EndWhenSampled(collector, config.epochs, sampled_epochs)
    callbacks.append(ending)  # after the collector: it reads the epoch's verdict
    if not resume:
        run.write_json(run.config, dataclasses.asdict(config))
    history = model.fit(epochs_ds, epochs=config.max_epochs, steps_per_epoch=steps,
                        verbose=verbose, callbacks=callbacks,
                        shuffle=False)  # the tf.data pipeline shuffles
    history.history = backup.run_history(history.history)  # a resumed run's too
    step = int(model.optimizer.iterations)
    if not collects and store.find(config.chain, step) is None:  # the point estimate
        store.append(model, chain=config.chain, epoch=config.epochs - 1, step=step)
    result = TrainResult(store, history, kinetic_temperature_rows(model, config),
                         gradient_noise_rows(model),
                         directional_noise_report(model, train_ds, config.batch_size),
                         dict(collection_report(model, collector), **ending.report()))
    run.write_json(run.collection, result.collection)
    run.write_json(run.gradient_noise, result.gradient_noise)
    run.write_json(run.directional_noise, result.directional_noise)
    run.write_json(run.history, history.history)
    run.write_json(run.kinetic_temperatures, result.kinetic_temperatures)  # last: complete
    shutil.rmtree(run.backup, ignore_errors=True)
    return result


class EndWhenSampled(keras.callbacks.Callback):
    """Ends a run at ``epochs``, or later, once its chain has sampled long enough.

    ``fit`` is given ``max_epochs``; at the end of epoch e (0-based) with
    e + 1 ≥ ``epochs``, training stops when collection has started, at
    epoch s = ``collector.started_epoch``, and

        e + 1 − s ≥ ``sampled_epochs``

    (:data:`keras_bnn.runs.config.MIN_SAMPLED_SHARE` of ``epochs``: at the
    default ``collect_every``, 25 samples). The decision reads the
    collector's equilibrium test, which every worker runs on the same
    (all-reduced) epoch logs, so all workers stop at the same epoch (a
    resumed run reads its start from the sample store, which they must
    share). Without a collector (the SGD/MAP baseline) the run ends at
    ``epochs``. A run restored after the epoch it ended at trains no epoch.

    Args:
        collector: the run's :class:`keras_bnn.callbacks.CollectSamples`, or None.
        epochs: the epochs the run trains at least.
        sampled_epochs: the epochs from the start of collection it trains at least.
    """

    def __init__(self, collector, epochs, sampled_epochs):
        super().__init__()
        self.collector = collector
        self.epochs = epochs
        self.sampled_epochs = sampled_epochs
        self.epochs_trained = None

    def _ends_after(self, epoch):
        """Whether the run ends at the end of epoch ``epoch``."""
        start = None if self.collector is None else self.collector.started_epoch
        return epoch + 1 >= self.epochs and (
            self.collector is None
            or start is not None and epoch + 1 - start >= self.sampled_epochs)

    def on_train_begin(self, logs=None):
        # A run restored (RunBackup, earlier in the list) after the epoch it
        # ended at runs no epoch: it only takes that epoch's sample if a kill
        # cut it off, as a run restored after its last epoch does.
        restored = getattr(self.model, "_initial_epoch", None) or 0
        if restored and restored < self.params["epochs"] and self._ends_after(restored - 1):
            if self.collector is not None:
                self.collector.collect_restored(restored)
            self.epochs_trained = restored
            self.model._initial_epoch = self.params["epochs"]

    def on_epoch_end(self, epoch, logs=None):
        self.epochs_trained = epoch + 1
        if self._ends_after(epoch):
            self.model.stop_training = True

    def report(self):
        """The run's length for its report.

        Returns:
            dict: ``epochs`` (trained in all) and ``lengthened``: None for a
            run that ended at ``epochs``, else a sentence saying why it went on.
        """
        trained = self.epochs_trained or self.params.get("epochs")
        if trained <= self.epochs:
            return {"epochs": trained, "lengthened": None}
        goal = f"sampled {counted(self.sampled_epochs, 'epoch')} from equilibrium"
        if self._ends_after(trained - 1):
            why = (f"collection started at epoch {self.collector.started_epoch}, and the run "
                   f"went on until it had {goal}")
        else:
            why = f"max_epochs, the most allowed, ended it before it had {goal}"
        return {"epochs": trained, "lengthened": f"{trained} epochs, not {self.epochs}: {why}"}


#: Training examples :func:`directional_noise_report` estimates the noise from.
DIRECTIONAL_EXAMPLES = 128


def directional_noise_report(model, train_ds, batch_size):
    """The gradient-noise ratio of the noisiest directions, at the end of training.

    :func:`keras_bnn.directional_noise.directional_noise_ratios` on the first
    :data:`DIRECTIONAL_EXAMPLES` examples of ``train_ds`` (shuffled), at the
    final weights and the sampler's final steps. The per-variable ratios of
    :func:`gradient_noise_rows` are means over parameters; this is the ratio
    of the directions the data determine, where the noise concentrates.

    Args:
        model: the trained model.
        train_ds: its training dataset, batches of ``(x, y, ...)``.
        batch_size: the training batch size.

    Returns:
        The dict of ``directional_noise_ratios`` plus ``above_limit`` (its
        top ratio above :data:`keras_bnn.samplers.NOISE_RATIO_LIMIT`); empty
        for the SGD baseline, HMC (no gradient noise) and a per-parameter
        preconditioner.
    """
    if not directional_noise.measurable(model.optimizer):
        return {}
    xs, ys = [], []
    for element in train_ds.unbatch().take(DIRECTIONAL_EXAMPLES).as_numpy_iterator():
        xs.append(element[0])
        ys.append(element[1])
    report = directional_noise.directional_noise_ratios(
        model, np.stack(xs), np.stack(ys), min(batch_size, int(model.train_size)),
        max_examples=DIRECTIONAL_EXAMPLES)
    return dict(report, above_limit=report["top"][0] > samplers.NOISE_RATIO_LIMIT)


def collection_report(model, collector):
    """When sample collection started and why, and the step size the run used.

    Args:
        model: the trained model.
        collector: its :class:`keras_bnn.callbacks.CollectSamples`, or None
            (the SGD baseline).

    Returns:
        dict: ``step_size`` (the frozen h of an auto step, else the
        schedule's h0; None for the baseline), ``warmup_steps`` (0 for an
        explicit step), ``steps`` (the steps taken, which tell whether the
        warm-up finished and so whether h was chosen), ``start_epoch`` (the
        first epoch whose end could take a sample; None if the chain never
        reached equilibrium),
        ``reason`` (the equilibrium test's verdict, or "fixed burn-in",
        with the number of samples taken during the warm-up if any),
        ``variable_temperatures`` (each variable's configurational
        temperature over the last epoch: dicts ``name, d, t_conf``; see
        :attr:`keras_bnn.callbacks.CollectSamples.variable_temperatures`),
        ``remeasurement`` (the step factors' second noise measurement at the
        first equilibrium: ``epoch``, the averaged ``ratios`` and the
        ``lowered`` factors ``[old, new]``; None when there was none, see
        :attr:`keras_bnn.callbacks.CollectSamples.remeasurement`),
        ``noise_lowerings`` (the factors lowered at equilibrium for a
        variable's noise above the limit, oldest first:
        :attr:`keras_bnn.callbacks.CollectSamples.noise_lowerings`),
        ``drift`` (the drift test of the collected epochs,
        :meth:`keras_bnn.collection_drift.DriftVerdict.as_dict`; None without
        one: the baseline, a fixed burn-in, no collection).
    """
    sampler = model.optimizer
    if collector is None or not isinstance(sampler, samplers.Sampler):
        return {"step_size": None, "warmup_steps": 0, "steps": None, "start_epoch": None,
                "reason": "no collection: the SGD/MAP baseline stores its last point",
                "variable_temperatures": [], "remeasurement": None, "noise_lowerings": [],
                "drift": None}
    if collector.auto:
        reason = collector.reason
    else:
        reason = f"fixed burn-in of {counted(collector.start_epoch, 'epoch')}"
        if collector.warmup_samples:
            reason += (f"; {counted(collector.warmup_samples, 'sample')} taken during the warm-up "
                       f"(steps up to {callbacks_lib.warmup_steps(sampler)})")
    return {"step_size": float(sampler.step_size_value),
            "warmup_steps": int(callbacks_lib.warmup_steps(sampler)),
            "steps": callbacks_lib.current_step(sampler),
            "start_epoch": collector.started_epoch, "reason": reason,
            "variable_temperatures": [{"name": name, "d": d, "t_conf": t}
                                      for name, t, d in collector.variable_temperatures],
            "remeasurement": collector.remeasurement,
            "noise_lowerings": collector.noise_lowerings,
            "drift": collector.drift and collector.drift.as_dict()}


class DataEpoch(keras.callbacks.Callback):
    """Sets a shuffled pipeline's epoch (:func:`keras_bnn.datasets.pipeline.data_epoch`)
    at every epoch's start, so that epoch e of a resumed run sees epoch e's order
    (an endless stream reads it once, when ``fit`` makes its iterator in the
    first epoch).

    Args:
        variable: the pipeline's epoch variable.
    """

    def __init__(self, variable):
        super().__init__()
        self.variable = variable

    def on_epoch_begin(self, epoch, logs=None):
        self.variable.assign(epoch)


def kinetic_temperature_rows(model, config):
    """Per-variable kinetic temperatures at the end of training, with χ² bands.

    Returns:
        List of dicts (``name, d, t_kin, lo, hi, inside_band``); empty for
        samplers without momentum and for relativistic momentum, where
        ``p·∇K(p)`` is not χ²-distributed.
    """
    sampler = model.optimizer
    if (not isinstance(sampler, samplers.Sampler) or not sampler.has_momentum
            or getattr(sampler, "speed_limit", None)):
        return []
    per_variable = [(name, float(t), d) for name, t, d in sampler.kinetic_temperatures()]
    return [row._asdict() for row in kinetic_temperature_report(
        per_variable, config.temperature)]


def gradient_noise_rows(model):
    """Per-variable gradient-noise ratios at the end of training.

    See :meth:`keras_bnn.samplers.Sampler.gradient_noise_ratios`.

    Returns:
        List of dicts (``name, d, ratio, above_limit, step_factor,
        coefficient``), ``above_limit`` when the ratio exceeds
        :data:`keras_bnn.samplers.NOISE_RATIO_LIMIT`, ``step_factor`` the
        variable's share ``s_v`` of the base step
        (:meth:`keras_bnn.samplers.Sampler.step_size_factors`),
        ``coefficient`` the ``c_v`` of ``r_v = c_v·mean(V̂_v)`` as the
        sampler applied it at its last step
        (:func:`keras_bnn.directional_noise.ratio_coefficients`; None for a
        per-parameter preconditioner); empty for the SGD baseline and for
        HMC (full batch: no gradient noise).
    """
    sampler = model.optimizer
    if "gradient_noise_ratio" not in model.transition_kernel.metric_names:
        return []
    factors = sampler.step_size_factors()
    rows = sampler.gradient_noise_ratios()
    coefficients = (directional_noise.ratio_coefficients(sampler)
                    if directional_noise.measurable(sampler) else [None] * len(rows))
    return [
        dict(name=name, d=d, ratio=float(r), above_limit=float(r) > samplers.NOISE_RATIO_LIMIT,
             step_factor=factors[name], coefficient=coefficient)
        for (name, r, d), coefficient in zip(rows, coefficients)
    ]
