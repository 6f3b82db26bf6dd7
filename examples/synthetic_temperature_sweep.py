"""The well-specified experiment: an MLP student on data from an MLP teacher.

When the model class contains the data-generating process and the prior is
sensible, the Bayes posterior (T = 1) should predict best (Wenzel et al.
2020, sec. 5). Every run uses the library's defaults: the warm-up picks the
step at each temperature and collection starts at equilibrium. Runs on a
laptop CPU in a few minutes (no download):

    python examples/synthetic_temperature_sweep.py --out runs/synthetic_sweep
"""

import argparse
import math

from keras_bnn import console, equilibrium, runs
from keras_bnn.cli_parser import positive_numbers


def min_epochs(config):
    """The fewest epochs in which a run of ``config`` collects a sample when
    its chain is stationary from the end of its warm-up.

    Collection starts at equilibrium (:class:`keras_bnn.callbacks.CollectSamples`):
    after the sampler's warm-up, the equilibrium test compares two windows
    of epochs, and the step factors' second noise measurement averages
    :meth:`keras_bnn.samplers.Sampler.noise_averaging_steps` steps from the
    first of them; where it lowers a factor (once a chain: measured on this
    task at T = 1), the test restarts and compares two windows again. A
    chain that is stationary later needs more.

    Args:
        config: the sweep's :class:`keras_bnn.runs.RunConfig` (``step_size``
            None: the sampler's warm-up).

    Returns:
        int.
    """
    from keras_bnn import samplers  # noqa: PLC0415 - keeps --help free of TensorFlow

    sampler = samplers.REGISTRY[config.sampler].build("auto", seed=0, temperature=1.0)
    steps = runs.steps_per_epoch(config, config.synthetic_sizes()[0])
    windows = 2 * equilibrium.WINDOW
    measured = max(windows, math.ceil(sampler.noise_averaging_steps() / steps))
    return math.ceil(sampler.warmup.warmup_steps / steps) + measured + windows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/synthetic_sweep",
                        help="a new directory for each sweep")
    parser.add_argument("--temperatures", default="0.03,0.1,0.3,1,3",
                        type=positive_numbers, help="comma-separated, each > 0")
    parser.add_argument("--epochs", type=int, default=None,
                        help="default: the library's run length (4000 steps: 200 epochs of "
                             "20 batches); collection starts at equilibrium, after the warm-up, "
                             "the second noise measurement and the equilibrium test, so a "
                             "smaller value than theirs is refused (the error says how many)")
    args = parser.parse_args(argv)
    config = runs.RunConfig(sampler="atmc", epochs=args.epochs, output_dir=args.out)
    if args.epochs is not None and args.epochs < (least := min_epochs(config)):
        parser.error(f"--epochs must be at least {least} (the warm-up, the second noise "
                     f"measurement and the equilibrium test come before the first sample); "
                     f"got {args.epochs}")
    try:
        rows = runs.sweep_temperature(config.validate(), args.temperatures, verbose=0)
    except (ValueError, FileExistsError) as error:  # one line, as the keras-bnn command's
        parser.exit(2, f"{parser.prog}: error: {console.one_line(error)}\n")
    for row in rows:
        print({k: round(v, 4) for k, v in row.items()})


if __name__ == "__main__":
    main()
