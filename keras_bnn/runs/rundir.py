"""The run directory: the one owner of its on-disk layout.

A run directory (:class:`RunDir`) holds::

    config.json                 the resolved RunConfig
    samples/                    a SampleStore (the SGD baseline: its final point)
    backup/                     BackupAndRestore's state while the run is unfinished
    history.json                Keras' History.history
    kinetic_temperatures.json   written last: the run is complete
    gradient_noise.json
    directional_noise.json      the noisiest directions' gradient-noise ratio at the end
    collection.json
    prior_selection.json        prior="auto": the candidates' validation NLL and the choice
    prior-selection/<prior>-<scale>/   one run per candidate (on the training part)
    validation_split.json       a sweep's run on a validation split: the split it was scored on
    metrics.json, reliability.png, metric_vs_samples.png   after evaluation

A multi-chain run holds ``config.json`` and one such directory per chain,
``chain-0 … chain-{K-1}``; a sweep holds ``<param>=<value>/seed=<seed>/``
runs (:func:`sweep_value` spells the value), ``sweep.csv`` and
``sweep.png``. :func:`stores_of` turns a run directory, a store or a list
of these into the checked stores, one per chain (:class:`Chains`), for
:meth:`keras_bnn.PosteriorEnsemble.from_store`,
:func:`keras_bnn.stored_chains.to_inference_data` and ``keras-bnn evaluate``.

The JSON files are strict JSON (RFC 8259), which ``jq``, JavaScript's
``JSON.parse`` and ``json.loads(..., parse_constant=...)`` read. JSON has no
literal for a number that is not finite, so one is written as a value a
reader tells apart (:func:`strict_json`): NaN (undefined: an R-hat of too
few draws, a diverged loss) as ``null``, as JavaScript's ``JSON.stringify``
writes it, and +inf and -inf (an R-hat of chains that each stay constant
at different values) as the strings ``"Infinity"`` and ``"-Infinity"``,
which Python's ``float`` and JavaScript's ``Number`` read as infinities.
:meth:`RunDir.read_numbers` reads them back as NaN and ±inf. Until
2026-11-29 such numbers were written as the literals ``NaN`` and
``Infinity`` (Python's default, not JSON), and until 2026-11-30 ±inf as
``null`` too (read back as NaN); those files still read, as written.
"""

import glob
import importlib
import json
import math
import os
import re

from keras_bnn.durable import atomic_write

_CHAIN = "chain-{}"
_CHAIN_RE = re.compile(r"^chain-(\d+)$")


#: How :func:`strict_json` writes the infinities (strings: JSON has no literal for them).
_INFINITIES = {math.inf: "Infinity", -math.inf: "-Infinity"}
_INFINITY_TEXTS = {text: value for value, text in _INFINITIES.items()}


def strict_json(value):
    """``value`` with every non-finite float replaced by a JSON value:
    what :meth:`RunDir.write_json` writes.

    Args:
        value: a JSON-serialisable value (dicts, lists, tuples, numbers, ...).

    Returns:
        The same value (nested in dicts, lists and tuples, the tuples as
        lists), NaN replaced by None and ±inf by ``"Infinity"`` and
        ``"-Infinity"``.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else _INFINITIES.get(value)
    if isinstance(value, dict):
        return {key: strict_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(item) for item in value]
    return value


def json_numbers(value):
    """A JSON value of numbers as read, with the values that stood for
    non-finite numbers (:func:`strict_json`) read as those numbers.

    Args:
        value: a value of :meth:`RunDir.read_json`: numbers, None, the
            strings ``"Infinity"`` and ``"-Infinity"``, and dicts and lists
            of these.

    Returns:
        The same value (nested in dicts and lists), every None NaN, and
        ``"Infinity"`` and ``"-Infinity"`` inf and -inf.
    """
    if value is None:
        return math.nan
    if isinstance(value, str):
        return _INFINITY_TEXTS.get(value, value)
    if isinstance(value, dict):
        return {key: json_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_numbers(item) for item in value]
    return value


def sweep_value(value):
    """How a sweep's run directory spells a value: ``f"{value:g}"`` (6
    significant digits; two values spelled alike would share a directory)."""
    return f"{value:g}"


def _sample_store():
    """:class:`keras_bnn.SampleStore`, imported when a store is opened: the
    paths alone (what :mod:`keras_bnn.runs.config` uses) need no Keras."""
    return importlib.import_module("keras_bnn.store").SampleStore


class RunDir:
    """The paths of one run directory (nothing is created until written).

    Args:
        path: the directory (``RunConfig.output_dir``).
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def __repr__(self):
        return f"RunDir({self.path!r})"

    def _file(self, name):
        return os.path.join(self.path, name)

    @property
    def config(self):
        """Path of ``config.json``, the resolved :class:`RunConfig`."""
        return self._file("config.json")

    @property
    def samples(self):
        """Path of the run's :class:`keras_bnn.SampleStore`."""
        return self._file("samples")

    @property
    def backup(self):
        """Path of ``keras.callbacks.BackupAndRestore``'s directory."""
        return self._file("backup")

    @property
    def history(self):
        """Path of ``history.json`` (``History.history``)."""
        return self._file("history.json")

    @property
    def kinetic_temperatures(self):
        """Path of ``kinetic_temperatures.json``, written last by a complete run."""
        return self._file("kinetic_temperatures.json")

    @property
    def gradient_noise(self):
        """Path of ``gradient_noise.json``."""
        return self._file("gradient_noise.json")

    @property
    def directional_noise(self):
        """Path of ``directional_noise.json``
        (:func:`keras_bnn.runs.fitting.directional_noise_report`)."""
        return self._file("directional_noise.json")

    @property
    def data_files(self):
        """Path of ``data_files.json``: for a run on the "npy" dataset, the
        SHA-256 of the files it was trained on
        (:func:`keras_bnn.runs.build.check_data_files`)."""
        return self._file("data_files.json")

    @property
    def collection(self):
        """Path of ``collection.json``: when collection started, why, and the step size."""
        return self._file("collection.json")

    @property
    def metrics(self):
        """Path of ``metrics.json`` (what ``evaluate`` returns)."""
        return self._file("metrics.json")

    @property
    def reliability_plot(self):
        """Path of ``reliability.png``."""
        return self._file("reliability.png")

    @property
    def samples_plot(self):
        """Path of ``metric_vs_samples.png``."""
        return self._file("metric_vs_samples.png")

    @property
    def sweep_table(self):
        """Path of a sweep's ``sweep.csv``."""
        return self._file("sweep.csv")

    @property
    def sweep_plot(self):
        """Path of a sweep's ``sweep.png``."""
        return self._file("sweep.png")

    @property
    def complete(self):
        """True when the run finished (its last file is written)."""
        return os.path.exists(self.kinetic_temperatures)

    @property
    def started(self):
        """True once a run trains here: :func:`keras_bnn.runs.train` writes
        ``config.json`` when its data are loaded and its model is built,
        before the first step, so a start that failed earlier (data not
        prepared) leaves no run behind."""
        return os.path.exists(self.config)

    def store(self):
        """The run's :class:`keras_bnn.SampleStore` (created empty if absent)."""
        return _sample_store()(self.samples)

    def chain(self, k):
        """Chain ``k``'s run directory inside a multi-chain run.

        Args:
            k: chain index ≥ 0.

        Returns:
            A :class:`RunDir`.
        """
        return RunDir(self._file(_CHAIN.format(k)))

    def chains(self):
        """The chain directories of a multi-chain run, in chain order.

        Returns:
            List of :class:`RunDir` (empty when this is not a multi-chain run).
        """
        if not os.path.isdir(self.path):
            return []
        found = sorted(
            (int(match.group(1)), name)
            for name in os.listdir(self.path)
            if (match := _CHAIN_RE.match(name)) and os.path.isdir(self._file(name))
        )
        return [RunDir(self._file(name)) for _, name in found]

    def sweep_run(self, param, value, seed):
        """The run directory of one (value, seed) of a sweep rooted here.

        Returns:
            A :class:`RunDir` ``<param>=<value>/seed=<seed>``.
        """
        return RunDir(os.path.join(self.path, f"{param}={sweep_value(value)}", f"seed={seed}"))

    def sweep_runs(self):
        """The runs of a sweep rooted here that have started, in path order.

        Returns:
            List of :class:`RunDir` ``<param>=<value>/seed=<seed>`` holding a
            ``config.json`` (empty when this is no sweep's root).
        """
        pattern = os.path.join(glob.escape(self.path), "*=*", "seed=*")
        return [run for run in map(RunDir, sorted(glob.glob(pattern))) if run.started]

    @property
    def validation_split(self):
        """Path of ``validation_split.json``: in a sweep's run on a validation
        split, that split (:func:`keras_bnn.runs.build.split_data`), which
        :func:`keras_bnn.runs.evaluate` scores instead of the test split."""
        return self._file("validation_split.json")

    @property
    def prior_selection(self):
        """Path of ``prior_selection.json`` (``prior="auto"``: the candidates and the choice)."""
        return self._file("prior_selection.json")

    @property
    def prior_candidates(self):
        """Path of the directory of the ``prior="auto"`` candidates' runs."""
        return self._file("prior-selection")

    def prior_candidate(self, prior, scale):
        """The run directory of one candidate of ``prior="auto"``.

        Returns:
            A :class:`RunDir` ``prior-selection/<prior>-<scale>``.
        """
        return RunDir(os.path.join(self.prior_candidates, f"{prior}-{scale:g}"))

    def write_json(self, path, value):
        """Writes ``value`` as indented strict JSON to ``path`` (one of this run's
        paths), atomically (:func:`keras_bnn.durable.atomic_write`); NaN is
        written as ``null``, ±inf as ``"Infinity"`` and ``"-Infinity"``
        (:func:`strict_json`)."""
        os.makedirs(self.path, exist_ok=True)
        text = json.dumps(strict_json(value), indent=2, allow_nan=False)
        atomic_write(path, lambda handle: handle.write(text.encode()))

    def holds_other_config(self, values):
        """Whether this run's ``config.json`` exists and differs from ``values``.

        Args:
            values: a config as a dict (``dataclasses.asdict``), compared as JSON.
        """
        if not os.path.exists(self.config):
            return False
        return self.read_json(self.config) != json.loads(json.dumps(values))

    @staticmethod
    def read_json(path):
        """The JSON value in ``path`` (one of a run's paths), as written: NaN is
        None and ±inf ``"Infinity"`` and ``"-Infinity"`` (:func:`strict_json`;
        NaN or inf in a file written before 2026-11-29).

        Args:
            path: one of a run's paths.

        Returns:
            The value.

        Raises:
            FileNotFoundError: if there is no such file.
        """
        with open(path) as handle:
            return json.load(handle)

    @staticmethod
    def read_numbers(path):
        """The JSON value in ``path``, a file of numbers (``history.json``), with
        its non-finite numbers read back (:func:`json_numbers`): the same
        numbers for a file written now and one written before 2026-11-29
        (``NaN`` literals).

        Args:
            path: one of a run's paths.

        Returns:
            The value, numbers as floats (NaN and ±inf where not finite).

        Raises:
            FileNotFoundError: if there is no such file.
        """
        return json_numbers(RunDir.read_json(path))


class Chains(tuple):
    """The sample stores of one source, one per chain: what :func:`stores_of`
    returns, checked non-empty and of one architecture (passed to
    :func:`stores_of` again, it is returned as is)."""


def _stores_of_path(path):
    run = RunDir(path)
    chains = run.chains()
    if chains:
        return [chain.store() for chain in chains]
    if os.path.isdir(run.samples):
        return [run.store()]
    if _sample_store().is_store(run.path):
        return [_sample_store()(run.path)]
    raise FileNotFoundError(
        f"{run.path!r} is neither a sample store, a run directory nor a multi-chain run "
        "directory (an export or a sweep directory holds none: pass one of its runs)."
    )


def stores_of(source):
    """The sample stores of ``source``, one per chain, all of one architecture.

    Args:
        source: a :class:`keras_bnn.SampleStore`; a path to a store, to a run
            directory (``<run>/samples``) or to a multi-chain run directory
            (``<run>/chain-k/samples``); or a list of any of these (pooled in
            order); or :class:`Chains` (already checked: returned as is).

    Returns:
        :class:`Chains` of read-only :class:`keras_bnn.SampleStore` snapshots
        (:meth:`~keras_bnn.SampleStore.snapshot`: the samples present now), none
        of them empty.

    Raises:
        ValueError: if ``source`` is of another type, holds no store or one
            store twice, a store is empty, or the stores hold samples of
            different architectures or drawn under different priors (the
            error names the first store that differs; a store written before
            priors were recorded is not compared by its priors).
        FileNotFoundError: for a path that does not exist.
    """
    if isinstance(source, Chains):
        return source
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    stores = []
    for item in items:
        if isinstance(item, _sample_store()):
            stores.append(item)
        elif isinstance(item, (str, os.PathLike)):
            stores.extend(_stores_of_path(item))
        else:
            raise ValueError(
                "`store` must be a SampleStore, a path to a store or run directory, or a "
                f"list of these; got {type(item).__name__}."
            )
    if not stores:
        raise ValueError("`store` holds no sample store; got an empty list.")
    # Read-only views: each directory listed once, and samples a chain appends
    # later are not seen, so lengths, pooled members and split points agree.
    stores = [store.snapshot() for store in stores]
    paths = [os.path.realpath(store.path) for store in stores]
    twice = sorted({path for path in paths if paths.count(path) > 1})
    if twice:  # its samples would count twice in the pooled ensemble
        raise ValueError(f"`store` names the sample store {twice[0]!r} more than once; pool "
                         "each chain once.")
    for store in stores:
        if not len(store):
            raise ValueError(
                f"`store` {store.path!r} holds no samples. CollectSamples(start_epoch='auto') "
                "collects none when its run ends before the chain is at equilibrium (its "
                "NotConvergedWarning says why): train for more steps (a default run trains "
                "4000, and up to 8000 until it has samples: 1000 of warm-up, then the "
                "equilibrium test and the step factors' second noise measurement; "
                "--epochs, --max-epochs).")
    store_priors = importlib.import_module("keras_bnn.store_priors")  # Keras, as the stores
    reference = stores[0].architecture
    for store in stores[1:]:
        if store.architecture["fingerprint"] != reference["fingerprint"]:
            raise ValueError(
                f"The chains are of different architectures: {store.path!r} holds samples "
                f"of another model than {stores[0].path!r}; pool only chains of one model."
            )
        listed = store_priors.mismatch(reference, store.architecture,
                                       ("in the first", "in this one"))
        if listed is not None:  # (a store written before priors were recorded: not compared)
            raise ValueError(
                f"The chains were sampled under different priors: {store.path!r} holds samples "
                f"of another posterior than {stores[0].path!r} ({listed}); pool only chains "
                "sampled under the same priors.")
    return Chains(stores)
