"""A run's configuration: :class:`RunConfig`, its defaults, and its seeds.

This module imports neither Keras nor TensorFlow, so that the ``keras-bnn``
command checks a configuration (and answers a bad one) before importing
them. The names a run accepts and the defaults are plain tables in
:mod:`keras_bnn.runs.tables`, re-exported here.
"""

import dataclasses
import json
import math
import os

import numpy as np

from keras_bnn.runs.rundir import RunDir, sweep_value
from keras_bnn.runs.tables import (ARRAYS, DATA_DIR_DATASETS, DATASETS, DEFAULT_MODEL_ARGS,
                                   DEFAULT_STEPS, DEFAULTS, FALLBACK_PRIOR, IMAGE_DATASETS,
                                   LIKELIHOODS, MAX_LENGTH, MIN_EPOCHS, MIN_SAMPLED_SHARE,
                                   MODEL_ARGS, MODEL_DATASETS, MODELS, PRIOR_CANDIDATES,
                                   PRIOR_VALIDATION_SPLIT, PRIORS, SAMPLER_ARGS, SAMPLERS,
                                   SAMPLES_PER_RUN, STUDENT_T_DF, SWEEP_PARAMS, TASK_LIKELIHOOD)
from keras_bnn.validation import (argument_error, check_choice, check_int, check_positive,
                                  check_seed, counted)

#: This module's names, and the tables it re-exports (their home until 2026-11-30).
__all__ = ["ARRAYS", "DATASETS", "DEFAULT_MODEL_ARGS", "DEFAULT_STEPS", "DEFAULTS",
           "FALLBACK_PRIOR", "IMAGE_DATASETS", "LIKELIHOODS", "MAX_LENGTH", "MIN_EPOCHS",
           "MIN_SAMPLED_SHARE", "MODEL_ARGS", "MODEL_DATASETS", "MODELS", "PRIOR_CANDIDATES",
           "PRIOR_VALIDATION_SPLIT", "PRIORS", "SAMPLER_ARGS", "SAMPLERS", "SAMPLES_PER_RUN",
           "STUDENT_T_DF", "SWEEP_PARAMS", "TASK_LIKELIHOOD", "COLLECTION_UNSET",
           "SYNTHETIC_SIZES", "CollectionRefused", "DataFieldRefused", "RunConfig", "chain_seed",
           "check_sweep", "default_collect_every", "default_epochs", "read_config",
           "resume_config"]


def default_epochs(steps_per_epoch):
    """``max(MIN_EPOCHS, ceil(DEFAULT_STEPS / steps_per_epoch))``.

    Args:
        steps_per_epoch: minibatches in one pass over the training set.

    Returns:
        int.
    """
    return max(MIN_EPOCHS, math.ceil(DEFAULT_STEPS / steps_per_epoch))


def default_collect_every(epochs):
    """``max(1, round(epochs / SAMPLES_PER_RUN))``: at most ~100 samples a run."""
    return max(1, round(epochs / SAMPLES_PER_RUN))


#: Runs whose optimizer has no step-size warm-up, and what sets their step:
#: ``step_size="auto"`` is refused for them (until 2026-11-30 the run failed
#: when its sampler was built, after the data was loaded).
AUTO_STEP_REFUSED = {"hmc": "HMC has no 'auto' warm-up: its num_adaptation_steps tune h",
                     "sgd": "the SGD/MAP baseline's learning rate; omit it for the default 0.05"}


#: The collection fields' values for a sampler that collects no sample (sgd).
COLLECTION_UNSET = {"burn_in_epochs": "auto", "collect_every": None}
#: The synthetic task's sizes where ``num_train``, ``num_test`` are None
#: (:meth:`RunConfig.synthetic_sizes`); every other dataset has its own split.
SYNTHETIC_SIZES = {"num_train": 2000, "num_test": 2000}


class CollectionRefused(ValueError):
    """A field that sets when samples are collected, set for a sampler that collects none.

    Args:
        field: the field (``burn_in_epochs`` or ``collect_every``), or how the
            command line names it (``--burn-in-epochs``, "`collect_every` in --config").
        sampler: the sampler's name (``"sgd"``).
        command_line: the message names ``--sampler`` and ``--chains`` as
            ``keras-bnn train`` does, not the Python API.

    Attributes:
        field, sampler: the arguments.
    """

    def __init__(self, field, sampler, command_line=False):
        self.field, self.sampler = field, sampler
        if command_line:
            named, ensemble = f"--sampler {sampler}", f"--sampler {sampler} --chains K"
        else:
            field = f"`{field}`"
            named = f"sampler {sampler!r}"
            ensemble = f"runs.run_chains(RunConfig(sampler={sampler!r}, ...), K)"
        super().__init__(f"{field} sets when a sampler collects samples; {named} collects "
                         f"none (it keeps each chain's final weights; a deep ensemble is "
                         f"{ensemble}): drop it")


class DataFieldRefused(ValueError):
    """A field that some datasets read, set for a dataset that would ignore it:
    ``num_train`` or ``num_test`` (the synthetic task's sizes) for another, or
    ``data_dir`` for one not in :data:`DATA_DIR_DATASETS`.

    Args:
        field: the RunConfig field.
        data: the dataset's name.
        flag: how the command line names the field (``--num-train``,
            "`num_train` in --config"); None: the Python API, which names it
            `field` and the dataset as ``dataset 'wine'``.
        data_named: how the command line names the data (``"the --x/--y
            arrays"``); None: as the dataset.

    Attributes:
        field, data: the arguments.
    """

    def __init__(self, field, data, flag=None, data_named=None):
        self.field, self.data = field, data
        named, data_named = flag or f"`{field}`", data_named or f"dataset {data!r}"
        if field == "data_dir":
            message = (f"is read by datasets {', '.join(DATA_DIR_DATASETS)}; {data_named} "
                       "reads no files from it, and would ignore it")
        else:
            message = ("sizes the synthetic task" + ("" if flag else " (dataset='synthetic')")
                       + f"; {data_named} has its own split")
        super().__init__(f"{named} {message}: drop it")


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; the CLI builds it from a JSON file and flags.

    Attributes:
        dataset: one of ``keras_bnn.data.DATASETS`` (or :data:`ARRAYS` for
            a run on in-memory arrays, whose data is passed to
            :func:`keras_bnn.runs.train` and :func:`keras_bnn.runs.evaluate`).
        data_dir: tensorflow-datasets data directory (real datasets), the
            Fashion-MNIST files' directory, or the directory of the "npy"
            dataset's four files (made absolute at validation, so that a
            command run from another directory reads the same files); left
            None for the datasets that read no files.
        model: one of :data:`MODELS`.
        model_args: extra keyword arguments of the model builder.
        sampler: a name of :data:`keras_bnn.samplers.REGISTRY` (``"sgd"``:
            the SGD/MAP baseline;
            ``"hmc"`` is exact only with ``batch_size`` ≥ the training set).
        sampler_args: extra keyword arguments of the sampler (e.g.
            ``{"num_leapfrog_steps": 20}`` for HMC).
        step_size: h0 > 0, or ``"auto"`` (default for the SG samplers: the
            warm-up chooses it, :mod:`keras_bnn.samplers.warmup`); None
            takes the registry entry's.
        temperature: posterior temperature T > 0.
        epochs: training epochs (None: :func:`default_epochs` of the
            training set, :data:`DEFAULT_STEPS` steps, and ``max_epochs``
            :data:`MAX_LENGTH` times that).
        max_epochs: with ``burn_in_epochs="auto"``, the most epochs the run
            may train: after ``epochs`` it goes on, epoch by epoch, until its
            chain has been sampled, from the epoch collection started at, for
            :data:`MIN_SAMPLED_SHARE` of ``epochs``. None: ``epochs`` (the
            run ends there), or :data:`MAX_LENGTH` times the default length
            when ``epochs`` is None (:func:`keras_bnn.runs.train` stores the
            value it used).
        batch_size: minibatch size; at least the training set's size is the
            full batch, whose epochs hold 20 steps with a minibatch kernel
            (:func:`keras_bnn.runs.build.steps_per_epoch`; HMC: one transition).
        cycle_epochs: cyclical step-size cycle length, or None (constant).
        burn_in_epochs: epochs before collecting (and before the first
            cycle), or ``"auto"`` (None's meaning for a sampler): collect
            from the first epoch where the chain is stationary
            (:class:`keras_bnn.callbacks.CollectSamples`). A sampler that
            collects no sample (sgd) refuses any other value.
        collect_every: collect every k epochs (None: at cycle ends, or
            :func:`default_collect_every` epochs with a constant step size);
            None for a sampler that collects no sample.
        num_train, num_test: sizes of the synthetic task (None:
            :data:`SYNTHETIC_SIZES`, :meth:`synthetic_sizes`); left None
            for any other dataset, which has its own split.
        likelihood: ``"categorical"``, ``"bernoulli"`` or ``"gaussian"``;
            None takes the dataset's (:data:`TASK_LIKELIHOOD`; categorical
            for the synthetic and tfds datasets).
        prior: kernel prior of the model's layers, one of
            :data:`KERNEL_PRIORS`, or ``"auto"`` (None's meaning): the
            candidate of :data:`PRIOR_CANDIDATES` with the lowest validation
            NLL (:func:`keras_bnn.runs.selection.select_prior`; training
            replaces it with the choice, so a stored config names a prior).
        prior_scale: s > 0 of that prior (``"auto"`` chooses it too) (σ = s·sqrt(2/fan_in) for
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
    max_epochs: int = None
    batch_size: int = 100
    cycle_epochs: int = None
    burn_in_epochs: int = None
    collect_every: int = None
    num_train: int = None
    num_test: int = None
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
            ValueError: naming the field and the allowed values
                (:class:`CollectionRefused` for ``burn_in_epochs`` or
                ``collect_every`` with a sampler that collects no sample, sgd;
                :class:`DataFieldRefused` for ``num_train`` or ``num_test``
                with another dataset than the synthetic task, or ``data_dir``
                with one that reads no files).
        """
        if self.prior is None:
            self.prior = DEFAULTS["prior"]
        if self.prior == "auto" and self.prior_scale is not None:
            raise argument_error("prior_scale", "be left unset with prior='auto' (the "
                                 "selection chooses the scale with the prior)",
                                 self.prior_scale, "RunConfig")
        if self.prior != "auto" and self.prior_scale is None:
            self.prior_scale = 1.0
        if self.burn_in_epochs is None:
            self.burn_in_epochs = "auto"
        if self.dataset != ARRAYS:  # the runs API's name for arrays in memory: not listed
            check_choice(self.dataset, "dataset", DATASETS)
        check_choice(self.model, "model", MODELS)
        check_choice(self.sampler, "sampler", tuple(SAMPLERS))
        check_choice(self.prior, "prior", (*PRIORS, "auto"))
        if self.likelihood is not None:
            check_choice(self.likelihood, "likelihood", LIKELIHOODS)
        needs, why = MODEL_DATASETS.get(self.model, (None, None))
        if needs and self.dataset not in needs:
            raise argument_error("dataset", f"be one of {', '.join(map(repr, needs))} for "
                                 f"model={self.model!r} ({why})", self.dataset, "RunConfig")
        check_int(self.batch_size, "batch_size", 1)
        for name in SYNTHETIC_SIZES:
            if getattr(self, name) is not None and self.dataset != "synthetic":
                raise DataFieldRefused(name, self.dataset)
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, 1)
        if self.epochs is not None:
            check_int(self.epochs, "epochs", 1)
        if self.max_epochs is not None:
            check_int(self.max_epochs, "max_epochs", self.epochs or 1)
            lengthens = self.epochs is None or self.max_epochs > self.epochs
            if lengthens and (self.burn_in_epochs != "auto" or not SAMPLERS[self.sampler]):
                raise argument_error(
                    "max_epochs", "be left unset unless a sampler collects from equilibrium "
                    "(burn_in_epochs='auto'): it extends a run whose collection started late",
                    self.max_epochs, "RunConfig")
        if self.burn_in_epochs != "auto":
            check_int(self.burn_in_epochs, "burn_in_epochs", 0)
        check_int(self.chain, "chain", 0)
        check_seed(self.seed, owner="RunConfig")
        for name in ("cycle_epochs", "collect_every"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, 1, owner="RunConfig")
        for name in ("temperature", "step_size", "prior_scale"):
            value = getattr(self, name)
            if value is not None and not (name == "step_size" and value == "auto"):
                check_positive(value, name, "RunConfig")
        if self.step_size == "auto" and self.sampler in AUTO_STEP_REFUSED:
            raise argument_error("step_size", f"be a number > 0 for sampler {self.sampler!r} "
                                 f"({AUTO_STEP_REFUSED[self.sampler]})", self.step_size,
                                 "RunConfig")
        for name in ("dataset", "model", "sampler", "output_dir", "data_dir"):
            value = getattr(self, name)
            unset_data_dir = name == "data_dir" and value is None
            if not (isinstance(value, str) and value) and not unset_data_dir:
                raise argument_error(name, "be a non-empty string", value, "RunConfig")
        if self.data_dir is not None and self.dataset not in DATA_DIR_DATASETS:
            raise DataFieldRefused("data_dir", self.dataset)
        if self.dataset == "npy" and self.data_dir is not None:
            self.data_dir = os.path.abspath(self.data_dir)
        blocker = _file_on(self.output_dir)
        if blocker is not None:
            raise argument_error("output_dir", "be a directory (or a path to create one)",
                                 self.output_dir, "RunConfig",
                                 got="a file" if blocker == os.path.abspath(self.output_dir)
                                 else f"a path inside the file {blocker!r}")
        collects = SAMPLERS[self.sampler]
        for name, unset in COLLECTION_UNSET.items():
            if not collects and getattr(self, name) != unset:
                raise CollectionRefused(name, self.sampler)
        if not collects and self.temperature != 1.0:
            raise ValueError(f"`temperature` applies to samplers, not to "
                             f"sampler={self.sampler!r}.")
        if not collects and self.cycle_epochs is not None:
            raise ValueError(f"`cycle_epochs` applies to samplers (a cyclical step size "
                             f"between samples), not to sampler={self.sampler!r}, whose "
                             "learning rate stays constant: leave it unset.")
        burn_in = 0 if self.burn_in_epochs == "auto" else self.burn_in_epochs
        if self.epochs is not None and burn_in >= self.epochs and collects:
            raise ValueError(
                f"`burn_in_epochs` ({self.burn_in_epochs}) must be smaller than "
                f"`epochs` ({self.epochs}), or no sample is collected."
            )
        for name, field, allowed in (("model_args", "model", MODEL_ARGS[self.model]),
                                     ("sampler_args", "sampler", SAMPLER_ARGS[self.sampler])):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"`{name}` must be a JSON object; got {getattr(self, name)!r}.")
            unknown = sorted(set(getattr(self, name)) - set(allowed))
            if unknown:
                raise argument_error(name, f"hold only keys of {field}={getattr(self, field)!r}: "
                                     f"{', '.join(sorted(allowed))}", getattr(self, name),
                                     "RunConfig", got=f"unknown {unknown}")
        sampled_epochs = math.inf if self.epochs is None else self.epochs - burn_in
        for name in ("collect_every", "cycle_epochs"):
            value = getattr(self, name)
            if collects and value is not None and value > sampled_epochs:
                raise ValueError(
                    f"`{name}` ({value}) must be at most `epochs` - `burn_in_epochs` "
                    f"({sampled_epochs}), or no sample is collected."
                )
        return self

    def synthetic_sizes(self):
        """The synthetic task's sizes: ``num_train`` and ``num_test``, each
        :data:`SYNTHETIC_SIZES`' where None.

        Returns:
            ``(num_train, num_test)``.
        """
        return tuple(SYNTHETIC_SIZES[name] if getattr(self, name) is None else getattr(self, name)
                     for name in SYNTHETIC_SIZES)

    def resolve_length(self, steps_per_epoch):
        """Fills ``epochs`` and ``max_epochs`` where they are None.

        ``epochs`` None: :func:`default_epochs`, and for a sampler that
        collects from equilibrium ``max_epochs`` = :data:`MAX_LENGTH` ·
        ``epochs``; otherwise ``max_epochs`` None means ``epochs``.

        Args:
            steps_per_epoch: minibatches in one epoch of this run.

        Returns:
            ``self``.

        Raises:
            ValueError: for a ``max_epochs`` below the default ``epochs``.
        """
        if self.epochs is None:
            self.epochs = default_epochs(steps_per_epoch)
            if self.max_epochs is not None and self.max_epochs < self.epochs:
                raise argument_error("max_epochs", f"be at least the default `epochs` of this "
                                     f"run ({self.epochs}), or be given with `epochs`",
                                     self.max_epochs, "RunConfig")
            if SAMPLERS[self.sampler] and self.burn_in_epochs == "auto" and \
                    self.max_epochs is None:
                self.max_epochs = MAX_LENGTH * self.epochs
        self.max_epochs = self.max_epochs or self.epochs
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
        try:
            handle = open(path, "rb")
        except OSError as error:
            raise type(error)(error.errno, f"{argument} {os.fspath(path)!r} cannot be read "
                                           f"({error.strerror or error})") from None
        with handle:
            try:
                values = json.loads(handle.read())
            except (ValueError, RecursionError) as error:
                raise ValueError(f"{argument} {os.fspath(path)!r} is not valid JSON "
                                 f"({type(error).__name__}: {error})") from None
        if not isinstance(values, dict):
            raise ValueError(f"{argument} {os.fspath(path)!r} must hold a JSON object of "
                             f"RunConfig fields; it holds a {type(values).__name__}")
        return cls.from_dict(dict(values, **(overrides or {})))


def _file_on(path):
    """The deepest existing part of ``path`` (made absolute) if it is not a
    directory, else None: a directory cannot be made at ``path`` then."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return None if os.path.isdir(path) else path


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


def read_config(run_dir, argument="`run_dir`", **overrides):
    """The :class:`RunConfig` stored in ``run_dir/config.json``.

    Args:
        run_dir: a run directory (single- or multi-chain).
        argument: how the error names ``run_dir``.
        **overrides: fields replaced before validation (e.g. ``output_dir``
            of a moved run).

    Returns:
        The validated :class:`RunConfig`; a stored sgd run's ``burn_in_epochs``
        or ``collect_every``, the ``num_train``, ``num_test`` of a run on
        another dataset than the synthetic task (each run stored 2000 before
        2026-11-30) and the ``data_dir`` of a dataset that reads no files,
        which the run never used, read as unset.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no ``config.json`` (for a
            sweep's root directory, the error lists its runs).
        ValueError: for an invalid stored config.
    """
    run = RunDir(run_dir)
    if not os.path.exists(run.config):
        sweep = run.sweep_runs()
        if sweep:
            raise FileNotFoundError(
                f"{argument} {run_dir!r} is a sweep's directory, not a run: pass one of its "
                f"{counted(len(sweep), 'run')}: {', '.join(r.path for r in sweep)}.")
        raise FileNotFoundError(f"{argument} {run_dir!r} holds no run (no config.json).")
    given = dict(overrides)
    while True:
        try:
            return RunConfig.from_json(run.config, overrides, argument="the run's config")
        except (CollectionRefused, DataFieldRefused) as refused:
            if refused.field in given:
                raise
            # A stored sgd run's collection field, or a synthetic size or data_dir of a
            # dataset that ignores it (the API took them before 2026-11-30; they never had
            # an effect): unset.
            unset = COLLECTION_UNSET.get(refused.field)  # None for a data field
            overrides = dict(overrides, **{refused.field: unset})


def resume_config(output_dir, flags, chains=1):
    """The config of the run in ``output_dir``, for ``train(..., resume=True)``
    (or ``run_chains(..., resume=True)``).

    Args:
        output_dir: the run directory (``--output-dir``).
        flags: RunConfig fields given on the command line besides
            ``output_dir``; each must equal the stored value (a resumed run
            continues the same chain).
        chains: the chains of the run (``--chains``): 1 for a run of one
            chain, else the run's K (its ``chain-k`` directories, k < K).

    Returns:
        The stored :class:`RunConfig`.

    Raises:
        ValueError: without ``output_dir``, with ``--config``, for a flag
            that differs from the stored config, or for ``chains`` > 1 and
            a run of one chain or of more than ``chains`` chains.
        FileNotFoundError: if ``output_dir`` holds no run (or one stopped
            during its prior selection, which the same command without
            ``--resume`` continues).
    """
    if not output_dir:
        raise ValueError("--resume needs --output-dir (the run directory to continue).")
    if "config" in flags:
        raise ValueError("--resume reads the run's own config.json; do not pass --config.")
    run = RunDir(output_dir)
    if not os.path.exists(run.config) and os.path.isdir(run.prior_candidates):
        raise FileNotFoundError(
            f"--resume: the run in {output_dir!r} was stopped while it chose its prior "
            "(prior auto), before it began: run the same command again without --resume (the "
            "candidates that finished are reused).")
    config = read_config(output_dir, "--resume: `output_dir`", output_dir=output_dir)
    found = run.chains()
    if chains != 1 and os.path.isdir(run.samples):
        raise ValueError(f"--resume: {output_dir!r} holds a run of one chain, not of "
                         f"--chains {chains}: drop --chains.")
    if chains != 1 and len(found) > chains:
        raise ValueError(f"--resume: {output_dir!r} holds a run of "
                         f"{counted(len(found), 'chain')}: pass --chains {len(found)}.")
    stored = dataclasses.asdict(config)
    if config.dataset == "synthetic":  # a size left None is the default's
        stored.update(zip(SYNTHETIC_SIZES, config.synthetic_sizes()))
    for name, value in flags.items():
        if name != "output_dir" and stored[name] != value:
            raise ValueError(f"--resume continues the stored run: `{name}` is "
                             f"{stored[name]!r} there, {value!r} given.")
    return config


def check_sweep(param, values, seeds, validation_split, names=("param", "values", "seeds")):
    """Checks the arguments of :func:`keras_bnn.runs.sweep` that are not arrays.

    Args:
        param: one of :data:`SWEEP_PARAMS`.
        values: positive, finite values of ``param``, each with a run directory
            of its own (:func:`keras_bnn.runs.rundir.sweep_value`: distinct to 6
            significant digits).
        seeds: at least one integer seed, none twice.
        validation_split: a fraction in (0, 1), or None.
        names: how errors name ``param``, ``values`` and ``seeds`` (the
            command line's flags, e.g. ``("--param", "--values", "--seeds")``).

    Returns:
        ``(param, values, seeds)`` with ``values`` as floats and ``seeds`` as ints.

    Raises:
        ValueError: naming the argument and the allowed values.
    """
    param = check_choice(param, names[0], SWEEP_PARAMS)
    values = [float(v) for v in values]
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise ValueError(f"`{names[1]}` must be positive numbers; got {values!r}.")
    spelled = [sweep_value(v) for v in values]
    for i, name in enumerate(spelled):
        if name in spelled[:i]:
            raise ValueError(f"`{names[1]}` must be distinct to 6 significant digits (each "
                             f"value's runs go to `{param}=<value>`); got "
                             f"{values[spelled.index(name)]!r} and {values[i]!r}, both "
                             f"`{param}={name}`.")
    seeds = [check_seed(seed, names[2]) for seed in seeds]
    if not seeds:
        raise ValueError(f"`{names[2]}` must hold at least one seed.")
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"`{names[2]}` must be distinct seeds (each seed's run goes to "
                         f"`seed=<seed>`); got {seeds!r}.")
    if validation_split is not None and not 0 < validation_split < 1:
        raise ValueError(f"`validation_split` must lie in (0, 1) or be None; "
                         f"got {validation_split!r}.")
    return param, values, seeds
