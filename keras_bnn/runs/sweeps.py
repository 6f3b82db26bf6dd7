"""Sweeps: one run per (value, seed) of the temperature or the prior scale.

Each run is :func:`keras_bnn.runs.train` then :func:`keras_bnn.runs.evaluate`
in ``<output_dir>/<param>=<value>/seed=<seed>``
(:meth:`keras_bnn.runs.RunDir.sweep_run`); the sweep's table and plot go to
the root.
"""

import csv
import dataclasses
import io
import math
import os

from keras_bnn import plots
from keras_bnn.datasets.npy_files import check_arrays
from keras_bnn.durable import atomic_write
from keras_bnn.runs.build import split_data
from keras_bnn.runs.config import ARRAYS, RunConfig, check_sweep
from keras_bnn.runs.evaluation import evaluate_sampled
from keras_bnn.runs.rundir import RunDir
from keras_bnn.runs.training import train


def sweep(param, values, x=None, y=None, dataset=None, config=None, seeds=(0,),
          validation_split=0.2, verbose=0):
    """Trains and evaluates one run per (value, seed): the cold-posterior plot.

    Selecting a prior scale or temperature on the test set would report an
    optimistic test score, so by default each run trains on a fraction
    ``1 − validation_split`` of the training data and is evaluated on the
    rest (a fixed split: the last ``round(n·validation_split)`` examples of
    a permutation drawn with seed 0; :func:`split_data`). Writes
    ``<output_dir>/<param>=<value>/seed=<seed>/`` runs (each records its
    split, so that :func:`keras_bnn.runs.evaluate` scores it on the same
    held-out rows), ``sweep.csv`` (one row per run) and ``sweep.png``
    (ensemble and single-sample metrics against the value, mean ± standard
    deviation over the seeds).

    Args:
        param: one of :data:`keras_bnn.runs.SWEEP_PARAMS`: ``"temperature"`` (T) or
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
        List of row dicts: ``param``'s value, ``seed``, ``num_samples`` (the
        ensemble's size), then ``single_sample_*`` and ``ensemble_*``
        metrics (accuracy/NLL/ECE/Brier, or NLL/RMSE/coverage for
        regression). A run whose chain never reached equilibrium collected
        no sample (it warned :class:`keras_bnn.NotConvergedWarning`): its
        row has ``num_samples`` 0 and NaN metrics, and the sweep goes on.

    Raises:
        ValueError: for an unknown ``param``, empty or non-positive values,
            values that share a run directory, no seeds or a seed twice
            (:func:`keras_bnn.runs.check_sweep`), both arrays and ``dataset``, ``x`` and ``y`` of
            different lengths (:func:`keras_bnn.runs.check_arrays`), a
            validation split outside (0, 1), or when no run collected a sample.
        FileExistsError: if ``config.output_dir`` holds a sweep, one of
            its runs (a sweep stopped part-way), or a run.
    """
    param, values, seeds = check_sweep(param, values, seeds, validation_split)
    if (x is None) != (y is None) or (x is not None and dataset is not None):
        raise ValueError("pass either both `x` and `y`, or a `dataset` name, not both.")
    if x is not None:
        x, y = check_arrays(x, y)
    config = config or RunConfig()
    if dataset is not None:
        config = dataclasses.replace(config, dataset=dataset)
    if x is not None:
        config = dataclasses.replace(config, dataset=ARRAYS)
    config.validate()
    if param == "prior_scale" and config.prior == "auto":
        raise ValueError("a prior_scale sweep varies the scale of one prior: set `prior` in "
                         "`config` (he_normal, glorot_normal or student_t), not 'auto'.")
    split = None
    if validation_split is not None:
        split = {"validation_split": validation_split, "data_seed": config.seed}
    elif x is not None:
        raise ValueError("a sweep on arrays needs a `validation_split` in (0, 1).")
    root = RunDir(config.output_dir)
    if os.path.exists(root.sweep_table):
        raise FileExistsError(f"`output_dir` {root.path!r} holds a sweep already "
                              f"({os.path.basename(root.sweep_table)}): choose a new directory.")
    if root.started or root.chains():
        raise FileExistsError(f"`output_dir` {root.path!r} holds a run (its config.json), not "
                              "a sweep: choose a new directory.")
    rows = []
    for value in values:
        for seed in seeds:
            run_dir = root.sweep_run(param, value, seed)
            run = dataclasses.replace(config, seed=seed, **{param: value},
                                      output_dir=run_dir.path)
            data = None if split is None else split_data(run, split, x, y)
            if run_dir.started:  # a sweep stopped part-way
                raise FileExistsError(f"the sweep's run {run.output_dir!r} exists already (a "
                                      "sweep into this directory was stopped part-way): "
                                      "choose a new `output_dir`.")
            if split is not None:  # what keras_bnn.runs.evaluate scores this run on
                run_dir.write_json(run_dir.validation_split,
                                   dict(split, num_validation=data[2]["num_test"]))
            train(run, verbose=verbose, data=data)
            row = {param: value, "seed": seed, "num_samples": 0}
            result = evaluate_sampled(run.output_dir, data=data)
            if result is not None:
                row["num_samples"] = result["num_samples"]
                for part in ("single_sample", "ensemble"):
                    row.update({f"{part}_{k}": v for k, v in result[part].items()})
            rows.append(row)
    rows = _fill_unsampled(rows, root)
    curve = "rmse" if "ensemble_rmse" in rows[0] else "accuracy"
    plots.sweep_plot(rows, root.sweep_plot, param=param,
                     metrics=((curve, curve.upper() if curve == "rmse" else curve),
                              ("nll", "NLL (nats)")))
    _write_csv(rows, root.sweep_table)
    return rows


def _fill_unsampled(rows, root):
    """The rows with NaN metrics for the runs that collected no sample.

    Raises:
        ValueError: when no run collected one.
    """
    sampled = [row for row in rows if row["num_samples"]]
    if not sampled:
        raise ValueError(
            f"no run of the sweep in {root.path!r} collected a sample: none reached "
            "equilibrium within its length (each run's collection.json says why); give the "
            "runs more epochs (`epochs`, `max_epochs`).")
    return [{key: row.get(key, math.nan) for key in sampled[0]} for row in rows]


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
