"""IMDB sentiment with the cold-posterior paper's CNN-LSTM, swept over temperature.

Wenzel et al. (2020) find that T < 1 predicts better than the Bayes posterior
(T = 1) on IMDB. With IMDB prepared for tensorflow-datasets:

    tfds build imdb_reviews --data_dir /data/tfds
    python examples/imdb_cnn_lstm_sweep.py --data-dir /data/tfds --out runs/imdb_sweep

writes one run per temperature, ``sweep.csv`` and the plot ``sweep.png``
(accuracy and NLL against T).
"""

import argparse

from keras_bnn import console, runs
from keras_bnn.cli_parser import positive_numbers

#: Epochs before the first cycle, and the length of a cyclical step-size
#: cycle, whose last step gives a sample: a run needs both.
BURN_IN_EPOCHS = 20
CYCLE_EPOCHS = 20
MIN_EPOCHS = BURN_IN_EPOCHS + CYCLE_EPOCHS


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--out", default="runs/imdb_sweep")
    parser.add_argument("--temperatures", default="0.001,0.01,0.1,0.3,1",
                        type=positive_numbers, help="comma-separated, each > 0")
    parser.add_argument("--epochs", type=int, default=100,
                        help=f"epochs of each run, at least {MIN_EPOCHS}: {BURN_IN_EPOCHS} of "
                             f"burn-in, then one sample per {CYCLE_EPOCHS}-epoch cycle")
    args = parser.parse_args(argv)
    if args.epochs < MIN_EPOCHS:
        parser.error(f"--epochs must be at least {MIN_EPOCHS} ({BURN_IN_EPOCHS} epochs of "
                     f"burn-in and one {CYCLE_EPOCHS}-epoch cycle); got {args.epochs}")
    config = runs.RunConfig(
        dataset="imdb", data_dir=args.data_dir, model="cnn_lstm", sampler="sghmc",
        step_size=1e-4, epochs=args.epochs, batch_size=32, cycle_epochs=CYCLE_EPOCHS,
        burn_in_epochs=BURN_IN_EPOCHS, output_dir=args.out).validate()
    try:
        rows = runs.sweep_temperature(config, args.temperatures, verbose=2)
    except (ValueError, OSError) as error:  # a used --out, IMDB not prepared: one line
        parser.exit(2, f"{parser.prog}: error: {console.one_line(error)}\n")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
