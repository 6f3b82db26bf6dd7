"""The ``keras-bnn`` command line: train, evaluate, export, sweep, sweep-temperature, demo.

Bad input, a run directory in use and a full disk end with exit code 2 and
one line ``keras-bnn: error: <reason>`` on stderr, never a traceback.
``--help`` and argument errors answer without importing Keras or TensorFlow:
each command checks its arguments and the run configuration
(:mod:`keras_bnn.runs.config`) first and imports them after, with
TensorFlow's C++ start-up log silenced unless ``TF_CPP_MIN_LOG_LEVEL`` is set
(:func:`keras_bnn.console.import_keras_quietly`; what the commands print is
:mod:`keras_bnn.console`'s too, and their arguments and help
:mod:`keras_bnn.cli_parser`'s). Under
``KERAS_BACKEND=jax`` this module imports no TensorFlow itself, except that
``export`` (a TensorFlow SavedModel) runs again as a TensorFlow process.
"""

import dataclasses
import os
import subprocess
import sys
import time

from keras_bnn import cli_parser, console
from keras_bnn.cli_parser import flag_values, int_at_least
from keras_bnn.durable import InUseError

__all__ = ["build_parser", "int_at_least", "main"]


def _config_from(args, arrays=False):
    """The checked RunConfig of ``--config`` and the flags (flags override).

    Args:
        args: the parsed arguments.
        arrays: the command trains on ``--x``/``--y`` (sweep), not on the
            config's dataset.

    Raises:
        ValueError: for a config :meth:`RunConfig.validate` refuses, dataset
            ``arrays``, or a synthetic task's size (``--num-train``,
            ``--num-test``, or in ``--config``) for another dataset, which
            would ignore it; ``--data-dir`` (or in ``--config``) for data
            that reads no files there (the synthetic task, a bundled
            dataset, ``--x``/``--y``), which would ignore it too (each
            :class:`~keras_bnn.runs.config.DataFieldRefused`, named as the
            command line names it); or ``--burn-in-epochs``
            or ``--collect-every`` (or in ``--config``) for a sampler that
            collects no sample (sgd), which would ignore them.
    """
    from keras_bnn.runs.config import (ARRAYS, DATASETS, SAMPLERS, CollectionRefused,
                                       DataFieldRefused, RunConfig)

    flags = flag_values(args)
    try:
        if args.config:
            config = RunConfig.from_json(args.config, flags, argument="--config")
        else:
            config = RunConfig.from_dict(flags)
    except CollectionRefused as error:  # named as the command line names it
        raise CollectionRefused(_named(error.field, flags), error.sampler,
                                command_line=True) from None
    except DataFieldRefused as error:
        raise DataFieldRefused(error.field, error.data, flag=_named(error.field, flags),
                               data_named="the --x/--y arrays" if arrays else None) from None
    if config.dataset == ARRAYS:  # the runs API's name for arrays passed in memory
        raise ValueError(f"--dataset must be one of {', '.join(DATASETS)} ('arrays' is the "
                         "Python API's name for arrays passed in memory; on the command line "
                         "--dataset npy --data-dir D reads your arrays from .npy files)")
    # RunConfig refuses these for a dataset that ignores them; --x/--y ignore them too.
    for field in ("num_train", "num_test", "data_dir"):
        if arrays and (field in flags or getattr(config, field) is not None):
            raise DataFieldRefused(field, ARRAYS, flag=_named(field, flags),
                                   data_named="the --x/--y arrays")
    collection = _fields_set(flags, config, burn_in_epochs=(None, "auto"), collect_every=(None,))
    if collection and not SAMPLERS[config.sampler]:  # --burn-in-epochs auto
        raise CollectionRefused(collection[0], config.sampler, command_line=True)
    return config


def _fields_set(flags, config, **unset):
    """The RunConfig fields named in ``unset`` that are set, as errors name them:
    a field's flag if given, else ``"`field` in --config"`` if ``config`` holds
    a value other than the field's ``unset`` values."""
    return [_named(field, flags) for field, values in unset.items()
            if field in flags or getattr(config, field) not in values]


def _named(field, flags):
    """A RunConfig field as errors name it: its flag if given, else in --config."""
    return f"--{field.replace('_', '-')}" if field in flags else f"`{field}` in --config"


def _runs():
    """:mod:`keras_bnn.runs` with Keras imported: call once the arguments are checked."""
    console.import_keras_quietly()
    from keras_bnn import runs

    return runs


def _cmd_train_chains(args, config):
    chains = _runs().run_chains(config, args.chains, verbose=args.verbose,
                                processes=args.processes, resume=args.resume)
    rows = [dict(chain=k, samples=len(store), epochs=len(logs.get("loss", [])),
                 **{key: logs[key][-1] for key in sorted(logs)})
            for k, (store, logs) in enumerate(chains)]
    print(console.format_table(rows, list(rows[0])))
    print(f"run directory: {config.output_dir}")


def _cmd_train(args):
    from keras_bnn.runs import config as config_lib
    from keras_bnn.validation import check_int

    check_int(args.chains, "--chains", 1)
    check_int(args.processes, "--processes", 1)
    if args.processes != 1 and args.chains == 1:
        raise ValueError("--processes runs chains at once: it needs --chains K (K >= 2)")
    if args.resume:
        given = flag_values(args)
        if args.config:
            given["config"] = args.config  # refused by resume_config
        config = config_lib.resume_config(args.output_dir, given, args.chains)
    else:
        config = _config_from(args)
    args.run_dir = config.output_dir  # what a Ctrl-C's advice reads (main)
    if args.chains != 1:
        return _cmd_train_chains(args, config)
    result = _runs().train(config, verbose=args.verbose, resume=args.resume)
    console.print_train_result(result, config.output_dir)


def _check_run_dir(path, flag):
    """Refuses, before Keras is imported, a directory that holds no run."""
    from keras_bnn.runs.config import read_config

    read_config(path, flag)


def _cmd_evaluate(args):
    from keras_bnn.validation import check_int

    check_int(args.num_bins, "--num-bins", 1)
    _check_run_dir(args.run_dir, "--run-dir")
    if args.baseline_run_dir:
        _check_run_dir(args.baseline_run_dir, "--baseline-run-dir")
    runs = _runs()
    baseline = None
    if args.baseline_run_dir:
        try:
            baseline = runs.evaluate(args.baseline_run_dir, num_bins=args.num_bins)
        except (FileNotFoundError, ValueError) as error:  # it names `run_dir`: say which
            raise type(error)(f"--baseline-run-dir: {error}") from None
    result = runs.evaluate(args.run_dir, num_bins=args.num_bins, baseline=baseline)
    rows = console.result_rows(result, result["sampler"])
    if baseline:
        rows.insert(0, dict(model=f"{baseline['sampler']} baseline", **baseline["single_sample"]))
    print(console.format_table(rows, ["model", *console.metric_columns(result)]))
    console.print_scored(args.run_dir, result)
    console.print_vs_baseline(result)
    console.print_rhat(result)
    plots = (result["reliability_plot"], result["samples_plot"])
    print(f"plots: {', '.join(p for p in plots if p)}")


def _cmd_export(args):
    from keras_bnn.validation import check_int

    if args.version is not None:
        check_int(args.version, "--version", 1)
    _check_run_dir(args.run_dir, "--run-dir")
    runs = _runs()
    import keras

    from keras_bnn.export import check_model_dir

    def named_as_flag(error):  # the Python API's errors name `model_dir`
        return ValueError(str(error).replace("`model_dir`", "--export-dir"))

    try:  # before the run is read
        check_model_dir(args.export_dir)
    except ValueError as error:
        raise named_as_flag(error) from None
    if keras.backend.backend() != "tensorflow":
        # A SavedModel is TensorFlow's: the stored samples are backend-independent,
        # so the same command runs again under TensorFlow.
        command = [sys.executable, "-m", "keras_bnn.cli", "export", "--run-dir", args.run_dir,
                   "--export-dir", args.export_dir]
        if args.version is not None:
            command += ["--version", str(args.version)]
        return subprocess.run(command, env=console.child_environment(KERAS_BACKEND="tensorflow"),
                              check=False).returncode
    try:  # e.g. another signature than the served version's
        path = runs.export(args.run_dir, args.export_dir, args.version)
    except ValueError as error:
        raise named_as_flag(error) from None
    print(f"exported: {path}")
    return 0


def _numbers(text, flag, kind=float):
    try:
        return [kind(t) for t in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} must be comma-separated numbers; got {text!r}") from None


def _refuse_swept(args, swept, why):
    """Refuses a flag that sets what the sweep varies (the sweep would override it)."""
    given = sorted(set(flag_values(args)) & set(swept))
    if given:
        raise ValueError(f"--{given[0].replace('_', '-')} is set by the sweep ({why}): drop it")


def _cmd_sweep_temperature(args):
    from keras_bnn.runs.config import SAMPLERS, check_sweep

    _refuse_swept(args, ["temperature"], "--temperatures")
    config = _config_from(args)
    if not SAMPLERS[config.sampler]:
        raise ValueError(f"sweep-temperature needs a sampler: --sampler {config.sampler} has no "
                         "temperature")
    _, temperatures, _ = check_sweep(
        "temperature", _numbers(args.temperatures, "--temperatures"), [config.seed], None,
        names=("param", "--temperatures", "--seed"))
    rows = _runs().sweep_temperature(config, temperatures, verbose=args.verbose)
    console.print_sweep(rows, "temperature", config.output_dir)


def _cmd_sweep(args):
    from keras_bnn.datasets.npy_files import check_arrays, read_npy
    from keras_bnn.runs.config import check_sweep

    if not 0 <= args.validation_split < 1:
        raise ValueError("--validation-split must lie in [0, 1) (0: score on the test split); "
                         f"got {args.validation_split!r}")
    if (args.x is None) != (args.y is None):
        raise ValueError("--x and --y go together (two .npy files: inputs and labels)")
    if args.x is not None and args.dataset is not None:
        raise ValueError("--dataset and --x/--y name two datasets: pass one of them")
    _refuse_swept(args, [args.param, "seed"], f"--param {args.param} --values, --seeds")
    arrays = {}
    if args.x is not None:
        x, y = check_arrays(read_npy(args.x, "--x"), read_npy(args.y, "--y"),
                            names=("--x", "--y"))
        arrays = {"x": x, "y": y}
    split = None if args.validation_split == 0 else args.validation_split
    config = _config_from(args, arrays=bool(arrays))
    param, values, seeds = check_sweep(args.param, _numbers(args.values, "--values"),
                                       _numbers(args.seeds, "--seeds", int), split,
                                       names=("--param", "--values", "--seeds"))
    runs = _runs()
    rows = runs.sweep(param, values, config=config, seeds=seeds, validation_split=split,
                      verbose=args.verbose, **arrays)
    console.print_sweep(rows, param, config.output_dir)


def _cmd_demo(args):
    from keras_bnn.datasets.bundled import BUNDLED
    from keras_bnn.runs.config import RunConfig

    if args.dataset not in ("synthetic", *BUNDLED):  # demo has no --data-dir
        raise ValueError(f"--dataset must be one of synthetic, {', '.join(BUNDLED)} for demo "
                         f"(a bundled or synthetic dataset; train takes the others); got "
                         f"{args.dataset!r}")
    root = os.path.join(args.output_dir, time.strftime("run-%Y%m%d-%H%M%S"))
    base = RunConfig(dataset=args.dataset, seed=args.seed)
    if args.epochs is not None:
        base = dataclasses.replace(base, epochs=args.epochs)
    configs = [dataclasses.replace(base, sampler=sampler,
                                   output_dir=os.path.join(root, sampler)).validate()
               for sampler in ("sgd", "atmc")]
    runs = _runs()
    rows, baseline = [], None
    for config in configs:
        length = f"{config.epochs} epochs" if config.epochs else "the default length"
        print(f"== training {config.sampler} on {config.dataset} ({length})")
        trained = runs.train(config, verbose=args.verbose)
        console.print_prior_selection(config.output_dir)
        if not len(trained.store):  # evaluate's advice names train's flags, not demo's
            raise ValueError(f"the {config.sampler} run collected no sample in {length}: its "
                             "chain did not reach equilibrium (its collection.json in "
                             f"{config.output_dir} says why); give demo more --epochs, or "
                             "leave --epochs unset for the default length")
        result = runs.evaluate(config.output_dir, baseline=baseline)
        if config.sampler == "sgd":
            baseline = result
            rows.append(dict(model="SGD (MAP baseline)", **baseline["single_sample"]))
        else:
            rows += console.result_rows(result, "ATMC")
    print()
    print(console.format_table(rows, ["model", *console.metric_columns(result)]))
    console.print_vs_baseline(result)
    console.print_rhat(result)
    print(f"reliability plot: {result['reliability_plot']}")
    print(f"metric vs samples plot: {result['samples_plot']}")
    print(f"exported ensemble: {runs.export(config.output_dir, args.export_dir)}")


def build_parser():
    """The argument parser of ``keras-bnn`` (exposed for the docs and tests).

    Returns:
        :func:`keras_bnn.cli_parser.build_parser`'s parser, each subcommand
        running its ``_cmd_*`` function here.
    """
    return cli_parser.build_parser(__doc__.splitlines()[0], {
        "train": _cmd_train, "sweep-temperature": _cmd_sweep_temperature, "sweep": _cmd_sweep,
        "evaluate": _cmd_evaluate, "export": _cmd_export, "demo": _cmd_demo})


#: What a command may import beyond Keras and its backend (``main`` names a missing one).
_TENSORFLOW_PACKAGES = ("tensorflow", "tensorflow_datasets", "tensorflow_probability")


def _interrupted_train_advice(args):
    """What an interrupted ``train`` tells the user to do next: ``--resume`` a run that
    began training; the same command again for one stopped while it chose its prior,
    which ``--resume`` refuses (:func:`keras_bnn.runs.config.resume_config`)."""
    from keras_bnn.runs.rundir import RunDir

    run_dir = getattr(args, "run_dir", None)
    if run_dir is not None and not RunDir(run_dir).started:
        if os.path.isdir(RunDir(run_dir).prior_candidates):
            return (" The run was choosing its prior (prior auto) and has not begun: run the "
                    "same command again, without --resume (the candidates that finished "
                    "are reused).")
        return " The run had not begun: run the same command again, without --resume."
    return (" What was written is kept (samples and epoch backups are written whole); "
            "continue the run with the same command and --resume.")


def main(argv=None):
    """Entry point of the ``keras-bnn`` console script.

    Args:
        argv: arguments (default: ``sys.argv[1:]``).

    Returns:
        Exit code: 0 on success, 2 on bad input or a failed run, 130 when
        interrupted (Ctrl-C).
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    args = None
    try:
        args = build_parser().parse_args(argv)
        with console.library_warnings_as_lines():
            code = args.run(args)
    except KeyboardInterrupt:
        advice = _interrupted_train_advice(args) if argv[:1] == ["train"] else ""
        print(f"keras-bnn: interrupted.{advice}", file=sys.stderr)
        return 130
    except (ValueError, TypeError, KeyError, OSError, FloatingPointError, RecursionError,
            OverflowError, InUseError) as error:
        # Python's messages for these name the bad value; with one line and
        # no traceback, the type is kept for errors whose text is terse.
        reason = console.one_line(error) or type(error).__name__
        if not isinstance(error, (ValueError, OSError, FloatingPointError, InUseError)):
            reason = f"{type(error).__name__}: {reason}"
        print(f"keras-bnn: error: {reason}", file=sys.stderr)
        return 2
    except ImportError as error:
        package = _failed_package(error)
        if package is None:
            raise
        if error.name is None:  # raised inside the package: installed, but broken
            print(f"keras-bnn: error: {package} is installed but failed to import "
                  f"({console.one_line(error)}); reinstall it (`pip install "
                  f"--force-reinstall {package.replace('_', '-')}`).", file=sys.stderr)
            return 2
        print(f"keras-bnn: error: this command needs {package}, which is not "
              "installed: its data are tf.data pipelines and its exports SavedModels, under "
              "KERAS_BACKEND=jax too (`pip install tensorflow`). With JAX alone, train by "
              "`model.fit` on NumPy arrays (README, \"Your own model\"; "
              "examples/fashion_mnist_fit.py).", file=sys.stderr)
        return 2
    return code or 0


def _failed_package(error):
    """The TensorFlow package an ``ImportError`` is about, or None.

    ``error.name`` names a module that is missing; a package that is installed
    but raises while importing leaves it None, so the traceback's innermost
    frame inside one of :data:`_TENSORFLOW_PACKAGES` names it instead.
    """
    if error.name is not None:
        top = error.name.split(".")[0]
        return top if top in _TENSORFLOW_PACKAGES else None
    frame, package = error.__traceback__, None
    while frame is not None:
        top = str(frame.tb_frame.f_globals.get("__name__", "")).split(".")[0]
        package = top if top in _TENSORFLOW_PACKAGES else package
        frame = frame.tb_next
    return package


if __name__ == "__main__":
    sys.exit(main())
