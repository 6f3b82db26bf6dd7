"""The ``keras-bnn`` command's argument parser: its subcommands, flags and help.

:func:`build_parser` builds what ``keras-bnn --help`` shows; the RunConfig
flags (:data:`CONFIG_FLAGS`) show their defaults, looked up in
:mod:`keras_bnn.runs.config` only when the help is shown, so that an
argument error imports nothing. The parser's ``error`` raises
``ValueError``, which :func:`keras_bnn.cli.main` prints as one line.
"""

import argparse
import dataclasses
import functools
import math


def _or_auto(kind, requirement):
    """An argparse type: ``"auto"``, or the text as ``kind`` (its error names ``requirement``)."""

    def parse(text):
        try:
            return text if text == "auto" else kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {requirement} or 'auto'; got {text!r}") from None

    return parse


def int_at_least(minimum):
    """An argparse type: an int ≥ ``minimum``, refused in argparse's one line naming the flag.

    Args:
        minimum: the smallest value allowed.

    Returns:
        A function of the flag's text (for ``add_argument(type=...)``); used
        by the scripts in ``benchmarks/`` too.
    """

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be an int >= {minimum}; got {text!r}")
        return value

    return parse


def positive_number(text):
    """An argparse type: a finite number > 0, refused in argparse's one line naming the flag.

    Args:
        text: the flag's text.

    Returns:
        The number as a float; used by the scripts in ``examples/``.

    Raises:
        argparse.ArgumentTypeError: if ``text`` is not a finite number > 0.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0; got {text!r}")
    return value


def positive_numbers(text):
    """An argparse type: comma-separated finite numbers > 0 (a sweep's values).

    Args:
        text: the flag's text, e.g. ``"0.1,0.3,1"``.

    Returns:
        The numbers as a list of floats; used by the sweep scripts in ``examples/``.

    Raises:
        argparse.ArgumentTypeError: if a value is not a finite number > 0.
    """
    try:
        return [positive_number(part) for part in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be comma-separated finite numbers > 0, e.g. '0.1,1'; got {text!r}") from None


#: The flags of the RunConfig fields: ``(flag, field, argparse type, help)``.
CONFIG_FLAGS = (
    ("--dataset", "dataset", str,
     "synthetic, digits, breast_cancer, wine, diabetes (bundled), npy (your x_train.npy, "
     "y_train.npy, x_test.npy, y_test.npy in --data-dir), fashion_mnist (local files), "
     "mnist, cifar10 or imdb"),
    ("--data-dir", "data_dir", str,
     "tensorflow-datasets data directory, the Fashion-MNIST files' directory, or the "
     "directory of the npy dataset's four files"),
    ("--model", "model", str, "mlp, resnet_pp, resnet20_frn, cnn_lstm or cnn"),
    ("--sampler", "sampler", str,
     "atmc, sghmc, sgnht, sgld, hmc (exact, full batch) or sgd (baseline)"),
    ("--step-size", "step_size", _or_auto(float, "a number > 0"), "step size h0 > 0, or auto"),
    ("--temperature", "temperature", float, "posterior temperature T > 0"),
    ("--prior", "prior", str,
     "kernel prior: he_normal, glorot_normal, student_t, he_student_t or auto"),
    ("--prior-scale", "prior_scale", float, "scale s > 0 of the kernel prior"),
    ("--likelihood", "likelihood", str, "categorical, bernoulli or gaussian"),
    ("--epochs", "epochs", int, "training epochs"),
    ("--max-epochs", "max_epochs", int,
     "with --burn-in-epochs auto: train on past --epochs, up to this, until the chain has "
     "been sampled for a quarter of --epochs"),
    ("--batch-size", "batch_size", int,
     "minibatch size; the training set's size or more is the full batch (20 steps an epoch "
     "with an SG-MCMC sampler or sgd, one transition with hmc)"),
    ("--cycle-epochs", "cycle_epochs", int,
     "cyclical step-size cycle length (epochs; samplers, not sgd)"),
    ("--burn-in-epochs", "burn_in_epochs", _or_auto(int, "an int >= 0"),
     "epochs before collecting samples, or auto (samplers, not sgd)"),
    ("--collect-every", "collect_every", int,
     "collect a sample every k epochs (samplers, not sgd)"),
    ("--num-train", "num_train", int, "synthetic task: training examples"),
    ("--num-test", "num_test", int, "synthetic task: test examples"),
    ("--seed", "seed", int, "seed of initialisation, data order and sampler noise"),
    ("--output-dir", "output_dir", str, "run directory"),
)
_CONFIG_FIELDS = {field for _, field, _, _ in CONFIG_FLAGS}
#: The default of the RunConfig fields that are None until validation.
_COMPUTED_DEFAULTS = {
    "data_dir": "tensorflow-datasets' own; Fashion-MNIST: Keras' cache, then "
                "/usr/share/datasets/fashion-mnist",
    "step_size": "auto: a warm-up chooses it (HMC: 0.001, then adapted by dual averaging)",
    "epochs": "enough for 4000 steps, at least 30",
    "max_epochs": "twice the default --epochs when --epochs is not given, else --epochs",
    "likelihood": "the dataset's",
    "cycle_epochs": "none, a constant step size",
    "burn_in_epochs": "auto: collect from the first epoch at equilibrium",
    "collect_every": "about 100 samples a run, or every cycle end with --cycle-epochs",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each flag's default, except where there is none to show; a
    RunConfig flag's that the parser leaves None is looked up when the help
    is shown (argument errors import nothing)."""

    def _get_help_string(self, action):
        if action.dest in _CONFIG_FIELDS and action.default is None:
            return f"{action.help} (default: {_config_default(action.dest)})"
        if action.default is None or action.default is False:  # not 0: a default to show
            return action.help
        return super()._get_help_string(action)


def _config_default(field):
    """The default of a RunConfig field, in words."""
    from keras_bnn.runs.config import PRIOR_CANDIDATES, SYNTHETIC_SIZES, RunConfig

    default = {f.name: f.default for f in dataclasses.fields(RunConfig)}[field]
    if default is not None or field in SYNTHETIC_SIZES:
        return str(SYNTHETIC_SIZES.get(field, default))
    if field in _COMPUTED_DEFAULTS:
        return _COMPUTED_DEFAULTS[field]
    if field == "prior_scale":
        return "1.0, or chosen with --prior auto"
    candidates = " or ".join(f"{prior}({scale:g})" for prior, scale in PRIOR_CANDIDATES)
    return f"auto: {candidates}, chosen on a validation split of the training set"


def _add_config_flags(parser):
    parser.add_argument("--config", help="JSON file with RunConfig fields (flags override)")
    for flag, field, kind, text in CONFIG_FLAGS:
        parser.add_argument(flag, dest=field, type=kind, default=None, help=text)


def build_parser(description, handlers):
    """The argument parser of ``keras-bnn``.

    Args:
        description: the text ``keras-bnn --help`` shows under its usage line.
        handlers: ``{subcommand: function}`` for train, sweep-temperature,
            sweep, evaluate, export and demo: the function each one's parsed
            arguments name as ``run``.

    Returns:
        An ``argparse.ArgumentParser`` whose ``error`` raises ``ValueError``.

    Raises:
        KeyError: for a subcommand ``handlers`` leaves out.
    """
    parser = _Parser(prog="keras-bnn", description=description)
    commands = parser.add_subparsers(
        dest="command", required=True,
        parser_class=functools.partial(_Parser, formatter_class=_HelpFormatter))
    train = commands.add_parser("train", help="train by sampling and collect samples")
    _add_config_flags(train)
    train.add_argument("--chains", type=int, default=1,
                       help="independent chains, stored as chain-0..chain-K-1 in the run dir")
    train.add_argument("--processes", type=int, default=1,
                       help="with --chains: run this many chains at once, as processes")
    train.add_argument("--resume", action="store_true",
                       help="continue the killed run in --output-dir from its last epoch "
                            "(its config.json; no sample is duplicated or dropped); with "
                            "--chains K, its chains: complete ones are kept")
    sweep_t = commands.add_parser("sweep-temperature",
                                  help="runs per temperature on the test split + plot + CSV")
    _add_config_flags(sweep_t)
    sweep_t.add_argument("--temperatures", default="0.03,0.1,0.3,1,3",
                         help="comma-separated temperatures (colder ones need more "
                              "--epochs to reach equilibrium: README, command line)")
    sweep = commands.add_parser(
        "sweep", help="runs per value of --param on a validation split + plot + CSV")
    _add_config_flags(sweep)
    sweep.add_argument("--param", required=True, help="temperature or prior_scale")
    sweep.add_argument("--values", required=True, help="comma-separated positive values")
    sweep.add_argument("--seeds", default="0", help="comma-separated seeds per value")
    sweep.add_argument("--validation-split", type=float, default=0.2,
                       help="fraction of the training data held out (0: use the test split)")
    sweep.add_argument("--x", help=".npy file of training inputs (instead of --dataset)")
    sweep.add_argument("--y", help=".npy file of training labels or targets")
    evaluate = commands.add_parser("evaluate", help="metrics and plots of a run")
    evaluate.add_argument("--run-dir", required=True,
                          help="a run directory of keras-bnn train (one chain or --chains K)")
    evaluate.add_argument("--num-bins", type=int, default=15,
                          help="confidence bins of the ECE and the reliability plot")
    evaluate.add_argument("--baseline-run-dir",
                          help="a reference run (e.g. --sampler sgd), drawn in the plots")
    export = commands.add_parser("export", help="export a run's ensemble for TF Serving")
    export.add_argument("--run-dir", required=True,
                        help="a run directory of keras-bnn train (all chains are pooled)")
    export.add_argument("--export-dir", required=True, help="saved_models/<name>")
    export.add_argument("--version", type=int, default=None, help="default: next free")
    demo = commands.add_parser("demo", help="SGD vs ATMC on digits, end to end")
    demo.add_argument("--dataset", default="digits", help="a bundled or synthetic dataset")
    demo.add_argument("--output-dir", default="runs/demo",
                      help="the runs go to run-<date>-<time>/sgd and .../atmc in it")
    demo.add_argument("--export-dir", default="saved_models/demo",
                      help="the ATMC ensemble is exported to its next version")
    demo.add_argument("--epochs", type=int, default=None, help="training epochs of each run")
    demo.add_argument("--seed", type=int, default=0, help="seed of both runs")
    for sub in (train, sweep_t, sweep, demo):
        sub.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2),
                         help="Keras progress verbosity")
    for name, sub in commands.choices.items():
        sub.set_defaults(run=handlers[name])
    return parser


def flag_values(args):
    """The RunConfig fields given as flags.

    Args:
        args: the parsed arguments of a subcommand with the RunConfig flags.

    Returns:
        ``{field: value}`` of the flags given (those left unset are None).
    """
    return {field: getattr(args, field) for _, field, _, _ in CONFIG_FLAGS
            if getattr(args, field) is not None}
