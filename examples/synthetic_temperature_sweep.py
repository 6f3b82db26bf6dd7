"""The well-specified experiment: an MLP student on data from an MLP teacher.

When the model class contains the data-generating process and the prior is
sensible, the Bayes posterior (T = 1) should predict best (Wenzel et al.
2020, sec. 5). Every run uses the library's defaults: the warm-up picks the
step at each temperature and collection starts at equilibrium. Runs on a
laptop CPU in a few minutes (no download):

    python examples/synthetic_temperature_sweep.py --out runs/synthetic_sweep
"""

import argparse

from keras_bnn import runs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="runs/synthetic_sweep")
    parser.add_argument("--temperatures", default="0.03,0.1,0.3,1,3")
    parser.add_argument("--epochs", type=int, default=None,
                        help="default: the library's run length (4000 steps: 200 epochs of "
                             "20 batches); collection starts at equilibrium, after the warm-up")
    args = parser.parse_args(argv)
    config = runs.RunConfig(sampler="atmc", epochs=args.epochs, output_dir=args.out).validate()
    temperatures = [float(t) for t in args.temperatures.split(",")]
    for row in runs.sweep_temperature(config, temperatures, verbose=0):
        print({k: round(v, 4) for k, v in row.items()})


if __name__ == "__main__":
    main()
