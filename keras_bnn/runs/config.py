"""A run's configuration: :class:`RunConfig`, its defaults, and its seeds.

The sampler names are :data:`keras_bnn.samplers.REGISTRY`'s (the samplers
and the SGD/MAP baseline, with their default step sizes).
"""

import dataclasses
import fractions
import json
import os

import numpy as np

from keras_bnn import data as data_lib
from keras_bnn import likelihoods as likelihoods_lib
from keras_bnn import priors as priors_lib
from keras_bnn import samplers
from keras_bnn.runs.rundir import RunDir
from keras_bnn.validation import (argument_error, check_choice, check_int, check_positive,
                                  check_seed)

#: ``RunConfig.dataset`` of a run on in-memory arrays (see :func:`keras_bnn.runs.sweep`).
ARRAYS = "arrays"
MODELS = ("mlp", "resnet_pp", "resnet20_frn", "cnn_lstm", "cnn")
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


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; the CLI builds it from a JSON file and flags.

    Attributes:
        dataset: one of ``keras_bnn.data.DATASETS`` (or :data:`ARRAYS` for
            a run on in-memory arrays, whose data is passed to
            :func:`keras_bnn.runs.train` and :func:`keras_bnn.runs.evaluate`).
        data_dir: tensorflow-datasets data directory (real datasets).
        model: one of :data:`MODELS`.
        model_args: extra keyword arguments of the model builder.
        sampler: a name of :data:`keras_bnn.samplers.REGISTRY` (``"sgd"``:
            the SGD/MAP baseline;
            ``"hmc"`` is exact only with ``batch_size`` ≥ the training set).
        sampler_args: extra keyword arguments of the sampler (e.g.
            ``{"num_leapfrog_steps": 20}`` for HMC).
        step_size: h0 (default: the registry entry's ``step_size``).
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
        check_choice(self.sampler, "sampler", tuple(samplers.REGISTRY))
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
        collects = samplers.REGISTRY[self.sampler].collects
        if not collects and self.temperature != 1.0:
            raise ValueError(f"`temperature` applies to samplers, not to "
                             f"sampler={self.sampler!r}.")
        if self.burn_in_epochs >= self.epochs and collects:
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
            if collects and value is not None and value > sampled_epochs:
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
        The validated :class:`RunConfig`.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no ``config.json``.
        ValueError: for an invalid stored config.
    """
    path = RunDir(run_dir).config
    if not os.path.exists(path):
        raise FileNotFoundError(f"{argument} {run_dir!r} holds no run (no config.json).")
    return RunConfig.from_json(path, overrides, argument="the run's config")

