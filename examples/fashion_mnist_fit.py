"""Fashion-MNIST by plain ``model.fit`` on NumPy arrays: a chain and a deep ensemble at equal wall.

No ``tf.data`` and no TensorFlow: with ``KERAS_BACKEND=jax`` this runs where
only JAX is installed, such as a GPU machine (README, "Resume,
tf.distribute, JAX, TPUs → JAX alone"). It is the route of "Your own model"
in the README, on the library's Fashion-MNIST arrays
(:func:`keras_bnn.fashion_mnist.fashion_mnist_arrays`):

* ``chain``: one ATMC chain at the library defaults (``step_size="auto"``,
  ``CollectSamples(start_epoch="auto")``, one sample an epoch;
  ``--burn-in-epochs`` fixes the start instead). Its length
  follows ``keras-bnn train``: at least ``--epochs`` (default
  :func:`keras_bnn.runs.config.default_epochs`), then on until it has
  sampled :data:`keras_bnn.runs.MIN_SAMPLED_SHARE` of them from
  equilibrium (:class:`keras_bnn.runs.fitting.EndWhenSampled`), up to
  ``--max-epochs``. ``--time-limit`` ends it at the epoch end nearest
  that many seconds (the row says so).
* ``ensemble``: a deep ensemble of ``--k`` SGD/MAP nets under the same
  prior (the registry's baseline, ``SGD(0.05, momentum=0.9)``), each
  trained for its share of the chain's time (whole epochs: a net stops at
  the epoch end nearest ``chain time / k``): equal wall-clock, or equal CPU
  time with ``--clock cpu`` on a machine shared with other work.

Both rows are scored on the test set: accuracy, NLL, ECE, Brier and the
out-of-distribution AUROC of predictive entropy and mutual information
against :func:`keras_bnn.ood.digits_28x28` (a stand-in for MNIST). The rows
go to ``<out>/results.json`` with the chain's equilibrium verdict, step
size and per-epoch history, and are printed as a Markdown table.

    KERAS_BACKEND=jax python examples/fashion_mnist_fit.py --out runs/fit --model cnn \
        --prior student_t --max-epochs 400 --time-limit 270
"""

import argparse
import json
import math
import os
import time

from keras_bnn.cli import int_at_least  # argparse types; imports no Keras
from keras_bnn.cli_parser import positive_number

ROWS = ("chain", "ensemble")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


#: An ensemble net trains for its share of the time; this only bounds ``fit``.
NET_MAX_EPOCHS = 200


def time_limit(seconds, clock="wall"):
    """A Keras callback that ends ``fit`` at the epoch end nearest ``seconds``.

    Training stops at the end of an epoch once another half epoch (at the
    last epoch's duration) would pass ``seconds`` of ``clock`` (a key of
    :data:`CLOCKS`: wall time, or the process's CPU time, all threads, which
    other work on a shared machine does not inflate), so a run overshoots
    or falls short of it by at most half an epoch. Its ``hit`` says whether
    it ended the run.
    """
    import keras  # noqa: PLC0415 - keeps --help free of Keras

    class TimeLimit(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.start = self.epoch_start = None
            self.hit = False

        def on_train_begin(self, logs=None):
            self.start = CLOCKS[clock]()

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch_start = CLOCKS[clock]()

        def on_epoch_end(self, epoch, logs=None):
            now = CLOCKS[clock]()
            if now - self.start + (now - self.epoch_start) / 2 >= seconds:
                self.model.stop_training = self.hit = True

    return TimeLimit()


def compiled_model(args, info, sampler, seed):
    """The ``keras-bnn train`` model and optimizer of ``--model`` and ``--prior``.

    :func:`keras_bnn.runs.build_model` and :func:`keras_bnn.runs.compile_model`
    for ``sampler`` (``"atmc"`` at its defaults, or ``"sgd"``, the registry's
    SGD/MAP baseline), initial weights from ``seed``.
    """
    import keras  # noqa: PLC0415

    from keras_bnn import runs  # noqa: PLC0415

    model_args = {"hidden": [256, 256]} if args.model == "mlp" else {}  # 784-256-256-10
    config = runs.RunConfig(dataset="fashion_mnist", model=args.model, model_args=model_args,
                            prior=args.prior, prior_scale=args.prior_scale, sampler=sampler,
                            seed=args.seed).validate()
    keras.utils.set_random_seed(seed)
    model = runs.build_model(config, info)
    runs.compile_model(model, config, info)
    return model


def score(member_probs, labels, ood_member_probs):
    """Test metrics of the members' mean and the OOD AUROCs, rounded."""
    import keras_bnn as kb  # noqa: PLC0415

    row = kb.metrics.evaluate_probs(member_probs.mean(axis=0), labels)
    row.update({f"auroc_{k}": v for k, v in kb.ood.ood_auroc(member_probs,
                                                           ood_member_probs).items()})
    return {k: round(float(v), 4) for k, v in row.items()}


def run_chain(args, data, info):
    """One ATMC chain at the library defaults; returns its row."""
    import keras_bnn as kb  # noqa: PLC0415
    from keras_bnn.runs.config import MIN_SAMPLED_SHARE, default_epochs  # noqa: PLC0415
    from keras_bnn.runs.fitting import EndWhenSampled  # noqa: PLC0415

    (x, y), (x_test, y_test), x_ood = data
    steps = math.ceil(len(y) / args.batch_size)
    epochs = args.epochs or default_epochs(steps)
    model = compiled_model(args, info, "atmc", args.seed)
    store = kb.SampleStore(os.path.join(args.out, "chain", "samples"))
    collector = kb.callbacks.CollectSamples(store, start_epoch=args.burn_in_epochs, every=1)
    ending = EndWhenSampled(collector, epochs, math.ceil(MIN_SAMPLED_SHARE * epochs))
    limit = time_limit(args.time_limit)
    start, start_cpu = time.perf_counter(), time.process_time()
    history = model.fit(x, y, batch_size=args.batch_size, epochs=args.max_epochs or 2 * epochs,
                        callbacks=[collector, ending, limit], verbose=args.verbose)
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    optimizer = model.optimizer
    row = {"row": "ATMC, 1 chain (library defaults)", "epochs": len(history.epoch),
           "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "num_samples": len(store),
           "started_epoch": collector.started_epoch,
           "verdict": collector.reason,
           "step_size": float(optimizer.step_size_value),
           "time_limit_hit": limit.hit,
           "history": {k: [round(float(v), 5) for v in values]
                       for k, values in history.history.items()}}
    if len(store):
        ensemble = kb.PosteriorEnsemble.from_store(store)
        row.update(score(ensemble.predict_members(x_test, batch_size=1000), y_test,
                         ensemble.predict_members(x_ood, batch_size=1000)))
    return row


def run_ensemble(args, data, info, budget):
    """``--k`` SGD/MAP nets, each given ``budget / k`` seconds of ``--clock``; returns the row."""
    import keras_bnn as kb  # noqa: PLC0415

    (x, y), (x_test, y_test), x_ood = data
    store = kb.SampleStore(os.path.join(args.out, "ensemble", "samples"))
    epochs = []
    start, start_cpu = time.perf_counter(), time.process_time()
    for k in range(args.k):
        model = compiled_model(args, info, "sgd", args.seed * 1000 + k)
        limit = time_limit(budget / args.k, args.clock)
        history = model.fit(x, y, batch_size=args.batch_size,
                            epochs=args.max_epochs or NET_MAX_EPOCHS,
                            callbacks=[limit], verbose=args.verbose)
        epochs.append(len(history.epoch))
        store.append(model, chain=k, epoch=epochs[-1] - 1,
                     step=int(model.optimizer.iterations))  # the net's final point
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    ensemble = kb.PosteriorEnsemble.from_store(store)
    members = ensemble.predict_members(x_test, batch_size=1000)
    ood_members = ensemble.predict_members(x_ood, batch_size=1000)
    return {"row": f"deep ensemble, sgd x {args.k}", "epochs": epochs, "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), "num_samples": args.k, **score(members, y_test, ood_members),
            "first_net": score(members[:1], y_test, ood_members[:1])}


def table(rows):
    """The rows as a Markdown table."""
    keys = ("accuracy", "nll", "ece", "brier", "auroc_entropy", "auroc_mutual_information")
    lines = ["| row | epochs | samples | " + " | ".join(keys) + " | wall s | CPU s |",
             "|---|---|---:|" + "---:|" * len(keys) + "---:|---:|"]
    for row in rows:
        values = " | ".join(str(row.get(k, "—")) for k in keys)
        lines.append(f"| {row['row']} | {row['epochs']} | {row['num_samples']} | {values} "
                     f"| {row['wall_s']} | {row['cpu_s']} |")
    return "\n".join(lines)


def save(out, config, rows):
    """Writes ``<out>/results.json`` (to a temporary name, then renamed)."""
    import keras  # noqa: PLC0415

    path = os.path.join(out, "results.json")
    with open(path + ".tmp", "w") as handle:
        json.dump({"config": config, "backend": keras.backend.backend(), "rows": rows},
                  handle, indent=1)
    os.replace(path + ".tmp", path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory of the samples and results.json")
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--prior", choices=("he_normal", "student_t"), default="he_normal")
    parser.add_argument("--prior-scale", type=positive_number, default=None,
                        help="default: 1 for he_normal, 0.4 for student_t")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--k", type=int_at_least(1), default=5, help="nets in the deep ensemble")
    parser.add_argument("--epochs", type=int_at_least(1), default=None,
                        help="the chain's least length (default: keras-bnn train's)")
    parser.add_argument("--max-epochs", type=int_at_least(1), default=None,
                        help="the chain's most epochs (default: twice its least, as "
                             "keras-bnn train), and each ensemble net's (default: "
                             f"{NET_MAX_EPOCHS}, which its time share ends first)")
    parser.add_argument("--burn-in-epochs",
                        type=lambda v: v if v == "auto" else int_at_least(0)(v),
                        default="auto", help="the chain's first collecting epoch, or auto "
                                             "(from equilibrium: the library default)")
    parser.add_argument("--time-limit", type=positive_number, default=math.inf,
                        help="seconds after which the chain stops at an epoch end "
                             "(default: no limit)")
    parser.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                        help="what the ensemble's time is measured in: wall time, or the "
                             "process's CPU time (for a machine shared with other work)")
    parser.add_argument("--ensemble-seconds", type=positive_number, default=None,
                        help="the ensemble's seconds of --clock when the chain is not run")
    parser.add_argument("--batch-size", type=int_at_least(1), default=128)
    parser.add_argument("--train-subset", type=int_at_least(1), default=None)
    parser.add_argument("--seed", type=int_at_least(0), default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--verbose", type=int, default=2)
    args = parser.parse_args(argv)
    if args.prior_scale is None:
        args.prior_scale = {"he_normal": 1.0, "student_t": 0.4}[args.prior]
    if "chain" not in args.rows and "ensemble" in args.rows and args.ensemble_seconds is None:
        parser.error("--rows ensemble without chain needs --ensemble-seconds")
    if args.epochs and args.max_epochs and args.max_epochs < args.epochs:
        parser.error(f"--max-epochs ({args.max_epochs}) must be at least --epochs ({args.epochs})")
    if any(os.path.exists(os.path.join(args.out, row, "samples")) for row in args.rows):
        parser.error(f"--out {args.out!r} already holds samples of these rows: use a new directory")

    import keras  # noqa: PLC0415

    import keras_bnn as kb  # noqa: PLC0415
    from keras_bnn import fashion_mnist  # noqa: PLC0415

    (x, y), _, (x_test, y_test), info = fashion_mnist.fashion_mnist_arrays(args.data_dir)
    x_ood, _ = kb.ood.digits_28x28()
    if args.train_subset:
        x, y = x[:args.train_subset], y[:args.train_subset]
        info["num_train"] = len(y)
    data = ((x, y), (x_test, y_test), x_ood)
    print(f"Keras {keras.__version__}, backend {keras.backend.backend()}; "
          f"{args.model}, {args.prior}({args.prior_scale}), train {len(y)}, seed {args.seed}",
          flush=True)
    os.makedirs(args.out, exist_ok=True)
    config = {k: v for k, v in vars(args).items() if k != "time_limit"}
    config["time_limit"] = None if math.isinf(args.time_limit) else args.time_limit
    rows = []
    budget = args.ensemble_seconds
    if "chain" in args.rows:
        rows.append(run_chain(args, data, info))
        save(args.out, config, rows)  # kept if the ensemble is cut off
        budget = rows[-1][f"{args.clock}_s"]
        print(f"chain: {rows[-1]['epochs']} epochs, collection from epoch "
              f"{rows[-1]['started_epoch']} ({rows[-1]['verdict']}), h {rows[-1]['step_size']:.3g}",
              flush=True)
    if "ensemble" in args.rows:
        rows.append(run_ensemble(args, data, info, budget))
        save(args.out, config, rows)
    print(table(rows), flush=True)


if __name__ == "__main__":
    main()
