"""A Bayesian last layer: a sampled head on a frozen pretrained network, against its MAP head.

The route of "Your own model → A Bayesian last layer" in the README, on
scikit-learn's digits (bundled, no download;
:func:`keras_bnn.datasets.bundled.bundled_arrays`, 1297 training and 500
test images of 8×8 pixels):

1. pretrain a small network (64 → 128 → 64 → 10) by SGD, ``--pretrain-epochs``;
2. freeze its trunk (``trainable = False``) and put a fresh Dense(10) head on it;
3. MAP head: the head under ``kb.bayesian``'s prior, trained by SGD
   (the SGD/MAP baseline) for ``--map-epochs``;
4. Bayesian head: the same head sampled by the library's default sampler
   (ATMC, ``step_size="auto"``: the warm-up chooses it) for ``--epochs``,
   collected by ``kb.callbacks.CollectSamples`` from equilibrium on
   (``--burn-in-epochs`` fixes the first collecting epoch instead) into a
   :class:`keras_bnn.SampleStore` (the frozen trunk is written once, in
   ``shared.npz``; each sample file holds the head only);
5. :meth:`keras_bnn.PosteriorEnsemble.from_store` (the trunk held once and
   run once per call), scored against the MAP head on the test set by
   :func:`keras_bnn.metrics.evaluate_probs` (accuracy, NLL, ECE, Brier),
   and exported for TensorFlow Serving (:meth:`~keras_bnn.PosteriorEnsemble.export`;
   under the TensorFlow backend).

The rows, the store's bytes and the export's path go to
``<out>/results.json`` and are printed as a Markdown table.

    python examples/bayesian_last_layer.py                 # --out: a new temporary directory
    python examples/bayesian_last_layer.py --out runs/bll --seed 1
"""

import argparse
import json
import math
import os
import tempfile
import time

from keras_bnn.cli import int_at_least  # argparse types; imports no Keras

LOSS_ARGS = {"from_logits": True}
HIDDEN = (128, 64)


def pretrained_trunk(x, y, args):
    """A 64 → 128 → 64 → 10 network trained by SGD; returns its two hidden layers."""
    import keras  # noqa: PLC0415 - keeps --help free of Keras

    keras.utils.set_random_seed(args.seed)
    inputs = keras.Input(x.shape[1:])
    hidden = inputs
    layers = [keras.layers.Dense(units, activation="relu", name=f"trunk_{i}")
              for i, units in enumerate(HIDDEN)]
    for layer in layers:
        hidden = layer(hidden)
    network = keras.Model(inputs, keras.layers.Dense(10, name="pretrain_head")(hidden))
    network.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                    loss=keras.losses.SparseCategoricalCrossentropy(**LOSS_ARGS))
    network.fit(x, y, batch_size=args.batch_size, epochs=args.pretrain_epochs, verbose=0)
    return layers


def head_model(trunk, input_shape, seed):
    """The frozen ``trunk`` layers under a fresh Dense(10) head (initialised from ``seed``),
    under ``kb.bayesian``: a prior on the head's weights, the only trainable ones."""
    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415

    keras.utils.set_random_seed(seed)
    inputs = keras.Input(input_shape)
    hidden = inputs
    for layer in trunk:
        layer.trainable = False
        hidden = layer(hidden)
    return kb.bayesian(keras.Model(inputs, keras.layers.Dense(10, name="head")(hidden)))


def scores(probs, labels):
    """:func:`keras_bnn.metrics.evaluate_probs` of [N, 10] probabilities, rounded."""
    import keras_bnn as kb  # noqa: PLC0415

    return {k: round(float(v), 4) for k, v in kb.metrics.evaluate_probs(probs, labels).items()}


def store_bytes(store):
    """The store's ``shared.npz`` and sample files' bytes on disk."""
    names = os.listdir(store.path)
    samples = [os.path.getsize(os.path.join(store.path, n)) for n in names
               if n.startswith("sample-") and n.endswith(".npz")]
    shared = os.path.join(store.path, "shared.npz")
    return {"shared_bytes": os.path.getsize(shared) if os.path.exists(shared) else 0,
            "sample_bytes_each": round(sum(samples) / max(len(samples), 1)),
            "total_bytes": sum(os.path.getsize(os.path.join(store.path, n)) for n in names)}


def run(args):
    """Pretrains, freezes, trains the MAP head and samples the Bayesian one; returns
    the results dict."""
    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415
    from keras_bnn.datasets.bundled import bundled_arrays  # noqa: PLC0415

    (x, y), (x_test, y_test), _ = bundled_arrays("digits")
    if args.train_subset:
        x, y = x[:args.train_subset], y[:args.train_subset]
    loss = keras.losses.SparseCategoricalCrossentropy(**LOSS_ARGS)
    start = time.perf_counter()
    trunk = pretrained_trunk(x, y, args)
    pretrain_s = time.perf_counter() - start

    map_head = head_model(trunk, x.shape[1:], args.seed)
    map_head.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
                     train_size=len(y), loss=loss)
    start = time.perf_counter()
    map_head.fit(x, y, batch_size=args.batch_size, epochs=args.map_epochs, verbose=0)
    map_row = {"row": "MAP head (SGD)", "samples": 1, "wall_s": time.perf_counter() - start,
               **scores(keras.ops.convert_to_numpy(
                   keras.ops.softmax(map_head.predict(x_test, verbose=0))), y_test)}

    bnn = head_model(trunk, x.shape[1:], args.seed)
    bnn.compile(sampler="atmc", train_size=len(y), loss=loss)  # step size: the warm-up's
    store = kb.SampleStore(os.path.join(args.out, "samples"))
    collect = kb.callbacks.CollectSamples(store, start_epoch=args.burn_in_epochs)
    start = time.perf_counter()
    bnn.fit(x, y, batch_size=args.batch_size, epochs=args.epochs, callbacks=[collect],
            verbose=args.verbose)
    wall = time.perf_counter() - start
    if not len(store):
        raise SystemExit(f"the chain collected no sample in {args.epochs} epochs "
                         f"({collect.reason}): run it longer (--epochs)")
    ensemble = kb.PosteriorEnsemble.from_store(store)
    bayes_row = {"row": "Bayesian head (ATMC)", "samples": len(store), "wall_s": wall,
                 **scores(ensemble.predict(x_test, verbose=0), y_test)}
    export_dir = args.export_dir or os.path.join(args.out, "export")
    return {"config": vars(args), "backend": keras.backend.backend(),
            "pretrain_s": round(pretrain_s, 1),
            "frozen_weights": sum(math.prod(w.shape) for w in bnn.non_trainable_weights),
            "head_weights": sum(math.prod(w.shape) for w in bnn.trainable_weights),
            "started_epoch": collect.started_epoch,
            "step_size": float(bnn.optimizer.step_size_value),
            "store": store_bytes(store),
            # TensorFlow Serving's SavedModel: written under the TensorFlow backend.
            "export": (ensemble.export(export_dir)
                       if keras.backend.backend() == "tensorflow" else None),
            "rows": [{**r, "wall_s": round(r["wall_s"], 1)} for r in (map_row, bayes_row)]}


def table(results):
    """The rows as a Markdown table."""
    keys = ("accuracy", "nll", "ece", "brier")
    lines = ["| head | samples | " + " | ".join(keys) + " | wall s |",
             "|---|---:|" + "---:|" * len(keys) + "---:|"]
    for row in results["rows"]:
        lines.append(f"| {row['row']} | {row['samples']} | "
                     + " | ".join(str(row[k]) for k in keys) + f" | {row['wall_s']} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None,
                        help="directory of the samples, export and results.json "
                             "(default: a new temporary directory)")
    parser.add_argument("--export-dir", default=None,
                        help="TensorFlow Serving model directory (default: <out>/export)")
    parser.add_argument("--pretrain-epochs", type=int_at_least(1), default=30)
    parser.add_argument("--epochs", type=int_at_least(1), default=150, help="the chain's epochs")
    parser.add_argument("--map-epochs", type=int_at_least(1), default=50,
                        help="the MAP head's epochs")
    parser.add_argument("--burn-in-epochs", type=lambda v: v if v == "auto" else int_at_least(0)(v),
                        default="auto", help="the chain's first collecting epoch, or auto "
                                             "(from equilibrium: the library default)")
    parser.add_argument("--batch-size", type=int_at_least(1), default=64)
    parser.add_argument("--train-subset", type=int_at_least(1), default=None,
                        help="train on the first this many images only")
    parser.add_argument("--seed", type=int_at_least(0), default=0)
    parser.add_argument("--verbose", type=int, default=0)
    args = parser.parse_args(argv)
    args.out = args.out or tempfile.mkdtemp(prefix="bayesian_last_layer-")
    if os.path.exists(os.path.join(args.out, "samples")):
        parser.error(f"--out {args.out!r} already holds samples: use a new directory")
    os.makedirs(args.out, exist_ok=True)

    results = run(args)
    path = os.path.join(args.out, "results.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(results, handle, indent=1)
    os.replace(path + ".tmp", path)
    store = results["store"]
    export = results["export"] or "none (TensorFlow backend only)"
    print(f"trunk: {results['frozen_weights']} frozen weights (pretrained in "
          f"{results['pretrain_s']} s); head: {results['head_weights']} weights; chain "
          f"collecting from epoch {results['started_epoch']}, h {results['step_size']:.3g}")
    print(table(results))
    print(f"store: {store['total_bytes']} bytes (shared.npz {store['shared_bytes']}, "
          f"{store['sample_bytes_each']} per sample); export: {export}; "
          f"results: {path}", flush=True)


if __name__ == "__main__":
    main()
