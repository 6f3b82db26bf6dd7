"""Runs behind the command line: train, evaluate, export, temperature sweeps.

A run directory holds ``config.json`` (the resolved :class:`RunConfig`),
``samples/`` (a :class:`keras_bnn.SampleStore`; for the SGD baseline its one
"sample" is the final point estimate), and after evaluation ``metrics.json``,
``reliability.png`` and ``metric_vs_samples.png``. A multi-chain run
(:func:`run_chains`) holds ``config.json`` and one such run directory per
chain, ``chain-0 … chain-{K-1}``; its evaluation (in the top directory)
pools the chains and adds R-hat/ESS across them.
"""

import csv
import dataclasses
import fractions
import inspect
import io
import json
import math
import os
import shutil
import subprocess
import sys

import keras
import numpy as np

from keras_bnn import callbacks as callbacks_lib
from keras_bnn import chains as chains_lib
from keras_bnn import data as data_lib
from keras_bnn import diagnostics
from keras_bnn import export as export_lib
from keras_bnn import likelihoods as likelihoods_lib
from keras_bnn import metrics as metrics_lib
from keras_bnn import models as models_lib
from keras_bnn import plots
from keras_bnn import priors as priors_lib
from keras_bnn import samplers
from keras_bnn.durable import atomic_write
from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.store import SampleStore
from keras_bnn.validation import (argument_error, check_choice, check_int, check_positive,
                                  check_seed)

#: ``RunConfig.dataset`` of a run on in-memory arrays (see :func:`sweep`).
ARRAYS = "arrays"
#: What :func:`sweep` can vary.
SWEEP_PARAMS = ("temperature", "prior_scale")
#: ``RunConfig.sampler`` of the SGD/MAP baseline: a keras optimizer
#: (``SGD(momentum=0.9)``), not a sampler.
BASELINE = "sgd"
#: The names of :mod:`keras_bnn.samplers`' registry, and :data:`BASELINE`.
SAMPLERS = (*samplers.BY_NAME, BASELINE)
MODELS = ("mlp", "resnet_pp", "resnet20_frn", "cnn_lstm")
#: Degrees of freedom of the "student_t" kernel prior (heavy tails; Fortuin
#: et al. 2022 found such priors fit fully connected networks better).
STUDENT_T_DF = 3.0
#: Kernel priors of :attr:`RunConfig.prior`, as functions of ``prior_scale``.
KERNEL_PRIORS = {
    "he_normal": priors_lib.HeNormal,
    "glorot_normal": priors_lib.GlorotNormal,
    "student_t": lambda scale: priors_lib.StudentT(df=STUDENT_T_DF, scale=scale),
}
#: The likelihood each bundled dataset's task implies (others: categorical).
TASK_LIKELIHOOD = {"classification": "categorical", "binary": "bernoulli",
                   "regression": "gaussian"}
#: Defaults of the :class:`RunConfig` fields that are left at None.
DEFAULTS = {"epochs": 30, "prior": "he_normal", "prior_scale": 1.0,
            "burn_in_fraction": fractions.Fraction(1, 3)}
#: Per-dataset defaults measured on that dataset (README, "Choosing the
#: prior"); they replace :data:`DEFAULTS` for fields left at None
#: (``burn_in_fraction``: the share of ``epochs`` that ``burn_in_epochs``
#: defaults to). digits: under HeNormal(1) both SGD/MAP and the ensemble are
#: underconfident (test ECE 0.20 / 0.16); wider HeNormal priors make MAP
#: calibrated and sharp before the ensemble, while a heavy-tailed
#: Student-t(3, 0.4) prior lets the ensemble win in NLL. Its chain is still
#: settling after 50 epochs (the prior term rises): on a validation split,
#: discarding the first 100 of 150 epochs gave the best ensemble NLL
#: (T = 0.5, 0.7, 1, a 300-epoch chain and scale 0.3 were no better).
DATASET_DEFAULTS = {"digits": {"prior": "student_t", "prior_scale": 0.4, "epochs": 150,
                               "burn_in_fraction": fractions.Fraction(2, 3)}}
#: Default step sizes h0 per sampler (SDE time units; "sgd" is a learning rate).
DEFAULT_STEP_SIZE = {"atmc": 5e-3, "sghmc": 5e-3, "sgnht": 5e-3, "sgld": 1e-5, "hmc": 1e-3,
                     "sgd": 0.05}


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; the CLI builds it from a JSON file and flags.

    Attributes:
        dataset: one of ``keras_bnn.data.DATASETS`` (or :data:`ARRAYS` for
            a run on in-memory arrays, whose data is passed to :func:`train`
            and :func:`evaluate`).
        data_dir: tensorflow-datasets data directory (real datasets).
        model: one of :data:`MODELS`.
        model_args: extra keyword arguments of the model builder.
        sampler: one of :data:`SAMPLERS` (``"sgd"``: the SGD/MAP baseline;
            ``"hmc"`` is exact only with ``batch_size`` ≥ the training set).
        sampler_args: extra keyword arguments of the sampler (e.g.
            ``{"num_leapfrog_steps": 20}`` for HMC).
        step_size: h0 (default per sampler, :data:`DEFAULT_STEP_SIZE`).
        temperature: posterior temperature T > 0.
        epochs: training epochs (None: :data:`DATASET_DEFAULTS` of the
            dataset, else :data:`DEFAULTS`; likewise ``prior`` and
            ``prior_scale``, whose dataset default applies to the dataset's
            default prior only).
        batch_size: minibatch size.
        cycle_epochs: cyclical step-size cycle length, or None (constant).
        burn_in_epochs: epochs before the first cycle and before collecting
            (None: a third of ``epochs``, two thirds for digits; see
            :data:`DATASET_DEFAULTS`).
        collect_every: collect every k epochs (None: at cycle ends, or every
            epoch with a constant step size).
        num_train, num_test: sizes of the synthetic task.
        likelihood: ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``;
            None takes the dataset's (:data:`TASK_LIKELIHOOD`; categorical
            for the synthetic and tfds datasets).
        prior: kernel prior of the model's layers, one of
            :data:`KERNEL_PRIORS` (None: the dataset's default, else
            he_normal, the builders' own default).
        prior_scale: s > 0 of that prior (σ = s·sqrt(2/fan_in) for
            he_normal, s·sqrt(2/(fan_in+fan_out)) for glorot_normal; the
            scale of every weight's Student-t(df=:data:`STUDENT_T_DF`) for
            student_t).
        seed: seeds the data (synthetic task, order), and for chain 0 the
            initialisation and the sampler noise.
        chain: index of this chain in a multi-chain run: chain k > 0 seeds
            its initialisation and noise with :func:`chain_seed`, on the same
            data.
        output_dir: the run directory.
    """

    dataset: str = "synthetic"
    data_dir: str = None
    model: str = "mlp"
    model_args: dict = dataclasses.field(default_factory=dict)
    sampler: str = "atmc"
    sampler_args: dict = dataclasses.field(default_factory=dict)
    step_size: float = None
    temperature: float = 1.0
    epochs: int = None
    batch_size: int = 100
    cycle_epochs: int = None
    burn_in_epochs: int = None
    collect_every: int = None
    num_train: int = 2000
    num_test: int = 2000
    likelihood: str = None
    prior: str = None
    prior_scale: float = None
    seed: int = 0
    chain: int = 0
    output_dir: str = "runs/default"

    def validate(self):
        """Fills the fields left at None with the defaults, checks every field.

        Returns:
            ``self``.

        Raises:
            ValueError: naming the field and the allowed values.
        """
        defaults = dict(DEFAULTS, **DATASET_DEFAULTS.get(self.dataset, {}))
        if self.prior is not None and self.prior != defaults["prior"]:
            defaults["prior_scale"] = DEFAULTS["prior_scale"]  # the dataset's is for its prior
        burn_in_fraction = defaults.pop("burn_in_fraction")
        for name, value in defaults.items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.burn_in_epochs is None and isinstance(self.epochs, int):
            self.burn_in_epochs = int(self.epochs * burn_in_fraction)
        check_choice(self.dataset, "dataset", (*data_lib.DATASETS, ARRAYS))
        check_choice(self.model, "model", MODELS)
        check_choice(self.sampler, "sampler", SAMPLERS)
        check_choice(self.prior, "prior", tuple(KERNEL_PRIORS))
        if self.likelihood is not None:
            check_choice(self.likelihood, "likelihood", likelihoods_lib.LIKELIHOODS)
        for name in ("epochs", "batch_size", "num_train", "num_test"):
            check_int(getattr(self, name), name, 1)
        check_int(self.burn_in_epochs, "burn_in_epochs", 0)
        check_int(self.chain, "chain", 0)
        check_seed(self.seed, owner="RunConfig")
        for name in ("cycle_epochs", "collect_every"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, 1, owner="RunConfig")
        for name in ("temperature", "step_size", "prior_scale"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name, "RunConfig")
        for name in ("dataset", "model", "sampler", "output_dir", "data_dir"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value) and not (name == "data_dir" and value is None):
                raise argument_error(name, "be a non-empty string", value, "RunConfig")
        if self.sampler == BASELINE and self.temperature != 1.0:
            raise ValueError("`temperature` applies to samplers, not to sampler='sgd'.")
        if self.burn_in_epochs >= self.epochs and self.sampler != BASELINE:
            raise ValueError(
                f"`burn_in_epochs` ({self.burn_in_epochs}) must be smaller than "
                f"`epochs` ({self.epochs}), or no sample is collected."
            )
        for name in ("model_args", "sampler_args"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"`{name}` must be a JSON object; got {getattr(self, name)!r}.")
        sampled_epochs = self.epochs - self.burn_in_epochs
        for name in ("collect_every", "cycle_epochs"):
            value = getattr(self, name)
            if self.sampler != BASELINE and value is not None and value > sampled_epochs:
                raise ValueError(
                    f"`{name}` ({value}) must be at most `epochs` - `burn_in_epochs` "
                    f"({sampled_epochs}), or no sample is collected."
                )
        return self

    @classmethod
    def from_dict(cls, values):
        """Builds a config from a dict, rejecting unknown keys.

        Raises:
            ValueError: for an unknown key (named, with the allowed ones).
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown config keys {unknown}; allowed: {sorted(known)}.")
        return cls(**values).validate()

    @classmethod
    def from_json(cls, path, overrides=None, argument="config file"):
        """Builds a config from a JSON file of fields, ``overrides`` applied on top.

        Args:
            path: a JSON file holding one object of :class:`RunConfig` fields.
            overrides: dict of fields replacing the file's (e.g. command-line
                flags).
            argument: how errors name the file (e.g. ``"--config"``).

        Returns:
            The validated :class:`RunConfig`.

        Raises:
            ValueError: if the file is not JSON, not an object, or the
                config is invalid (:meth:`validate`).
            OSError: if the file cannot be read.
        """
        with open(path, "rb") as handle:
            try:
                values = json.loads(handle.read())
            except (ValueError, RecursionError) as error:
                raise ValueError(f"{argument} {os.fspath(path)!r} is not valid JSON "
                                 f"({type(error).__name__}: {error})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{argument} {os.fspath(path)!r} must hold a JSON object of "
                             f"RunConfig fields; it holds a {type(values).__name__}")
        return cls.from_dict(dict(values, **(overrides or {})))


def _write_json(value, path):
    atomic_write(path, lambda handle: handle.write(json.dumps(value, indent=2).encode()))


def load_data(config):
    """Loads the run's dataset.

    Returns:
        ``(train_ds, test_ds, info)`` from :func:`keras_bnn.data.load`.

    Raises:
        ValueError: for a run on in-memory arrays (its data is not on disk).
    """
    if config.dataset == ARRAYS:
        raise ValueError("this run was trained on in-memory arrays: pass the same "
                         "`data=` to keras_bnn.experiment.evaluate.")
    kwargs = {"seed": config.seed}
    if config.dataset == "synthetic":
        kwargs.update(num_train=config.num_train, num_test=config.num_test)
    elif config.dataset not in data_lib.BUNDLED:
        kwargs["data_dir"] = config.data_dir
    return data_lib.load(config.dataset, batch_size=config.batch_size, **kwargs)


def likelihood_of(config, info):
    """The run's likelihood: ``config.likelihood``, else the dataset's task's."""
    return config.likelihood or TASK_LIKELIHOOD[info.get("task", "classification")]


def build_model(config, info):
    """Builds the run's model for the dataset described by ``info``.

    The head has :func:`keras_bnn.likelihoods.output_units` outputs; the
    kernels get ``config.prior`` with scale ``config.prior_scale`` unless
    ``config.model_args`` names a ``kernel_prior`` (resnet_pp, whose
    weight-normalised layers have their own priors, takes neither).
    """
    builder = getattr(models_lib, config.model)
    parameters = inspect.signature(builder).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        fixed = {"input_shape", "num_classes", "vocab_size"}
        allowed = sorted(set(parameters) - fixed)
        unknown = sorted(set(config.model_args) - set(allowed))
        if unknown:
            raise ValueError(f"unknown `model_args` {unknown} for model {config.model!r}; "
                             f"allowed: {allowed}.")
    units = likelihoods_lib.output_units(likelihood_of(config, info), info["num_classes"])
    args = dict(config.model_args)
    if config.model != "resnet_pp":
        args.setdefault("kernel_prior", KERNEL_PRIORS[config.prior](config.prior_scale))
    if config.model == "cnn_lstm":
        return builder(vocab_size=info["vocab_size"], num_classes=units, **args)
    return builder(info["input_shape"], units, **args)


def chain_seed(config):
    """Seed of a chain's initialisation and sampler noise.

    ``config.seed`` for chain 0 (so a single-chain run is unchanged), else a
    seed drawn from ``numpy.random.SeedSequence([seed, chain])``: distinct
    per chain and reproducible.

    Args:
        config: a :class:`RunConfig`.

    Returns:
        int in [0, 2**31).
    """
    if config.chain == 0:
        return config.seed
    return int(np.random.SeedSequence([config.seed, config.chain]).generate_state(1)[0] >> 1)


def _compile(model, config, info):
    step_size = config.step_size or DEFAULT_STEP_SIZE[config.sampler]
    likelihood = likelihood_of(config, info)
    loss = likelihoods_lib.loss_for(likelihood)
    metrics = {"categorical": ["accuracy"], "bernoulli": [
        keras.metrics.BinaryAccuracy(threshold=0.0)], "gaussian": []}[likelihood]
    if config.sampler == BASELINE:
        model.compile(optimizer=keras.optimizers.SGD(step_size, momentum=0.9),
                      train_size=info["num_train"], loss=loss, metrics=metrics)
    else:
        model.compile(
            sampler=samplers.get(config.sampler, step_size=step_size, seed=chain_seed(config),
                                 **config.sampler_args),
            temperature=config.temperature, train_size=info["num_train"], loss=loss,
            metrics=metrics,
        )


def resume_config(output_dir, flags):
    """The config of the run in ``output_dir``, for ``train(..., resume=True)``.

    Args:
        output_dir: the run directory (``--output-dir``).
        flags: RunConfig fields given on the command line besides
            ``output_dir``; each must equal the stored value (a resumed run
            continues the same chain).

    Returns:
        The stored :class:`RunConfig`.

    Raises:
        ValueError: without ``output_dir``, with ``--config``, or for a flag
            that differs from the stored config.
        FileNotFoundError: if ``output_dir`` holds no run.
    """
    if not output_dir:
        raise ValueError("--resume needs --output-dir (the run directory to continue).")
    if "config" in flags:
        raise ValueError("--resume reads the run's own config.json; do not pass --config.")
    config = read_config(output_dir, "--resume: `output_dir`", output_dir=output_dir)
    for name, value in flags.items():
        if name != "output_dir" and getattr(config, name) != value:
            raise ValueError(f"--resume continues the stored run: `{name}` is "
                             f"{getattr(config, name)!r} there, {value!r} given.")
    return config


@dataclasses.dataclass(frozen=True)
class TrainResult:
    """What :func:`train` returns (and writes into the run directory).

    Unpacks as ``store, history = train(...)``.

    Attributes:
        store: the run's :class:`keras_bnn.SampleStore`.
        history: the ``keras.callbacks.History`` of ``fit``.
        kinetic_temperatures: :func:`kinetic_temperature_rows` (also in
            ``kinetic_temperatures.json``).
        gradient_noise: :func:`gradient_noise_rows` (also in
            ``gradient_noise.json``).
    """

    store: SampleStore
    history: keras.callbacks.History
    kinetic_temperatures: list
    gradient_noise: list

    def __iter__(self):
        return iter((self.store, self.history))


def train(config, verbose=1, resume=False, data=None):
    """Trains a model by sampling (or SGD) and stores the samples.

    The run is backed up at every epoch end (``keras.callbacks.BackupAndRestore``
    in ``output_dir/backup``, removed when the run completes), so a killed
    run continues with ``resume=True``: from the last finished epoch, with
    the same chain state and step counter, and no sample duplicated or
    dropped (:class:`keras_bnn.callbacks.CollectSamples`).

    Args:
        config: a validated :class:`RunConfig`.
        verbose: Keras progress-bar verbosity.
        resume: continue the run in ``config.output_dir``.
        data: ``(train_ds, test_ds, info)`` to use instead of loading
            ``config.dataset`` (e.g. from :func:`arrays_data`).

    Returns:
        A :class:`TrainResult` (``store, history = train(...)`` unpacks it).

    Raises:
        FileExistsError: if ``output_dir`` already holds a run and
            ``resume`` is False.
        ValueError: if ``resume`` is True and the run is complete.
    """
    config.validate()
    store = SampleStore(os.path.join(config.output_dir, "samples"))
    backup = os.path.join(config.output_dir, "backup")
    finished = os.path.join(config.output_dir, "kinetic_temperatures.json")
    if resume and os.path.exists(finished):
        raise ValueError(f"--resume: the run in {config.output_dir!r} is complete "
                         f"({len(store)} samples); nothing to resume.")
    if not resume and (len(store) or os.path.exists(backup)):
        raise FileExistsError(
            f"`output_dir` {config.output_dir!r} already holds a run ({len(store)} samples); "
            "choose a new directory, or continue a killed run with --resume."
        )
    # Seed first: the shuffle op combines its own seed with the global one, so
    # the data order must not depend on what ran before in the process.
    keras.utils.set_random_seed(chain_seed(config))
    train_ds, _, info = data or load_data(config)
    model = build_model(config, info)
    _compile(model, config, info)
    callbacks = [keras.callbacks.BackupAndRestore(
        backup, delete_checkpoint=False, double_checkpoint=True)]
    if config.sampler != BASELINE:
        if config.cycle_epochs:
            callbacks.append(callbacks_lib.CyclicalSchedule(config.cycle_epochs,
                                                            config.burn_in_epochs))
        callbacks.append(callbacks_lib.CollectSamples(store, start_epoch=config.burn_in_epochs,
                                                      every=config.collect_every,
                                                      chain=config.chain))
    if not resume:
        _write_json(dataclasses.asdict(config), os.path.join(config.output_dir, "config.json"))
    history = model.fit(train_ds, epochs=config.epochs, verbose=verbose, callbacks=callbacks,
                        shuffle=False)  # the tf.data pipeline shuffles
    step = int(model.optimizer.iterations)
    if config.sampler == BASELINE and store.find(config.chain, step) is None:
        store.append(model, chain=config.chain, epoch=config.epochs - 1, step=step)
    result = TrainResult(store, history, kinetic_temperature_rows(model, config),
                         gradient_noise_rows(model))
    _write_json(result.gradient_noise, os.path.join(config.output_dir, "gradient_noise.json"))
    _write_json(history.history, os.path.join(config.output_dir, "history.json"))
    _write_json(result.kinetic_temperatures, finished)
    shutil.rmtree(backup, ignore_errors=True)
    return result


def run_chains(config, chains, verbose=1, processes=1):
    """Trains ``chains`` independent chains of one configuration.

    Chain k is :func:`train` with ``chain=k`` (its own initialisation and
    sampler noise, :func:`chain_seed`; the same data) in
    ``<output_dir>/chain-k``; ``<output_dir>/config.json`` holds the shared
    configuration. ``keras-bnn evaluate --run-dir <output_dir>`` then pools
    the chains and reports R-hat/ESS across them. With ``processes > 1`` the
    chains run as that many concurrent ``keras-bnn train`` processes (each
    with its own TensorFlow runtime; worth it when the cores outnumber what
    one chain uses), else one after another in this process.

    Args:
        config: a :class:`RunConfig` (``output_dir`` is the run directory).
        chains: K ≥ 1.
        verbose: Keras progress-bar verbosity of each chain (in-process).
        processes: concurrent chain processes, ≥ 1.

    Returns:
        List of ``(store, logs)``, one per chain: its
        :class:`keras_bnn.SampleStore` and its ``History.history`` dict (also
        in ``chain-k/history.json``).

    Raises:
        ValueError: for ``chains`` or ``processes`` < 1 or an invalid config.
        FileExistsError: if a chain directory already holds samples.
        ChildProcessError: if a chain process fails (with the end of its
            stderr).
    """
    chains = check_int(chains, "chains", 1)
    processes = check_int(processes, "processes", 1)
    config = dataclasses.replace(config.validate(), chain=0)
    os.makedirs(config.output_dir, exist_ok=True)
    _write_json(dataclasses.asdict(config), os.path.join(config.output_dir, "config.json"))
    runs = [dataclasses.replace(config, chain=k, output_dir=os.path.join(
        config.output_dir, chains_lib.CHAIN_DIR.format(k))) for k in range(chains)]
    if processes == 1:
        return [(result.store, result.history.history) for result in
                (train(run, verbose=verbose) for run in runs)]
    for start in range(0, chains, processes):
        _train_in_processes(runs[start:start + processes])
    results = []
    for run in runs:
        with open(os.path.join(run.output_dir, "history.json")) as handle:
            results.append((SampleStore(os.path.join(run.output_dir, "samples")),
                            json.load(handle)))
    return results


def _train_in_processes(runs):
    """Runs ``keras-bnn train`` for each config concurrently; raises on a failure."""
    launched = []
    for run in runs:
        os.makedirs(run.output_dir, exist_ok=True)
        path = os.path.join(run.output_dir, "config.json")  # train() writes the same
        _write_json(dataclasses.asdict(run), path)
        launched.append((run, subprocess.Popen(
            [sys.executable, "-m", "keras_bnn.cli", "train", "--config", path, "--verbose", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    errors = [(run, process.communicate()[1], process.returncode) for run, process in launched]
    failures = [(run, err) for run, err, code in errors if code]
    if failures:
        run, err = failures[0]
        raise ChildProcessError(
            f"{len(failures)} chain process(es) failed; chain {run.chain} "
            f"({run.output_dir}) said: {err.strip()[-2000:]}")


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
    return [row._asdict() for row in diagnostics.kinetic_temperature_report(
        per_variable, config.temperature)]


def gradient_noise_rows(model):
    """Per-variable gradient-noise ratios at the end of training.

    See :meth:`keras_bnn.samplers.Sampler.gradient_noise_ratios`.

    Returns:
        List of dicts (``name, d, ratio, above_limit``), ``above_limit`` when
        the ratio exceeds :data:`keras_bnn.samplers.NOISE_RATIO_LIMIT`; empty
        for the SGD baseline and for HMC (full batch: no gradient noise).
    """
    sampler = model.optimizer
    if not isinstance(sampler, samplers.Sampler) or sampler.exact:
        return []
    return [
        dict(name=name, d=d, ratio=float(r), above_limit=float(r) > samplers.NOISE_RATIO_LIMIT)
        for name, r, d in sampler.gradient_noise_ratios()
    ]


def read_config(run_dir, argument="`run_dir`", **overrides):
    """The :class:`RunConfig` stored in ``run_dir/config.json``.

    Args:
        run_dir: a run directory (single- or multi-chain).
        argument: how the error names ``run_dir``.
        **overrides: fields replaced before validation (e.g. ``output_dir``
            of a moved run).

    Returns:
        The validated :class:`RunConfig`.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no ``config.json``.
        ValueError: for an invalid stored config.
    """
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{argument} {run_dir!r} holds no run (no config.json).")
    return RunConfig.from_json(path, overrides, argument="the run's config")


def load_run(run_dir):
    """Reads a run directory.

    Returns:
        ``(config, store)``.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no run.
    """
    config = read_config(run_dir)
    store = SampleStore(os.path.join(run_dir, "samples"))
    if not len(store):
        raise FileNotFoundError(f"`run_dir` {run_dir!r} holds no samples yet.")
    return config, store


def load_chains(run_dir):
    """Reads a single- or multi-chain run directory.

    Returns:
        ``(config, stores)``: the (shared) configuration and one
        :class:`keras_bnn.SampleStore` per chain.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no run.
        ValueError: if a chain holds no samples, or the chains are of
            different architectures.
    """
    if not chains_lib.chain_dirs(run_dir):
        config, store = load_run(run_dir)
        return config, [store]
    return read_config(run_dir), chains_lib.stores_of(run_dir)


def _gaussian_curve(members, targets):
    """Regression metrics of the first s members' moment-matched mixture, s = 1..S.

    ``members`` is [S, N, 2D] raw ``[μ, log σ²]``; the mixture of s members
    has mean (1/s) Σ μ_r and variance (1/s) Σ (σ²_r + μ_r²) − mean².
    """
    units = members.shape[-1] // 2
    means, variances = members[..., :units], np.exp(members[..., units:])
    count = np.arange(1, len(members) + 1)[:, None, None]
    mean = np.cumsum(means, axis=0) / count
    variance = np.cumsum(variances + means**2, axis=0) / count - mean**2
    rows = [metrics_lib.evaluate_gaussian(m, v, targets) for m, v in zip(mean, variance)]
    curve = {"num_samples": count.ravel().tolist()}
    curve.update({name: [row[name] for row in rows] for name in rows[0]})
    single = metrics_lib.evaluate_gaussian(means[-1], variances[-1], targets)
    return single, rows[-1], curve


def evaluate(run_dir, num_bins=15, baseline=None, data=None):
    """Evaluates a run: last sample, and the posterior-predictive ensemble.

    The ensemble is :meth:`PosteriorEnsemble.from_store` (its likelihood read
    from the store). Classification and binary runs are scored with
    :func:`keras_bnn.metrics.evaluate_members` (accuracy, NLL, ECE, Brier);
    regression runs with :func:`keras_bnn.metrics.evaluate_gaussian` (NLL,
    RMSE, coverage of the central 50/90/95 % intervals) on the moment-matched
    mixture. Writes ``metrics.json``, ``reliability.png`` (classification)
    and ``metric_vs_samples.png`` into ``run_dir``.

    Args:
        run_dir: a directory written by :func:`train` or :func:`run_chains`
            (the chains are pooled).
        num_bins: ECE / reliability bins.
        baseline: optional metrics dict of a reference model (e.g. the SGD/MAP
            run's ``single_sample``), drawn as a horizontal line in the
            metric-vs-samples plot.
        data: ``(train_ds, test_ds, info)`` to evaluate on instead of the
            test split of ``config.dataset`` (needed for runs on arrays).

    Returns:
        dict with ``likelihood``, ``single_sample`` (the last sample of the
        last chain) and ``ensemble`` (all chains pooled) metrics,
        ``num_chains``, ``num_samples`` (over all chains), the
        ``metric_vs_num_samples`` curve, ``rhat`` (see :func:`chain_rhat`:
        rank-normalised R-hat and ESS in function and weight space; one
        chain is compared by its halves) and the plot paths.
    """
    config, stores = load_chains(run_dir)
    _, test_ds, _ = data or load_data(config)
    labels = data_lib.dataset_labels(test_ds)
    # The store is read once, by from_store: the members' predictions and
    # the weight-space diagnostics both come from the ensemble.
    ensemble = PosteriorEnsemble.from_store(stores)
    members = ensemble.predict_members(test_ds)  # chain by chain
    num_samples = len(members)
    chain_ends = np.cumsum([len(s) for s in stores])[:-1]
    weights = np.concatenate(
        [np.reshape(w, (num_samples, -1)) for w in ensemble.member_weights()], axis=1)
    result = {"sampler": config.sampler, "temperature": config.temperature,
              "likelihood": ensemble.likelihood, "num_chains": len(stores),
              "num_samples": num_samples}
    if ensemble.likelihood == "gaussian":
        single, scores, curve = _gaussian_curve(members, labels)
        curve_metrics = (("rmse", "RMSE"), ("nll", "NLL (nats)"))
        result["reliability_plot"] = None
    else:
        scored = metrics_lib.evaluate_members(members, labels, num_bins=num_bins)
        single, scores, curve = scored["members"][-1], scored["ensemble"], scored[
            "metric_vs_num_samples"]
        curve_metrics = (("accuracy", "accuracy"), ("nll", "NLL (nats)"))
        result["reliability_plot"] = plots.reliability_diagram(
            members.mean(axis=0), labels, os.path.join(run_dir, "reliability.png"),
            num_bins=num_bins, title=f"{config.sampler} ensemble ({num_samples} samples)")
    result.update({
        "single_sample": single,
        "ensemble": scores,
        "metric_vs_num_samples": curve,
        "rhat": chain_rhat(np.split(members, chain_ends), np.split(weights, chain_ends)),
        "samples_plot": plots.metric_vs_samples_plot(
            curve, os.path.join(run_dir, "metric_vs_samples.png"), metrics=curve_metrics,
            baseline=baseline, baseline_label="SGD (MAP)"),
    })
    _write_json(result, os.path.join(run_dir, "metrics.json"))
    return result


def chain_rhat(chain_probs, chain_weights):
    """R-hat and ESS across chains in function and weight space.

    :func:`keras_bnn.diagnostics.convergence_summary` of the members'
    predictions on the test inputs (``"function"``: class probabilities
    p(k|x_n), or the raw ``[μ, log σ²]`` of a Gaussian head)
    and of every weight (``"weight"``), over the last S draws of each chain
    (S the shortest chain). With one chain its halves are compared.

    Args:
        chain_probs: per chain, the ``[S_k, N, units]`` predictions of its samples.
        chain_weights: per chain, the ``[S_k, D]`` flattened weights of its
            samples (all weights, in ``model.weights`` order).

    Returns:
        ``{"function": {...}, "weight": {...}}`` (keys ``median``, ``max``,
        ``frac_below_1.01``, ``frac_below_1.1``, ESS, counts), or None when
        the chains have fewer than 4 common draws.
    """
    draws = min(len(p) for p in chain_probs)
    if draws < 4:
        return None

    def last_draws(per_chain):
        return np.stack([c[len(c) - draws:] for c in per_chain]).astype(np.float64)

    return {"function": diagnostics.convergence_summary(last_draws(chain_probs), "probabilities"),
            "weight": diagnostics.convergence_summary(last_draws(chain_weights), "weights")}


def export(run_dir, model_dir, version=None):
    """Exports a run's posterior ensemble (all chains pooled) for TF Serving.

    Args:
        run_dir: a directory written by :func:`train` or :func:`run_chains`.
        model_dir: ``saved_models/<name>``; the version directory goes inside.
        version: integer version, or None for the next free one.

    Returns:
        The path of the written version directory.

    Raises:
        See :func:`keras_bnn.export.export_ensemble` and :func:`load_chains`.
    """
    _, stores = load_chains(run_dir)
    return export_lib.export_ensemble(PosteriorEnsemble.from_store(stores), model_dir,
                                      version=version)


def arrays_data(x, y, batch_size, seed=0, likelihood=None, x_test=None, y_test=None):
    """In-memory arrays as a run's ``(train_ds, test_ds, info)``.

    Args:
        x, y: training inputs [n, ...] and labels [n] (integer classes, 0/1
            for bernoulli, float targets for regression).
        batch_size: examples per batch.
        seed: seed of the per-epoch training shuffle.
        likelihood: one of :data:`keras_bnn.likelihoods.LIKELIHOODS`; None
            takes ``"gaussian"`` for non-integer ``y`` and ``"categorical"``
            otherwise.
        x_test, y_test: the evaluation set.

    Returns:
        ``(train_ds, test_ds, info)``; ``info`` has ``name`` (``"arrays"``),
        ``task``, ``num_train``, ``num_test``, ``num_classes`` and
        ``input_shape``.

    Raises:
        ValueError: for mismatched or empty arrays or an unknown likelihood.
    """
    y = np.asarray(y)
    if likelihood is None:
        integral = np.issubdtype(y.dtype, np.integer) or np.all(np.mod(y, 1) == 0)
        likelihood = "categorical" if integral else "gaussian"
    likelihood = check_choice(likelihood, "likelihood", likelihoods_lib.LIKELIHOODS)
    task = {value: key for key, value in TASK_LIKELIHOOD.items()}[likelihood]
    dtype = np.float32 if likelihood == "gaussian" else np.int64
    info = {"name": ARRAYS, "task": task, "num_train": len(y), "num_test": len(y_test),
            "input_shape": tuple(np.shape(x)[1:]),
            "num_classes": int(y.max()) + 1 if likelihood == "categorical" else None}
    return (data_lib.make_dataset(x, y.astype(dtype), batch_size, shuffle=True, seed=seed),
            data_lib.make_dataset(x_test, np.asarray(y_test).astype(dtype), batch_size),
            info)


def _sweep_arrays(config, x, y):
    """Training arrays of a sweep: ``(x, y)`` given, or the dataset's training split."""
    if x is not None:
        return np.asarray(x), np.asarray(y)
    if config.dataset in data_lib.BUNDLED:
        return data_lib.bundled_arrays(config.dataset)[0]
    if config.dataset == "synthetic":
        return data_lib.synthetic_teacher(config.num_train, 1, seed=config.seed)[0]
    raise ValueError(
        f"sweep with a validation split needs arrays: pass x and y, or a bundled or "
        f"synthetic dataset (got dataset {config.dataset!r}); for a tensorflow-datasets "
        "dataset pass validation_split=None to evaluate on its test split.")


def sweep(param, values, x=None, y=None, dataset=None, config=None, seeds=(0,),
          validation_split=0.2, verbose=0):
    """Trains and evaluates one run per (value, seed): the cold-posterior plot.

    Selecting a prior scale or temperature on the test set would report an
    optimistic test score, so by default each run trains on a fraction
    ``1 − validation_split`` of the training data and is evaluated on the
    rest (a fixed split: the last ``round(n·validation_split)`` examples of
    a permutation drawn with seed 0). Writes ``<output_dir>/<param>=<value>/
    seed=<seed>/`` runs, ``sweep.csv`` (one row per run) and ``sweep.png``
    (ensemble and single-sample metrics against the value, mean ± standard
    deviation over the seeds).

    Args:
        param: one of :data:`SWEEP_PARAMS`: ``"temperature"`` (T) or
            ``"prior_scale"`` (s of the kernel prior, ``config.prior``).
        values: positive values of ``param``.
        x, y: training arrays (then the run's dataset is ``"arrays"``); or
            None to use ``dataset``.
        dataset: a dataset name (default ``config.dataset``).
        config: base :class:`RunConfig` (``output_dir`` is the sweep's root).
        seeds: seeds of the runs at each value.
        validation_split: fraction in (0, 1) held out for evaluation; None
            trains on the whole training split and evaluates on the test split
            (tensorflow-datasets datasets need this).
        verbose: progress-bar verbosity of each training run.

    Returns:
        List of row dicts: ``param``'s value, ``seed``, then ``single_sample_*``
        and ``ensemble_*`` metrics (accuracy/NLL/ECE/Brier, or NLL/RMSE/
        coverage for regression).

    Raises:
        ValueError: for an unknown ``param``, empty or non-positive values,
            no seeds, both arrays and ``dataset``, or a validation split
            outside (0, 1).
    """
    param = check_choice(param, "param", SWEEP_PARAMS)
    values = [float(v) for v in values]
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError(f"`values` must be positive numbers; got {values!r}.")
    seeds = [int(seed) for seed in seeds]
    if not seeds:
        raise ValueError("`seeds` must hold at least one seed.")
    if (x is None) != (y is None) or (x is not None and dataset is not None):
        raise ValueError("pass either both `x` and `y`, or a `dataset` name, not both.")
    config = config or RunConfig()
    if dataset is not None:
        config = dataclasses.replace(config, dataset=dataset)
    if x is not None:
        config = dataclasses.replace(config, dataset=ARRAYS)
    config.validate()
    arrays = None
    if validation_split is not None:
        if not 0 < validation_split < 1:
            raise ValueError(f"`validation_split` must lie in (0, 1) or be None; "
                             f"got {validation_split!r}.")
        x_all, y_all = _sweep_arrays(config, x, y)
        order = np.random.default_rng(0).permutation(len(y_all))
        cut = len(order) - int(round(len(order) * validation_split))
        arrays = (x_all[order[:cut]], y_all[order[:cut]], x_all[order[cut:]],
                  y_all[order[cut:]])
    elif x is not None:
        raise ValueError("a sweep on arrays needs a `validation_split` in (0, 1).")
    rows = []
    for value in values:
        for seed in seeds:
            run = dataclasses.replace(
                config, seed=seed, **{param: value},
                output_dir=os.path.join(config.output_dir, f"{param}={value:g}",
                                        f"seed={seed}"))
            data = None
            if arrays is not None:
                likelihood = config.likelihood
                if likelihood is None and config.dataset != ARRAYS:
                    likelihood = likelihood_of(config, load_info(config))
                data = arrays_data(arrays[0], arrays[1], config.batch_size, seed,
                                   likelihood, arrays[2], arrays[3])
            train(run, verbose=verbose, data=data)
            result = evaluate(run.output_dir, data=data)
            row = {param: value, "seed": seed}
            for part in ("single_sample", "ensemble"):
                row.update({f"{part}_{k}": v for k, v in result[part].items()})
            rows.append(row)
    curve = "rmse" if "ensemble_rmse" in rows[0] else "accuracy"
    plots.sweep_plot(rows, os.path.join(config.output_dir, "sweep.png"), param=param,
                     metrics=((curve, curve.upper() if curve == "rmse" else curve),
                              ("nll", "NLL (nats)")))
    _write_csv(rows, os.path.join(config.output_dir, "sweep.csv"))
    return rows


def load_info(config):
    """The ``info`` dict of the run's dataset (bundled and synthetic sets only)."""
    if config.dataset in data_lib.BUNDLED:
        return data_lib.bundled_arrays(config.dataset)[2]
    return {"task": "classification"}


def sweep_temperature(config, temperatures, verbose=0):
    """The temperature sweep on the test split: :func:`sweep` with
    ``param="temperature"``, ``seeds=(config.seed,)`` and
    ``validation_split=None``.

    Raises:
        ValueError: for an empty or non-positive temperature list.
    """
    return sweep("temperature", temperatures, config=config, seeds=(config.seed,),
                 validation_split=None, verbose=verbose)


def _write_csv(rows, path):
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, lambda handle: handle.write(text.getvalue().encode()))
