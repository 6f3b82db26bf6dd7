"""Why a chain is not at equilibrium: per-layer temperatures and weight sizes, epoch by epoch.

Trains one chain on the Fashion-MNIST MLP (784-256-256-10, batch 128, the
library's defaults: step ``auto``, the sampler's default friction) from the
builders' He-normal initialisation, and prints after every epoch, for each
variable, the configurational temperature ``mean(θ·G)`` averaged over the
epoch's steps (T at equilibrium: integration by parts) and, for each
kernel, the median ``|w|``. A variable whose temperature climbs slowly
while its weights grow steadily is still diffusing out of its
initialisation towards the prior's scale (Student-t(3, s) has median
``|w| = 0.765·s``); docs/fashion-mnist.md ("Why the Student-t chain is not
at equilibrium") has the numbers.

The temperatures are :attr:`keras_bnn.callbacks.CollectSamples.variable_temperatures`
(running sums kept by the update, read twice an epoch); the chain's samples
go to a temporary store, deleted at the end.

    python examples/fashion_mnist_weight_growth.py --epochs 24 --prior student_t --prior-scale 0.4
    python examples/fashion_mnist_weight_growth.py --epochs 20 --sampler sghmc \
        --sampler-args '{"friction": 5}'
"""

import argparse
import json
import tempfile

import numpy as np

from keras_bnn.cli import int_at_least
from keras_bnn.cli_parser import positive_number


def main(argv=None):
    """Trains the chain, printing one JSON line per epoch; returns ``(model, rows)``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int_at_least(1), default=20)
    parser.add_argument("--sampler", default="atmc", choices=["atmc", "sghmc", "sgnht", "sgld"])
    parser.add_argument("--prior", default="student_t", choices=["student_t", "he_normal"])
    parser.add_argument("--prior-scale", type=positive_number, default=0.4)
    parser.add_argument("--sampler-args", type=json.loads, default={},
                        help="extra sampler arguments as JSON, e.g. "
                             "'{\"friction\": 5}'")
    parser.add_argument("--seed", type=int_at_least(0), default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--train-subset", type=int_at_least(1), default=None,
                        help="train on the first N training images only")
    args = parser.parse_args(argv)

    import keras  # noqa: PLC0415 - keeps --help free of TensorFlow

    import keras_bnn as kb  # noqa: PLC0415
    from keras_bnn import console, fashion_mnist  # noqa: PLC0415
    from keras_bnn.runs.build import build_model, compile_model  # noqa: PLC0415
    from keras_bnn.runs.config import chain_seed  # noqa: PLC0415

    try:  # a bad --sampler-args, the files absent: one line, before training
        config = kb.runs.RunConfig(
            dataset="fashion_mnist", model="mlp", model_args={"hidden": [256, 256]},
            sampler=args.sampler, sampler_args=args.sampler_args, epochs=args.epochs,
            batch_size=128, seed=args.seed,
            prior=args.prior, prior_scale=args.prior_scale, output_dir="unused").validate()
        (x, y), _, _, info = fashion_mnist.fashion_mnist_arrays(args.data_dir)
    except (ValueError, FileNotFoundError) as error:
        parser.exit(2, f"{parser.prog}: error: {console.one_line(error)}\n")
    if args.train_subset:
        x, y = x[:args.train_subset], y[:args.train_subset]
        info["num_train"] = len(y)
    keras.utils.set_random_seed(chain_seed(config))
    model = build_model(config, info)
    compile_model(model, config, info)

    class Report(keras.callbacks.Callback):
        """Prints each epoch's per-variable temperatures (after ``collect`` read them)."""

        rows = []

        def on_epoch_end(self, epoch, logs=None):
            variables = self.model.optimizer._trainable_variables
            self.rows.append({
                "epoch": epoch + 1, "step_size": float(self.model.optimizer.step_size_value),
                "configurational_temperature": {
                    name: t for name, t, _ in collect.variable_temperatures},
                "median_abs_kernel": {v.path: float(np.median(np.abs(v.numpy())))
                                      for v in variables if v.path.endswith("kernel")},
                "nll": float(logs["nll"])})
            print(json.dumps(self.rows[-1]), flush=True)

    train_ds = kb.data.make_dataset(x, y, 128, shuffle=True, seed=args.seed)
    with tempfile.TemporaryDirectory() as store_dir:
        collect = kb.callbacks.CollectSamples(kb.SampleStore(store_dir))
        model.fit(train_ds, epochs=args.epochs, verbose=0, callbacks=[collect, Report()])
    return model, Report.rows


if __name__ == "__main__":
    main()
