"""Fashion-MNIST: SGD/MAP, deep ensembles and ATMC chains; the cold-posterior sweep.

Reads the four IDX files from ``--data-dir``, Keras' cache or Debian's
``dataset-fashion-mnist`` (nothing is downloaded). Every row is a
:func:`keras_bnn.runs.train` run with the library defaults of
``keras-bnn train`` (the warm-up's step size, He-normal(1) kernel priors,
collection from the epoch the equilibrium test passes, one sample per epoch
after it) at batch size 128,
scored on the test set (or, with ``--validation-split``, on held-out
training images: use that for any choice) for accuracy, NLL, ECE, Brier, and
the out-of-distribution AUROC of predictive entropy and of mutual
information against scikit-learn's digits upscaled to 28×28
(:func:`keras_bnn.ood.digits_28x28`, a stand-in for MNIST).

``compare`` trains, per seed (K = ``--k``):

* ``sgd``: one SGD/MAP net (``--sgd-epochs``);
* ``sgd x K``: a deep ensemble of K SGD nets (``--sampler sgd --chains K``);
* ``atmc 1 chain``: one ATMC chain of ``--chain-epochs`` epochs
  (``--chain-burn-in-epochs`` fixes its burn-in, and that of every sweep
  run);
* ``atmc x K``: K ATMC chains of ``--chains-epochs`` epochs each (at equal
  wall-clock they are too short for the equilibrium test, which needs the
  warm-up and two 10-epoch windows: ``--chains-burn-in-epochs`` sets their
  burn-in).

For equal wall-clock give the chains the ensemble's ``K·sgd_epochs`` SGD
epochs of time: ``chain_epochs ≈ K·sgd_epochs / r`` and ``chains_epochs ≈
sgd_epochs / r`` with r the measured ATMC/SGD epoch-cost ratio; the wall
times are reported, check them. ``sweep`` trains ATMC at every temperature ×
kernel prior (``he_normal`` scale 1; ``student_t``: Student-t(3, 0.4)).
Each row is appended to ``<out>/results.jsonl`` (a sampler's row with its
``configurational_temperature`` over the last epoch, in units of T: 1 at
equilibrium, averaged over its chains); ``table`` prints the
Markdown tables and draws ``<out>/cold_posterior.png``.

A ``compare`` or ``sweep`` killed part-way resumes when run again with the
same ``--out``: a row whose result is in ``results.jsonl`` is skipped, and a
row it was training is trained again from the start (one command at a time
per ``--out``: a second one is refused while the first runs).

    python examples/fashion_mnist.py compare --out runs/fmnist     # the full grid
    python examples/fashion_mnist.py compare --rows "atmc x K" --seeds 0   # K chains
    python examples/fashion_mnist.py sweep --out runs/fmnist --model mlp
    python examples/fashion_mnist.py sweep --out runs/fmnist --model cnn --train-subset 20000 \
        --chain-epochs 14 --chain-burn-in-epochs 8 --seeds 0   # the README's CNN sweep
    python examples/fashion_mnist.py table --out runs/fmnist
"""

import argparse
import dataclasses
import json
import os
import shutil
import time

import numpy as np

from keras_bnn.cli import int_at_least  # argparse types; imports no Keras

ROWS = ("sgd", "sgd x K", "atmc 1 chain", "atmc x K")
SWEEP_PRIORS = {"he_normal": 1.0, "student_t": 0.4}


def load_data(args):
    """``(train_ds, eval_ds, info, (x_ood, y_ood))``: eval_ds is the test or validation split."""
    import keras_bnn as kb  # noqa: PLC0415 - keeps --help free of TensorFlow
    from keras_bnn import fashion_mnist  # noqa: PLC0415

    (x, y), (x_val, y_val), (x_test, y_test), info = fashion_mnist.fashion_mnist_arrays(
        args.data_dir, validation_split=args.validation_split, seed=0)
    if args.train_subset:
        x, y = x[:args.train_subset], y[:args.train_subset]
        info["num_train"] = len(y)
    if args.validation_split:
        x_test, y_test = x_val, y_val
    train_ds = kb.data.make_dataset(x, y, args.batch_size, shuffle=True, seed=0)
    eval_ds = kb.data.make_dataset(x_test, y_test, 500)
    return train_ds, eval_ds, info, kb.ood.digits_28x28()


def run_row(args, data, finished, name, sampler, chains, epochs, seed, **fields):
    """Trains ``chains`` runs of one configuration, scores the pooled samples, saves the row.

    A row in ``finished`` (:func:`_finished`) is skipped; one whose run
    directory a killed run left without a saved result is trained again.

    Returns:
        The row's dict, or None for a row skipped.
    """
    import keras_bnn as kb  # noqa: PLC0415

    train_ds, eval_ds, info, (x_ood, _) = data
    label = "-".join(str(v) for v in (args.model, name.replace(" ", ""), seed, epochs,
                                      args.step_size, *fields.values(),
                                      f"n{args.train_subset or 'all'}", f"b{args.batch_size}",
                                      f"val{args.validation_split:g}"))
    model_args = {"hidden": [256, 256]} if args.model == "mlp" else {}  # 784-256-256-10
    config = kb.runs.RunConfig(dataset="fashion_mnist", data_dir=args.data_dir, model=args.model,
                               model_args=model_args,
                               sampler=sampler, epochs=epochs, batch_size=args.batch_size,
                               seed=seed, output_dir=os.path.join(args.out, "runs", label),
                               step_size=args.step_size if sampler != "sgd" else None,
                               **fields).validate()
    row = {"model": args.model, "row": name, "sampler": sampler, "chains": chains,
           "epochs": epochs, "seed": seed, "step_size": config.step_size, **fields,
           "run": label}
    chain_dirs = [os.path.join(config.output_dir, f"chain-{k}") for k in range(chains)]
    if label in finished:
        print(f"{name}, seed {seed}: done in an earlier run ({config.output_dir}): skipped",
              flush=True)
        return None
    if os.path.exists(config.output_dir):  # a run killed before it saved the row's result
        print(f"{name}, seed {seed}: {config.output_dir} holds an unfinished row (its result "
              "is not in results.jsonl): training it again", flush=True)
        shutil.rmtree(config.output_dir)
    start = time.perf_counter()
    try:
        stores = [kb.runs.train(dataclasses.replace(config, chain=k, output_dir=chain_dir),
                                verbose=0, data=(train_ds, eval_ds, info)).store
                  for k, chain_dir in enumerate(chain_dirs)]
    except kb.NonFiniteError as error:
        row["diverged"] = str(error).split("(")[1].split(")")[0]  # "at optimizer step k"
        _save(args, row)
        return row
    wall = time.perf_counter() - start
    if sampler != "sgd":  # how far from equilibrium: the mean over the chains' last epochs
        row["configurational_temperature"] = round(float(np.mean(
            [_last_epoch(chain_dir, "configurational_temperature") for chain_dir in chain_dirs]
        )) / config.temperature, 3)
    if not all(len(store) for store in stores):  # NotConvergedWarning: never at equilibrium
        with open(os.path.join(chain_dirs[0], "collection.json")) as handle:
            row.update(wall_s=round(wall, 1), not_converged=json.load(handle)["reason"])
        _save(args, row)
        return row
    ensemble = kb.PosteriorEnsemble.from_store(chain_dirs)
    members = ensemble.predict_members(eval_ds)
    labels = kb.data.dataset_labels(eval_ds)
    row.update({
        "num_samples": len(members), "wall_s": round(wall, 1),
        "eval": "validation" if args.validation_split else "test",
        "train_size": info["num_train"],
        **{k: round(v, 4) for k, v in kb.metrics.evaluate_probs(
            members.mean(axis=0), labels).items()},
        **{f"auroc_{k}": round(v, 4) for k, v in kb.ood.ood_auroc(
            members, ensemble.predict_members(x_ood, batch_size=500)).items()}})
    _save(args, row)
    return row


def _last_epoch(chain_dir, name):
    """The value of the logged diagnostic ``name`` in a run's last epoch."""
    import keras_bnn as kb  # noqa: PLC0415

    with open(kb.runs.RunDir(chain_dir).history) as handle:
        return json.load(handle)[name][-1]


def _finished(args):
    """The run directories (``row["run"]``) of the rows ``<out>/results.jsonl`` holds.

    A last line a kill cut short (not a whole JSON line) is removed: its row
    is trained again.

    Raises:
        SystemExit: if ``<out>/runs`` holds a row's run directory and
            results.jsonl rows written before rows named their run directory
            (which rows finished cannot be told).
    """
    path = os.path.join(args.out, "results.jsonl")
    if not os.path.exists(path):
        return set()
    with open(path, "rb") as handle:
        text = handle.read()
    whole, _, cut = text.rpartition(b"\n")  # each saved row ends with a newline
    if cut:
        with open(path, "r+b") as handle:
            handle.truncate(len(text) - len(cut))
    rows = [json.loads(line) for line in whole.splitlines()]
    runs_dir = os.path.join(args.out, "runs")
    if any("run" not in row for row in rows) and os.path.isdir(runs_dir) and \
            os.listdir(runs_dir):
        raise SystemExit(f"fashion_mnist.py: {path} holds rows that do not name their run "
                         "directory (written by an older version): which rows finished cannot "
                         "be told; use another --out.")
    return {row["run"] for row in rows if "run" in row}


def _save(args, row):
    with open(os.path.join(args.out, "results.jsonl"), "a") as handle:
        handle.write(json.dumps(row) + "\n")
    print(json.dumps(row), flush=True)


def compare(args):
    finished, data = _finished(args), load_data(args)
    plan = {"sgd": ("sgd", 1, args.sgd_epochs), "sgd x K": ("sgd", args.k, args.sgd_epochs),
            "atmc 1 chain": ("atmc", 1, args.chain_epochs),
            "atmc x K": ("atmc", args.k, args.chains_epochs)}
    for seed in args.seeds:
        for name in args.rows:
            sampler, chains, epochs = plan[name]
            fields = {"prior": args.prior, "prior_scale": SWEEP_PRIORS[args.prior]}
            burn_in = {"atmc 1 chain": args.chain_burn_in_epochs,
                       "atmc x K": args.chains_burn_in_epochs}.get(name)
            if burn_in is not None:
                fields["burn_in_epochs"] = burn_in
            run_row(args, data, finished, name.replace("K", str(args.k)), sampler, chains,
                    epochs, seed, **fields)


def sweep(args):
    finished, data = _finished(args), load_data(args)
    for seed in args.seeds:
        for prior in args.priors:
            for temperature in args.temperatures:
                burn_in = ({} if args.chain_burn_in_epochs is None
                           else {"burn_in_epochs": args.chain_burn_in_epochs})
                run_row(args, data, finished, "atmc 1 chain", "atmc", 1, args.chain_epochs, seed,
                        temperature=temperature, prior=prior,
                        prior_scale=SWEEP_PRIORS[prior], **burn_in)


def _markdown(rows, columns):
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def table(args):
    """Prints the comparison and sweep tables (mean ± sd over seeds); plots the sweep."""
    with open(os.path.join(args.out, "results.jsonl")) as handle:
        rows = [json.loads(line) for line in handle]
    for row in rows:
        for outcome in ("diverged", "not_converged"):
            if outcome in row:
                print(f"{outcome}: {row}")
    rows = [row for row in rows if "diverged" not in row and "not_converged" not in row]
    metrics = ("accuracy", "nll", "ece", "brier", "auroc_entropy", "auroc_mutual_information",
               "wall_s", "configurational_temperature")
    keys = ("model", "row", "temperature", "prior", "epochs", "step_size", "train_size", "eval")
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in keys), []).append(row)
    summary = []
    for key, members in groups.items():
        line = dict(zip(keys, key), seeds=",".join(str(r["seed"]) for r in members),
                    samples=members[0]["num_samples"])
        for name in metrics:  # an SGD row, or one run before the column existed: blank
            values = np.array([r.get(name, np.nan) for r in members], dtype=float)
            line[name] = ("" if np.isnan(values).any() else f"{values.mean():.4g}"
                          if len(values) == 1
                          else f"{values.mean():.4g} ± {values.std(ddof=1):.2g}")
        summary.append(line)
    compared = [r for r in summary if r["temperature"] is None]
    swept = sorted((r for r in summary if r["temperature"] is not None),
                   key=lambda r: (r["model"], r["prior"], -r["temperature"]))
    columns = ["model", "row", "epochs", "step_size", "samples", "seeds", *metrics]
    if compared:
        print(_markdown(compared, ["model", "prior", *columns[1:]]) + "\n")
    if swept:
        print(_markdown(swept, ["model", "prior", "temperature", *columns[2:]]))
        _plot_sweep(swept, os.path.join(args.out, "cold_posterior.png"))


def _plot_sweep(rows, path):
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(1, 3, figsize=(13, 4.6))
    keys = ("model", "train_size", "prior", "epochs", "step_size")  # one line per setting
    for setting in sorted({tuple(r[k] for k in keys) for r in rows}, key=str):
        line = [r for r in rows if tuple(r[k] for k in keys) == setting]
        model, n, prior, epochs, step_size = setting
        label = f"{model} (n = {n}), {prior}, {epochs} epochs, h {step_size or 'auto'}"
        temps = [r["temperature"] for r in line]
        for axis, name in zip(axes, ("accuracy", "nll", "ece")):
            values = [float(r[name].split()[0]) for r in line]
            axis.plot(temps, values, "o-", label=label)
            axis.set_xscale("log")
            axis.set_xlabel("temperature T")
            axis.set_title(f"test {name}")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=3, fontsize=8)
    fig.suptitle("Fashion-MNIST, ATMC: the cold-posterior sweep")
    fig.tight_layout(rect=(0, 0.08 + 0.04 * ((len(axes[0].lines) + 2) // 3), 1, 1))
    fig.savefig(path, dpi=110)
    print(f"\nplot: {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["compare", "sweep", "table"])
    parser.add_argument("--out", default="runs/fashion_mnist")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="mlp", choices=["mlp", "cnn"])
    parser.add_argument("--batch-size", type=int_at_least(1), default=128)
    parser.add_argument("--step-size", type=float, default=None,
                        help="the samplers' h0 (default: the library's); choose it on "
                             "--validation-split, never on the test set")
    parser.add_argument("--seeds", type=int_at_least(0), nargs="+", default=[0, 1])
    parser.add_argument("--k", type=int_at_least(1), default=5,
                        help="ensemble size and number of chains")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--sgd-epochs", type=int_at_least(1), default=30)
    parser.add_argument("--chain-epochs", type=int_at_least(1), default=75,
                        help="epochs of the single chain (and of each sweep run)")
    parser.add_argument("--chain-burn-in-epochs", type=int_at_least(0), default=None,
                        help="burn-in of the single chain and of each sweep run (default: "
                             "the library's equilibrium test)")
    parser.add_argument("--chains-epochs", type=int_at_least(1), default=15,
                        help="epochs of each of K chains")
    parser.add_argument("--chains-burn-in-epochs", type=int_at_least(0), default=None,
                        help="burn-in of each of the K chains (default: the library's "
                             "equilibrium test)")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.3, 0.1, 0.03])
    parser.add_argument("--prior", choices=list(SWEEP_PRIORS), default="he_normal",
                        help="kernel prior of every compare row (he_normal: the library's "
                             "default for data not selected on)")
    parser.add_argument("--priors", nargs="+", choices=list(SWEEP_PRIORS),
                        default=list(SWEEP_PRIORS))
    parser.add_argument("--train-subset", type=int_at_least(1), default=None,
                        help="train on the first N training images only (a scaled-down run)")
    parser.add_argument("--validation-split", type=float, default=0.0,
                        help="hold out this fraction of the training images and score on it")
    args = parser.parse_args(argv)
    if any(not t > 0 for t in args.temperatures) or not (args.step_size or 1) > 0:
        parser.error("--temperatures and --step-size must be > 0")
    for flag in ("seeds", "rows", "priors", "temperatures"):
        values = getattr(args, flag)
        if len(set(values)) < len(values):  # a repeat's run directory is the first one's
            parser.error(f"--{flag} must not repeat a value; got {values}")
    if not 0 <= args.validation_split < 1:
        parser.error(f"--validation-split must lie in [0, 1); got {args.validation_split}")
    if args.command == "table" and not os.path.exists(os.path.join(args.out, "results.jsonl")):
        parser.error(f"--out {args.out!r} holds no results.jsonl: run compare or sweep first")
    os.makedirs(args.out, exist_ok=True)
    if args.command == "table":
        return table(args)
    from keras_bnn.durable import DirectoryLock, InUseError  # noqa: PLC0415

    try:
        with DirectoryLock(args.out):  # one compare or sweep at a time: a rerun resumes it
            return {"compare": compare, "sweep": sweep}[args.command](args)
    except InUseError as error:
        raise SystemExit(f"fashion_mnist.py: --out {error}") from None


if __name__ == "__main__":
    main()
