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
import inspect
import io
import json
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
from keras_bnn import metrics as metrics_lib
from keras_bnn import models as models_lib
from keras_bnn import plots
from keras_bnn import samplers
from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.durable import atomic_write
from keras_bnn.store import SampleStore
from keras_bnn.validation import check_int, check_positive, check_seed

SAMPLERS = ("atmc", "sghmc", "sgnht", "sgld", "hmc", "sgd")
MODELS = ("mlp", "resnet_pp", "resnet20_frn", "cnn_lstm")
#: Default step sizes h0 per sampler (SDE time units; "sgd" is a learning rate).
DEFAULT_STEP_SIZE = {"atmc": 5e-3, "sghmc": 5e-3, "sgnht": 5e-3, "sgld": 1e-5, "hmc": 1e-3,
                     "sgd": 0.05}


@dataclasses.dataclass
class RunConfig:
    """Everything a run needs; the CLI builds it from a JSON file and flags.

    Attributes:
        dataset: one of ``keras_bnn.data.DATASETS``.
        data_dir: tensorflow-datasets data directory (real datasets).
        model: one of :data:`MODELS`.
        model_args: extra keyword arguments of the model builder.
        sampler: one of :data:`SAMPLERS` (``"sgd"``: the SGD/MAP baseline;
            ``"hmc"`` is exact only with ``batch_size`` ≥ the training set).
        sampler_args: extra keyword arguments of the sampler (e.g.
            ``{"num_leapfrog_steps": 20}`` for HMC).
        step_size: h0 (default per sampler, :data:`DEFAULT_STEP_SIZE`).
        temperature: posterior temperature T > 0.
        epochs: training epochs.
        batch_size: minibatch size.
        cycle_epochs: cyclical step-size cycle length, or None (constant).
        burn_in_epochs: epochs before the first cycle and before collecting.
        collect_every: collect every k epochs (None: at cycle ends, or every
            epoch with a constant step size).
        num_train, num_test: sizes of the synthetic task.
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
    epochs: int = 30
    batch_size: int = 100
    cycle_epochs: int = None
    burn_in_epochs: int = 10
    collect_every: int = None
    num_train: int = 2000
    num_test: int = 2000
    seed: int = 0
    chain: int = 0
    output_dir: str = "runs/default"

    def validate(self):
        """Checks every field; returns ``self``.

        Raises:
            ValueError: naming the field and the allowed values.
        """
        _choice("dataset", self.dataset, data_lib.DATASETS)
        _choice("model", self.model, MODELS)
        _choice("sampler", self.sampler, SAMPLERS)
        for name in ("epochs", "batch_size", "num_train", "num_test"):
            check_int(getattr(self, name), name, 1)
        check_int(self.burn_in_epochs, "burn_in_epochs", 0)
        check_int(self.chain, "chain", 0)
        check_seed(self.seed, "RunConfig")
        for name in ("cycle_epochs", "collect_every"):
            if getattr(self, name) is not None:
                check_int(getattr(self, name), name, 1)
        for name in ("temperature", "step_size"):
            if getattr(self, name) is not None:
                check_positive(getattr(self, name), name, "RunConfig")
        for name in ("dataset", "model", "sampler", "output_dir", "data_dir"):
            value = getattr(self, name)
            if not (isinstance(value, str) and value) and not (name == "data_dir" and value is None):
                raise ValueError(f"`{name}` must be a non-empty string; got {value!r}.")
        if self.sampler == "sgd" and self.temperature != 1.0:
            raise ValueError("`temperature` applies to samplers, not to sampler='sgd'.")
        if self.burn_in_epochs >= self.epochs and self.sampler != "sgd":
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
            if self.sampler != "sgd" and value is not None and value > sampled_epochs:
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


def _write_json(value, path):
    atomic_write(path, lambda handle: handle.write(json.dumps(value, indent=2).encode()))


def _choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}.")


def load_data(config):
    """Loads the run's dataset.

    Returns:
        ``(train_ds, test_ds, info)`` from :func:`keras_bnn.data.load`.
    """
    kwargs = {"seed": config.seed}
    if config.dataset == "synthetic":
        kwargs.update(num_train=config.num_train, num_test=config.num_test)
    else:
        kwargs["data_dir"] = config.data_dir
    return data_lib.load(config.dataset, batch_size=config.batch_size, **kwargs)


def build_model(config, info):
    """Builds the run's model for the dataset described by ``info``."""
    builder = getattr(models_lib, config.model)
    parameters = inspect.signature(builder).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        fixed = {"input_shape", "num_classes", "vocab_size"}
        allowed = sorted(set(parameters) - fixed)
        unknown = sorted(set(config.model_args) - set(allowed))
        if unknown:
            raise ValueError(f"unknown `model_args` {unknown} for model {config.model!r}; "
                             f"allowed: {allowed}.")
    if config.model == "cnn_lstm":
        return builder(vocab_size=info["vocab_size"], num_classes=info["num_classes"],
                       **config.model_args)
    return builder(info["input_shape"], info["num_classes"], **config.model_args)


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


def _compile(model, config, train_size):
    step_size = config.step_size or DEFAULT_STEP_SIZE[config.sampler]
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    if config.sampler == "sgd":
        model.compile(optimizer=keras.optimizers.SGD(step_size, momentum=0.9),
                      train_size=train_size, loss=loss, metrics=["accuracy"])
    else:
        model.compile(
            sampler=samplers.get(config.sampler, step_size=step_size, seed=chain_seed(config),
                                 **config.sampler_args),
            temperature=config.temperature, train_size=train_size, loss=loss,
            metrics=["accuracy"],
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
    path = os.path.join(output_dir, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"--resume: `output_dir` {output_dir!r} holds no run "
                                "(no config.json).")
    with open(path, "rb") as handle:
        config = RunConfig.from_dict(dict(json.loads(handle.read()), output_dir=output_dir))
    for name, value in flags.items():
        if name != "output_dir" and getattr(config, name) != value:
            raise ValueError(f"--resume continues the stored run: `{name}` is "
                             f"{getattr(config, name)!r} there, {value!r} given.")
    return config


def train(config, verbose=1, resume=False):
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

    Returns:
        ``(store, history)``.

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
    train_ds, _, info = load_data(config)
    keras.utils.set_random_seed(chain_seed(config))
    model = build_model(config, info)
    _compile(model, config, info["num_train"])
    callbacks = [keras.callbacks.BackupAndRestore(
        backup, delete_checkpoint=False, double_checkpoint=True)]
    if config.sampler != "sgd":
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
    if config.sampler == "sgd" and store.find(config.chain, step) is None:
        store.append(model, chain=config.chain, epoch=config.epochs - 1, step=step)
    _write_json(gradient_noise_rows(model), os.path.join(config.output_dir, "gradient_noise.json"))
    _write_json(history.history, os.path.join(config.output_dir, "history.json"))
    _write_json(kinetic_temperature_rows(model, config), finished)
    shutil.rmtree(backup, ignore_errors=True)
    return store, history


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
        return [(store, history.history) for store, history in
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
    if config.sampler in ("sgd", "sgld") or getattr(sampler, "speed_limit", None):
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


def load_run(run_dir):
    """Reads a run directory.

    Returns:
        ``(config, store)``.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no run.
    """
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"`run_dir` {run_dir!r} holds no run (no config.json).")
    with open(path) as handle:
        config = RunConfig.from_dict(json.load(handle))
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
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"`run_dir` {run_dir!r} holds no run (no config.json).")
    with open(path) as handle:
        config = RunConfig.from_dict(json.load(handle))
    return config, chains_lib.stores_of(run_dir)


def member_probabilities(store, dataset):
    """Class probabilities of every stored sample on ``dataset``, ``[S, N, K]``."""
    model = store.build_model()
    probs = []
    for sample in store:
        model.set_weights(sample.weights)
        logits = model.predict(dataset, verbose=0)
        probs.append(keras.ops.convert_to_numpy(keras.ops.softmax(logits, axis=-1)))
    return np.stack(probs)


def evaluate(run_dir, num_bins=15):
    """Evaluates a run: last sample, and the posterior-predictive ensemble.

    Writes ``metrics.json``, ``reliability.png`` (ensemble) and
    ``metric_vs_samples.png`` into ``run_dir``.

    Args:
        run_dir: a directory written by :func:`train`.
        num_bins: ECE / reliability bins.

    Returns:
        dict with ``single_sample`` (the last sample of the last chain) and
        ``ensemble`` (all chains pooled) metrics, ``num_chains``,
        ``num_samples`` (over all chains), the ``metric_vs_num_samples``
        curve, the ``predictive_diagnostics`` (one chain: split-R-hat and ESS
        of the predicted probabilities over its samples; None below 8
        samples or for several chains), ``rhat`` (see :func:`chain_rhat`)
        and the paths.
    """
    config, stores = load_chains(run_dir)
    _, test_ds, _ = load_data(config)
    labels = data_lib.dataset_labels(test_ds)
    chain_probs = [member_probabilities(store, test_ds) for store in stores]
    member_probs = np.concatenate(chain_probs)
    members = metrics_lib.evaluate_members(member_probs, labels, num_bins=num_bins)
    ensemble_probs = PosteriorEnsemble.from_store(stores).predict(test_ds, verbose=0)
    num_samples = len(member_probs)
    result = {
        "sampler": config.sampler,
        "temperature": config.temperature,
        "num_chains": len(stores),
        "num_samples": num_samples,
        "single_sample": members["members"][-1],
        "ensemble": metrics_lib.evaluate_probs(ensemble_probs, labels, num_bins=num_bins),
        "metric_vs_num_samples": members["metric_vs_num_samples"],
        # One chain: split-R-hat (its halves as two chains) and ESS of the
        # predicted probabilities, from 8 samples on (4 draws per half-chain;
        # fewer make the autocorrelation estimates meaningless).
        "predictive_diagnostics": (
            diagnostics.predictive_rhat(member_probs[np.newaxis], split=True)
            if len(stores) == 1 and num_samples >= 8 else None),
        "rhat": chain_rhat(stores, chain_probs),
        "reliability_plot": plots.reliability_diagram(
            ensemble_probs, labels, os.path.join(run_dir, "reliability.png"), num_bins=num_bins,
            title=f"{config.sampler} ensemble ({num_samples} samples)"),
        "samples_plot": plots.metric_vs_samples_plot(
            members["metric_vs_num_samples"], os.path.join(run_dir, "metric_vs_samples.png")),
    }
    _write_json(result, os.path.join(run_dir, "metrics.json"))
    return result


def chain_rhat(stores, chain_probs):
    """R-hat and ESS across chains in function and weight space.

    :func:`keras_bnn.diagnostics.convergence_summary` of the predicted class
    probabilities on the test inputs (``"function"``, components p(k|x_n))
    and of every weight (``"weight"``), over the last S draws of each chain
    (S the shortest chain). With one chain its halves are compared.

    Args:
        stores: one :class:`keras_bnn.SampleStore` per chain.
        chain_probs: per chain, the ``[S_k, N, K]`` probabilities of its samples.

    Returns:
        ``{"function": {...}, "weight": {...}}`` (keys ``median``, ``max``,
        ``frac_below_1.01``, ``frac_below_1.1``, ESS, counts), or None when
        the chains have fewer than 4 common draws.
    """
    draws = min(len(p) for p in chain_probs)
    if draws < 4:
        return None
    probs = np.stack([p[len(p) - draws:] for p in chain_probs])
    return {"function": diagnostics.convergence_summary(probs, "probabilities"),
            "weight": diagnostics.convergence_summary(diagnostics.chain_weights(stores),
                                                      "weights")}


def export(run_dir, model_dir, version=None):
    """Exports a run's posterior ensemble (all chains pooled) for TF Serving.

    Args:
        run_dir: a directory written by :func:`train` or :func:`run_chains`.
        model_dir: ``saved_models/<name>``; the version directory goes inside.
        version: integer version, or None for the next free one.

    Returns:
        The path of the written version directory.
    """
    _, stores = load_chains(run_dir)
    return PosteriorEnsemble.from_store(stores).export(model_dir, version=version)


def sweep_temperature(config, temperatures, verbose=0):
    """Trains and evaluates one run per temperature (the cold-posterior plot).

    Writes ``<output_dir>/T=<T>/`` runs, ``sweep.csv`` and ``sweep.png``.

    Args:
        config: base :class:`RunConfig` (``output_dir`` is the sweep's root).
        temperatures: positive temperatures.
        verbose: progress-bar verbosity of each training run.

    Returns:
        List of row dicts (temperature, then single-sample and ensemble
        accuracy / NLL / ECE / Brier).

    Raises:
        ValueError: for an empty or non-positive temperature list.
    """
    if not temperatures or any(not t > 0 for t in temperatures):
        raise ValueError(f"`temperatures` must be positive numbers; got {temperatures!r}.")
    rows = []
    for temperature in temperatures:
        run = dataclasses.replace(config, temperature=float(temperature),
                                  output_dir=os.path.join(config.output_dir, f"T={temperature:g}"))
        train(run, verbose=verbose)
        result = evaluate(run.output_dir)
        row = {"temperature": float(temperature)}
        for part in ("single_sample", "ensemble"):
            row.update({f"{part}_{k}": v for k, v in result[part].items()})
        rows.append(row)
    plots.temperature_sweep_plot(rows, os.path.join(config.output_dir, "sweep.png"))
    _write_csv(rows, os.path.join(config.output_dir, "sweep.csv"))
    return rows


def _write_csv(rows, path):
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    atomic_write(path, lambda handle: handle.write(text.getvalue().encode()))
