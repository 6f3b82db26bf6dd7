"""Evaluating a run: metrics, plots and R-hat across chains; its export.

A run directory is resolved once (:func:`load_chains` →
:func:`keras_bnn.runs.stores_of`) and the checked stores go to
:meth:`keras_bnn.PosteriorEnsemble.from_store` as they are.
"""

import errno
import os

import numpy as np

from keras_bnn import diagnostics
from keras_bnn import metrics as metrics_lib
from keras_bnn import plots, positions
from keras_bnn.datasets.pipeline import dataset_targets
from keras_bnn.ensemble import PosteriorEnsemble
from keras_bnn.metric_inputs import take_weights
from keras_bnn.runs.build import check_data_files, load_data, split_data
from keras_bnn.runs.config import ARRAYS, read_config
from keras_bnn.runs.rundir import RunDir, json_numbers, stores_of
from keras_bnn.validation import counted

#: The parts of ``metrics.json`` that hold numbers only (:func:`read_metrics`).
_NUMBERS = ("single_sample", "ensemble", "metric_vs_num_samples", "rhat", "nll_vs_baseline")


def load_run(run_dir):
    """Reads a run directory.

    Returns:
        ``(config, store)``.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no run, or no samples.
    """
    return read_config(run_dir), _sampled_store(RunDir(run_dir), f"`run_dir` {run_dir!r}")


def _sampled_store(run, named):
    """The store of ``run`` (a :class:`RunDir`), refused when it holds no sample.

    Raises:
        FileNotFoundError: saying why it holds none and which flags to change;
            the message names the run as ``named``.
    """
    store = run.store()
    if not len(store):
        if not run.complete:
            raise FileNotFoundError(f"{named} holds no samples yet: it is still "
                                    "training, or was stopped before its first sample "
                                    "(continue it with keras-bnn train --resume).")
        collection = run.read_json(run.collection)
        if collection.get("start_epoch") is not None:
            raise FileNotFoundError(
                f"{named} holds no samples, though its collection began at epoch "
                f"{collection['start_epoch']} ({collection['reason']}): the run ended before "
                f"a sample was due, or its samples were removed from {store.path}.")
        raise FileNotFoundError(
            f"{named} holds no samples: its chain did not reach equilibrium in "
            f"its {counted(collection['epochs'], 'epoch')} ({collection['reason']}); train a "
            "run with more --epochs or --max-epochs, or collect from a given epoch with "
            "--burn-in-epochs.")
    return store


def load_chains(run_dir):
    """Reads a single- or multi-chain run directory, resolving it once.

    Each store is read through one :meth:`keras_bnn.SampleStore.snapshot`,
    so a chain still appending (another process) adds nothing to this
    evaluation: the pooled members, the chain lengths and R-hat's split
    points all refer to the same samples.

    Returns:
        ``(config, stores)``: the (shared) configuration and the checked
        :class:`keras_bnn.runs.Chains`, one read-only snapshot
        :class:`keras_bnn.SampleStore` per chain.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no run, or it or one of its
            chains holds no samples (the error names the chain's directory
            and the ``keras-bnn train`` flags that would give it samples).
        ValueError: if the chains are of different architectures.
    """
    chains = RunDir(run_dir).chains()
    if chains:
        config = read_config(run_dir)
        stores = [_sampled_store(chain, f"the chain {chain.path!r} of `run_dir` {run_dir!r}")
                  for chain in chains]
    else:
        config, store = load_run(run_dir)
        stores = [store]
    return config, stores_of(stores)


def _gaussian_curve(members, targets, sample_weight=None):
    """Regression metrics of the Gaussian members and of their mixture.

    ``members`` is [S, N, 2D] raw ``[μ, log σ²]``, scored in float64 by
    :func:`keras_bnn.metrics.evaluate_gaussian_members` (the exact mixture
    (1/s) Σ_r N(μ_r, σ²_r) of the first s members, s = 1..S), weighted by
    ``sample_weight`` (or None). Returns
    ``(last member's metrics, the S-member mixture's metrics, the curve,
    the S-member mixture's per-example NLL)``.
    """
    members = np.asarray(members, dtype=np.float64)
    units = members.shape[-1] // 2
    means, variances = members[..., :units], np.exp(members[..., units:])
    scored = metrics_lib.evaluate_gaussian_members(means, variances, targets,
                                                   sample_weight=sample_weight)
    return (scored["members"][-1], scored["ensemble"], scored["metric_vs_num_samples"],
            metrics_lib.gaussian_mixture_nll_per_example(means, variances, targets))


def evaluate(run_dir, num_bins=15, baseline=None, data=None):
    """Evaluates a run: last sample, and the posterior-predictive ensemble.

    The ensemble is :meth:`PosteriorEnsemble.from_store` (its likelihood read
    from the store). Classification and binary runs are scored with
    :func:`keras_bnn.metrics.evaluate_members` (accuracy, NLL, ECE, Brier;
    every NLL exact, from the members' log-probabilities: no floor at 87.3
    nats an example where p̄ underflows float32, as until 2026-11-30);
    regression runs with :func:`keras_bnn.metrics.evaluate_gaussian_members`
    (NLL, RMSE, coverage of the central 50/90/95 % intervals) of the
    members' Gaussian mixture. Writes ``metrics.json`` (strict JSON, NaN as
    null and ±inf as ``"Infinity"``/``"-Infinity"``: :func:`read_metrics`),
    ``reliability.png`` (classification) and ``metric_vs_samples.png`` into
    ``run_dir``. The runs' models
    (:mod:`keras_bnn.models`) output ``[N, K]``: none is a tagger, whose
    ensemble is scored by :mod:`keras_bnn.metrics` with ``mask=``.

    Args:
        run_dir: a directory written by :func:`keras_bnn.runs.train` or
            :func:`keras_bnn.runs.run_chains`
            (the chains are pooled).
        num_bins: ECE / reliability bins.
        baseline: optional result of this function on a reference run on the
            same test set (e.g. the SGD/MAP run): its ``single_sample``
            metrics are drawn as a horizontal line in the metric-vs-samples
            plot, and the ensembles' per-example NLLs are compared
            (``nll_vs_baseline``).
        data: ``(train_ds, test_ds, info)`` to evaluate on (needed for runs
            on arrays; ``test_ds`` may be shuffled: it is read once, its
            labels and predictions in one order). A ``test_ds`` of
            (inputs, labels, sample_weight) batches, as Keras' ``evaluate``
            takes (:func:`keras_bnn.data.make_dataset` with
            ``sample_weight=``), is scored weighted: every metric, the
            reliability diagram and ``nll_vs_baseline``. None: the test split of
            ``config.dataset`` or, for a sweep's run on a validation split,
            the held-out rows the sweep scored it on
            (:func:`keras_bnn.runs.build.split_data`).

    Returns:
        dict with ``likelihood``, ``single_sample`` (the last sample of the
        last chain) and ``ensemble`` (all chains pooled) metrics,
        ``num_chains``, ``num_samples`` (over all chains), the
        ``metric_vs_num_samples`` curve, ``rhat`` (see :func:`chain_rhat`:
        rank-normalised R-hat and ESS in function and weight space; one
        chain is compared by its halves), the plot paths,
        ``nll_per_example`` (the ensemble's), ``test_labels`` and
        ``test_weights`` (None unweighted) (numpy arrays, not written to
        ``metrics.json``) and, with a ``baseline``, ``nll_vs_baseline``:
        :func:`keras_bnn.metrics.paired_difference` of this ensemble's and
        the baseline ensemble's per-example NLL, weighted by the test
        weights (Δ < 0: this run is better).

    Raises:
        FileNotFoundError, ValueError: as :func:`load_chains`.
        ValueError: if ``baseline`` was scored on another task, number of
            test examples, sequence of test labels or of test weights, or
            naming ``data`` for a test set of other elements than (inputs,
            labels) or (inputs, labels, sample_weight) batches, or for
            weights that :func:`keras_bnn.metrics.nll` refuses.
    """
    config, stores = load_chains(run_dir)
    run = RunDir(run_dir)
    # Cached: the labels and the predictions read the examples in one order,
    # also from a test set that reshuffles on every pass (shuffle's default).
    test_ds = (data or _scored_data(run, config))[1].cache()
    labels, sample_weight = _targets(test_ds)
    # The store is read once, by from_store: the members' predictions and
    # the weight-space diagnostics both come from the ensemble.
    ensemble = PosteriorEnsemble.from_store(stores)
    # Chain by chain; log-probabilities, whose NLL is exact where p̄ underflows.
    members = ensemble.predict_members(test_ds, log_probabilities=True)
    num_samples = len(members)
    chain_ends = np.cumsum([len(s) for s in stores])[:-1]
    # Weight space is the weights that vary: one held once (a frozen
    # backbone's) would be num_samples copies of constant columns.
    varying = [np.reshape(w, (num_samples, -1)) for w in ensemble.member_weights(held_once=False)]
    weights = np.concatenate(varying, axis=1) if varying else np.zeros((num_samples, 0))
    result = {"sampler": config.sampler, "temperature": config.temperature,
              "likelihood": ensemble.likelihood, "num_chains": len(stores),
              "num_samples": num_samples}
    if baseline:
        _check_baseline(baseline, result["likelihood"], labels, sample_weight, run_dir)
    if ensemble.likelihood == "gaussian":
        single, scores, curve, per_example = _gaussian_curve(members, labels, sample_weight)
        curve_metrics = (("rmse", "RMSE"), ("nll", "NLL (nats)"))
        result["reliability_plot"] = None
    else:
        log_members = members
        members = _member_probabilities(log_members, ensemble.likelihood)
        scored = metrics_lib.evaluate_members(members, labels, num_bins=num_bins,
                                              sample_weight=sample_weight,
                                              member_log_probs=log_members)
        single, scores, curve = scored["members"][-1], scored["ensemble"], scored[
            "metric_vs_num_samples"]
        curve_metrics = (("accuracy", "accuracy"), ("nll", "NLL (nats)"))
        per_example = metrics_lib.nll_per_example(metrics_lib.predictive_log_probs(log_members),
                                                  labels, log_probs=True)
        result["reliability_plot"] = plots.reliability_diagram(
            members.mean(axis=0), labels, run.reliability_plot, num_bins=num_bins,
            title=f"{config.sampler} ensemble ({counted(num_samples, 'sample')})",
            sample_weight=sample_weight)
    result.update({
        "single_sample": single,
        "ensemble": scores,
        "metric_vs_num_samples": curve,
        "rhat": chain_rhat(np.split(members, chain_ends), np.split(weights, chain_ends)),
        "samples_plot": plots.metric_vs_samples_plot(
            curve, run.samples_plot, metrics=curve_metrics,
            baseline=baseline and baseline["single_sample"], baseline_label="SGD (MAP)"),
    })
    if baseline:
        result["nll_vs_baseline"] = metrics_lib.paired_difference(
            per_example, baseline["nll_per_example"], sample_weight=sample_weight)
    run.write_json(run.metrics, result)
    result |= {"nll_per_example": per_example, "test_labels": labels,
               "test_weights": sample_weight}
    return result


def _member_probabilities(log_members, likelihood):
    """The members' probabilities [S, N, K] (p(y=1) [S, N, 1] for ``"bernoulli"``) of their
    log-probabilities [S, N, K] ([S, N, 2]: y=0, y=1)."""
    return np.exp(log_members[..., 1:] if likelihood == "bernoulli" else log_members)


def read_metrics(run_dir):
    """The ``metrics.json`` that :func:`evaluate` wrote into ``run_dir``.

    The file is strict JSON (:mod:`keras_bnn.runs.rundir`): a NaN (an
    undefined R-hat, of a single chain of fewer than 8 draws) is ``null``
    there and an infinity (the R-hat of chains that each stay constant at
    different values) the string ``"Infinity"``, read back here as NaN and
    inf, so that the result is :func:`evaluate`'s (without its arrays),
    which :func:`keras_bnn.console.print_rhat` and
    :func:`keras_bnn.diagnostics.convergence_verdict` read. A file written
    before 2026-11-29 (``NaN`` and ``Infinity`` literals) reads the same;
    one written before 2026-11-30 has its infinities as ``null``, read as
    NaN.

    Args:
        run_dir: an evaluated run directory.

    Returns:
        dict: the metrics, numbers as floats (NaN and ±inf where not finite); ``rhat``
        None when the chains had too few draws.

    Raises:
        FileNotFoundError: if ``run_dir`` holds no ``metrics.json``.
    """
    path = RunDir(run_dir).metrics
    if not os.path.exists(path):
        raise FileNotFoundError(f"`run_dir` {run_dir!r} holds no metrics.json: evaluate it "
                                "first (keras-bnn evaluate --run-dir, kb.runs.evaluate).")
    result = RunDir.read_json(path)
    return result | {key: json_numbers(result[key]) for key in _NUMBERS
                     if result.get(key) is not None}


def _targets(test_ds):
    """The labels and sample weights (None unweighted) of the test set.

    Raises:
        ValueError: naming ``data``, for a test set of other elements than
            (inputs, labels) or (inputs, labels, sample_weight) batches, or
            for weights of another shape than the labels' [N] (or [N, 1]),
            negative, not finite or all 0.
    """
    labels, sample_weight = dataset_targets(test_ds, name="data", owner=None)
    if sample_weight is None:
        return labels, None
    try:  # the metrics' checks; Keras' [N, 1] as [N]
        return labels, take_weights(sample_weight, positions.select(labels.shape[:1],
                                                                    name="labels"))
    except ValueError as error:
        raise ValueError(f"`data`: its test set's sample weights are refused: {error}") from None


def _scored_data(run, config):
    """The data :func:`evaluate` scores a run on when it is given none.

    The test split of ``config.dataset``, except for a run of
    :func:`keras_bnn.runs.sweep` on a validation split of a dataset's
    training set (its :attr:`RunDir.validation_split` file records the
    split): that split, rebuilt by :func:`keras_bnn.runs.build.split_data`,
    whose held-out rows the sweep scored the run on (``sweep.csv``).

    Args:
        run: the run's :class:`RunDir`.
        config: its :class:`keras_bnn.runs.RunConfig`.

    Returns:
        ``(train_ds, test_ds, info)``.

    Raises:
        ValueError: for a run on in-memory arrays (:func:`load_data`).
    """
    check_data_files(run, config)  # "npy": the files the run was trained on
    if config.dataset == ARRAYS or not os.path.exists(run.validation_split):
        return load_data(config)
    return split_data(config, run.read_json(run.validation_split))


def _check_baseline(baseline, likelihood, labels, sample_weight, run_dir):
    """Refuses a ``baseline`` scored on another test set or task than ``run_dir``.

    Raises:
        ValueError: for another likelihood, number of test examples,
            sequence of test labels or of test weights (an unweighted
            baseline for a weighted test set, or the reverse).
    """
    which = "the baseline (`baseline=`, --baseline-run-dir)"
    if baseline["likelihood"] != likelihood:
        raise ValueError(f"{which} is a {baseline['likelihood']} model and {run_dir!r} a "
                         f"{likelihood} one: a paired comparison needs the same task.")
    theirs = baseline["test_labels"]
    if len(theirs) != len(labels):
        raise ValueError(f"{which} was scored on {len(theirs)} test examples and {run_dir!r} "
                         f"on {len(labels)}: a paired comparison needs the same test set.")
    if not np.array_equal(theirs, labels):
        raise ValueError(f"{which} was scored on other test labels than {run_dir!r}: a "
                         "paired comparison needs the same test set, in the same order.")
    their_weights = baseline.get("test_weights")  # none in a result of before 2026-11-30
    if (their_weights is None) != (sample_weight is None) or (
            sample_weight is not None and not np.array_equal(their_weights, sample_weight)):
        raise ValueError(f"{which} was scored on other test weights than {run_dir!r} (one "
                         "weighted, the other not, or other weights): a paired comparison "
                         "needs the same weighted test set, in the same order.")


def evaluate_sampled(run_dir, data=None):
    """:func:`evaluate` for a run that collected samples, None for one that did not.

    A run whose chain never reached equilibrium within its length collected
    no sample (it warned :class:`keras_bnn.NotConvergedWarning`, and its
    ``collection.json`` says why): there is no predictive to score. The
    prior selection and the sweeps skip such runs instead of stopping.

    Args:
        run_dir: a directory written by :func:`keras_bnn.runs.train`.
        data: as for :func:`evaluate`.

    Returns:
        :func:`evaluate`'s dict, or None.
    """
    if not len(RunDir(run_dir).store()):
        return None
    return evaluate(run_dir, data=data)


def chain_rhat(chain_probs, chain_weights):
    """R-hat and ESS across chains in function and weight space.

    :func:`keras_bnn.diagnostics.convergence_summary` of the members'
    predictions on the test inputs (``"function"``: class probabilities
    p(k|x_n), or the raw ``[μ, log σ²]`` of a Gaussian head)
    and of every weight that varies (``"weight"``), over the last S draws of each chain
    (S the shortest chain). With one chain its halves are compared.

    Args:
        chain_probs: per chain, the ``[S_k, N, units]`` predictions of its samples.
        chain_weights: per chain, the ``[S_k, D]`` flattened weights of its
            samples (those that vary between samples, in ``model.weights``
            order: see :func:`keras_bnn.stored_chains.chain_weights`).

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
        run_dir: a directory written by :func:`keras_bnn.runs.train` or
            :func:`keras_bnn.runs.run_chains`.
        model_dir: ``saved_models/<name>``; the version directory goes inside.
        version: integer version, or None for the next free one.

    Returns:
        The path of the written version directory.

    Raises:
        OSError: if the version cannot be written (a full disk): the message
            names ``model_dir``; no version is published, those before are
            kept.
        See also :func:`keras_bnn.export.export_ensemble` and :func:`load_chains`.
    """
    import tensorflow as tf  # noqa: PLC0415 - the export is TensorFlow's, on every backend

    _, stores = load_chains(run_dir)
    ensemble = PosteriorEnsemble.from_store(stores)
    try:
        return ensemble.export(model_dir, version=version)
    except (tf.errors.ResourceExhaustedError, tf.errors.OutOfRangeError,
            tf.errors.DataLossError) as error:  # how TensorFlow reports a full disk
        raise OSError(errno.ENOSPC, f"cannot write the export into {model_dir} "
                      f"({type(error).__name__}: {error.message}); no version was "
                      "published and the versions before are kept") from None
