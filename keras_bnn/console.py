"""What the ``keras-bnn`` commands print, and their quiet import of Keras.

The command line (:mod:`keras_bnn.cli`) parses arguments and calls
:mod:`keras_bnn.runs`; this module turns the results into text: aligned
tables (:func:`format_table`), a training run's report
(:func:`print_train_result`), what an evaluation scored
(:func:`print_scored`), its comparison with a baseline
(:func:`print_vs_baseline`) and R-hat verdict (:func:`print_rhat`), a
sweep's table (:func:`print_sweep`). :func:`import_keras_quietly` imports
Keras with TensorFlow's start-up log hidden,
:func:`library_warnings_as_lines` prints the package's warnings without
a source location, and :func:`one_line` an error's message as one line.
"""

import contextlib
import logging
import os
import sys
import tempfile
import warnings

_METRICS = ("accuracy", "nll", "ece", "brier")
_REGRESSION_METRICS = ("nll", "rmse", "coverage_0.5", "coverage_0.9", "coverage_0.95")
_RHAT_COLUMNS = ("space", "median", "max", "frac_below_1.01", "frac_below_1.1",
                 "ess_bulk_min", "ess_tail_min")


def format_table(rows, columns):
    """Formats ``rows`` as an aligned text table.

    Args:
        rows: dicts holding every key of ``columns``; floats print with 4
            decimals, or with 4 significant digits where 4 decimals would
            show a nonzero value as 0 (a step size of 2.56e-06), other
            values with ``str``.
        columns: the keys to show, in order (the header line).

    Returns:
        str: the header, a rule of dashes, and one line per row.
    """
    cells = [[str(c) for c in columns]] + [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    lines = ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cell(value):
    """A value of :func:`format_table` as text: four decimals, or four significant digits
    below 10⁻³ (where four decimals leave one: a temperature band at T = 10⁻⁴)."""
    if not isinstance(value, float):
        return str(value)
    return f"{value:.3e}" if 0 < abs(value) < 1e-3 else f"{value:.4f}"


def metric_columns(result):
    """The metric columns of an evaluation ``result``: regression or classification."""
    return _REGRESSION_METRICS if result["likelihood"] == "gaussian" else _METRICS


def result_rows(result, label):
    """The last sample's and the ensemble's rows of an evaluation ``result``."""
    return [
        dict(model=f"{label} (last sample)", **result["single_sample"]),
        dict(model=f"{label} ensemble of {result['num_samples']}", **result["ensemble"]),
    ]


def print_rhat(result):
    """Prints R-hat and ESS across chains, and Vehtari et al.'s verdict on them.

    Args:
        result: an evaluation result of :func:`keras_bnn.runs.evaluate`;
            nothing is printed when it holds no ``rhat``.
    """
    rhat = result.get("rhat")
    if not rhat:
        return
    from keras_bnn import diagnostics  # Keras is imported: the result came from `runs`
    from keras_bnn.validation import counted

    chains, draws = result["num_chains"], rhat["function"]["num_draws"]
    print(f"\nrank-normalised split R-hat and ESS across {counted(chains, 'chain')} x "
          f"{counted(draws, 'draw')} (Vehtari et al. 2021):")
    rows = [dict(space=space, **{k: rhat[space][k] for k in _RHAT_COLUMNS[1:]})
            for space in ("function", "weight")]
    print(format_table(rows, _RHAT_COLUMNS))
    print(f"Vehtari et al. (2021) ask R-hat < 1.01 and bulk and tail ESS ≥ "
          f"{diagnostics.ESS_PER_CHAIN} per chain:")
    predictions = ("predicted means and log-variances" if result["likelihood"] == "gaussian"
                   else "predicted probabilities")
    function = diagnostics.convergence_verdict(rhat["function"], predictions)
    print(f"function space: {function.reason}")
    print(f"  weight space: {diagnostics.convergence_verdict(rhat['weight'], 'weights').reason}")
    if not function.converged:
        more = "" if result["num_chains"] >= 4 else " or run more chains (--chains 4)"
        print(f"  the ensemble averages draws that have not mixed: train longer (--epochs, "
              f"--max-epochs){more};\n  weight-space R-hat stays high for networks "
              "(permutation symmetries): judge convergence in function space.")


def print_prior_selection(output_dir):
    """Prints the prior a ``prior="auto"`` run in ``output_dir`` chose, and why (if it chose)."""
    from keras_bnn.runs import RunDir

    path = RunDir(output_dir).prior_selection
    if os.path.exists(path):
        chosen = RunDir.read_json(path)
        print(f"\nprior {chosen['prior']}({chosen['prior_scale']:g}) (prior auto): "
              f"{chosen['reason']}")


def print_train_result(result, output_dir):
    """Prints a training run's report.

    The last epoch's logs, the per-variable kinetic temperatures,
    gradient-noise ratios with their step factors and configurational
    temperatures, the noisiest directions' ratio, the chosen prior, the step
    size and when and why collection began.

    Args:
        result: the :class:`keras_bnn.runs.TrainResult` of
            :func:`keras_bnn.runs.train`.
        output_dir: the run's directory.
    """
    logs = result.history.history
    row = dict(samples=len(result.store), **{key: logs[key][-1] for key in sorted(logs)})
    print(format_table([row], list(row)))
    if result.kinetic_temperatures:
        print("\nkinetic temperature per variable (99% chi-squared band):")
        print(format_table(result.kinetic_temperatures,
                           ["name", "d", "t_kin", "lo", "hi", "inside_band"]))
    if result.gradient_noise:
        print("\ngradient-noise ratio per variable (minibatch over injected noise variance; "
              "biased above 0.1) and its step factor (step = step size × factor):")
        print(format_table(result.gradient_noise,
                           ["name", "d", "ratio", "above_limit", "step_factor"]))
    _print_directional_noise(result.directional_noise)
    collection = result.collection
    if collection["variable_temperatures"]:
        print("\nconfigurational temperature per variable, mean over the last epoch's steps "
              "(T at equilibrium; far below T: still leaving the initialisation):")
        print(format_table(collection["variable_temperatures"], ["name", "d", "t_conf"]))
    print_prior_selection(output_dir)
    if collection["step_size"] is not None:
        from keras_bnn.validation import counted  # numpy: Keras is imported already

        warmup, steps = collection["warmup_steps"], collection["steps"]
        chosen = ("given" if not warmup else f"chosen by a warm-up of {counted(warmup, 'step')}"
                  if steps >= warmup else f"not chosen: the run ended at step {steps}, inside "
                  f"its warm-up of {counted(warmup, 'step')}; this is the warm-up's current "
                  "value")
        start = collection["start_epoch"]
        print(f"\nstep size {collection['step_size']:.4g} ({chosen}); "
              + ("no collection" if start is None else f"collection from epoch {start}")
              + f": {collection['reason']}")
        if collection["lengthened"]:
            print(f"run length: {collection['lengthened']}")
        _print_remeasurement(collection["remeasurement"])
        _print_noise_lowerings(collection.get("noise_lowerings"))  # older runs have none
        drift = collection.get("drift")  # older runs have none
        if drift and drift["drifting"]:
            print(f"collected epochs drifted (NotConvergedWarning): {drift['reason']}")
    print(f"run directory: {output_dir}")


def _print_directional_noise(report):
    """The noisiest directions' gradient-noise ratio, if the run has one."""
    if not report:
        return
    from keras_bnn.samplers import NOISE_RATIO_LIMIT

    top = ", ".join(f"{ratio:.3g}" for ratio in report["top"])
    verdict = (f"above {NOISE_RATIO_LIMIT:g}: along these directions the minibatch noise is "
               "not small against the injected noise (README, 'Noise by direction')"
               if report["above_limit"] else f"at most {NOISE_RATIO_LIMIT:g}")
    print(f"\ngradient-noise ratio of the noisiest directions of weight space (per-example "
          f"gradients of {report['num_examples']} training examples at the final weights, "
          f"whose mean over all parameters is {report['mean']:.3g}; the table above is the "
          f"sampler's running estimate over the chain): {top}; {verdict}")


def _print_remeasurement(remeasurement):
    """One line on the step factors' second noise measurement, if there was one."""
    if not remeasurement:
        return
    from keras_bnn.samplers.warmup import REMEASURE_TOLERANCE

    lowered = remeasurement["lowered"]
    what = ("; ".join(f"{name} {old:.3g} -> {new:.3g} (ratio {remeasurement['ratios'][name]:.3g})"
                      for name, (old, new) in lowered.items())
            if lowered else f"none more than {REMEASURE_TOLERANCE - 1:.0%} above the warm-up's "
                            "target")
    raised = remeasurement.get("raised")
    if raised:
        what = (f"none; the step size h raised {raised[0]:.3g} -> {raised[1]:.3g} (the "
                "averaged noise allows at least twice h; factors set again)")
    print(f"step factors re-measured from the first equilibrium (ratios averaged over epochs "
          f"{remeasurement['first_epoch']}-{remeasurement['epoch']}), lowered: {what}")


def _print_noise_lowerings(lowerings):
    """One line per lowering of every step factor at equilibrium, if there was one."""
    from keras_bnn.samplers import NOISE_RATIO_LIMIT

    for lowering in lowerings or ():
        noisy = ", ".join(f"{name} {ratio:.3g}" for name, ratio in lowering["ratios"].items()
                          if ratio > NOISE_RATIO_LIMIT)
        old, new = next(iter(lowering["lowered"].values()))
        print(f"step factors lowered at epoch {lowering['epoch']}, every one x{new / old:.3g}: "
              f"gradient-noise ratio over the equilibrium window above {NOISE_RATIO_LIMIT:g} "
              f"({noisy})")


def print_scored(run_dir, result):
    """Prints what an evaluation of ``run_dir`` scored where it is not a
    finished run on the test split: a sweep's run is scored on its
    validation split, and a run that has not finished (still training, or
    stopped) on the samples it holds now.

    Args:
        run_dir: the evaluated run directory.
        result: its :func:`keras_bnn.runs.evaluate` result.
    """
    from keras_bnn.runs import RunDir
    from keras_bnn.validation import counted  # numpy: Keras is imported already

    run = RunDir(run_dir)
    if os.path.exists(run.validation_split):
        print(f"scored on the sweep's validation split ({len(result['test_labels'])} held-out "
              f"training rows, its {os.path.basename(run.validation_split)}), not on the "
              "test split")
    unfinished = [chain.path for chain in run.chains() or [run] if not chain.complete]
    if unfinished:
        print(f"not finished (still training, or stopped: keras-bnn train --resume continues "
              f"it): {', '.join(unfinished)}; scored on the "
              f"{counted(result['num_samples'], 'sample')} held now")


def print_vs_baseline(result):
    """Prints the ensemble's test NLL minus the baseline's, paired, with its SE.

    Args:
        result: an evaluation result; nothing is printed without its
            ``nll_vs_baseline`` (:func:`keras_bnn.metrics.paired_difference`).
    """
    if "nll_vs_baseline" not in result:
        return
    diff = result["nll_vs_baseline"]
    # <=: a run scored against itself (or its seeded rerun) has Δ̄ = SE = 0: no difference.
    verdict = ("no difference detectable at 2 SE" if abs(diff["mean"]) <= 2 * diff["se"]
               else "the ensemble is better" if diff["mean"] < 0 else "the baseline is better")
    print(f"ensemble NLL - baseline NLL = {diff['mean']:+.4f} ± {diff['se']:.4f} (SE, paired "
          f"over {diff['n']} test examples): {verdict}")
    print(f"  median per-example difference {diff['median']:+.4f}; the largest is test example "
          f"{diff['largest_index']}, {diff['largest']:+.3f} "
          f"(it adds {diff['largest_share']:+.4f} to the mean)")


def print_sweep(rows, param, output_dir):
    """Prints a sweep's table, the runs that collected no sample, and its plot's path.

    Args:
        rows: the rows of :func:`keras_bnn.runs.sweep`.
        param: the swept parameter.
        output_dir: the sweep's directory.
    """
    from keras_bnn.runs import RunDir

    metric = "ensemble_rmse" if rows and "ensemble_rmse" in rows[0] else "ensemble_accuracy"
    print(format_table(rows, [param, "seed", "num_samples", metric, "ensemble_nll",
                              "single_sample_nll"]))
    unsampled = [f"{param} {row[param]:g} seed {row['seed']}" for row in rows
                 if not row["num_samples"]]
    if unsampled:
        print(f"no sample (the chain did not reach equilibrium in the run's length; its "
              f"collection.json says why; give more --epochs or --max-epochs): "
              f"{', '.join(unsampled)}")
    print(f"plot: {RunDir(output_dir).sweep_plot}")


def one_line(error):
    """An exception's message as one line: its whitespace runs (line breaks
    of a long message) become single spaces, for a command's
    ``error: <message>`` line (the ``keras-bnn`` command and the examples).

    Args:
        error: the exception.

    Returns:
        str, empty when the exception has no message.
    """
    return " ".join(str(error).split())


@contextlib.contextmanager
def library_warnings_as_lines():
    """Prints the package's own warnings as ``keras-bnn: <Class>: <message>``.

    Python prints a warning after the file and line of the code that issued
    it, which for a callback's warning (``NotConvergedWarning`` at the end of
    ``fit``) is a line of Keras' callback list: meaningless to the user of a
    command. Inside this context a warning whose class is defined in
    ``keras_bnn`` prints as one line without the location; other warnings
    print as Python prints them. Only the format changes
    (``warnings.formatwarning``): filters, and tools that record warnings
    (``warnings.catch_warnings(record=True)``, pytest), are unaffected.
    """
    python_format = warnings.formatwarning

    def format_warning(message, category, filename, lineno, line=None):
        if category.__module__.split(".")[0] == "keras_bnn":
            return f"keras-bnn: {category.__name__}: {message}\n"
        return python_format(message, category, filename, lineno, line)

    warnings.formatwarning = format_warning
    try:
        yield
    finally:
        warnings.formatwarning = python_format


class RetracingFilter(logging.Filter):
    """Drops TensorFlow's "N out of the last M calls to … triggered tf.function
    retracing" warning.

    A ``keras-bnn`` command builds a Keras model for every run and candidate
    prior it trains or scores, and Keras traces each model's train and
    predict functions once, as it must (a posterior ensemble traces its own
    graph, :func:`keras_bnn.backend.predict_graph`, which is not counted). TensorFlow counts
    traces by the code of the traced function, which all these models share,
    and after five it warns of "creating @tf.function repeatedly in a loop":
    true of the command, not a cost of any one model (each is traced once).
    """

    def filter(self, record):
        return "triggered tf.function retracing" not in record.getMessage()


#: Whether :func:`import_keras_quietly` set ``TF_CPP_MIN_LOG_LEVEL`` (not the user).
_QUIET_SET = False


def child_environment(**overrides):
    """The environment for a ``keras-bnn`` command run as a child process.

    Leaves out the ``TF_CPP_MIN_LOG_LEVEL`` that :func:`import_keras_quietly`
    set here, so that the child hides TensorFlow's start-up log itself (a
    level already set reads as the user's wish to see the log, and the
    first lines print at any level); a level the user set is kept.

    Args:
        **overrides: variables to set in the child (``KERAS_BACKEND=...``).

    Returns:
        dict.
    """
    environment = dict(os.environ, **overrides)
    if _QUIET_SET:
        environment.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return environment


def import_keras_quietly():
    """Imports Keras (and so its backend: TensorFlow, or JAX under
    ``KERAS_BACKEND=jax``) with TensorFlow's C++ start-up log (oneDNN, CUDA,
    CPU features) hidden. Under another backend TensorFlow is imported here
    too, where installed: the commands' ``tf.data`` pipelines need it.

    Nothing is hidden when the user set ``TF_CPP_MIN_LOG_LEVEL`` or Keras is
    already imported; if the import fails, the hidden log is shown. The
    retracing warning is hidden in any case (:class:`RetracingFilter`).
    """
    logger = logging.getLogger("tensorflow")  # TensorFlow's Python log; no import
    if not any(isinstance(f, RetracingFilter) for f in logger.filters):
        logger.addFilter(RetracingFilter())
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ or "keras" in sys.modules:
        return
    global _QUIET_SET
    os.environ["TF_CPP_MIN_LOG_LEVEL"], _QUIET_SET = "3", True
    # The first messages come before absl's logging starts, whatever the
    # level: point file descriptor 2 elsewhere while they are written.
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 2)
        try:
            import keras
            if keras.backend.backend() != "tensorflow":
                try:  # the runs' tf.data pipelines import it later, when the log would show
                    import tensorflow  # noqa: F401
                except ImportError:
                    pass  # JAX alone: the command that needs TensorFlow says so
        except BaseException:
            os.dup2(saved, 2)
            log.seek(0)
            sys.stderr.write(log.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
